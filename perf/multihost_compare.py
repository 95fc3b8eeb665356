#!/usr/bin/env python3
"""What is slower across hosts: each figure within one host and across the two-host test
bed (tests/multihost), in the same run, launches alternated.

    multihost_compare.py [--build=DIR] [--launches=5] [--only=WORD,...] [--json=OUT]

Brings the bed up if it is not (tests/multihost/hosts.sh up), and down again after; do not
run the multihost ctest label at the same time (its fixture removes the bed at its end). Each row is measured by one
benchmark binary launched through tests/multihost/mpirun.sh twice per launch round: with
every rank on prism-h1 ("within") and with the ranks that matter split over prism-h1 and
prism-h2 ("across"). A launch's figure is its binary's median over rounds; the table gives
the median and the worst of the launches, within and across. Standard library only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = os.path.join(HERE, "..", "tests", "multihost", "mpirun.sh")
HOSTS = os.path.join(HERE, "..", "tests", "multihost", "hosts.sh")
SHARED = subprocess.run([HOSTS, "shared"], capture_output=True, text=True, check=True).stdout.strip()

# name, unit, higher is better, binary, args, ranks within, ranks across, row, field
ROWS = [
    ("task round trip (rank 0 -> rank 1)", "us", False, "prism_microbenchmark",
     ["--filter=single_client_tasks_sync_remote", "--rounds=3"], (2, 0), (1, 1),
     "single_client_tasks_sync_remote", "median"),
    ("object GetView, 64 MiB (rank 2 reads rank 1's)", "GB/s", True, "prism_object_benchmark",
     ["--mib=64", "--rounds=3"], (3, 0), (2, 1), "object_remote_get_view/64MiB", "median"),
    ("all-reduce 64 MiB, 4 ranks (bus bandwidth)", "GB/s", True, "prism_collective_benchmark",
     ["--sizes-mib", "64", "--rounds=3", "--gloo=off"], (4, 0), (2, 2),
     "allreduce_collective/64MiB", "median"),
    ("all-reduce 64 MiB, 4 ranks, hierarchical (bus bandwidth)", "GB/s", True,
     "prism_collective_benchmark", ["--sizes-mib", "64", "--rounds=3", "--gloo=off",
                                    "--algorithm=hierarchical"], (4, 0), (2, 2),
     "allreduce_collective/64MiB", "median"),
    ("training, MLP on 2 workers (one per rank)", "samples/s", True, "prism_train_benchmark",
     ["--rounds=3", "--steps=30", "--prism-num-cpus=1", "--storage-path=" + SHARED], (2, 0), (1, 1),
     "train_mlp_samples_per_second/2w", "items_per_second"),
]


def launch(build, binary, args, layout, row, field):
    """One launch: the row's figure, or None (with the output) if it failed."""
    fd, out = tempfile.mkstemp(suffix=".json", dir=SHARED)
    os.close(fd)
    cmd = [MPIRUN, str(layout[0]), str(layout[1]), "--",
           os.path.join(build, "perf", binary), "--json=" + out] + args
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=600)
        if p.returncode != 0:
            sys.stderr.write("%s failed (%d):\n%s\n" % (" ".join(cmd), p.returncode, p.stdout[-2000:] + p.stderr[-2000:]))
            return None
        with open(out) as f:
            for b in json.load(f)["benchmarks"]:
                if b["name"] == row and b.get("aggregate_name", "median") == "median":
                    return float(b[field])
        sys.stderr.write("%s: no row %s in %s\n" % (binary, row, out))
        return None
    except subprocess.TimeoutExpired:
        sys.stderr.write("%s timed out\n" % " ".join(cmd))
        return None
    finally:
        os.unlink(out)


def summary(values, higher):
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    return statistics.median(vals), (min(vals) if higher else max(vals))


def fmt(v):
    if v is None:
        return "-"
    return "{:,.0f}".format(v) if abs(v) >= 100 else "%.3g" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD_DIR", "build"))
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--only", default="", help="only the rows whose name has one of these words")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    hosts = HOSTS
    made = False
    if subprocess.run([hosts, "check"], capture_output=True).returncode:
        if subprocess.run([hosts, "up", build, os.path.dirname(HERE)]).returncode:
            sys.exit("the two-host test bed cannot be made here")
        made = True
    words = [w for w in a.only.split(",") if w]
    rows = [r for r in ROWS if not words or any(w in r[0] for w in words)]
    try:
        results = measure(build, rows, a.launches)
    finally:
        if made:
            subprocess.run([hosts, "down"])
    report(results, a.launches, a.json)


def measure(build, rows, launches):
    results = []
    for name, unit, higher, binary, args, within, across, row, field in rows:
        runs = {"within": [], "across": []}
        for i in range(launches):
            for where, layout in (("within", within), ("across", across)):
                runs[where].append(launch(build, binary, args, layout, row, field))
            print("  %s, launch %d: within %s, across %s" % (name, i + 1, fmt(runs["within"][-1]),
                                                          fmt(runs["across"][-1])), flush=True)
        w_med, w_worst = summary(runs["within"], higher)
        x_med, x_worst = summary(runs["across"], higher)
        slower = None
        if w_med and x_med:
            slower = (w_med / x_med) if higher else (x_med / w_med)
        results.append({"name": name, "unit": unit, "higher_is_better": higher,
                        "within": runs["within"], "across": runs["across"],
                        "within_median": w_med, "within_worst": w_worst,
                        "across_median": x_med, "across_worst": x_worst,
                        "across_slower_by": slower,
                        "layout_within": "%d+%d" % within, "layout_across": "%d+%d" % across})
    return results


def report(results, launches, json_path):
    print("\n%d launches each, alternated; median (worst)" % launches)
    print("| figure | unit | within one host | across two hosts | across is slower by |")
    print("|---|---|---|---|---|")
    for r in results:
        print("| %s | %s | %s (%s) | %s (%s) | %s |" % (
            r["name"], r["unit"], fmt(r["within_median"]), fmt(r["within_worst"]),
            fmt(r["across_median"]), fmt(r["across_worst"]),
            ("%.1fx" % r["across_slower_by"]) if r["across_slower_by"] else "-"))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"launches": launches, "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
