#!/usr/bin/env bash
# What the dashboard costs the hot path: perf/hot_path_runs.sh's rows with the dashboard off
# and on (PRISM_DASHBOARD=loopback: rank 0 serves it, every rank sends a sample a second,
# rank 0 keeps the history), in alternated launches (off, on, off, on, ...) so that both
# modes meet the same drift of this VM, then one table per row: each mode's median and worst
# across its launches, and on/off at the median.
#
#   perf/dashboard_cost.sh [--runs=N] [--quick] [--filter=ROWS] [--json=PATH]
#
#   --runs=N       launches of each mode (default 5)
#   --quick        a smoke run (figures not comparable)
#   --filter=ROWS  launch prism_microbenchmark itself with only these rows (comma-separated,
#                  e.g. single_client_tasks_async,single_client_tasks_sync: ~16 s a launch
#                  instead of ~50 s, so more launches fit in a few minutes)
#   --json=PATH    the table as JSON (default perf/results/dashboard_cost.json)
#
# Environment: as perf/hot_path_runs.sh (BUILD_DIR, MPIRUN, PRISM_LAUNCH). No page is open
# during the runs: what is measured is the feed (samples, history), which runs whether or
# not anyone looks; a page costs rank 0 one state API round per 0.5 s on top.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
runs=5 quick=() json="perf/results/dashboard_cost.json" filter=""
for arg in "$@"; do
  case "$arg" in
    --runs=*) runs="${arg#--runs=}" ;;
    --quick) quick=(--quick) ;;
    --json=*) json="${arg#--json=}" ;;
    --filter=*) filter="${arg#--filter=}" ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "dashboard_cost.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
work="$(mktemp -d "${TMPDIR:-/tmp}/prism-dashboard-cost.XXXXXX")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [[ -n "${PRISM_LAUNCH:-}" ]]; then
  read -r -a launch <<< "$PRISM_LAUNCH"
else
  launch=("${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe)
fi
for ((i = 1; i <= runs; i++)); do
  for mode in off loopback; do
    echo "launch $i/$runs, dashboard $mode"
    if [[ -n "$filter" ]]; then
      PRISM_DASHBOARD=$mode timeout -k 10 600 "${launch[@]}" -n 3 "${BUILD_DIR:-build}/perf/prism_microbenchmark" \
        "${quick[@]}" --filter="$filter" --json="$work/${mode}_$i.json" > "$work/${mode}_$i.log" 2>&1
    else
      PRISM_DASHBOARD=$mode perf/hot_path_runs.sh --runs=1 "${quick[@]}" --json="$work/${mode}_$i.json" \
        > "$work/${mode}_$i.log" 2>&1
    fi || { echo "failed: see $work/${mode}_$i.log" >&2; exit 1; }
  done
done
mkdir -p "$(dirname "$json")"
python3 - "$work" "$runs" "$json" <<'PY'
import json, statistics, sys
work, runs, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
figures = {}  # (row, mode) -> [figure per launch]
meta = {}
for mode in ("off", "loopback"):
    for i in range(1, runs + 1):
        doc = json.load(open("%s/%s_%d.json" % (work, mode, i)))
        if "rows" in doc:  # hot_path_runs.sh's summary of one launch
            for r in doc["rows"]:
                meta[r["name"]] = (r["unit"], r["higher_is_better"])
                if r["runs"] and r["runs"][0] is not None:
                    figures.setdefault((r["name"], mode), []).append(r["runs"][0])
        else:  # prism_microbenchmark's own JSON
            for b in doc["benchmarks"]:
                unit = b.get("unit", "")
                meta[b["name"]] = (unit, "/s" in unit)
                if b.get("median") is not None:
                    figures.setdefault((b["name"], mode), []).append(b["median"])
rows = []
print("%-32s %-10s %12s %12s %12s %12s %8s" % ("row", "unit", "off median", "off worst", "on median", "on worst", "on/off"))
for name, (unit, hib) in meta.items():
    off, on = figures.get((name, "off"), []), figures.get((name, "loopback"), [])
    if not off or not on:
        continue
    worst = min if hib else max
    r = {"name": name, "unit": unit, "off": off, "on": on,
         "off_median": statistics.median(off), "off_worst": worst(off),
         "on_median": statistics.median(on), "on_worst": worst(on)}
    r["on_over_off"] = r["on_median"] / r["off_median"] if r["off_median"] else None
    rows.append(r)
    print("%-32s %-10s %12.4g %12.4g %12.4g %12.4g %8s" % (name, unit, r["off_median"], r["off_worst"], r["on_median"],
          r["on_worst"], "%.2f" % r["on_over_off"] if r["on_over_off"] else "-"))
json.dump({"runs_per_mode": runs, "alternated": True, "rows": rows}, open(out, "w"), indent=1)
print("launches alternated off/on, %d each; median and worst across launches; %s" % (runs, out))
PY
rm -rf "$work"
