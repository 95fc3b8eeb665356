#!/usr/bin/env python3
"""Serve from Python (issue 42): no-op HTTP requests/s and p50/p99 with `wrk -t1 -cC
--latency` at C = 1 and 64 connections, in one run, beside

  prism.serve (sync)   @serve.deployment(num_replicas=2) class with `def __call__(self,
                       request): return "ok"`, under `mpirun -n 3` (replicas on ranks 1, 2,
                       the HTTP server on rank 0; Serve's defaults: max_ongoing_requests 5,
                       one CPU per replica)
  prism.serve (async)  the same with `async def __call__` (the replica's event loop)
  FastAPI on uvicorn   `@app.get("/noop") async def noop(): return "ok"` (a plain-text
                       response), Debian's python3-fastapi and python3-uvicorn, one process
                       (uvicorn's default: one worker), no access log
  C++ Serve            perf/prism_serve_benchmark --only=http (a no-op C++ deployment, 2
                       replicas, the same wrk runs), at 3 ranks with --prism-num-cpus=2

The servers run in this script's session, as wrk and prism_serve_benchmark do: a server
started in a session of its own (setsid) ran 2-3 times slower at 1 connection on a loaded
machine (the kernel's autogroup scheduling shares the CPU between sessions, not processes).
Each round starts every server, warms it up (1 s of wrk at the most connections), runs wrk
at each connection count for --duration seconds,
and stops it; the systems take turns within a round so that the machine's other load falls
on all of them. --rounds (default 5) rounds: the median and the worst (lowest requests/s,
highest p50) are reported. Every wrk run must see only 2xx answers and no socket errors.

    /usr/bin/python3 perf/python_serve_benchmark.py [--rounds=5] [--duration=5]
        [--connections=1,64] [--build=build] [--json=perf/results/python_serve_benchmark.json]
        [--only=prism,prism_async,fastapi,cpp]

Needs wrk, mpirun, python3-fastapi and python3-uvicorn (scripts/install-deps.sh), and the
build's python/ (prism_python_serve) and perf/prism_serve_benchmark.
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ---- the servers -----------------------------------------------------------------------

def prism_child(kind):
    """Runs under mpirun: the no-op deployment, serving until SIGTERM."""
    import prism
    from prism import serve

    if kind == "async":
        class Noop:
            async def __call__(self, request):
                return "ok"
    else:
        class Noop:
            def __call__(self, request):
                return "ok"
    noop = serve.deployment(Noop, name="noop", num_replicas=2)
    prism.init(num_cpus=2)
    serve.start(http_options={"host": "127.0.0.1", "port": 0})
    serve.run(noop.bind(), route_prefix="/noop", name="noop")
    print(serve.status().http_address + "/noop", flush=True)
    serve.run(noop.bind(), route_prefix="/noop", name="noop", blocking=True)
    prism.shutdown()


def fastapi_app():
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse
    app = FastAPI()

    @app.get("/noop", response_class=PlainTextResponse)
    async def noop():
        return "ok"
    return app


if __name__ != "__main__" and os.environ.get("PRISM_BENCH_FASTAPI") == "1":
    app = fastapi_app()  # uvicorn python_serve_benchmark:app


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, deadline_s=60):
    import urllib.request
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {deadline_s} s")


def clean_env(build):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(build, "python"))
    return env


def start_prism(kind, build):
    proc = subprocess.Popen(["mpirun", "--oversubscribe", "-n", "3", "-x", "PYTHONPATH", sys.executable,
                             os.path.abspath(__file__), f"--child={kind}"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=clean_env(build))
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise RuntimeError(f"prism.serve ({kind}) did not start (run it alone: mpirun -n 3 python3 "
                           f"{os.path.abspath(__file__)} --child={kind})")
    wait_http(url)
    return proc, url


def start_fastapi(build):
    port = free_port()
    env = clean_env(build)
    env["PRISM_BENCH_FASTAPI"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "--app-dir", HERE, "python_serve_benchmark:app",
                             "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                             "--no-access-log"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)
    url = f"http://127.0.0.1:{port}/noop"
    wait_http(url)
    return proc, url


def stop(proc):
    """SIGTERM to the server (mpirun passes it on to the ranks); SIGKILL after 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


# ---- wrk ---------------------------------------------------------------------------------

