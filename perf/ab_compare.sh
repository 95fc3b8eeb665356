#!/usr/bin/env bash
# Two builds side by side in one run: prism_microbenchmark from build A and build B,
# alternated (A B A B ...) so that both see the same machine, then each benchmark's
# median over the runs and the ratio B/A (for latencies, above 1 is slower; for rates,
# below 1 is slower). For refactors: "no regression" is a ratio within the run-to-run
# spread that the same table shows for A against itself (the min..max columns).
#
#   perf/ab_compare.sh OLD_BUILD_DIR NEW_BUILD_DIR [--runs=N] [--ranks=N] [--filter=a,b]
#
# Default filter: task and actor round trips, async throughput, put/get, PG create/remove.
set -euo pipefail
a=$(cd "$1" && pwd); b=$(cd "$2" && pwd); shift 2
runs=4 ranks=3
filter=single_client_tasks_sync,single_client_tasks_async,1_1_actor_calls_sync,1_1_actor_calls_async,single_client_put_calls,single_client_get_calls,single_client_put_gigabytes,placement_group_create/removal,single_client_tasks_sync_remote
for arg in "$@"; do
  case $arg in
    --runs=*) runs=${arg#*=} ;;
    --ranks=*) ranks=${arg#*=} ;;
    --filter=*) filter=${arg#*=} ;;
    *) echo "ab_compare.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
for d in "$a" "$b"; do
  [[ -x $d/perf/prism_microbenchmark ]] || { echo "no $d/perf/prism_microbenchmark (build it)" >&2; exit 2; }
done
out=$(mktemp -d /tmp/prism-ab-XXXXXX)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "A = $a"; echo "B = $b"; echo "$runs runs each, alternated, $ranks ranks; load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do
  for side in A B; do
    dir=$a; [[ $side == B ]] && dir=$b
    timeout 600 mpirun --oversubscribe -n "$ranks" "$dir/perf/prism_microbenchmark" --filter="$filter" \
      --rounds=3 --min-time=0.3 --json="$out/$side-$i.json" > "$out/$side-$i.log" 2>&1 ||
      { echo "run $side $i failed:"; tail -5 "$out/$side-$i.log"; exit 1; }
  done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def load(side):
    per = {}
    for i in range(1, runs + 1):
        for b in json.load(open(f"{out}/{side}-{i}.json"))["benchmarks"]:
            per.setdefault(b["name"], []).append((b["median"], b.get("unit", "")))
    return per
A, B = load("A"), load("B")
print(f"{'benchmark':34} {'unit':10} {'A median':>10} {'A min..max':>19} {'B median':>10} {'B min..max':>19} {'B/A':>6}")
for name in A:
    if name not in B: continue
    a = [v for v, _ in A[name]]; b = [v for v, _ in B[name]]; unit = A[name][0][1]
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{name:34} {unit:10} {ma:10.4g} {min(a):9.4g}..{max(a):<9.4g} {mb:10.4g} {min(b):9.4g}..{max(b):<9.4g} {mb / ma:6.3f}")
PY
echo "raw runs: $out"
