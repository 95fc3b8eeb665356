#!/usr/bin/env python3
"""Side-by-side table of Prism and its peers, from the raw files run_peers.sh collected.

    python3 perf/peers/report.py WORKDIR OUT_JSON

WORKDIR holds steps.tsv (one line per step: name, status, reason, seconds, load average
before, load average after) and each step's JSON: prism_micro.json (perf/hot_path_runs.sh
--micro-json: the hot-path rows over several launches, see below), prism_train.json (+
prism_train.log, whose stdout table has min/max), prism_collective.json, dask.json,
mpi4py.json, ddp_train.json, ddp_allreduce.json. Missing files give rows marked "skipped".

Prints the table and writes OUT_JSON. The ratio is oriented so that > 1 means Prism is better:
Prism/peer for throughputs and bandwidths, peer/Prism for latencies. Standard library only.

Prism's task and actor rows (the hot path: tasks sync and async, the remote round trip,
actor calls) come from several mpirun launches, each landing in this VM's fast or slow
mode: their figure is the median of the launches' medians with [min, max] across launches,
the ratio is computed from that median, and the ratio at Prism's worst launch stands beside it.
"""

import json
import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402


def load(workdir, name):
    path = os.path.join(workdir, name)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_steps(workdir):
    steps = []
    try:
        with open(os.path.join(workdir, "steps.tsv")) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 6:
                    continue
                steps.append({"step": parts[0], "status": parts[1], "reason": parts[2],
                              "seconds": float(parts[3] or 0),
                              "load_avg_before": [float(x) for x in parts[4].split()],
                              "load_avg_after": [float(x) for x in parts[5].split()]})
    except OSError:
        pass
    return steps


def fig(median, lo=None, hi=None, bench=None, launches=None, worst=None):
    if median is None:
        return None
    # min/max stay None where the benchmark reports only a median.
    f = {"benchmark": bench, "median": median, "min": lo, "max": hi}
    if launches:  # over several launches: min/max (and worst) across them, not across rounds
        f.update({"launches": launches, "worst": worst})
    return f


# ---- Prism figures ------------------------------------------------------------------------

def prism_micro(doc, name, field="median"):
    """A microbenchmark entry: median/min/max in its unit, or ops/s for field='ops'."""
    if not doc:
        return None
    for b in doc.get("benchmarks", []):
        if b.get("name") == name:
            n = b.get("launches") if b.get("range") == "launches" else None
            if field == "ops":
                ops = [v for v in b.get("per_launch_items_per_second") or [] if v is not None]
                return fig(b.get("items_per_second"), b.get("ops_per_second_min"),
                           b.get("ops_per_second_max"), name, n, min(ops) if n and ops else None)
            return fig(b.get("median"), b.get("min"), b.get("max"), name, n, b.get("worst"))
    return None


def prism_cross_rank_get(doc, want_bytes):
    """The cross_rank_get_gigabytes size nearest (log scale) to want_bytes, and the others."""
    if not doc:
        return None, {}
    sizes = {}
    for b in doc.get("benchmarks", []):
        m = re.match(r"cross_rank_get_gigabytes/(\d+)MiB$", b.get("name", ""))
        if m:
            sizes[int(m.group(1))] = b
    if not sizes or not want_bytes:
        return None, {}
    want_mib = want_bytes / (1 << 20)
    best = min(sizes, key=lambda s: abs(math.log(s / want_mib)))
    b = sizes[best]
    others = {s: sizes[s]["median"] for s in sorted(sizes)}
    return fig(b["median"], b["min"], b["max"], b["name"]), others


