#!/usr/bin/env python3
"""The Fashion-MNIST app's images/s with and without batching (issue 18, "Batching").

  perf/serve_fashion_mnist_load.py [--build=build] [--checkpoint=PATH] [--ranks=3]
      [--replicas=2] [--connections=1,16,64] [--duration=10] [--rounds=1]
      [--batch-wait-ms=X] [--max-batch-size=N]
      [--json=perf/results/serve_fashion_mnist_load.json] [--quick]

For each mode (batching on, then off) it starts build/apps/serve_fashion_mnist under
`mpirun -n RANKS` on 127.0.0.1 (port 0, its endpoint file), loads it with wrk posting one
Fashion-MNIST test image as raw bytes (perf/serve_fashion_mnist_post.lua) at each
connection count for DURATION seconds after a 2 s warm-up, then SIGTERMs rank 0 and waits
for the drain. Reported per mode and connection count: images/s (wrk's requests/s: one
image per request), p50 and p99 latency (wrk --latency), and the mean batch size the
replicas saw (their GET statistics, before and after the run). Every wrk run must see
only 2xx answers and no socket errors, else the script fails (exit 1). Rounds repeat the
whole set; the table shows the median [min, max] over rounds. Without wrk on PATH it
prints SKIP and exits 77.

Without --checkpoint it trains one first (train_fashion_mnist, 1 epoch of 4000 images:
the weights do not change the cost of a forward pass). Loopback only, every wait bounded.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


class Server:
    """serve_fashion_mnist under mpirun, in its own process group; its output kept."""

    def __init__(self, cmd, endpoint_file, timeout):
        self.lines = []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        threading.Thread(target=lambda: [self.lines.append(l) for l in self.proc.stdout], daemon=True).start()
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(r"^stop: kill -TERM (\d+)$", "".join(self.lines), re.M)
            if m and os.path.exists(endpoint_file):
                self.pid = int(m.group(1))
                self.endpoint = open(endpoint_file).read().strip()
                return
            if self.proc.poll() is not None:
                fail(f"the server exited ({self.proc.returncode}):\n{''.join(self.lines)[-4000:]}")
            time.sleep(0.1)
        self.kill()
        fail(f"the server was not up within {timeout} s:\n{''.join(self.lines)[-4000:]}")

    def stop(self, timeout=90):
        os.kill(self.pid, signal.SIGTERM)
        try:
            status = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            fail(f"the server did not exit within {timeout} s of SIGTERM")
        if status != 0:
            fail(f"the server exited {status} after SIGTERM:\n{''.join(self.lines)[-4000:]}")

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def replica_stats(url, replicas):
    """{replica: (batches, images)} from GETs until every replica answered (at most 50)."""
    seen = {}
    for _ in range(50):
        with urllib.request.urlopen(url, timeout=10) as r:
            info = json.load(r)
        seen[info["replica"]] = (info.get("batches", 0), info.get("batched_images", 0))
        if len(seen) >= replicas:
            break
    return seen


def to_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        fail(f"cannot read the latency {text!r} in wrk's output")
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]


def wrk(url, connections, duration, image):
    cmd = ["wrk", "-t", "1" if connections < 8 else "2", "-c", str(connections), "-d", f"{duration}s",
           "--timeout", "10s", "--latency", "-s", os.path.join(HERE, "serve_fashion_mnist_post.lua"), url]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60,
                           env=dict(os.environ, PRISM_WRK_BODY=image))
    except subprocess.TimeoutExpired:
        fail(f"wrk did not finish within {duration + 60} s")
    out = p.stdout
    if p.returncode != 0:
        fail(f"wrk failed ({p.returncode}): {p.stderr}{out}")
    if "Non-2xx" in out or "Socket errors" in out:
        fail(f"wrk saw errors at {connections} connection(s):\n{out}")
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    if not (rps and p50 and p99):
        fail(f"cannot read wrk's output:\n{out}")
    return float(rps.group(1)), to_ms(p50.group(1)), to_ms(p99.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--connections", default="1,16,64")
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", default="perf/results/serve_fashion_mnist_load.json")
    ap.add_argument("--batch-wait-ms", type=float, default=None, help="the app's --batch-wait-ms (default: its own)")
    ap.add_argument("--max-batch-size", type=int, default=None, help="the app's --max-batch-size (default: its own)")
    ap.add_argument("--quick", action="store_true", help="2 s per run at 1 and 16 connections")
    args = ap.parse_args()
    if args.quick:
        args.duration, args.connections = 2, "1,16"
    connections = [int(c) for c in args.connections.split(",")]
    if any(c < 1 for c in connections) or args.duration <= 0 or args.rounds < 1 or args.ranks < 1:
        fail("--connections must be positive whole numbers, --duration > 0, --rounds and --ranks >= 1")
    if shutil.which("wrk") is None:
        print("SKIP: wrk is not on PATH (Debian: apt-get install wrk; scripts/install-deps.sh has it)")
        return 77
    if shutil.which("mpirun") is None:
        fail("mpirun is not on PATH (Debian: apt-get install openmpi-bin)")
    apps = os.path.join(args.build, "apps")
    serve_app = os.path.join(apps, "serve_fashion_mnist")
    if not os.access(serve_app, os.X_OK):
        fail(f"{serve_app} is missing: cmake --build {args.build} --target serve_fashion_mnist train_fashion_mnist")
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    work = tempfile.mkdtemp(prefix="serve_fmnist_load_")

    checkpoint = args.checkpoint
    if not checkpoint:
        p = subprocess.run(mpirun + ["-n", "3", os.path.join(apps, "train_fashion_mnist"), "--workers=2",
                                     "--epochs=1", "--train-samples=4000", "--test-samples=500",
                                     f"--storage-path={work}", "--name=load", "--progress=lines"],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            fail(f"training a checkpoint failed:\n{p.stdout}\n{p.stderr}")
        checkpoint = os.path.join(work, "load")
    import gzip
    image = os.path.join(work, "image.bin")
    with open(image, "wb") as f:
        f.write(gzip.open(DATA).read()[16:16 + 784])

    app_flags = []
    if args.batch_wait_ms is not None:
        app_flags.append(f"--batch-wait-ms={args.batch_wait_ms:g}")
    if args.max_batch_size is not None:
        app_flags.append(f"--max-batch-size={args.max_batch_size}")
    results = {}  # (mode, connections) -> list of (images/s, p50, p99, mean batch)
    for round_ in range(args.rounds):
        for mode in ("on", "off"):
            endpoint_file = os.path.join(work, f"endpoint_{mode}")
            if os.path.exists(endpoint_file):
                os.remove(endpoint_file)
            server = Server(mpirun + ["-n", str(args.ranks), serve_app, f"--checkpoint={checkpoint}",
                                      f"--replicas={args.replicas}", f"--batching={mode}", "--host=127.0.0.1",
                                      "--port=0", f"--endpoint-file={endpoint_file}"] + app_flags,
                            endpoint_file, 180)
            try:
                url = server.endpoint + "/fashion_mnist"
                for c in connections:
                    wrk(url, c, 2, image)  # warm-up: threads, caches, the allocator
                    before = replica_stats(url, args.replicas) if mode == "on" else {}
                    rps, p50, p99 = wrk(url, c, args.duration, image)
                    batch = 1.0
                    if mode == "on":
                        after = replica_stats(url, args.replicas)
                        batches = sum(after[r][0] - before.get(r, (0, 0))[0] for r in after)
                        images = sum(after[r][1] - before.get(r, (0, 0))[1] for r in after)
                        batch = images / batches if batches else float("nan")
                    results.setdefault((mode, c), []).append((rps, p50, p99, batch))
                    print(f"round {round_ + 1} batching {mode:3} {c:3} connection(s): {rps:8.0f} images/s  "
                          f"p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  mean batch {batch:5.2f}", flush=True)
            finally:
                if server.proc.poll() is None:
                    server.stop()

    def cell(values, fmt):
        med = statistics.median(values)
        return fmt.format(med) if len(values) == 1 else f"{fmt.format(med)} [{fmt.format(min(values))}, {fmt.format(max(values))}]"

    print(f"\n{args.replicas} replicas on {args.ranks} ranks, wrk {args.duration:g} s per run, {args.rounds} round(s)"
          f"{', app flags ' + ' '.join(app_flags) if app_flags else ''}")
    print("| batching | connections | images/s | p50 (ms) | p99 (ms) | mean batch |")
    print("|---|---|---|---|---|---|")
    entries = []
    for c in connections:
        for mode in ("on", "off"):
            rows = results[(mode, c)]
            cols = list(zip(*rows))
            print(f"| {mode} | {c} | {cell(cols[0], '{:.0f}')} | {cell(cols[1], '{:.2f}')} | {cell(cols[2], '{:.2f}')} | "
                  f"{cell(cols[3], '{:.2f}')} |")
            for name, values, unit, higher in (("images_per_second", cols[0], "images/s", True),
                                               ("p50_latency", cols[1], "ms", False),
                                               ("p99_latency", cols[2], "ms", False),
                                               ("mean_batch_size", cols[3], "images", True)):
                entries.append({"name": f"serve_fashion_mnist/batching_{mode}/connections:{c}/{name}",
                                "value": statistics.median(values), "min": min(values), "max": max(values),
                                "unit": unit, "higher_is_better": higher, "per_round": list(values)})
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"context": {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "num_cpus": os.cpu_count(),
                                   "ranks": args.ranks, "replicas": args.replicas, "duration_s": args.duration,
                                   "rounds": args.rounds, "app_flags": app_flags,
                                   "load_avg": os.getloadavg()},
                       "benchmarks": entries}, f, indent=1)
        print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
