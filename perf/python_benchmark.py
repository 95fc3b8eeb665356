#!/usr/bin/env python3
"""Prism for Python against Dask and mpi4py.futures, from the same Python in one run.

    /usr/bin/python3 perf/python_benchmark.py [--build=build] [--ranks=3] [--quick] [--json=FILE]

Each system runs in its own child process (MPI cannot be started twice in one process):
  prism    mpirun -n RANKS python3 perf/python_benchmark.py --child=prism   (PYTHONPATH=<build>/python)
  dask     a distributed.LocalCluster of RANKS-1 worker processes, 1 thread each (its
           scheduler lives in the client process: RANKS processes in all, as perf/run_peers.sh)
  mpi4py   mpirun -n RANKS python3 -m mpi4py.futures perf/python_benchmark.py --child=mpi4py
           (an MPIPoolExecutor of RANKS-1 workers)

Figures, each the median of --rounds rounds (per system, where it has the feature):
  tasks_sync_us        one no-op task submitted and waited for, in a loop (latency)
  tasks_async_per_s    N no-op tasks submitted, then all waited for (throughput)
  tasks_*_remote       Prism: the same with every task pinned to the last rank (where the
                       scheduler puts them otherwise: rank 0 first, the driver's own rank)
  actor_sync_us / actor_async_per_s   the same with calls on one actor
  numpy_put_100MiB_ms  a 100 MiB float64 array into the object store (Dask: scatter)
  numpy_get_100MiB_us  reading it back on the same rank (Prism: a view, no copy; Dask: the
                       worker's copy gathered)
Targets (issue 23): >= 20,000 async tasks/s, <= 100 us sync, the same-rank get without a copy.
Ray's published Python figures (64 vCPUs): single_client_tasks_sync 981/s, async 8,041/s.
The JSON is the suite's part format (perf/suite.py: name, median, unit, min, max, per_round).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MiB = 1 << 20


def noop():
    return None


class Actor:
    def noop(self):
        return None


def rounds_of(fn, rounds):
    return [fn() for _ in range(rounds)]


# ---- children ----------------------------------------------------------------------------

def child_prism(n_sync, n_async, rounds, big):
    import numpy as np
    import prism

    f = prism.remote(noop)
    A = prism.remote(Actor)
    prism.init()
    out = {}
    prism.get([f.remote() for _ in range(200)], timeout=60)  # warm every rank

    def sync():
        t = time.perf_counter()
        for _ in range(n_sync):
            prism.get(f.remote(), timeout=60)
        return (time.perf_counter() - t) / n_sync * 1e6

    def asynchronous():
        t = time.perf_counter()
        prism.get([f.remote() for _ in range(n_async)], timeout=300)
        return n_async / (time.perf_counter() - t)

    out["tasks_sync_us"] = rounds_of(sync, rounds)
    out["tasks_async_per_s"] = rounds_of(asynchronous, rounds)
    world = prism.get_runtime_context().world_size
    if world > 1:  # every task on the last rank: a round trip over MPI each
        f = f.options(resources={f"rank:{world - 1}": 0.001})
        out["tasks_sync_remote_us"] = rounds_of(sync, rounds)
        out["tasks_async_remote_per_s"] = rounds_of(asynchronous, rounds)
    a = A.remote()
    prism.get(a.noop.remote(), timeout=60)

    def actor_sync():
        t = time.perf_counter()
        for _ in range(n_sync):
            prism.get(a.noop.remote(), timeout=60)
        return (time.perf_counter() - t) / n_sync * 1e6

    def actor_async():
        t = time.perf_counter()
        prism.get([a.noop.remote() for _ in range(n_async)], timeout=300)
        return n_async / (time.perf_counter() - t)

    out["actor_sync_us"] = rounds_of(actor_sync, rounds)
    out["actor_async_per_s"] = rounds_of(actor_async, rounds)
    arr = np.random.default_rng(0).random(big // 8)
    puts, gets, zero_copy = [], [], True
    for _ in range(rounds):
        t = time.perf_counter()
        ref = prism.put(arr)
        puts.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        got = prism.get(ref, timeout=60)
        gets.append((time.perf_counter() - t) * 1e6)
        view = prism._prism.get([ref], -1)[0]
        address = got.__array_interface__["data"][0]
        zero_copy &= view.store_owned and view.address <= address < view.address + len(view) \
            and not got.flags.owndata
        assert got[-1] == arr[-1]
        del got, ref, view
    out["numpy_put_100MiB_ms"] = puts
    out["numpy_get_100MiB_us"] = gets
    out["numpy_get_zero_copy"] = zero_copy
    prism.shutdown()
    return out


def child_dask(ranks, n_sync, n_async, rounds, big):
    import numpy as np
    from distributed import Client, LocalCluster

    out = {}
    with LocalCluster(n_workers=max(1, ranks - 1), threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.gather([client.submit(noop, pure=False) for _ in range(200)])

        def sync():
            t = time.perf_counter()
            for _ in range(n_sync):
                client.submit(noop, pure=False).result()
            return (time.perf_counter() - t) / n_sync * 1e6

        def asynchronous():
            t = time.perf_counter()
            client.gather([client.submit(noop, pure=False) for _ in range(n_async)])
            return n_async / (time.perf_counter() - t)

        out["tasks_sync_us"] = rounds_of(sync, rounds)
        out["tasks_async_per_s"] = rounds_of(asynchronous, rounds)
        a = client.submit(Actor, actor=True).result()
        a.noop().result()

        def actor_sync():
            t = time.perf_counter()
            for _ in range(n_sync):
                a.noop().result()
            return (time.perf_counter() - t) / n_sync * 1e6

        def actor_async():
            t = time.perf_counter()
            futures = [a.noop() for _ in range(n_async)]
            for fu in futures:
                fu.result()
            return n_async / (time.perf_counter() - t)

        out["actor_sync_us"] = rounds_of(actor_sync, rounds)
        out["actor_async_per_s"] = rounds_of(actor_async, rounds)
        arr = np.random.default_rng(0).random(big // 8)
        puts, gets = [], []
        for _ in range(rounds):
            t = time.perf_counter()
            fut = client.scatter(arr)
            puts.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            got = fut.result()
            gets.append((time.perf_counter() - t) * 1e6)
            assert got[-1] == arr[-1]
            del fut, got
        out["numpy_put_100MiB_ms"] = puts
        out["numpy_get_100MiB_us"] = gets
    return out


def child_mpi4py(n_sync, n_async, rounds):
    from mpi4py.futures import MPIPoolExecutor

    out = {}
    with MPIPoolExecutor() as pool:
        list(pool.map(noop_arg, range(200)))

        def sync():
            t = time.perf_counter()
            for _ in range(n_sync):
                pool.submit(noop).result()
            return (time.perf_counter() - t) / n_sync * 1e6

        def asynchronous():
            t = time.perf_counter()
            for fu in [pool.submit(noop) for _ in range(n_async)]:
                fu.result()
            return n_async / (time.perf_counter() - t)

        out["tasks_sync_us"] = rounds_of(sync, rounds)
        out["tasks_async_per_s"] = rounds_of(asynchronous, rounds)
    return out


def noop_arg(_):
    return None


# ---- driver ------------------------------------------------------------------------------

UNITS = {"tasks_sync_us": "us", "tasks_async_per_s": "tasks/s", "tasks_sync_remote_us": "us",
         "tasks_async_remote_per_s": "tasks/s", "actor_sync_us": "us",
         "actor_async_per_s": "calls/s", "numpy_put_100MiB_ms": "ms", "numpy_get_100MiB_us": "us"}


def run_child(name, cmd, env, timeout):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    t = time.monotonic()
    proc = subprocess.run(cmd + ["--out=" + path], env=env, timeout=timeout, capture_output=True, text=True)
    if proc.returncode != 0 or os.path.getsize(path) == 0:
        sys.stderr.write(f"{name}: failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}\n")
        return None
    with open(path) as f:
        result = json.load(f)
    os.unlink(path)
    print(f"{name}: done in {time.monotonic() - t:.1f} s", file=sys.stderr)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small counts: a smoke run of a few seconds")
    ap.add_argument("--only", default="prism,dask,mpi4py")
    ap.add_argument("--json")
    ap.add_argument("--child")
    ap.add_argument("--out")
    ap.add_argument("--n-sync", type=int)
    ap.add_argument("--n-async", type=int)
    args = ap.parse_args()
    # Quick counts are a smoke run's: Dask needs about 11 ms a sync task and 2 ms an async
    # one here, so 200/2000 took 40 s of a 60 s perf/run_peers.sh --quick.
    n_sync = args.n_sync or (50 if args.quick else 2000)
    n_async = args.n_async or (300 if args.quick else 20000)
    big = (8 if args.quick else 100) * MiB
    if args.child:
        if args.child == "prism":
            result = child_prism(n_sync, n_async, args.rounds, big)
        elif args.child == "dask":
            result = child_dask(args.ranks, n_sync, n_async, args.rounds, big)
        else:
            result = child_mpi4py(n_sync, n_async, args.rounds)
        if args.out:  # rank 0 only: other ranks never get here (prism) or are pool workers
            with open(args.out, "w") as f:
                json.dump(result, f)
        return 0

    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(args.ranks)]
    launch = os.environ.get("PRISM_LAUNCH")
    if launch:
        mpirun = launch.split() + ["-n", str(args.ranks)]
    me = [sys.executable, os.path.abspath(__file__), f"--rounds={args.rounds}", f"--ranks={args.ranks}",
          f"--n-sync={n_sync}", f"--n-async={n_async}"] + (["--quick"] if args.quick else [])
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    prism_env = dict(env, PYTHONPATH=os.path.join(os.path.abspath(args.build), "python"))
    results = {}
    wanted = args.only.split(",")
    if "prism" in wanted:
        results["prism"] = run_child("prism", mpirun + me + ["--child=prism"], prism_env, 600)
    if "dask" in wanted:
        results["dask"] = run_child("dask", me + ["--child=dask"], env, 600)
    if "mpi4py" in wanted:
        cmd = mpirun[:-2] + ["-n", str(args.ranks), sys.executable, "-m", "mpi4py.futures",
                             os.path.abspath(__file__)] + me[2:] + ["--child=mpi4py"]
        results["mpi4py"] = run_child("mpi4py", cmd, env, 600)

    benchmarks = []
    print(f"{'system':8} {'figure':22} {'median':>12} {'min':>12} {'max':>12}  unit")
    for system, r in results.items():
        if r is None:
            continue
        for key, unit in UNITS.items():
            if key not in r:
                continue
            v = r[key]
            name = f"python_{system}_{key}".replace("_100MiB", "_100MiB" if not args.quick else "_8MiB")
            benchmarks.append({"name": name, "median": statistics.median(v), "min": min(v), "max": max(v),
                               "unit": unit, "per_round": v, "repetitions": len(v)})
            print(f"{system:8} {key:22} {statistics.median(v):12.1f} {min(v):12.1f} {max(v):12.1f}  {unit}")
    zero_copy = (results.get("prism") or {}).get("numpy_get_zero_copy")
    if zero_copy is not None:
        print(f"prism    numpy get on the same rank is a view of the store (no copy): {zero_copy}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmarks": benchmarks, "context": {"ranks": args.ranks, "quick": args.quick,
                                                             "numpy_get_zero_copy": zero_copy}}, f, indent=1)
    failed = [s for s, r in results.items() if r is None]
    if zero_copy is False:
        print("python_benchmark: the same-rank NumPy get copied", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
