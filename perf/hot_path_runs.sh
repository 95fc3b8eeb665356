#!/usr/bin/env bash
# The hot-path rows of prism_microbenchmark over N separate launches, then one table: per
# row, each run's figure (that launch's median across rounds), min, median and max across
# the runs, the target, and in how many runs it was met. On this VM a launch lands in a fast
# or a slow mode, so the spread across launches is part of the figure (perf/README.md, "Hot
# path: the spread across launches").
#
#   perf/hot_path_runs.sh [--runs=N] [--quick] [--ranks=N] [--json=PATH] [--micro-json=PATH]
#                         [--first-also=a,b|all] [--work=DIR] [-- BINARY_ARGS...]
#
#   --runs=N        launches, one after another (default 10)
#   --quick         passes --quick to the binary: a smoke run, figures NOT comparable
#   --ranks=N       MPI ranks of each launch (default 3)
#   --json=PATH     per-run figures and the summary (default perf/results/hot_path_runs.json)
#   --micro-json=PATH  also a file in prism_microbenchmark's JSON format: the first launch's
#                   rows, the hot-path ones replaced by their figures across the runs
#                   (what perf/run_suite.sh and perf/run_peers.sh read)
#   --first-also=LIST  the first launch also runs these benchmarks (all: every benchmark);
#                   their figures come from that one launch
#   --work=DIR      where each launch's JSON and log go (default: a temporary directory,
#                   removed at the end unless KEEP=1 or a launch failed)
#   BINARY_ARGS     passed to every launch (e.g. --async-batch=200)
#
# Environment: BUILD_DIR (default build), MPIRUN (default mpirun; run as MPIRUN
# --allow-run-as-root --oversubscribe -n N), PRISM_LAUNCH (replaces that prefix: $PRISM_LAUNCH
# -n N), LAUNCH_TIMEOUT (seconds one launch may take, default 900, quick 180), KEEP=1.
# Exit status: 0 when every launch ran, whether or not the targets were met (the table says);
# 1 if a launch failed (the table still shows the others); 2 on bad use.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

runs=10 quick=0 ranks=3 json="perf/results/hot_path_runs.json" micro_json="" first_also="" work=""
bin_args=()
while (($#)); do
  case "$1" in
    --runs=*) runs="${1#--runs=}" ;;
    --quick) quick=1 ;;
    --ranks=*) ranks="${1#--ranks=}" ;;
    --json=*) json="${1#--json=}" ;;
    --micro-json=*) micro_json="${1#--micro-json=}" ;;
    --first-also=*) first_also="${1#--first-also=}" ;;
    --work=*) work="${1#--work=}" ;;
    --) shift; bin_args=("$@"); break ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "hot_path_runs.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ "$runs" =~ ^[0-9]+$ ]] || ((runs < 1)) || ! [[ "$ranks" =~ ^[0-9]+$ ]] || ((ranks < 1)); then
  echo "hot_path_runs.sh: --runs and --ranks must be numbers >= 1" >&2
  exit 2
fi

micro="${BUILD_DIR:-build}/perf/prism_microbenchmark"
if [[ ! -x "$micro" ]]; then
  echo "hot_path_runs.sh: $micro not found; build it first (./scripts/build.sh prism_microbenchmark)" >&2
  exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [[ -n "${PRISM_LAUNCH:-}" ]]; then
  read -r -a launch <<< "$PRISM_LAUNCH"
else
  launch=("${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe)
fi
launch+=(-n "$ranks")
quick_flag=()
((quick)) && quick_flag=(--quick)
launch_timeout="${LAUNCH_TIMEOUT:-$((quick ? 180 : 900))}"
hot="$(python3 perf/hot_path_runs.py filter)" || exit 1

tmp_work=0
if [[ -z "$work" ]]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/prism-hot-path.XXXXXX")"
  tmp_work=1
fi
mkdir -p "$work"

echo "hot_path_runs.sh: $runs launches of $micro, $ranks ranks, $( ((quick)) && echo quick || echo full) mode;" \
     "work dir $work"
command="${launch[*]} $micro$( ((quick)) && echo " --quick") --filter=$hot${bin_args[*]:+ ${bin_args[*]}}"
echo "command: $command --json=$work/run_N.json"
files=() failed=()
for ((i = 1; i <= runs; i++)); do
  filter="--filter=$hot"
  if ((i == 1)) && [[ "$first_also" == all ]]; then
    filter=""
  elif ((i == 1)) && [[ -n "$first_also" ]]; then
    filter="--filter=$hot,$first_also"
  fi
  f="$work/run_$i.json"
  rm -f "$f"
  t0=$SECONDS load="$(cut -d' ' -f1 /proc/loadavg)"
  timeout -k 10 "$launch_timeout" "${launch[@]}" "$micro" "${quick_flag[@]}" ${filter:+"$filter"} \
    "${bin_args[@]}" --json="$f" >"$work/run_$i.log" 2>&1
  rc=$?
  if ((rc == 0)) && [[ -s "$f" ]]; then
    files+=("$f")
    echo "run $i/$runs: ok in $((SECONDS - t0)) s (load $load at start)"
  else
    failed+=("$i")
    echo "run $i/$runs: FAILED (exit $rc$( ((rc == 124)) && echo ", timed out after $launch_timeout s")) after" \
         "$((SECONDS - t0)) s; last lines of $work/run_$i.log:" >&2
    tail -n 15 "$work/run_$i.log" >&2
  fi
done

if ((${#files[@]} == 0)); then
  echo "hot_path_runs.sh: no launch succeeded (logs in $work)" >&2
  exit 1
fi
echo
IFS=,
summary_args=(--json="$json" --failed="${failed[*]:-}")
unset IFS
[[ -n "$micro_json" ]] && summary_args+=(--micro-json="$micro_json")
python3 perf/hot_path_runs.py summarize "${summary_args[@]}" \
  --command="$command" "${files[@]}" || exit 1

if ((${#failed[@]})); then
  echo "hot_path_runs.sh: launch(es) ${failed[*]} failed (logs kept in $work)" >&2
  exit 1
fi
if ((tmp_work)) && [[ "${KEEP:-0}" != 1 ]]; then
  rm -rf "$work"
fi
exit 0
