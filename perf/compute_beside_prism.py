"""Does Prism's waiting cost the user's computation? (issue 43, item 2)

The same compute runs alone in a plain Python process, and as a Prism task while Prism
waits beside it: at 1 rank (the driver waits in prism.get on the task's own rank) and at 3
ranks under mpirun (the task pinned to rank 1; ranks 0 and 2 idle, the driver waiting).
Each child measures its own throughput over --seconds after a warm-up, so start-up is not
counted. Prism's cost = 1 - prism / alone, per workload, from the medians of --reps
alternated launches (worst of each side beside it).

Workloads: the demo's CNN (two conv layers, Fashion-MNIST's 28x28 shape, batch 64, forward,
backward and an SGD step: LibTorch under python3-torch), an MLP (784-256-256-10, batch 256)
and NumPy (384 x 384 matrix products). torch and NumPy use the machine's cores as they do
by default.

    /usr/bin/python3 perf/compute_beside_prism.py --build=/tmp/bu --reps=5 [--json=out.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = ("cnn", "mlp", "numpy")
SIDES = ("alone", "prism_1rank", "prism_3ranks")


def make_step(workload):
    """A function doing one unit of work (a training step, a matrix product)."""
    if workload == "numpy":
        import numpy as np
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((384, 384)), rng.standard_normal((384, 384))

        def step():
            np.dot(a, b)
        return step
    import torch
    from torch import nn
    torch.manual_seed(0)
    if workload == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))
        x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    else:
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        x, y = torch.randn(256, 784), torch.randint(0, 10, (256,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return step


def measure(workload, seconds, warmup_s=1.0):
    """Steps per second over `seconds`, after `warmup_s` of the same steps."""
    step = make_step(workload)
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        step()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        n += 1
    return n / (time.perf_counter() - start)


def child(side, workload, seconds):
    if side == "alone":
        print(json.dumps({"steps_s": measure(workload, seconds)}), flush=True)
        return
    import prism
    from prism.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    prism.init()
    ctx = prism.get_runtime_context()
    target = 1 if ctx.world_size > 1 else 0
    task = prism.remote(num_cpus=1)(measure).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(target, soft=False))
    rate = prism.get(task.remote(workload, seconds), timeout=seconds + 120)
    print(json.dumps({"steps_s": rate, "rank": target, "world": ctx.world_size}), flush=True)
    prism.shutdown()


def launch(side, workload, seconds, build):
    env = dict(os.environ)
    if build:
        env["PYTHONPATH"] = os.path.join(build, "python") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", side, "--workload", workload,
           "--seconds", str(seconds)]
    if side == "prism_3ranks":
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        cmd = ["mpirun", "--oversubscribe", "-n", "3", "-x", "PYTHONPATH"] + cmd
    else:
        env = {k: v for k, v in env.items() if not k.startswith(("OMPI_", "PMIX_"))}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds + 300)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{side} {workload} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(lines[-1])["steps_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", choices=SIDES)
    p.add_argument("--workload", choices=WORKLOADS, default="cnn")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--build", default="")
    p.add_argument("--json", default="")
    a = p.parse_args()
    if a.child:
        child(a.child, a.workload, a.seconds)
        return
    rates = {w: {s: [] for s in SIDES} for w in a.workloads.split(",")}
    for rep in range(a.reps):
        for w in rates:
            for s in SIDES:  # alternated, so a slow spell of the machine hits every side
                rates[w][s].append(launch(s, w, a.seconds, a.build))
        print(f"rep {rep + 1}/{a.reps} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    report = {}
    print(f"{'workload':8} {'side':13} {'steps/s median (worst)':>24} {'cost vs alone':>14}")
    for w, by_side in rates.items():
        alone = statistics.median(by_side["alone"])
        for s, values in by_side.items():
            med = statistics.median(values)
            cost = 1 - med / alone
            report.setdefault(w, {})[s] = {"median": med, "worst": min(values), "all": values, "cost": cost}
            print(f"{w:8} {s:13} {med:12.1f} ({min(values):8.1f}) {cost * 100:13.1f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
