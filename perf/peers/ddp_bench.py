#!/usr/bin/env python3
"""PyTorch DDP (gloo, CPU): training throughput and all-reduce bandwidth, for comparison
with prism_train_benchmark and prism_collective_benchmark.

    python3 perf/peers/ddp_bench.py [--quick] [--json=PATH] [--rounds=N] [--steps=N]
                                    [--sizes-mib=1,16,64] [--no-train] [--no-allreduce]
                                    [--seconds-out=PATH]

--seconds-out writes, per all-reduce size, a line "<MiB> <seconds per op, round 1> ..." (the
slowest rank's), for prism_collective_benchmark, which runs this peer between its own rounds.

Starts 2 processes (torch.multiprocessing, spawn), one torch thread each, a gloo process
group over a file store and the loopback interface (no other network).

Training: MLP 784-512-512-10, SGD lr 0.01, cross entropy, synthetic data (one fixed random
batch per rank), batch 128 per rank, 5 warm-up steps, then --steps timed steps between two
barriers, timed on rank 0 (as prism_train_benchmark). Round by round, interleaved:
  1 worker   rank 0 alone trains a plain (not DDP) model; rank 1 waits in a barrier.
  2 workers  both ranks train a DistributedDataParallel model.
  ddp_train_samples_per_second/{1w,2w}   samples/s over all workers
  ddp_scaling_efficiency                 2w / (2 x 1w), median of the per-round ratios

All-reduce: dist.all_reduce(SUM) of a float32 tensor per size, 2 ranks; each round is
max(2, 512 MiB / size) operations between barriers, timed on each rank, the slowest rank's
time counts. Bus bandwidth = bytes x 2(n-1)/n / seconds (NCCL-tests' convention, as
prism_collective_benchmark).
  ddp_allreduce_bus_gbps/<size>MiB       GB/s
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402

WORLD = 2


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default="perf/results/peers_ddp.json")
    p.add_argument("--rounds", type=int, default=None, help="rounds (5; quick 1 train, 3 allreduce)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per round (50; quick 3)")
    p.add_argument("--sizes-mib", default=None, help="all-reduce sizes (1,16,64; quick 1)")
    p.add_argument("--no-train", action="store_true")
    p.add_argument("--no-allreduce", action="store_true")
    p.add_argument("--seconds-out", default=None, help="per-size seconds per op, plain text")
    a = p.parse_args(argv)
    a.train_rounds = a.rounds if a.rounds is not None else (1 if a.quick else 5)
    a.ar_rounds = a.rounds if a.rounds is not None else (3 if a.quick else 5)
    if a.steps is None:
        a.steps = 3 if a.quick else 50
    if a.sizes_mib is None:
        a.sizes_mib = "1" if a.quick else "1,16,64"
    a.sizes = [int(s) for s in a.sizes_mib.split(",") if s]
    a.budget_bytes = (8 if a.quick else 512) << 20
    return a


def make_mlp(torch):
    nn = torch.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def train_samples_per_second(torch, dist, rank, workers, steps, group=None):
    """Trains on `workers` ranks (1: plain model on this rank; 2: DDP); returns samples/s
    over all workers as timed on this rank between barriers."""
    import torch.nn.functional as F
    torch.manual_seed(7)
    model = make_mlp(torch)
    if workers > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.manual_seed(100 + rank)
    x = torch.randn(128, 784)
    y = torch.randint(0, 10, (128,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    if workers > 1:
        dist.barrier(group)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if workers > 1:
        dist.barrier(group)
    seconds = time.perf_counter() - t0
    return 128.0 * steps * workers / seconds, seconds / steps * 1e3


def worker(rank, a, init_file, out_file):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=WORLD)
    results = {"train": {1: [], 2: []}, "step_ms": {1: [], 2: []}, "allreduce": {}}
    if not a.no_train:
        for _ in range(a.train_rounds):
            dist.barrier()
            if rank == 0:
                rate, ms = train_samples_per_second(torch, dist, rank, 1, a.steps)
                results["train"][1].append(rate)
                results["step_ms"][1].append(ms)
            dist.barrier()  # rank 1 waits here while rank 0 trains alone
            rate, ms = train_samples_per_second(torch, dist, rank, 2, a.steps)
            results["train"][2].append(rate)
            results["step_ms"][2].append(ms)
    if not a.no_allreduce:
        for mib in a.sizes:
            count = (mib << 20) // 4
            iters = max(2, a.budget_bytes // (mib << 20))
            t = torch.ones(count, dtype=torch.float32)
            dist.all_reduce(t)  # warm-up, checked
            if not bool((t == float(WORLD)).all()):
                raise RuntimeError(f"warm-up all_reduce of {mib} MiB gave wrong sums")
            t.zero_()
            per_round = []
            for _ in range(a.ar_rounds):
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(t)
                sec = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
                dist.all_reduce(sec, op=dist.ReduceOp.MAX)  # the slowest rank's time
                per_round.append(float(sec.item()))
            results["allreduce"][mib] = {"seconds": per_round, "iterations": iters}
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump(results, f)


def main():
    a = parse_args()
    load_start = peerlib.load_average()
    t_start = time.time()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        return peerlib.skipped("ddp_bench", f"{e} (Debian: python3-torch)")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        return peerlib.skipped("ddp_bench", "this torch has no gloo backend")
    # gloo on the loopback interface only.
    if os.path.exists("/sys/class/net/lo"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    print(f"PyTorch {torch.__version__} DDP, gloo, {WORLD} processes x 1 thread; "
          f"load avg {load_start[0]:.2f}")
    sys.stdout.flush()
    with tempfile.TemporaryDirectory(prefix="prism-peers-ddp-") as tmp:
        init_file = os.path.join(tmp, "store")
        out_file = os.path.join(tmp, "result.json")
        mp.spawn(worker, args=(a, init_file, out_file), nprocs=WORLD, join=True)
        with open(out_file) as f:
            res = json.load(f)

    metrics = []
    model = "MLP 784-512-512-10, SGD, batch 128/rank, 1 thread/rank, synthetic data"
    if not a.no_train:
        r1, r2 = res["train"]["1"], res["train"]["2"]
        ms1, ms2 = res["step_ms"]["1"], res["step_ms"]["2"]
        metrics.append(peerlib.metric(
            "ddp_train_samples_per_second/1w", "samples/s", True, r1,
            f"{model}; 1 process, plain model; {a.steps} steps; "
            f"{statistics.median(ms1):.2f} ms/step", steps=a.steps))
        metrics.append(peerlib.metric(
            "ddp_train_samples_per_second/2w", "samples/s", True, r2,
            f"{model}; 2 processes, DDP gloo; {a.steps} steps; "
            f"{statistics.median(ms2):.2f} ms/step", steps=a.steps))
        eff = [b / (2 * x) for x, b in zip(r1, r2)]
        metrics.append(peerlib.metric(
            "ddp_scaling_efficiency", "ratio", True, eff,
            "2-worker samples/s / (2 x 1-worker samples/s), per round"))
    if not a.no_allreduce:
        bus = 2.0 * (WORLD - 1) / WORLD
        for mib in a.sizes:
            r = res["allreduce"][str(mib)]
            gbps = [(mib << 20) * bus / s / 1e9 for s in r["seconds"]]
            metrics.append(peerlib.metric(
                f"ddp_allreduce_bus_gbps/{mib}MiB", "GB/s", True, gbps,
                f"dist.all_reduce(SUM) float32 {mib} MiB, gloo, {WORLD} ranks, "
                f"{r['iterations']} ops per round, slowest rank",
                bytes=mib << 20, iterations=r["iterations"]))

    if a.seconds_out and not a.no_allreduce:
        with open(a.seconds_out, "w") as f:
            for mib in a.sizes:
                secs = res["allreduce"][str(mib)]["seconds"]
                f.write(f"{mib} " + " ".join(repr(x) for x in secs) + "\n")

    peerlib.print_table("PyTorch DDP results (median [min, max] across rounds):", metrics)
    peerlib.write_report(a.json, "pytorch-ddp", {
        "torch_version": torch.__version__, "backend": "gloo", "world_size": WORLD,
        "torch_threads_per_rank": 1, "mode": "quick" if a.quick else "full",
        "train_rounds": a.train_rounds, "allreduce_rounds": a.ar_rounds, "steps": a.steps,
        "load_avg_at_start": load_start, "wall_s": time.time() - t_start}, metrics)
    print(f"JSON: {os.path.abspath(a.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
