"""Shared helpers of the peer benchmarks (perf/peers/*_bench.py): round statistics, a timed
round loop and the JSON report. Standard library only.

Every peer script writes one JSON file:

    {"peer": "...", "context": {...}, "metrics": [
        {"name", "value", "unit", "higher_is_better", "median", "min", "max",
         "per_round", "rounds", "note"}, ...]}

`value` is the median across rounds (the figure run_peers.sh puts in its table).
"""

import json
import os
import platform
import socket
import statistics
import sys
import time


def load_average():
    try:
        return list(os.getloadavg())
    except OSError:
        return [0.0, 0.0, 0.0]


# run_peers.sh reports a peer script that exits with this status as "skipped: <why>",
# taking <why> from the line skipped() prints.
EXIT_SKIPPED = 3


def skipped(script, why):
    """Says why `script` cannot run, in the form run_peers.sh reads; returns EXIT_SKIPPED."""
    print(f"{script}: skipped: {why}", file=sys.stderr)
    return EXIT_SKIPPED


def fill_defaults(args, quick, full):
    """Sets every option still None in `args` from `quick` or `full` (by args.quick)."""
    for k, v in (quick if args.quick else full).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    return args


def metric(name, unit, higher_is_better, per_round, note="", **extra):
    """One metric entry: median/min/max of per_round (one figure per round)."""
    if not per_round:
        raise ValueError(f"metric {name}: no rounds")
    med = statistics.median(per_round)
    out = {
        "name": name,
        "value": med,
        "unit": unit,
        "higher_is_better": bool(higher_is_better),
        "median": med,
        "min": min(per_round),
        "max": max(per_round),
        "per_round": list(per_round),
        "rounds": len(per_round),
        "note": note,
    }
    out.update(extra)
    return out


def timed_rounds(op, rounds, min_time_s, min_ops=2):
    """Runs `op()` repeatedly for at least min_time_s per round; returns, per round, the list
    of per-op wall times in seconds (op's whole call is timed)."""
    out = []
    for _ in range(rounds):
        lat = []
        t0 = time.perf_counter()
        while True:
            a = time.perf_counter()
            op()
            b = time.perf_counter()
            lat.append(b - a)
            if b - t0 >= min_time_s and len(lat) >= min_ops:
                break
        out.append(lat)
    return out


def latency_metrics(base, lat_rounds, note, us_note_extra=""):
    """From timed_rounds' output: `<base>` median latency (us) per round and `<base>_ops`
    round trips per second per round."""
    medians = [statistics.median(r) * 1e6 for r in lat_rounds]
    rates = [len(r) / sum(r) for r in lat_rounds]
    return [
        metric(base, "us", False, medians, note + us_note_extra,
               calls=sum(len(r) for r in lat_rounds)),
        metric(base + "_ops", "ops/s", True, rates, note),
    ]


def write_report(path, peer, context, metrics):
    ctx = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host_name": socket.gethostname(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "num_cpus": os.cpu_count(),
        "load_avg_at_end": load_average(),
    }
    ctx.update(context)
    doc = {"peer": peer, "context": ctx, "metrics": metrics}
    if path:
        write_json(path, doc, indent=2)
    return doc


def write_json(path, doc, indent):
    """Writes doc to path through a temporary file, so a reader never sees half of it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=indent)
        f.write("\n")
    os.replace(tmp, path)


def print_table(title, metrics):
    print(title)
    print(f"  {'metric':<36} {'median':>12} {'min':>12} {'max':>12}  unit")
    for m in metrics:
        print(f"  {m['name']:<36} {fmt(m['median']):>12} {fmt(m['min']):>12} "
              f"{fmt(m['max']):>12}  {m['unit']}")
    sys.stdout.flush()


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"
