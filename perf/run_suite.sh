#!/usr/bin/env bash
# Prism's regression suite: every benchmark (core, actors, transfer, training, checkpoint, tune, data, rl,
# serve, scale),
# the same run's reference figures (memcpy, MPI ping-pong, a matrix multiply) and callgrind's
# instruction counts, merged into one JSON file in Google Benchmark's format plus a
# Markdown table. This script builds nothing (see perf/README.md, "Regression suite").
#
#   perf/run_suite.sh [--ranks=N] [--quick] [--out=DIR] [--only=a,b] [--no-callgrind]
#
#   --ranks=N       MPI ranks for the MPI parts (default 3)
#   --quick         tiny sizes, a smoke run of about a minute (what CI runs)
#   --out=DIR       where the files go (default perf/results/suite, or perf/results/suite_quick)
#   --only=a,b      run only these parts: reference, micro, collective, train, checkpoint,
#                   tune, data, rl, serve, scale, python, callgrind (default: all of them)
#   --no-callgrind  the same as leaving callgrind out of --only
#
# Environment:
#   BUILD_DIR     build directory, relative to the repository root or absolute (default build)
#   MPIRUN        launcher used as: $MPIRUN --allow-run-as-root --oversubscribe -n N (default mpirun)
#   PRISM_LAUNCH  replaces the whole mpirun prefix, used as: $PRISM_LAUNCH -n N
#                 (under Slurm: PRISM_LAUNCH="srun --mpi=pmix")
#   STEP_TIMEOUT  seconds one part may take before it is killed (default 900, quick 180)
#
# Writes DIR/suite.json (merged), DIR/suite.md (table), one JSON and one log per part, and
# uptime at start and end. Exit status: 0 if every part ran, 1 if one failed or timed out
# (the merged file still holds the parts that ran and lists the failed ones), 2 on bad usage.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

usage() { sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; }

ranks=3
quick=0
out=""
only="reference,micro,collective,train,checkpoint,tune,data,rl,serve,scale,python,callgrind"
for a in "$@"; do
  case "$a" in
    --ranks=*) ranks="${a#--ranks=}" ;;
    --quick) quick=1 ;;
    --out=*) out="${a#--out=}" ;;
    --only=*) only="${a#--only=}" ;;
    --no-callgrind) only="${only//callgrind/}" ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_suite.sh: unknown argument '$a'" >&2; usage; exit 2 ;;
  esac
done
if ! [[ "$ranks" =~ ^[0-9]+$ ]] || (( ranks < 1 )); then
  echo "run_suite.sh: --ranks must be a positive whole number, got '$ranks'" >&2
  exit 2
fi
for part in ${only//,/ }; do
  case "$part" in
    reference|micro|collective|train|checkpoint|tune|data|rl|serve|scale|python|callgrind) ;;
    *) echo "run_suite.sh: unknown part '$part' in --only (known: reference, micro, collective, train, checkpoint, tune, data, rl, serve, scale, python, callgrind)" >&2; exit 2 ;;
  esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }

if [[ -z "$out" ]]; then
  out="perf/results/suite"
  (( quick )) && out="perf/results/suite_quick"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