def to_us(text):
    """wrk's latency ("38.00us", "1.20ms", "2.00s", "1.00m") in microseconds."""
    match = re.match(r"([\d.]+)(us|ms|s|m|h)$", text)
    if match is None:
        raise RuntimeError(f"cannot read wrk's latency {text!r}")
    value, unit = match.groups()
    return float(value) * {"us": 1, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}[unit]


def wrk(url, connections, duration):
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration:g}s", "--timeout", "5s", "--latency", url],
                         capture_output=True, text=True, timeout=duration + 60).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors against {url}:\n{out}")
    if "Requests/sec" not in out or "50%" not in out:
        raise RuntimeError(f"cannot read wrk's report against {url}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = to_us(re.search(r"^\s*50%\s+(\S+)", out, re.M).group(1))
    p99 = to_us(re.search(r"^\s*99%\s+(\S+)", out, re.M).group(1))
    return {"rps": rps, "p50_us": p50, "p99_us": p99}


def run_cpp(build, connections, duration):
    binary = os.path.join(build, "perf", "prism_serve_benchmark")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cpp.json")
        out = subprocess.run(["mpirun", "--oversubscribe", "-n", "3", binary, "--prism-num-cpus=2", "--only=http",
                              "--connections=" + ",".join(map(str, connections)), f"--duration={duration:g}",
                              f"--json={path}"], capture_output=True, text=True, env=clean_env(build),
                             timeout=len(connections) * (duration + 30) * 2 + 120)
        if out.returncode != 0:
            raise RuntimeError(f"prism_serve_benchmark failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        rows = json.load(open(path))["benchmarks"]
    result = {}
    for c in connections:
        row = next(r for r in rows if r["name"] == f"serve_e2e_wrk_c{c}")
        result[c] = {"rps": row["items_per_second"], "p50_us": row["p50_us"], "p99_us": row["p99_us"]}
    return result


# ---- the run -----------------------------------------------------------------------------

NAMES = {"prism": "prism.serve (sync def)", "prism_async": "prism.serve (async def)",
         "fastapi": "FastAPI on uvicorn", "cpp": "C++ Serve"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--connections", default="1,64")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--json", default=os.path.join(ROOT, "perf", "results", "python_serve_benchmark.json"))
    parser.add_argument("--only", default="prism,prism_async,fastapi,cpp")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        prism_child(args.child)
        return 0
    build = os.path.abspath(args.build)
    connections = [int(c) for c in args.connections.split(",")]
    systems = args.only.split(",")
    samples = {s: {c: [] for c in connections} for s in systems}
    load_start = os.getloadavg()
    for round_ in range(args.rounds):
        for system in systems:
            if system == "cpp":
                for c, r in run_cpp(build, connections, args.duration).items():
                    samples[system][c].append(r)
                continue
            proc, url = start_fastapi(build) if system == "fastapi" else \
                start_prism("async" if system == "prism_async" else "sync", build)
            try:
                wrk(url, max(connections), 1)  # warm-up: every actor thread's first request, the caches
                for c in connections:
                    samples[system][c].append(wrk(url, c, args.duration))
            finally:
                stop(proc)
        print(f"round {round_ + 1}/{args.rounds} done (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)

    print(f"No-op HTTP requests, wrk -t1, {args.duration:g} s a run, {args.rounds} rounds: median (worst); "
          f"load average {load_start[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end\n")
    print("| system | connections | requests/s | p50 | p99 |")
    print("| --- | --- | --- | --- | --- |")
    report = {"rounds": args.rounds, "duration_s": args.duration, "load_avg_start": load_start,
              "load_avg_end": os.getloadavg(), "results": {}}
    for system in systems:
        for c in connections:
            runs = samples[system][c]
            rps = [r["rps"] for r in runs]
            p50 = [r["p50_us"] for r in runs]
            p99 = [r["p99_us"] for r in runs]
            report["results"].setdefault(system, {})[c] = {"runs": runs, "rps_median": statistics.median(rps),
                                                          "rps_worst": min(rps), "p50_us_median": statistics.median(p50),
                                                          "p50_us_worst": max(p50), "p99_us_median": statistics.median(p99)}
            print(f"| {NAMES[system]} | {c} | {statistics.median(rps):,.0f} ({min(rps):,.0f}) | "
                  f"{statistics.median(p50):,.0f} us ({max(p50):,.0f}) | {statistics.median(p99):,.0f} us |")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
