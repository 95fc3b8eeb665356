#!/usr/bin/env python3
"""Dask distributed's dataframe on the pipeline of Prism Data's side-by-side benchmark.

    python3 perf/peers/dask_data_bench.py [--workers=N] [--quick] [--json=PATH]
                                          [--rows=N] [--partitions=N] [--rounds=N]

The pipeline (perf/data_pipeline_benchmark.cc runs the same one in Prism Data):
  1. source: rows 0..N-1 in P partitions made on the workers, columns
       id    int64
       key   int64   (id * 2654435761) % 1024
       value float64 (id % 1000) * 0.001
  2. map_batches: value = value * 2 + 1              (Dask: map_partitions)
  3. random shuffle of every row                     (Dask: shuffle on a random column,
                                                      task-based, then a shuffle within
                                                      each partition)
  4. groupby(key) aggregate count, sum(value), mean(value)  -> 1,024 rows, to the client

One round is the whole pipeline from the graph's submission to the aggregated table in the
client (what the user waits for). Checked every round: the counts add up to N and the sums
to the closed form. A LocalCluster of N worker processes (default 3), one thread each, no
dashboard, every socket on 127.0.0.1.

Metric: dask_data_pipeline_seconds (median [min, max] over rounds), and _rows_per_s.
"""

import argparse
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402

KEYS = 1024
MULT = 2654435761


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default="perf/results/peers_dask_data.json")
    p.add_argument("--rows", type=int, default=None, help="rows (8,000,000; quick 200,000)")
    p.add_argument("--partitions", type=int, default=None, help="partitions (24; quick 6)")
    p.add_argument("--rounds", type=int, default=None, help="rounds (3; quick 1)")
    return peerlib.fill_defaults(p.parse_args(),
                                 quick=dict(rows=200_000, partitions=6, rounds=1),
                                 full=dict(rows=8_000_000, partitions=24, rounds=3))


def expected_sums(n):
    """The pipeline's totals in closed form: (rows, sum of value after the map)."""
    full, rest = divmod(n, 1000)
    base = full * (999 * 1000 // 2) + (rest - 1) * rest // 2  # sum of id % 1000
    return n, 2 * 0.001 * base + n


def main():
    a = parse_args()
    if a.rows < 1 or a.partitions < 1 or a.rounds < 1:
        print("dask_data_bench: --rows, --partitions and --rounds must be >= 1", file=sys.stderr)
        return 2
    try:
        import dask
        import dask.dataframe as dd
        import distributed
        import numpy as np
        import pandas as pd
        from distributed import Client, LocalCluster
    except ImportError as e:
        return peerlib.skipped("dask_data_bench",
                               f"{e} (Debian: python3-distributed python3-pandas python3-numpy)")

    n, parts = a.rows, a.partitions

    def make_part(i):
        lo, hi = n * i // parts, n * (i + 1) // parts
        ids = np.arange(lo, hi, dtype=np.int64)
        return pd.DataFrame({"id": ids, "key": (ids * MULT) % KEYS, "value": (ids % 1000) * 0.001})

    def scale(df):
        return df.assign(value=df["value"] * 2 + 1)

    def add_random(df, partition_info=None):
        seed = 7 + (partition_info or {}).get("number", 0)
        return df.assign(_r=np.random.default_rng(seed).random(len(df)))

    def local_shuffle(df, partition_info=None):
        seed = 11 + (partition_info or {}).get("number", 0)
        return df.sample(frac=1.0, random_state=seed).drop(columns="_r")

    tmp = tempfile.mkdtemp(prefix="prism-peers-dask-data-")
    dask.config.set({"distributed.worker.daemon": True, "temporary-directory": tmp,
                     "distributed.admin.tick.limit": "60s"})
    load_start = peerlib.load_average()
    cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, host="127.0.0.1", protocol="tcp://",
                           silence_logs=logging.ERROR, local_directory=tmp)
    client = Client(cluster)
    try:
        client.wait_for_workers(a.workers, timeout=120)
        print(f"Dask {distributed.__version__}: LocalCluster, {a.workers} worker processes x 1 "
              f"thread; {n:,} rows in {parts} partitions; load avg {load_start[0]:.2f}")
        sys.stdout.flush()
        want_rows, want_sum = expected_sums(n)
        seconds = []
        for r in range(a.rounds):
            t0 = time.perf_counter()
            ddf = dd.from_map(make_part, range(parts))
            ddf = ddf.map_partitions(scale)
            ddf = ddf.map_partitions(add_random)
            ddf = ddf.shuffle("_r", shuffle="tasks", npartitions=parts)
            ddf = ddf.map_partitions(local_shuffle)
            table = ddf.groupby("key")["value"].agg(["count", "sum", "mean"]).compute()
            seconds.append(time.perf_counter() - t0)
            got_rows, got_sum = int(table["count"].sum()), float(table["sum"].sum())
            if len(table) != min(KEYS, n) or got_rows != want_rows or \
                    abs(got_sum - want_sum) > 1e-6 * max(1.0, abs(want_sum)):
                print(f"dask_data_bench: wrong result in round {r}: {len(table)} groups, "
                      f"{got_rows} rows (want {want_rows}), sum {got_sum} (want {want_sum})",
                      file=sys.stderr)
                return 1
            print(f"round {r}: {seconds[-1]:.2f} s ({n / seconds[-1] / 1e6:.2f} M rows/s); "
                  f"key 0: count {int(table.loc[0, 'count'])}, sum {table.loc[0, 'sum']:.3f}")
            sys.stdout.flush()
        metrics = [
            peerlib.metric("dask_data_pipeline_seconds", "s", False, seconds,
                           "map_partitions + task shuffle + groupby agg, graph to client",
                           rows=n, partitions=parts),
            peerlib.metric("dask_data_pipeline_rows_per_s", "rows/s", True,
                           [n / s for s in seconds], "rows / pipeline seconds", rows=n),
        ]
        peerlib.write_report(a.json, "dask_data", {"workers": a.workers, "rows": n,
                                                   "partitions": parts,
                                                   "dask": distributed.__version__}, metrics)
    finally:
        client.close()
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
