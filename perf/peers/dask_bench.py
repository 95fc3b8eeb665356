#!/usr/bin/env python3
"""Dask distributed: the workloads of Prism's microbenchmark that Dask can run.

    python3 perf/peers/dask_bench.py [--workers=N] [--quick] [--json=PATH]
                                     [--tasks=N] [--rounds=N] [--min-time=S] [--object-mib=N]

A LocalCluster of N worker processes (default 2), one thread each, no dashboard, every
socket on 127.0.0.1 (no other network). The client (this process) plays Prism's driver.

Metrics (median [min, max] across rounds):
  dask_tasks_async        N no-op tasks submitted one by one (client.submit, pure=False),
                          then one client.gather of all of them; tasks/s.
                          Prism: single_client_tasks_async (same count, same no-op).
  dask_tasks_sync         submit one no-op task, .result(); median round trip (us) per
                          round (and _ops: round trips/s). Prism: single_client_tasks_sync.
  dask_actor_calls_sync   one Dask actor (client.submit(cls, actor=True)) on a worker; call
                          its no-op method and .result(); median round trip (us) (and _ops).
                          Prism: 1_1_actor_calls_sync.
  dask_put_gigabytes      client.scatter of a numpy uint8 array of random bytes (hash=False:
                          a fresh key each time) to a worker; GB/s (1e9 B/s). Dask's default
                          config (comm compression "auto").
  dask_get_gigabytes      client.gather of that object back from the worker; GB/s.
"""

import argparse
import gc
import logging
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402


def small_value():
    return 0


class BenchActor:
    def small_value(self):
        return 0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default="perf/results/peers_dask.json")
    p.add_argument("--tasks", type=int, default=None, help="tasks per async batch (10000)")
    p.add_argument("--rounds", type=int, default=None, help="rounds per metric (5; quick 3)")
    p.add_argument("--async-rounds", type=int, default=None,
                   help="rounds of the async batch (3: one round of 10k tasks takes ~15 s)")
    p.add_argument("--min-time", type=float, default=None, help="seconds per round (1.0)")
    p.add_argument("--object-mib", type=float, default=None, help="put/get size (100)")
    return peerlib.fill_defaults(p.parse_args(),
                                 quick=dict(tasks=200, rounds=3, async_rounds=3, min_time=0.05, object_mib=4),
                                 full=dict(tasks=10000, rounds=5, async_rounds=3, min_time=1.0, object_mib=100))


def main():
    a = parse_args()
    load_start = peerlib.load_average()
    t_start = time.time()
    try:
        import dask
        import distributed
        import numpy as np
        from distributed import Client, LocalCluster
    except ImportError as e:
        return peerlib.skipped("dask_bench", f"{e} (Debian: python3-distributed python3-numpy)")

    tmp = tempfile.mkdtemp(prefix="prism-peers-dask-")
    # Localhost only, no dashboard, quiet; worker spill files in our own temp directory.
    dask.config.set({"distributed.worker.daemon": True,
                     "temporary-directory": tmp,
                     "distributed.admin.tick.limit": "60s"})
    metrics = []
    try:
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, host="127.0.0.1",
                               protocol="tcp://", silence_logs=logging.ERROR,
                               local_directory=tmp)
        client = Client(cluster)
        client.wait_for_workers(a.workers, timeout=120)
        cluster_s = time.time() - t_start
        print(f"Dask {distributed.__version__}: LocalCluster, {a.workers} worker processes x 1 "
              f"thread, started in {cluster_s:.1f} s; load avg {load_start[0]:.2f}")
        sys.stdout.flush()

        # ---- no-op task throughput: N submits, one gather --------------------------------
        def batch(n):
            futs = [client.submit(small_value, pure=False) for _ in range(n)]
            res = client.gather(futs)
            assert len(res) == n and not any(res)
            del futs, res

        batch(min(a.tasks, 1000))  # warm-up (also ships the function to every worker)
        rates = []
        for _ in range(a.async_rounds):
            t0 = time.perf_counter()
            batch(a.tasks)
            rates.append(a.tasks / (time.perf_counter() - t0))
        metrics.append(peerlib.metric(
            "dask_tasks_async", "tasks/s", True, rates,
            f"{a.tasks} no-op client.submit(pure=False), then one client.gather",
            batch_size=a.tasks))

        # ---- sync task round trip ----------------------------------------------------------
        def sync_task():
            assert client.submit(small_value, pure=False).result() == 0

        for _ in range(20):
            sync_task()
        metrics += peerlib.latency_metrics(
            "dask_tasks_sync", peerlib.timed_rounds(sync_task, a.rounds, a.min_time),
            "submit one no-op task, .result()")

        # ---- actor sync calls --------------------------------------------------------------
        actor = client.submit(BenchActor, actor=True, pure=False).result()

        def actor_call():
            assert actor.small_value().result() == 0

        for _ in range(20):
            actor_call()
        metrics += peerlib.latency_metrics(
            "dask_actor_calls_sync", peerlib.timed_rounds(actor_call, a.rounds, a.min_time),
            "one Dask actor on a worker process; no-op method, .result()")
        del actor

        # ---- object put (scatter) / get (gather) -------------------------------------------
        nbytes = int(a.object_mib * (1 << 20))
        # Random bytes: Dask compresses messages by default (lz4 where installed) when a
        # sample compresses well; random data, like trained weights, does not, so this
        # measures the transfer rather than the compressor.
        arr = np.random.default_rng(7).integers(0, 256, nbytes, dtype=np.uint8)
        put_rounds, get_rounds = [], []

        def one_pair(put_times, get_times):
            t0 = time.perf_counter()
            f = client.scatter(arr, hash=False)
            t1 = time.perf_counter()
            back = client.gather(f)
            t2 = time.perf_counter()
            assert back.nbytes == nbytes and back[12345] == arr[12345]
            put_times.append(t1 - t0)
            get_times.append(t2 - t1)
            del f, back  # released outside the timed parts
            gc.collect()

        one_pair([], [])  # warm-up
        for _ in range(a.rounds):
            pt, gt = [], []
            t0 = time.perf_counter()
            while True:
                one_pair(pt, gt)
                if time.perf_counter() - t0 >= a.min_time and len(pt) >= 2:
                    break
            put_rounds.append(nbytes * len(pt) / sum(pt) / 1e9)
            get_rounds.append(nbytes * len(gt) / sum(gt) / 1e9)
        mib = f"{a.object_mib:g} MiB"
        metrics.append(peerlib.metric(
            "dask_put_gigabytes", "GB/s", True, put_rounds,
            f"client.scatter of a {mib} numpy uint8 array (hash=False) to a worker process",
            bytes=nbytes))
        metrics.append(peerlib.metric(
            "dask_get_gigabytes", "GB/s", True, get_rounds,
            f"client.gather of that {mib} object back from the worker process", bytes=nbytes))

        client.close()
        cluster.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    peerlib.print_table("Dask results (median [min, max] across rounds):", metrics)
    peerlib.write_report(a.json, "dask", {
        "dask_version": distributed.__version__,
        "workers": a.workers, "threads_per_worker": 1, "mode": "quick" if a.quick else "full",
        "rounds": a.rounds, "min_time_s": a.min_time, "load_avg_at_start": load_start,
        "wall_s": time.time() - t_start}, metrics)
    print(f"JSON: {os.path.abspath(a.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
