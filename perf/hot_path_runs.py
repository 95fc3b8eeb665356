#!/usr/bin/env python3
"""The hot-path rows of prism_microbenchmark over several launches (perf/hot_path_runs.sh).

    hot_path_runs.py filter
    hot_path_runs.py summarize [--json=OUT] [--micro-json=OUT] [--failed=3,5] RUN1.json RUN2.json ...

On this VM each mpirun launch lands in a fast or a slow mode (perf/README.md, "Bimodal
runs"), so one launch's figure says little: the spread across launches is part of the
figure. A run's figure is its launch's median across rounds (`median` in the binary's
JSON); summarize gives, per hot-path row, every run's figure, their min, median and max,
the worst (the slowest), the target and in how many runs it was met.

filter prints the --filter that selects the hot-path rows. summarize prints the table and
writes OUT (the per-run figures and the summary) and, with --micro-json, a file in
prism_microbenchmark's own JSON format: the first run's benchmarks, with each hot-path row
replaced by its figures across the runs (median = the median of the runs' figures, min/max
across runs, per_launch = every run's figure, worst, target_met_runs), which perf/suite.py
merge and perf/peers/report.py read. Standard library only.
"""

import argparse
import copy
import datetime
import json
import os
import socket
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite import fmt  # noqa: E402  (one number format for every perf table)

# (name, higher is better, comparison, target) - the targets (issues 21 and 43).
HOT_PATH = [
    ("single_client_tasks_async", True, ">=", 500000.0),
    ("single_client_tasks_sync", False, "<=", 10.0),
    ("single_client_tasks_sync_remote", False, "<=", 20.0),
    ("1_1_actor_calls_sync", False, "<=", 10.0),
    ("1_1_actor_calls_async", True, ">=", 500000.0),
    ("idle_rank_cpu", False, "<", 0.5),
    ("single_client_task_after_idle", False, "<=", 40.0),
]
HOT_NAMES = [h[0] for h in HOT_PATH]
UNITS = {"single_client_tasks_async": "tasks/s", "1_1_actor_calls_async": "calls/s",
         "idle_rank_cpu": "% of a core"}
STATISTIC = ("a run is one mpirun launch; its figure is the launch's median across rounds; "
             "min, median and max across the runs; worst = the slowest run")


def met(value, op, target):
    return {">=": value >= target, "<=": value <= target, "<": value < target}[op]


def target_text(name, op, target):
    unit = UNITS.get(name, "us")
    t = "{:,.0f}".format(target) if target >= 1000 else "%g" % target
    return "%s %s %s" % (op, t, unit)


def number(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def load_runs(paths):
    docs = []
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        if not isinstance(d, dict) or not isinstance(d.get("benchmarks"), list):
            raise ValueError("%s: not prism_microbenchmark JSON (no \"benchmarks\" list)" % p)
        docs.append(d)
    return docs


def entry(doc, name):
    for b in doc.get("benchmarks", []):
        if b.get("name") == name:
            return b
    return None


def summarize(docs):
    """Per hot-path row: every run's figure (None where the run lacks the row) and the
    summary across the runs that have it."""
    rows = []
    for name, hib, op, target in HOT_PATH:
        entries = [entry(d, name) for d in docs]
        runs = [number(e.get("median")) if e else None for e in entries]
        have = [v for v in runs if v is not None]
        unit = next((e.get("unit") for e in entries if e and e.get("unit")), UNITS.get(name, "us"))
        r = {"name": name, "unit": unit, "higher_is_better": hib, "runs": runs,
             "target": target_text(name, op, target), "target_op": op, "target_value": target,
             "measured": len(have)}
        if have:
            r.update({"min": min(have), "median": statistics.median(have), "max": max(have),
                      "worst": min(have) if hib else max(have),
                      "met": sum(met(v, op, target) for v in have),
                      "median_met": met(statistics.median(have), op, target)})
        else:
            r.update({"min": None, "median": None, "max": None, "worst": None, "met": 0,
                      "median_met": None})
        rows.append(r)
    return rows


def run_numbers(n_ok, failed):
    """The numbers (from 1) of the n_ok launches that succeeded, given those that failed."""
    return [i for i in range(1, n_ok + len(failed) + 1) if i not in failed]


def table(rows, docs, failed):
    header = (["row", "unit"] + ["run %d" % i for i in run_numbers(len(docs), failed)]
              + ["min", "median", "max", "target", "met"])
    lines = [header]
    for r in rows:
        lines.append([r["name"], r["unit"]] + [fmt(v) for v in r["runs"]]
                     + [fmt(r["min"]), fmt(r["median"]), fmt(r["max"]), r["target"],
                        "%d of %d" % (r["met"], r["measured"])])
    widths = [max(len(x[i]) for x in lines) for i in range(len(header))]
    out = []
    for k, cells in enumerate(lines):
        out.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) if i < len(cells) - 2 else c.ljust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    loads = ["%.2f" % d.get("context", {}).get("load_avg_at_start", [float("nan")])[0] for d in docs]
    out.append("")
    out.append("load average (1 min) at each run's start: " + ", ".join(loads))
    modes = {d.get("context", {}).get("mode") for d in docs}
    if "quick" in modes:
        out.append("quick mode: tiny sizes, the figures are a smoke run's and no verdict")
    if failed:
        out.append("FAILED launches (not counted): " + ", ".join(str(f) for f in failed))
    return "\n".join(out)


