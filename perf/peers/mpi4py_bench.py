#!/usr/bin/env python3
"""mpi4py.futures: no-op task throughput and sync round trip, for comparison with Prism.

    mpirun -n N python3 -m mpi4py.futures perf/peers/mpi4py_bench.py [--quick] [--json=PATH]
                                          [--tasks=N] [--rounds=N] [--min-time=S]

Rank 0 runs this script (the client, like Prism's driver); ranks 1..N-1 are the pool's
workers (N-1 of them). Started without `-m mpi4py.futures` (one process), it falls back to
MPIPoolExecutor spawning --workers workers (needs MPI_Comm_spawn, often unavailable).

Metrics (median [min, max] across rounds):
  mpi4py_tasks_async_chunksize1    executor.map(no-op, range(N), chunksize=1); tasks/s.
  mpi4py_tasks_async_chunksize100  the same with chunksize=100 (100 calls per message).
  mpi4py_tasks_sync                executor.submit(no-op).result(), one at a time; median
                                   round trip (us) per round (and _ops: round trips/s).
Prism equivalents: single_client_tasks_async (N tasks, no chunking: one message per task)
and single_client_tasks_sync / single_client_tasks_sync_remote.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402


def small_value(_=None):
    return 0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default="perf/results/peers_mpi4py.json")
    p.add_argument("--tasks", type=int, default=None, help="tasks per batch (10000)")
    p.add_argument("--rounds", type=int, default=None, help="rounds per metric (5; quick 3)")
    p.add_argument("--min-time", type=float, default=None, help="seconds per round (1.0)")
    p.add_argument("--workers", type=int, default=2,
                   help="workers to spawn when not started under -m mpi4py.futures")
    return peerlib.fill_defaults(p.parse_args(),
                                 quick=dict(tasks=200, rounds=3, min_time=0.05),
                                 full=dict(tasks=10000, rounds=5, min_time=1.0))


def main():
    a = parse_args()
    load_start = peerlib.load_average()
    t_start = time.time()
    try:
        import mpi4py
        from mpi4py import MPI
        from mpi4py.futures import MPIPoolExecutor
    except ImportError as e:
        return peerlib.skipped("mpi4py_bench", f"{e} (Debian: python3-mpi4py)")

    world = MPI.COMM_WORLD.Get_size()
    metrics = []
    # Under `mpirun -n N python3 -m mpi4py.futures`, the pool is the other N-1 ranks and
    # max_workers is ignored; otherwise spawn a.workers.
    executor = MPIPoolExecutor(max_workers=a.workers if world == 1 else None)
    with executor:
        executor.bootup(wait=True)
        workers = getattr(executor, "num_workers", world - 1 if world > 1 else a.workers)
        print(f"mpi4py {mpi4py.__version__} ({MPI.Get_library_version().splitlines()[0].split(',')[0]}): "
              f"MPIPoolExecutor with {workers} workers, world size {world}; "
              f"load avg {load_start[0]:.2f}")
        sys.stdout.flush()

        def batch(chunksize):
            res = list(executor.map(small_value, range(a.tasks), chunksize=chunksize))
            assert len(res) == a.tasks and not any(res)

        for chunk in (1, 100):
            batch(chunk)  # warm-up
            rates = []
            for _ in range(a.rounds):
                t0 = time.perf_counter()
                n = 0
                while True:  # whole batches until min_time has passed
                    batch(chunk)
                    n += a.tasks
                    if time.perf_counter() - t0 >= a.min_time:
                        break
                rates.append(n / (time.perf_counter() - t0))
            metrics.append(peerlib.metric(
                f"mpi4py_tasks_async_chunksize{chunk}", "tasks/s", True, rates,
                f"executor.map(no-op, range({a.tasks}), chunksize={chunk}), list() of results",
                batch_size=a.tasks, chunksize=chunk))

        def sync_task():
            assert executor.submit(small_value).result() == 0

        for _ in range(100):
            sync_task()
        metrics += peerlib.latency_metrics(
            "mpi4py_tasks_sync", peerlib.timed_rounds(sync_task, a.rounds, a.min_time),
            "executor.submit(no-op).result(), one at a time")

    peerlib.print_table("mpi4py.futures results (median [min, max] across rounds):", metrics)
    peerlib.write_report(a.json, "mpi4py.futures", {
        "mpi4py_version": mpi4py.__version__,
        "mpi_library_version": MPI.Get_library_version().splitlines()[0].split(",")[0],
        "world_size": world, "workers": workers, "mode": "quick" if a.quick else "full",
        "rounds": a.rounds, "min_time_s": a.min_time, "load_avg_at_start": load_start,
        "wall_s": time.time() - t_start}, metrics)
    print(f"JSON: {os.path.abspath(a.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
