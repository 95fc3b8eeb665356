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

After a pause (issue 43, item 4: "low load is a workload too"): in each round, after a
system's wrk runs and before it stops, one client opens one keep-alive HTTP/1.1 connection
(a raw socket, TCP_NODELAY; one untimed GET on it first), then --pauses times sleeps
--pause-s and times one GET until its whole response is read (time.perf_counter_ns): the
p50 and the worst of those, beside the p50 of --stream back-to-back GETs by the same client
on the same connection right after (the busy stream), and their ratio (target: within 2x).
Over the pause phase (from before the first sleep to the last response), the CPU time
(utime + stime in /proc/PID/stat, every thread, 10 ms ticks) of each of the server's
processes (prism: every rank, not mpirun; FastAPI: the uvicorn process; nginx: master and
worker) as % of one core: the busiest one is reported (target for Prism's ranks: < 0.5 %).
C++ Serve's server lives inside prism_serve_benchmark, which runs wrk itself: its pause
phase runs from a `wrk` shim put first on that program's PATH, which runs the real wrk and,
after the e2e run at the last connection count, the same client against the deployment's
URL while the ranks wait (the shim runs under `timeout duration+30`, so --pauses x
--pause-s must stay within 20 s for C++ Serve, else its pause row is skipped). nginx, as
the machine's reference, runs only this phase (after 1 s of wrk as a warm-up), last in
each round: a private nginx (one worker, `return 200 "ok";`, no access log, daemon off,
every path in a temp dir) on a free loopback port; skipped, with the reason printed, when
nginx is not installed (Debian: nginx). --pauses=0 turns the phase off (nginx too).

    /usr/bin/python3 perf/python_serve_benchmark.py [--rounds=5] [--duration=5]
        [--connections=1,64] [--build=build] [--json=perf/results/python_serve_benchmark.json]
        [--only=prism,prism_async,fastapi,cpp] [--pauses=10] [--pause-s=1.0] [--stream=200]
        [--no-nginx] [--quick]

--quick (a smoke run, about 1 min): 1 round, 1 s wrk runs, 2 pauses of 0.2 s, a stream of 20.

Needs wrk, mpirun, python3-fastapi and python3-uvicorn (scripts/install-deps.sh), and the
build's python/ (prism_python_serve) and perf/prism_serve_benchmark; nginx for its row.
"""
import argparse
import json
import os
import re
import shutil
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


def find_nginx():
    """nginx's path, or None (Debian puts it in /usr/sbin, not always on a user's PATH)."""
    found = shutil.which("nginx")
    if found is None and os.access("/usr/sbin/nginx", os.X_OK):
        found = "/usr/sbin/nginx"
    return found


def start_nginx(nginx, tmp):
    """A private nginx: one worker, a fixed "ok", no access log, every path in tmp."""
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    paths = "\n".join(f"    {kind}_temp_path {os.path.join(tmp, kind)};"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    with open(conf, "w") as f:
        f.write(f"""daemon off;