def combined_micro(docs, rows, numbers=None):
    """prism_microbenchmark's JSON: the first run's benchmarks, each hot-path row replaced by
    the runs' figures. Its other fields come from the run whose figure is the median (the
    lower middle one for an even count). numbers: each doc's launch number (default 1..n)."""
    numbers = numbers or list(range(1, len(docs) + 1))
    out = copy.deepcopy(docs[0])
    by_name = {r["name"]: r for r in rows}
    benchmarks = []
    present = set()
    for b in out["benchmarks"]:
        present.add(b.get("name"))
    # Keep the first run's order; a hot-path row the first run lacks is appended.
    names = [b.get("name") for b in out["benchmarks"]]
    names += [n for n in HOT_NAMES if n not in present and by_name[n]["measured"]]
    for name in names:
        r = by_name.get(name)
        b0 = entry(out, name)
        if r is None or not r["measured"]:
            benchmarks.append(b0)
            continue
        runs = [(i, entry(d, name)) for i, d in enumerate(docs)]
        runs = [(i, e) for i, e in runs if e and number(e.get("median")) is not None]
        ordered = sorted(runs, key=lambda ie: ie[1]["median"])
        mid_i, mid = ordered[(len(ordered) - 1) // 2]
        e = copy.deepcopy(mid)
        med = r["median"]
        ips = [number(x.get("items_per_second")) for _, x in runs]
        ips = [v for v in ips if v is not None]
        e.pop("per_round", None)
        e.update({
            "median": med, "min": r["min"], "max": r["max"], "worst": r["worst"],
            "per_launch": [x["median"] for _, x in runs],
            "per_launch_items_per_second": [number(x.get("items_per_second")) for _, x in runs],
            "per_round_by_launch": [x.get("per_round") for _, x in runs],
            "launches": len(runs), "repetitions": len(runs), "range": "launches",
            "fields_from_launch": numbers[mid_i],
            "items_per_second": statistics.median(ips) if ips else e.get("items_per_second"),
            "target": r["target"], "target_value": r["target_value"],
            "target_met": bool(r["median_met"]), "target_met_runs": r["met"],
            "ratio_to_target": med / r["target_value"] if r["target_value"] else None,
            "target_verdict_valid": all(x.get("target_verdict_valid", True) for _, x in runs),
            "label": "%d launches: median of their medians %s, min %s, max %s (launch %d's other fields)"
                     % (len(runs), fmt(med), fmt(r["min"]), fmt(r["max"]), numbers[mid_i]),
        })
        for k in ("real_time", "cpu_time"):
            v = [x[k] for _, x in runs if number(x.get(k)) is not None]
            if v:
                e[k] = statistics.median(v)
        if ips and "ops_per_second_min" in e:
            e["ops_per_second_min"], e["ops_per_second_max"] = min(ips), max(ips)
        benchmarks.append(e)
    out["benchmarks"] = benchmarks
    ctx = out.setdefault("context", {})
    ctx["hot_path_launches"] = len(docs)
    ctx["hot_path_rows"] = HOT_NAMES
    ctx["load_avg"] = docs[-1].get("context", {}).get("load_avg", ctx.get("load_avg"))
    ctx["statistic"] = ("hot-path rows: " + STATISTIC + "; other rows: the first launch's median across rounds "
                        "(min/max across rounds alongside)")
    return out


def cmd_summarize(args):
    docs = load_runs(args.runs)
    failed = [int(x) for x in args.failed.split(",") if x]
    rows = summarize(docs)
    numbers = run_numbers(len(docs), failed)
    print(table(rows, docs, failed))
    ctx0 = docs[0].get("context", {})
    if args.json:
        doc = {
            "context": {
                "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "host_name": socket.gethostname(), "runs": len(docs) + len(failed), "runs_ok": len(docs),
                "failed_runs": failed, "run_numbers": numbers, "mode": ctx0.get("mode"), "mpi_ranks": ctx0.get("mpi_ranks"),
                "prism_git_commit": ctx0.get("prism_git_commit"), "command": args.command,
                "load_avg_at_start": ctx0.get("load_avg_at_start"),
                "load_avg": docs[-1].get("context", {}).get("load_avg"), "statistic": STATISTIC},
            "launches": [{"run": numbers[i], "file": os.path.basename(p),
                          "date": d.get("context", {}).get("date"),
                          "load_avg_at_start": d.get("context", {}).get("load_avg_at_start"),
                          "load_avg": d.get("context", {}).get("load_avg")}
                         for i, (p, d) in enumerate(zip(args.runs, docs))],
            "rows": rows,
        }
        write(args.json, doc)
        print("JSON: %s" % args.json)
    if args.micro_json:
        write(args.micro_json, combined_micro(docs, rows, numbers))
        print("prism_microbenchmark JSON (hot-path rows over %d launches): %s" % (len(docs), args.micro_json))
    return 0


def write(path, doc):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main(argv):
    p = argparse.ArgumentParser(prog="hot_path_runs.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("filter", help="print the --filter of the hot-path rows")
    s = sub.add_parser("summarize", help="the table and JSON of several launches' JSON")
    s.add_argument("--json", default="")
    s.add_argument("--micro-json", default="")
    s.add_argument("--failed", default="", help="comma-separated numbers of the runs that failed")
    s.add_argument("--command", default="", help="the command of a launch, recorded in the JSON")
    s.add_argument("runs", nargs="+", metavar="RUN.json")
    args = p.parse_args(argv)
    if args.cmd == "filter":
        print(",".join(HOT_NAMES))
        return 0
    try:
        return cmd_summarize(args)
    except (OSError, ValueError) as e:
        print("hot_path_runs.py: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
