#!/usr/bin/env python3
"""The Fashion-MNIST DDP script (apps/train_fashion_mnist_py/train.py) under Prism's
prism-train-script vs under torchrun (python3 -m torch.distributed.run, Debian's
python3-torch), in one run, alternating the two launchers repetition by repetition:

  * samples/s: the script's own figure for its epoch (training samples of all workers /
    the epoch's training time on world rank 0), the median over repetitions;
  * start-up: from the launcher's start to the end of the first training step on world
    rank 0 (the script prints that moment), the median.

    /usr/bin/python3 perf/script_trainer_benchmark.py --build=build --reps=5 [--json=out.json]

torchrun is run as `python3 -c <TORCHRUN>`: torch.distributed.run with a one-line fix for
Debian's torch 1.13 on Python 3.11 (see TORCHRUN below). Both runs use 2 workers, OMP_NUM_THREADS=1 (torchrun's default for several processes,
Prism's for one CPU per worker) and the same flags. Prism runs on 3 ranks (rank 0 is the
driver; mpirun --oversubscribe), torchrun with --standalone.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRIPT = os.path.join(ROOT, "apps", "train_fashion_mnist_py", "train.py")
PY = "/usr/bin/python3"
# torchrun as `python3 -m torch.distributed.run`, with one fix: Debian's torch 1.13 on
# Python 3.11 turns --redirects/--tee "0" (their defaults) into None, because iterating an
# IntFlag no longer yields its zero member, and fails before starting anything. Std.from_str
# is replaced by the plain conversion; nothing else changes.
TORCHRUN = r"""
import runpy
from torch.distributed.elastic.multiprocessing import api
def from_str(vm):
    if ":" in vm:
        return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    return api.Std(int(vm))
api.Std.from_str = staticmethod(from_str)
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
"""


def run(cmd, env, timeout):
    t0 = time.time()
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)  # mpirun forwards stdin: give it none
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout[-4000:]))
    first = re.search(r"first step done at ([0-9.]+)", p.stdout)
    rate = re.search(r"epoch \d+: .* ([0-9.]+) samples/s", p.stdout)
    if not first or not rate:
        sys.exit("no figures in the output of %s:\n%s" % (" ".join(cmd), p.stdout[-4000:]))
    return {"startup_s": float(first.group(1)) - t0, "samples_per_s": float(rate.group(1)),
            "wall_s": time.time() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--train-samples", type=int, default=30000)
    ap.add_argument("--test-samples", type=int, default=1000)
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--launchers", default="prism,torchrun",
                    help="which to run, in order: prism, torchrun, manual (two processes started by hand)")
    args = ap.parse_args()
    app = os.path.join(os.path.abspath(args.build), "apps", "prism-train-script")
    store = tempfile.mkdtemp(prefix="prism-script-bench-")
    script_args = [SCRIPT, "--epochs=1", "--train-samples=%d" % args.train_samples,
                   "--test-samples=%d" % args.test_samples]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(ROOT, "python"))
    launchers = {
        "prism": lambda rep: ["mpirun", "--oversubscribe", "-n", "3", app, "--num-workers=2", "--backend=torch",
                              "--storage-path=" + store, "--name=bench%d" % rep, "--quiet", "--", PY] + script_args,
        "torchrun": lambda rep: [PY, "-c", TORCHRUN, "--standalone", "--nproc_per_node=2"] + script_args,
    }
    # Two plain processes with torchrun's variables set by hand: what the launchers add.
    manual = ("port=$(%s -c 'import socket; s=socket.socket(); s.bind((\"\", 0)); print(s.getsockname()[1])'); "
              "for r in 0 1; do MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r "
              "LOCAL_WORLD_SIZE=2 %s %s & pids+=($!); done; wait ${pids[0]} && wait ${pids[1]}") % (PY, PY, " ".join(script_args))
    launchers["manual"] = lambda rep: ["bash", "-c", manual]
    names = args.launchers.split(",")
    results = {name: [] for name in names}
    for rep in range(args.reps):
        for name in (names if rep % 2 == 0 else names[::-1]):
            r = run(launchers[name](rep), env, 900)
            results[name].append(r)
            print("rep %d %-8s samples/s %8.1f  start-up to first step %6.2f s  wall %6.1f s"
                  % (rep + 1, name, r["samples_per_s"], r["startup_s"], r["wall_s"]), flush=True)
    summary = {}
    for name, rs in results.items():
        summary[name] = {k: statistics.median(r[k] for r in rs) for k in ("samples_per_s", "startup_s", "wall_s")}
    base = "torchrun" if "torchrun" in summary else names[-1]
    ratio = summary["prism"]["samples_per_s"] / summary[base]["samples_per_s"] if "prism" in summary else float("nan")
    print("\nmedians over %d repetitions (2 workers, %d training samples, 1 epoch):" % (args.reps, args.train_samples))
    print("| launcher | samples/s | start-up to first step (s) | wall (s) |")
    print("| --- | --- | --- | --- |")
    for name in names:
        s = summary[name]
        print("| %s | %.1f | %.2f | %.1f |" % (name, s["samples_per_s"], s["startup_s"], s["wall_s"]))
    if "prism" in summary and base != "prism":
        # Each repetition runs the launchers back to back: the ratio within a repetition
        # sees the same background load, so its median is steadier on a shared machine.
        paired = statistics.median(p["samples_per_s"] / b["samples_per_s"]
                                   for p, b in zip(results["prism"], results[base]))
        summary["paired_ratio_median"] = paired
        print("median of the per-repetition prism / %s samples/s ratios: %.3f" % (base, paired))
        print("prism / %s samples/s: %.3f (%+.1f%%); start-up difference %+.2f s"
              % (base, ratio, 100 * (ratio - 1), summary["prism"]["startup_s"] - summary[base]["startup_s"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": results, "medians": summary, "samples_per_s_ratio": ratio}, f, indent=1)
    subprocess.run(["rm", "-rf", store])


if __name__ == "__main__":
    main()