def prism_train(doc, log_text, workers):
    name = f"train_mlp_samples_per_second/{workers}w"
    med = lo = hi = None
    if doc:
        for b in doc.get("benchmarks", []):
            if b.get("name") == name:
                med = b.get("items_per_second")
    m = re.search(re.escape(name) + r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", log_text or "")
    if m:
        med2, lo, hi = (float(x) for x in m.groups())
        if med is None:
            med = med2
    return fig(med, lo, hi, name)


def prism_train_efficiency(doc):
    if not doc:
        return None
    for b in doc.get("benchmarks", []):
        if b.get("name") == "train_mlp_samples_per_second/2w":
            return fig(b.get("scaling_efficiency"), bench="scaling efficiency (2w / 2 x 1w)")
    return None


def prism_collective(doc, mib, which="collective"):
    if not doc:
        return None
    name = f"allreduce_{which}/{mib}MiB"
    for b in doc.get("benchmarks", []):
        if b.get("name") == name:
            return fig(b.get("median"), b.get("min"), b.get("max"), name)
    return None


# ---- Peer figures -------------------------------------------------------------------------

def peer_metric(doc, name):
    if not doc:
        return None
    for m in doc.get("metrics", []):
        if m.get("name") == name:
            return fig(m["median"], m["min"], m["max"], name)
    return None


def peer_meta(doc, name, key):
    if not doc:
        return None
    for m in doc.get("metrics", []):
        if m.get("name") == name:
            return m.get(key)
    return None


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    workdir, out_path = sys.argv[1], sys.argv[2]
    steps = read_steps(workdir)
    status = {s["step"]: s for s in steps}
    ctx_in = load(workdir, "context.json") or {}

    micro = load(workdir, "prism_micro.json")
    train = load(workdir, "prism_train.json")
    try:
        with open(os.path.join(workdir, "prism_train.log")) as f:
            train_log = f.read()
    except OSError:
        train_log = ""
    coll = load(workdir, "prism_collective.json")
    dask = load(workdir, "dask.json")
    mpi = load(workdir, "mpi4py.json")
    ddp_t = load(workdir, "ddp_train.json")
    ddp_a = load(workdir, "ddp_allreduce.json")
    pdata = load(workdir, "prism_data.json")
    ddata = load(workdir, "dask_data.json")

    ranks = ctx_in.get("ranks")
    tasks = ctx_in.get("tasks")
    obj_bytes = ctx_in.get("object_bytes")
    obj_mib = f"{obj_bytes / (1 << 20):g} MiB" if obj_bytes else "?"
    dask_workers = (dask or {}).get("context", {}).get("workers", ctx_in.get("dask_workers"))
    mpi_workers = (mpi or {}).get("context", {}).get("workers")

    rows = []

    def row(workload, unit, hib, prism, peer, peer_fig, note, peer_step, tag="same work"):
        r = {"workload": workload, "unit": unit, "higher_is_better": hib,
             "prism": prism, "peer": peer, "peer_figure": peer_fig, "match": tag,
             "note": note}
        ratio = lambda p: p / peer_fig["median"] if hib else peer_fig["median"] / p  # noqa: E731
        if prism and peer_fig and prism["median"] and peer_fig["median"]:
            r["ratio"] = ratio(prism["median"])
            if prism.get("worst"):  # Prism's worst launch against the peer's median
                r["ratio_worst"] = ratio(prism["worst"])
        else:
            r["ratio"] = None
        st = status.get(peer_step)
        if peer_fig is None:
            r["peer_status"] = (f"{st['status']}: {st['reason']}" if st and st["status"] != "ok"
                                else "no figure")
            r["peer_short"] = (f"{st['status']} (see {peer_step} below)"
                               if st and st["status"] != "ok" else "no figure")
        rows.append(r)

    tasks_txt = f"{tasks:,}" if tasks else "?"
    p_async = prism_micro(micro, "single_client_tasks_async")
    row(f"no-op tasks: submit {tasks_txt}, get all", "tasks/s", True, p_async,
        "Dask", peer_metric(dask, "dask_tasks_async"),
        f"Prism: tasks run on {ranks} ranks incl. the driver's; Dask: {dask_workers} worker "
        "processes, client.submit(pure=False) + one gather", "dask")
    row(f"no-op tasks: submit {tasks_txt}, get all", "tasks/s", True, p_async,
        "mpi4py.futures chunksize 1", peer_metric(mpi, "mpi4py_tasks_async_chunksize1"),
        f"mpi4py: executor.map on {mpi_workers} worker ranks, one message per task", "mpi4py")
    row(f"no-op tasks: submit {tasks_txt}, get all", "tasks/s", True, p_async,
        "mpi4py.futures chunksize 100", peer_metric(mpi, "mpi4py_tasks_async_chunksize100"),
        "NOT the same work: mpi4py packs 100 calls per message; Prism has no chunking "
        "(one spec per task)", "mpi4py",
        "NOT same: peer batches 100/msg")

    p_sync = prism_micro(micro, "single_client_tasks_sync")
    p_sync_r = prism_micro(micro, "single_client_tasks_sync_remote")
    for peer, doc, metric, step in (("Dask", dask, "dask_tasks_sync", "dask"),
                                    ("mpi4py.futures", mpi, "mpi4py_tasks_sync", "mpi4py")):
        row("sync no-op task round trip (local)", "us", False, p_sync, peer,
            peer_metric(doc, metric),
            "Prism runs it on the driver's own rank (no process hop); the peer always "
            "ships it to a worker process", step, "differs: Prism stays in process")
        row("sync no-op task round trip (other process)", "us", False, p_sync_r, peer,
            peer_metric(doc, metric),
            "Prism pinned to rank 1 (one MPI hop each way), like the peer's worker "
            "process", step, "same: one process hop")

    p_actor = prism_micro(micro, "1_1_actor_calls_sync")
    p_actor_ops = prism_micro(micro, "1_1_actor_calls_sync", "ops")
    note_actor = ("Prism's actor lands on rank 0, in the driver's process (another thread); "
                  "the Dask actor lives in a worker process")
    row("actor sync call round trip", "us", False, p_actor, "Dask",
        peer_metric(dask, "dask_actor_calls_sync"), note_actor, "dask",
        "differs: Prism actor in process")
    row("actor sync calls", "calls/s", True, p_actor_ops, "Dask",
        peer_metric(dask, "dask_actor_calls_sync_ops"), note_actor, "dask",
        "differs: Prism actor in process")

    p_put = prism_micro(micro, "single_client_put_gigabytes")
    row(f"object put, {obj_mib}", "GB/s", True, p_put, "Dask",
        peer_metric(dask, "dask_put_gigabytes"),
        "NOT the same path: Prism Put copies into the driver's own store (in process); "
        "Dask scatter ships the bytes to a worker process over loopback TCP", "dask",
        "NOT same: Prism put is in process")
    p_get, sizes = prism_cross_rank_get(micro, obj_bytes)
    if p_get:
        got_mib = int(re.search(r"/(\d+)MiB", p_get["benchmark"]).group(1))
        size_note = ("" if obj_bytes and got_mib << 20 == obj_bytes else
                     f" at {got_mib} MiB, its nearest size to {obj_mib} (all sizes: "
                     + ", ".join(f"{s} MiB {v:.3g}" for s, v in sizes.items()) + " GB/s)")
    else:
        size_note = " (needs >= 3 ranks)" if ranks and ranks < 3 else ""
    row(f"object get from another process, {obj_mib}", "GB/s", True, p_get, "Dask",
        peer_metric(dask, "dask_get_gigabytes"),
        "Prism: object made on rank 1, Get in a task on rank 2 (cross_rank_get)" + size_note
        + "; Dask: client.gather from a worker process", "dask",
        "same: cross process" + (f", Prism at {got_mib} MiB" if size_note and p_get else ""))

    ddp_note = "MLP 784-512-512-10, SGD, batch 128/worker, 1 torch thread/worker"
    row("MLP training, 1 worker", "samples/s", True, prism_train(train, train_log, 1),
        "PyTorch DDP (gloo)", peer_metric(ddp_t, "ddp_train_samples_per_second/1w"),
        ddp_note + "; Prism: TorchTrainer with 1 worker (solo collective); PyTorch: plain "
        "model, one process", "ddp_train", "same model, batch, threads")
    row("MLP training, 2 workers", "samples/s", True, prism_train(train, train_log, 2),
        "PyTorch DDP (gloo)", peer_metric(ddp_t, "ddp_train_samples_per_second/2w"),
        ddp_note + "; Prism: TorchTrainer, MPI all-reduce; PyTorch: DDP over gloo", "ddp_train",
        "same model, batch, threads")
    row("MLP training, scaling efficiency 2 vs 1", "ratio", True, prism_train_efficiency(train),
        "PyTorch DDP (gloo)", peer_metric(ddp_t, "ddp_scaling_efficiency"),
        "2-worker samples/s / (2 x 1-worker samples/s), each side against its own 1 worker",
        "ddp_train", "each vs its own 1 worker")

    sizes_mib = ctx_in.get("allreduce_mib", [])
    for mib in sizes_mib:
        raw = prism_collective(coll, mib, "raw_mpi")
        raw_txt = f"; raw MPI_Allreduce same run {raw['median']:.3g} GB/s" if raw else ""
        row(f"all-reduce float32 {mib} MiB, 2 ranks", "GB/s bus", True,
            prism_collective(coll, mib), "PyTorch DDP (gloo)",
            peer_metric(ddp_a, f"ddp_allreduce_bus_gbps/{mib}MiB"),
            "Prism: prism::train MPI Collective::AllReduce; PyTorch: dist.all_reduce over "
            "gloo; bus bw = bytes x 2(n-1)/n / s" + raw_txt, "ddp_allreduce", "same size, ranks")

    data_rows = (ddata or {}).get("context", {}).get("rows")
    row(f"Data pipeline: {data_rows or '?':,} rows, map_batches + shuffle + groupby agg"
        if data_rows else "Data pipeline: map_batches + shuffle + groupby agg", "s", False,
        prism_micro(pdata, "data_pipeline_seconds"), "Dask dataframe",
        peer_metric(ddata, "dask_data_pipeline_seconds"),
        "the same rows, steps and check (perf/data_pipeline_benchmark.cc, "
        "perf/peers/dask_data_bench.py); Prism: 3 ranks; Dask: 3 worker processes, "
        "map_partitions + task shuffle + groupby agg", "dask_data", "same rows and steps")

    # ---- print ---------------------------------------------------------------------------
    loads_before = [s["load_avg_before"] for s in steps if s["load_avg_before"]]
    loads_after = [s["load_avg_after"] for s in steps if s["load_avg_after"]]
    la0 = loads_before[0] if loads_before else None
    la1 = loads_after[-1] if loads_after else None
    mode = ctx_in.get("mode", "?")
    print()
    launches = sorted({r["prism"]["launches"] for r in rows if r["prism"] and r["prism"].get("launches")})
    print(f"Prism vs peers, {mode} mode, {ranks} ranks, one run; median [min, max] across "
          "rounds.")
    if launches:
        print(f"Prism's task and actor rows: {'/'.join(map(str, launches))} mpirun launches, the median of "
              "their medians [min, max across launches]; the ratio from that median, with the ratio at "
              "Prism's worst launch beside it.")
    print("Ratio = Prism/peer for throughput and bandwidth, peer/Prism for latency: "
          "> 1 means Prism is better.")
    if la0 or la1:
        f3 = lambda v: " ".join(f"{x:.2f}" for x in v) if v else "?"  # noqa: E731
        print(f"Load average (1/5/15 min): {f3(la0)} at start, {f3(la1)} at end.")
    if mode == "quick":
        print("Quick mode: tiny sizes and counts, NOT comparable figures (a smoke run).")
    print()

    def ftxt(f):
        if not f:
            return "-"
        if f["min"] is None or f["max"] is None:
            return f"{peerlib.fmt(f['median'])} (median only)"
        over = f" over {f['launches']} launches" if f.get("launches") else ""
        return f"{peerlib.fmt(f['median'])} [{peerlib.fmt(f['min'])}, {peerlib.fmt(f['max'])}]{over}"

    def rtxt(v):
        return peerlib.fmt(v) if v >= 100 else f"{v:.3g}"

    header = ["#", "workload", "unit", "Prism", "peer", "peer figure",
              "Prism/peer (>1: Prism better)", "note"]
    table = []
    for i, r in enumerate(rows, 1):
        peer_txt = ftxt(r["peer_figure"]) if r["peer_figure"] else r.get("peer_short", "-")
        ratio = "-" if r["ratio"] is None else rtxt(r["ratio"])
        if r.get("ratio_worst") is not None:
            ratio += f" (worst {rtxt(r['ratio_worst'])})"
        table.append([str(i), r["workload"], r["unit"], ftxt(r["prism"]), r["peer"], peer_txt,
                      ratio, r["match"]])
    widths = [max(len(str(x[i])) for x in table + [header]) for i in range(len(header))]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    print(line(header))
    print(line(["-" * w for w in widths]))
    for cells in table:
        print(line(cells))
    print()
    print("Notes:")
    for i, r in enumerate(rows, 1):
        print(f"  {i:2}. {r['workload']} vs {r['peer']}: {r['note']}")
    targets = [b for b in (micro or {}).get("benchmarks", []) if b.get("target")]
    if targets:
        print()
        print("Prism's own targets (prism_microbenchmark, same run):")
        for b in targets:
            verdict = ("MET" if b.get("target_met") else "NOT MET") if b.get("target_verdict_valid", True) \
                else "no verdict (quick mode)"
            spread = ""
            if b.get("range") == "launches":
                spread = (f"  (median of {b['launches']} launches; worst {b['worst']:,.4g}; met in "
                          f"{b.get('target_met_runs', '?')} of {b['launches']})")
            print(f"  {b['name']:<32} {b['median']:>12,.4g} {b.get('unit', ''):<12} "
                  f"{b['target']:<48} {verdict}{spread}")
    print()
    print("Steps (seconds, load average before -> after):")
    for s in steps:
        why = f" ({s['reason']})" if s["reason"] else ""
        b = s["load_avg_before"][0] if s["load_avg_before"] else float("nan")
        a = s["load_avg_after"][0] if s["load_avg_after"] else float("nan")
        print(f"  {s['step']:<16} {s['status']:<8} {s['seconds']:7.1f} s  load {b:.2f} -> "
              f"{a:.2f}{why}")

    doc = {
        "context": dict(ctx_in, date=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                        load_avg_at_start=la0, load_avg_at_end=la1,
                        prism_git_commit=(micro or {}).get("context", {}).get(
                            "prism_git_commit"),
                        ratio="Prism/peer for throughput and bandwidth, peer/Prism for "
                              "latency: > 1 means Prism is better",
                        statistic="median across rounds, min/max across rounds alongside; Prism's "
                                  "hot-path rows (\"launches\" in the figure): the median of that many "
                                  "launches' medians, min/max/worst across the launches, ratio_worst = "
                                  "the ratio at Prism's worst launch"),
        "steps": steps,
        "rows": rows,
        "raw": {"prism_microbenchmark": micro,
                "prism_hot_path_runs": load(workdir, "prism_hot_path_runs.json"),
                "prism_train_benchmark": train,
                "prism_collective_benchmark": coll, "dask": dask, "mpi4py": mpi,
                "ddp_train": ddp_t, "ddp_allreduce": ddp_a,
                "prism_data_pipeline_benchmark": pdata, "dask_data": ddata},
    }
    peerlib.write_json(out_path, doc, indent=1)
    print(f"\nJSON: {os.path.abspath(out_path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