build_dir="${BUILD_DIR:-build}"
[[ "$build_dir" == /* ]] || build_dir="$root/$build_dir"
bin="$build_dir/perf"
export BUILD_DIR="$build_dir"  # for run_callgrind.sh
if [[ ! -d "$bin" ]]; then
  echo "run_suite.sh: $bin not found; build the benchmarks first:" >&2
  echo "  ./scripts/build.sh prism_microbenchmark prism_reference_benchmark prism_collective_benchmark prism_train_benchmark prism_checkpoint_benchmark prism_tune_benchmark prism_data_benchmark prism_data_memory_benchmark prism_data_shuffle_benchmark prism_rl_env_benchmark prism_rl_sampling_benchmark prism_serve_http_benchmark prism_serve_benchmark prism_head_simulation_benchmark prism_hotpath_benchmark" >&2
  exit 1
fi

step_timeout="${STEP_TIMEOUT:-$(( quick ? 180 : 900 ))}"
quick_flag=()
(( quick )) && quick_flag=(--quick)
mode="full"
(( quick )) && mode="quick"

# Open MPI refuses to run as root unless told; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Sets L to the launcher's words for N ranks.
launcher() {
  if [[ -n "${PRISM_LAUNCH:-}" ]]; then
    read -r -a L <<< "$PRISM_LAUNCH"
    L+=(-n "$1")
  else
    L=("${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe -n "$1")
  fi
}

failed=()
skipped=()
inputs=()
# step NAME JSON PROGRAM_PATH COMMAND...: runs COMMAND under the timeout, logs to DIR/NAME.log.
step() {
  local name="$1" json="$2" program="$3"
  shift 3
  if [[ ! -x "$program" ]]; then
    echo "== $name: skipped, $program is not built (cmake --build ${BUILD_DIR:-build} --target $(basename "$program"))" >&2
    skipped+=("$name")
    return 0
  fi
  rm -f "$json"
  echo "== $name ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$step_timeout" "$@" > "$out/$name.log" 2>&1 || rc=$?
  if (( rc == 0 )) && [[ -s "$json" ]]; then
    echo "   done in $(( SECONDS - t0 )) s"
    inputs+=("$name=$json")
  else
    if (( rc == 124 )); then
      echo "   TIMED OUT after ${step_timeout} s (STEP_TIMEOUT)" >&2
    fi
    echo "   FAILED (exit $rc) after $(( SECONDS - t0 )) s; last lines of $out/$name.log:" >&2
    tail -n 15 "$out/$name.log" >&2 || true
    failed+=("$name")
    if [[ -s "$json" ]]; then
      inputs+=("$name=$json")  # keep what it wrote
    fi
  fi
}

uptime > "$out/uptime_start.txt"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "Prism regression suite: $ranks rank(s), $mode mode, out $out"
echo "uptime at start: $(cat "$out/uptime_start.txt")"
suite_t0=$SECONDS

ref_ranks=$ranks
(( ref_ranks < 2 )) && ref_ranks=2  # the ping-pong needs two ranks
launcher "$ref_ranks"
wants reference && step reference "$out/reference.json" "$bin/prism_reference_benchmark" \
  "${L[@]}" "$bin/prism_reference_benchmark" "${quick_flag[@]}" --json="$out/reference.json"
launcher "$ranks"
# Micro: every benchmark in one launch, then the hot-path rows (tasks and actor calls sync and
# async, the remote and after-idle round trips, idle CPU) in 4 more launches (quick: 1 more),
# each launch landing in this VM's fast or slow mode: those rows are the median of the
# launches' medians with [min, max] across launches (perf/hot_path_runs.sh). Each launch's
# JSON and log go to DIR/micro_launches, the per-run table to DIR/hot_path_runs.json.
wants micro && step micro "$out/microbenchmark.json" "$bin/prism_microbenchmark" \
  "$root/perf/hot_path_runs.sh" --runs=$(( quick ? 2 : 5 )) "${quick_flag[@]}" --ranks="$ranks" \
  --first-also=all --work="$out/micro_launches" --json="$out/hot_path_runs.json" \
  --micro-json="$out/microbenchmark.json"
wants collective && step collective "$out/collective.json" "$bin/prism_collective_benchmark" \
  "${L[@]}" "$bin/prism_collective_benchmark" "${quick_flag[@]}" --json="$out/collective.json"
wants train && step train "$out/train.json" "$bin/prism_train_benchmark" \
  "${L[@]}" "$bin/prism_train_benchmark" "${quick_flag[@]}" --json="$out/train.json"
wants checkpoint && step checkpoint "$out/checkpoint.json" "$bin/prism_checkpoint_benchmark" \
  "$bin/prism_checkpoint_benchmark" "${quick_flag[@]}" --json="$out/checkpoint.json"
# Tune's trials run 16 at a time (they sleep, or report in a loop): 16 logical CPUs over the
# ranks, whatever their number.
wants tune && step tune "$out/tune.json" "$bin/prism_tune_benchmark" \
  "${L[@]}" "$bin/prism_tune_benchmark" "${quick_flag[@]}" --prism-num-cpus=$(( (16 + ranks - 1) / ranks )) \
  --json="$out/tune.json"
# Data: ingest into the driver (2 CPUs a rank), and a pipeline over 10x a 256 MiB store
# (4x in quick mode) that must not spill; RandomShuffle of 2 GiB (32 MiB quick) against raw
# MPI_Alltoallv of the same bytes (the input, the output and the exchange's buffers must fit
# the ranks' memory). Three steps, one part.
if wants data; then
  step data_ingest "$out/data_ingest.json" "$bin/prism_data_benchmark" \
    "${L[@]}" "$bin/prism_data_benchmark" "${quick_flag[@]}" --prism-num-cpus=2 --json="$out/data_ingest.json"
  data_store=256M
  step data_memory "$out/data_memory.json" "$bin/prism_data_memory_benchmark" \
    "${L[@]}" "$bin/prism_data_memory_benchmark" "${quick_flag[@]}" --prism-num-cpus=2 \
    --prism-object-store-memory=$data_store --json="$out/data_memory.json"
  step data_shuffle "$out/data_shuffle.json" "$bin/prism_data_shuffle_benchmark" \
    "${L[@]}" "$bin/prism_data_shuffle_benchmark" "${quick_flag[@]}" --prism-num-cpus=2 \
    --prism-object-store-memory=8G --json="$out/data_shuffle.json"
fi
# RL: raw environment steps/s on one core (no MPI), then PPO's sampling with policy inference
# (one sampler on one core, and Train() with 2 env runner actors: at least 3 ranks). Two steps,
# one part.
if wants rl; then
  step rl "$out/rl_env.json" "$bin/prism_rl_env_benchmark" \
    "$bin/prism_rl_env_benchmark" "${quick_flag[@]}" --json="$out/rl_env.json"
  launcher $(( ranks < 3 ? 3 : ranks ))
  step rl_sampling "$out/rl_sampling.json" "$bin/prism_rl_sampling_benchmark" \
    "${L[@]}" "$bin/prism_rl_sampling_benchmark" "${quick_flag[@]}" --runners=2 --json="$out/rl_sampling.json"
  launcher "$ranks"
fi

# Serve: the HTTP layer alone (one process), then end to end on the ranks (HTTP through
# replicas, handle calls, autoscaling under a load step; its CSV and plot go beside the JSON).
# wrk on PATH: without it both skip their wrk rows. Two steps, one part.
if wants serve; then
  step serve_http "$out/serve_http.json" "$bin/prism_serve_http_benchmark" \
    "$bin/prism_serve_http_benchmark" "${quick_flag[@]}" --json="$out/serve_http.json"
  step serve "$out/serve.json" "$bin/prism_serve_benchmark" \
    "${L[@]}" "$bin/prism_serve_benchmark" "${quick_flag[@]}" --prism-num-cpus=2 \
    --json="$out/serve.json" --csv="$out/serve_autoscaling.csv"
fi
# Scale: the real head driven by simulated ranks, 100 to 100,000 of them (one process, no
# MPI; quick: up to 10,000).
wants scale && step scale "$out/scale.json" "$bin/prism_head_simulation_benchmark" \
  "$bin/prism_head_simulation_benchmark" "${quick_flag[@]}" --json="$out/scale.json"
# Python: Prism for Python's no-op tasks (sync, async), actor calls and a 100 MiB NumPy
# put/get, with Dask and mpi4py.futures from the same Python (quick: Prism alone, 8 MiB).
if wants python; then
  if [[ -f "$build_dir/python/prism/__init__.py" ]]; then
    py_only=prism,dask,mpi4py
    (( quick )) && py_only=prism
    step python "$out/python.json" "$root/perf/python_benchmark.py" \
      /usr/bin/python3 "$root/perf/python_benchmark.py" --build="$build_dir" --ranks="$ranks" \
      --only="$py_only" "${quick_flag[@]}" --json="$out/python.json"
  else
    echo "== python: skipped, the prism Python package is not built (PRISM_BUILD_PYTHON, pybind11-dev)" >&2
    skipped+=(python)
  fi
fi
if wants callgrind; then
  if command -v valgrind > /dev/null; then
    step callgrind "$out/callgrind/callgrind.json" "$bin/prism_hotpath_benchmark" \
      "$root/perf/run_callgrind.sh" "${quick_flag[@]}" --out="$out/callgrind"
  else
    echo "== callgrind: skipped, valgrind is not installed (apt-get install valgrind)" >&2
    skipped+=(callgrind)
  fi
fi

uptime > "$out/uptime_end.txt"
echo "uptime at end: $(cat "$out/uptime_end.txt")"
duration=$(( SECONDS - suite_t0 ))

IFS=,
merge_args=(--out="$out/suite.json" --ranks="$ranks" --mode="$mode" --duration="$duration"
            --load-start="$load_start" --load-end="$(cut -d' ' -f1-3 /proc/loadavg)"
            --failed="${failed[*]:-}" --skipped="${skipped[*]:-}" --build-dir="$build_dir")
unset IFS
if (( ${#inputs[@]} == 0 )); then
  echo "run_suite.sh: no part produced results" >&2
  exit 1
fi
python3 "$root/perf/suite.py" merge "${merge_args[@]}" "${inputs[@]}"
python3 "$root/perf/suite.py" table "$out/suite.json" > "$out/suite.md"
cat "$out/suite.md"
echo
echo "suite took ${duration} s"
echo "JSON:  $out/suite.json"
echo "table: $out/suite.md"
if (( ${#failed[@]} )); then
  echo "run_suite.sh: these parts failed: ${failed[*]} (logs in $out)" >&2
  exit 1
fi