worker_processes 1;
{"user root;" if os.geteuid() == 0 else ""}
pid {os.path.join(tmp, "nginx.pid")};
error_log {os.path.join(tmp, "error.log")};
events {{ worker_connections 1024; }}
http {{
    access_log off;
{paths}
    server {{
        listen 127.0.0.1:{port};
        location / {{ default_type text/plain; return 200 "ok"; }}
    }}
}}
""")
    proc = subprocess.Popen([nginx, "-p", tmp, "-c", conf, "-e", os.path.join(tmp, "error.log")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/noop"
    try:
        wait_http(url, 20)
    except RuntimeError:
        stop(proc)
        raise
    return proc, url


# ---- after a pause -----------------------------------------------------------------------

class KeepAliveClient:
    """One keep-alive HTTP/1.1 connection on a raw socket: GET, read the whole response."""

    def __init__(self, url):
        match = re.match(r"http://([^/:]+):(\d+)(/.*)?$", url)
        if match is None:
            raise RuntimeError(f"cannot read the URL {url!r}")
        host, port, path = match.group(1), int(match.group(2)), match.group(3) or "/"
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
        self.buf = b""

    def close(self):
        self.sock.close()

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise RuntimeError("the server closed the keep-alive connection")
        self.buf += data

    def get_us(self):
        """One GET; microseconds from the send to the last byte of the response."""
        start = time.perf_counter_ns()
        self.sock.sendall(self.request)
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if "content-length" in headers:
            length = int(headers["content-length"])
            while len(self.buf) < length:
                self._fill()
            self.buf = self.buf[length:]
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while b"0\r\n\r\n" not in self.buf:
                self._fill()
            self.buf = self.buf.partition(b"0\r\n\r\n")[2]
        else:
            raise RuntimeError(f"a response without a length: {head!r}")
        elapsed = (time.perf_counter_ns() - start) / 1e3
        status = lines[0].split()
        if len(status) < 2 or status[1] != "200" or headers.get("connection", "").lower() == "close":
            raise RuntimeError(f"unexpected response: {head!r}")
        return elapsed


def proc_stat(pid):
    """(ppid, utime + stime in seconds) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root):
    """root and every process below it."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None:
                children.setdefault(st[0], []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def server_pids(root, marker, with_root=True):
    """The processes at or below root (below it only, without with_root) whose command line
    contains marker."""
    return [pid for pid in descendants(root) if (with_root or pid != root) and marker in cmdline(pid)]


def cpp_rank_pids():
    """From the wrk shim: the ranks of the prism_serve_benchmark that started it (rank 0 is
    an ancestor, the other ranks its siblings under the launcher)."""
    pid = os.getppid()
    while pid > 1 and "prism_serve_benchmark" not in cmdline(pid):
        st = proc_stat(pid)
        pid = st[0] if st else 1
    if pid <= 1:
        raise RuntimeError("the wrk shim found no prism_serve_benchmark above it")
    launcher = proc_stat(pid)[0]
    return [p for p in descendants(launcher) if p != launcher and "prism_serve_benchmark" in cmdline(p)]


def pause_phase(url, pids, pauses, pause_s, stream):
    """One connection; `pauses` GETs each after `pause_s` s of idle, then `stream` back to
    back; the CPU of `pids` over the pause phase, as % of one core each."""
    client = KeepAliveClient(url)
    try:
        client.get_us()  # the connection's first request, not timed
        cpu_before = {pid: proc_stat(pid) for pid in pids}
        wall_start = time.monotonic()
        after = []
        for _ in range(pauses):
            time.sleep(pause_s)
            after.append(client.get_us())
        wall = time.monotonic() - wall_start
        cpu_after = {pid: proc_stat(pid) for pid in pids}
        busy = [client.get_us() for _ in range(stream)]
    finally:
        client.close()
    cpu_pct = {pid: 100 * (cpu_after[pid][1] - cpu_before[pid][1]) / wall
               for pid in pids if cpu_before[pid] is not None and cpu_after[pid] is not None}
    if not cpu_pct:
        raise RuntimeError(f"found no server process to measure for {url}")
    p50, busy_p50 = statistics.median(after), statistics.median(busy)
    return {"after_pause_us": after, "p50_us": p50, "worst_us": max(after), "busy_p50_us": busy_p50,
            "busy_p99_us": sorted(busy)[min(len(busy) - 1, int(0.99 * len(busy)))], "ratio": p50 / busy_p50,
            "idle_cpu_pct_busiest": max(cpu_pct.values()), "idle_cpu_pct_sum": sum(cpu_pct.values()),
            "idle_cpu_pct_per_process": [cpu_pct[pid] for pid in sorted(cpu_pct)],  # by pid: ranks in order
            "processes": len(cpu_pct), "window_s": wall}


def wrk_shim(argv):
    """Stands in for wrk on prism_serve_benchmark's PATH: runs the real wrk, then (after the
    e2e run at the last connection count) the pause phase against that URL."""
    rc = subprocess.run([os.environ["PRISM_BENCH_REAL_WRK"]] + argv).returncode
    url = argv[-1] if argv else ""
    if rc == 0 and url.endswith("/noop") and f"-c{os.environ['PRISM_BENCH_PAUSE_AT']}" in argv:
        out = os.environ["PRISM_BENCH_PAUSE_OUT"]
        try:
            result = pause_phase(url, cpp_rank_pids(), int(os.environ["PRISM_BENCH_PAUSES"]),
                                 float(os.environ["PRISM_BENCH_PAUSE_S"]), int(os.environ["PRISM_BENCH_PAUSE_STREAM"]))
        except Exception as e:  # reported by run_cpp
            result = {"error": f"{type(e).__name__}: {e}"}
        with open(out, "w") as f:
            json.dump(result, f)
    return rc


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


def run_cpp(build, connections, duration, pause=None):
    """prism_serve_benchmark --only=http; with pause = (pauses, pause_s, stream), also the
    pause phase through the wrk shim. Returns ({connections: wrk figures}, pause result)."""
    binary = os.path.join(build, "perf", "prism_serve_benchmark")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cpp.json")
        env = clean_env(build)
        pause_out = os.path.join(tmp, "pause.json")
        if pause is not None:
            shim = os.path.join(tmp, "bin", "wrk")
            os.makedirs(os.path.dirname(shim))
            with open(shim, "w") as f:
                f.write(f'#!/bin/sh\nexec "{sys.executable}" "{os.path.abspath(__file__)}" --wrk-shim "$@"\n')
            os.chmod(shim, 0o755)
            env.update(PATH=os.path.dirname(shim) + os.pathsep + env.get("PATH", ""),
                       PRISM_BENCH_REAL_WRK=shutil.which("wrk"), PRISM_BENCH_PAUSE_AT=str(connections[-1]),
                       PRISM_BENCH_PAUSE_OUT=pause_out, PRISM_BENCH_PAUSES=str(pause[0]),
                       PRISM_BENCH_PAUSE_S=str(pause[1]), PRISM_BENCH_PAUSE_STREAM=str(pause[2]))
        out = subprocess.run(["mpirun", "--oversubscribe", "-n", "3", binary, "--prism-num-cpus=2", "--only=http",
                              "--connections=" + ",".join(map(str, connections)), f"--duration={duration:g}",
                              f"--json={path}"], capture_output=True, text=True, env=env,
                             timeout=len(connections) * (duration + 30) * 2 + 120 + (30 if pause else 0))
        if out.returncode != 0:
            raise RuntimeError(f"prism_serve_benchmark failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        rows = json.load(open(path))["benchmarks"]
        pause_result = None
        if pause is not None:
            if not os.path.exists(pause_out):
                raise RuntimeError("C++ Serve: the wrk shim ran no pause phase")
            pause_result = json.load(open(pause_out))
            if "error" in pause_result:
                raise RuntimeError(f"C++ Serve's pause phase failed: {pause_result['error']}")
    result = {}
    for c in connections:
        row = next(r for r in rows if r["name"] == f"serve_e2e_wrk_c{c}")
        result[c] = {"rps": row["items_per_second"], "p50_us": row["p50_us"], "p99_us": row["p99_us"]}
    return result, pause_result


# ---- the run -----------------------------------------------------------------------------

NAMES = {"prism": "prism.serve (sync def)", "prism_async": "prism.serve (async def)",
         "fastapi": "FastAPI on uvicorn", "cpp": "C++ Serve", "nginx": "nginx (1 worker, the machine's reference)"}


def pause_report(args, pause_systems, pause_samples, skipped):
    """Prints the pause phase's table; returns its JSON."""
    print(f"\nAfter a pause (issue 43): one keep-alive connection, {args.pauses} GETs each after "
          f"{args.pause_s:g} s idle, then {args.stream} back to back (the busy stream), once per round after the "
          f"system's wrk runs; {args.rounds} rounds: median (worst). Idle CPU: the busiest server process "
          f"(Prism: rank) over the pause phase, % of one core\n")
    print("| system | after a pause: p50 | worst of the pauses | busy stream p50 | after / busy (target <= 2) "
          "| idle CPU, busiest process (Prism target < 0.5 %) |")
    print("| --- | --- | --- | --- | --- | --- |")
    out = {"pauses": args.pauses, "pause_s": args.pause_s, "stream": args.stream,
           "when": "once per round, after the system's wrk runs (nginx: after 1 s of wrk as a warm-up)",
           "client": "one keep-alive HTTP/1.1 connection, raw socket, TCP_NODELAY",
           "cpu": "utime+stime from /proc/PID/stat over the pause phase, % of one core, per server process",
           "skipped": skipped, "results": {}}
    for system in pause_systems:
        runs = pause_samples[system]
        entry = {"runs": runs}
        for key, worst in (("p50_us", max), ("worst_us", max), ("busy_p50_us", max), ("ratio", max),
                           ("idle_cpu_pct_busiest", max)):
            values = [r[key] for r in runs]
            entry[key + "_median"], entry[key + "_worst"] = statistics.median(values), worst(values)
        out["results"][system] = entry
        e = entry
        print(f"| {NAMES[system]} | {e['p50_us_median']:,.0f} us ({e['p50_us_worst']:,.0f}) | "
              f"{e['worst_us_median']:,.0f} us ({e['worst_us_worst']:,.0f}) | "
              f"{e['busy_p50_us_median']:,.0f} us ({e['busy_p50_us_worst']:,.0f}) | "
              f"{e['ratio_median']:.2f} ({e['ratio_worst']:.2f}) | "
              f"{e['idle_cpu_pct_busiest_median']:.2f} % ({e['idle_cpu_pct_busiest_worst']:.2f}) |")
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--wrk-shim":
        return wrk_shim(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--connections", default="1,64")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--json", default=os.path.join(ROOT, "perf", "results", "python_serve_benchmark.json"))
    parser.add_argument("--only", default="prism,prism_async,fastapi,cpp")
    parser.add_argument("--pauses", type=int, default=10,
                        help="GETs each after --pause-s of idle, per system and round (0: no pause phase)")
    parser.add_argument("--pause-s", type=float, default=1.0)
    parser.add_argument("--stream", type=int, default=200, help="back-to-back GETs after the pauses (the busy p50)")
    parser.add_argument("--no-nginx", action="store_true", help="no nginx row in the pause phase")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 1 round, 1 s wrk runs, 2 pauses of 0.2 s, a stream of 20")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        prism_child(args.child)
        return 0
    if args.quick:
        args.rounds, args.duration, args.pauses, args.pause_s, args.stream = 1, 1, min(args.pauses, 2), 0.2, 20
    build = os.path.abspath(args.build)
    connections = [int(c) for c in args.connections.split(",")]
    systems = args.only.split(",")
    samples = {s: {c: [] for c in connections} for s in systems}
    pause = (args.pauses, args.pause_s, args.stream) if args.pauses > 0 else None
    pause_systems, skipped = [], {}
    if pause is not None:
        pause_systems = list(systems)
        if "cpp" in systems and args.pauses * args.pause_s > 20:
            pause_systems.remove("cpp")
            skipped["cpp"] = (f"--pauses x --pause-s = {args.pauses * args.pause_s:g} s does not fit in the wrk "
                              f"shim's timeout (at most 20 s)")
        nginx = None if args.no_nginx else find_nginx()
        if args.no_nginx:
            skipped["nginx"] = "--no-nginx"
        elif nginx is None:
            skipped["nginx"] = "nginx is not installed (Debian: apt-get install nginx)"
        else:
            pause_systems.append("nginx")
        for system, reason in skipped.items():
            print(f"pause phase: no {NAMES[system]} row: {reason}", file=sys.stderr, flush=True)
    pause_samples = {s: [] for s in pause_systems}
    load_start = os.getloadavg()
    started = time.monotonic()
    for round_ in range(args.rounds):
        for system in systems:
            if system == "cpp":
                figures, pause_result = run_cpp(build, connections, args.duration,
                                                pause if "cpp" in pause_systems else None)
                for c, r in figures.items():
                    samples[system][c].append(r)
                if pause_result is not None:
                    pause_samples[system].append(pause_result)
                continue
            proc, url = start_fastapi(build) if system == "fastapi" else \
                start_prism("async" if system == "prism_async" else "sync", build)
            try:
                wrk(url, max(connections), 1)  # warm-up: every actor thread's first request, the caches
                for c in connections:
                    samples[system][c].append(wrk(url, c, args.duration))
                if system in pause_systems:
                    pids = server_pids(proc.pid, "uvicorn") if system == "fastapi" else \
                        server_pids(proc.pid, "--child=", with_root=False)  # the ranks, not mpirun
                    pause_samples[system].append(pause_phase(url, pids, *pause))
            finally:
                stop(proc)
        if "nginx" in pause_systems:
            with tempfile.TemporaryDirectory() as tmp:
                proc, url = start_nginx(nginx, tmp)
                try:
                    wrk(url, max(connections), 1)  # the same warm-up as the others
                    pause_samples["nginx"].append(pause_phase(url, server_pids(proc.pid, "nginx"), *pause))
                finally:
                    stop(proc)
        print(f"round {round_ + 1}/{args.rounds} done (load {os.getloadavg()[0]:.2f}, "
              f"{time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)

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
    if pause is not None:
        report["after_pause"] = pause_report(args, pause_systems, pause_samples, skipped)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
