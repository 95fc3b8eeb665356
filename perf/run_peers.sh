#!/usr/bin/env bash
# Prism and its peers side by side, in one run: the same workloads in Prism (the perf/
# binaries, built beforehand: this script builds nothing), Dask distributed, mpi4py.futures,
# PyTorch DDP (gloo), torchrun and Optuna, back to back, then one table of Prism/peer ratios
# (> 1 means Prism is better; the Python steps print their own tables). Prism's task and
# actor rows (the hot path) come from 5 launches of prism_microbenchmark (quick: 2), each
# landing in this VM's fast or slow mode: min, median and max across them, the ratio from
# the median and, beside it, the ratio at Prism's worst launch (perf/hot_path_runs.sh). See
# perf/peers/README.md and perf/README.md.
#
#   perf/run_peers.sh [--ranks=N] [--quick] [--json=PATH]
#
#   --ranks=N   Prism ranks for the task/actor/object workloads (default 3); mpi4py.futures
#               gets the same N (N-1 workers), Dask N-1 worker processes (its scheduler
#               lives in the client process, so N processes in all). Training always uses
#               3 ranks (driver + 2 workers), the all-reduce 2 ranks, DDP 2 processes.
#   --quick     tiny counts and sizes (a smoke run, about a minute): figures NOT comparable
#   --json=PATH the combined JSON (default perf/results/peers.json, --quick:
#               perf/results/peers_quick.json)
#
# Environment: BUILD_DIR (default build), MPIRUN (default mpirun), PYTHON (default: the
# first of /usr/bin/python3 and python3 that imports the peer's package), KEEP=1 keeps the
# work directory with every step's log. Each step runs under `timeout` (600 s, prism_micro's
# launches 1200 s; 150 s in quick mode). A peer that cannot start is reported as
# "skipped: <why>" and the run goes on.
# Exit status: 0, or 1 if a Prism benchmark failed (peers never fail the run), 2 on bad use.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

ranks=3
quick=0
json=""
for a in "$@"; do
  case "$a" in
    --ranks=*) ranks="${a#--ranks=}" ;;
    --quick) quick=1 ;;
    --json=*) json="${a#--json=}" ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_peers.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$ranks" =~ ^[0-9]+$ ]] || ((ranks < 2)); then
  echo "run_peers.sh: --ranks must be a number >= 2 (got '$ranks')" >&2
  exit 2
fi
if [[ -z "$json" ]]; then
  if ((quick)); then json="perf/results/peers_quick.json"; else json="perf/results/peers.json"; fi
fi

build_dir="${BUILD_DIR:-build}"
perf_bin="$build_dir/perf"
micro="$perf_bin/prism_microbenchmark"
train="$perf_bin/prism_train_benchmark"
coll="$perf_bin/prism_collective_benchmark"
data="$perf_bin/prism_data_pipeline_benchmark"
if [[ ! -x "$micro" ]]; then
  echo "run_peers.sh: $micro not found; build it first:" >&2
  echo "  cmake -S . -B $build_dir -DCMAKE_BUILD_TYPE=Release &&" \
       "BUILD_DIR=$build_dir ./scripts/build.sh prism_microbenchmark prism_train_benchmark prism_collective_benchmark" >&2
  exit 1
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PYTHONDONTWRITEBYTECODE=1
mpirun_cmd=("${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe)

# Sizes: the same on both sides of every comparison.
if ((quick)); then
  tasks=200; object_bytes=$((4 << 20)); step_timeout=150; micro_timeout=150; micro_runs=2
  micro_args=(--quick); train_args=(--quick); coll_args=(--quick --sizes-mib=1)
  dask_args=(--quick); mpi_args=(--quick); ddp_args=(--quick --sizes-mib=1); ar_mib="[1]"
  data_args=(--quick)
else
  tasks=10000; object_bytes=$((100 << 20)); step_timeout=600; micro_timeout=1200; micro_runs=5
  micro_args=(); train_args=(--rounds=5 --steps=50); coll_args=(--rounds=5 --sizes-mib=1,16,64 --gloo=off)  # gloo runs below, as its own peer
  dask_args=(); mpi_args=(); ddp_args=(--rounds=5 --steps=50 --sizes-mib=1,16,64)
  ar_mib="[1, 16, 64]"
  data_args=(--rows=8000000 --partitions=24 --rounds=3)
fi
object_mib=$(awk "BEGIN {print $object_bytes / 1048576}")

work="$(mktemp -d "${TMPDIR:-/tmp}/prism-peers.XXXXXX")"
steps_tsv="$work/steps.tsv"
: >"$steps_tsv"
prism_failed=0
t_run=$SECONDS

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# step NAME KIND(prism|peer) COMMAND...: runs COMMAND under timeout, logs to $work/NAME.log,
# echoes its output, records the outcome in steps.tsv.
step() {
  local name="$1" kind="$2"
  shift 2
  local before after t0 rc status reason=""
  before="$(loadavg)"
  t0=$SECONDS
  echo
  echo "=== $name ($(uptime | sed 's/^ *//'))"
  timeout -k 10 "$step_timeout" "$@" 2>&1 | tee "$work/$name.log"
  rc=${PIPESTATUS[0]}
  after="$(loadavg)"
  if ((rc == 0)); then
    status=ok
  elif ((rc == 124 || rc == 137)); then
    status=failed; reason="timed out after ${step_timeout} s"
  elif [[ "$kind" == peer ]] && ((rc == 3)); then
    status=skipped; reason="$(grep -m1 'skipped:' "$work/$name.log" | sed 's/.*skipped: *//')"
  else
    status=failed; reason="exit code $rc: $(grep -v '^\s*$' "$work/$name.log" | tail -1 | cut -c1-160)"
  fi
  if [[ "$status" == failed && "$kind" == prism ]]; then prism_failed=1; fi
  [[ "$status" != ok ]] && echo "--- $name: $status${reason:+: $reason}"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "${reason//$'\t'/ }" \
    "$((SECONDS - t0))" "$before" "$after" >>"$steps_tsv"
}

# skip NAME WHY: records a step that could not start.
skip() {
  echo
  echo "=== $1: skipped: $2"
  printf '%s\tskipped\t%s\t0\t%s\t%s\n' "$1" "$2" "$(loadavg)" "$(loadavg)" >>"$steps_tsv"
}

# find_python MODULE...: the first interpreter that imports every MODULE (PYTHON wins if set).
find_python() {
  local py mods
  mods="$(IFS=,; echo "$*")"
  for py in ${PYTHON:-/usr/bin/python3 python3}; do
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c "import $mods" >/dev/null 2>&1; then
      echo "$py"
      return 0
    fi
  done
  return 1
}

# built_step NAME BINARY COMMAND...: step NAME (a Prism benchmark) if BINARY was built.
built_step() {
  local name=$1 bin=$2
  shift 2
  if [[ -x "$bin" ]]; then
    step "$name" prism "$@"
  else
    skip "$name" "$bin not built (PRISM_BUILD_TRAIN off?)"
  fi
}

# ddp_step NAME ARGS...: step NAME running perf/peers/ddp_bench.py ARGS, if torch imports.
ddp_step() {
  local name=$1
  shift
  if [[ -n "$torch_py" ]]; then
    step "$name" peer "$torch_py" perf/peers/ddp_bench.py "${ddp_args[@]}" "$@"
  else
    skip "$name" "python3 cannot import torch (Debian: python3-torch)"
  fi
}

report_py="$(find_python json || echo python3)"

echo "run_peers.sh: $( ((quick)) && echo quick || echo full) mode, $ranks ranks," \
     "$tasks tasks per batch, objects of $object_mib MiB; build: $build_dir; work dir: $work"
echo "start: $(uptime | sed 's/^ *//')"

# ---- tasks, actors, objects -----------------------------------------------------------
# The hot-path rows (tasks and actor calls sync and async, the remote and after-idle round
# trips, idle CPU) in $micro_runs launches, the first of which also runs the object rows (Put,
# cross-rank Get): prism_micro.json is prism_microbenchmark's JSON with the hot-path rows
# over the launches (perf/hot_path_runs.sh; mpirun as for every other step).
step_timeout_saved=$step_timeout
step_timeout=$micro_timeout
step prism_micro prism env -u PRISM_LAUNCH perf/hot_path_runs.sh --runs="$micro_runs" "${micro_args[@]}" \
  --ranks="$ranks" --first-also=single_client_put_gigabytes,cross_rank_get --work="$work/micro_launches" \
  --json="$work/prism_hot_path_runs.json" --micro-json="$work/prism_micro.json" -- \
  --async-batch="$tasks" --put-bytes="$object_bytes"
step_timeout=$step_timeout_saved

if py="$(find_python distributed numpy)"; then
  step dask peer "$py" perf/peers/dask_bench.py "${dask_args[@]}" --workers=$((ranks - 1)) \
    --tasks="$tasks" --object-mib="$object_mib" --json="$work/dask.json"
else
  skip dask "python3 cannot import distributed and numpy (Debian: python3-distributed python3-numpy)"
fi

if py="$(find_python mpi4py.futures)"; then
  step mpi4py peer "${mpirun_cmd[@]}" -n "$ranks" "$py" -m mpi4py.futures \
    perf/peers/mpi4py_bench.py "${mpi_args[@]}" --tasks="$tasks" --json="$work/mpi4py.json"
else
  skip mpi4py "python3 cannot import mpi4py.futures (Debian: python3-mpi4py)"
fi

# ---- Python: Prism for Python against Dask and mpi4py.futures, from the same Python -----
# (its own table in the log and prism_python.json; perf/python_benchmark.py)
if [[ -f "$build_dir/python/prism/__init__.py" ]] && py="$(find_python distributed mpi4py.futures numpy)"; then
  py_quick=()
  ((quick)) && py_quick=(--quick)
  step prism_python prism "$py" perf/python_benchmark.py --build="$build_dir" --ranks="$ranks" \
    "${py_quick[@]}" --json="$work/prism_python.json"
else
  skip prism_python "the prism Python package is not built, or python3 lacks distributed/mpi4py/numpy"
fi

# ---- training -------------------------------------------------------------------------
torch_py="$(find_python torch torch.distributed || true)"
built_step prism_train "$train" "${mpirun_cmd[@]}" -n 3 "$train" "${train_args[@]}" \
  --json="$work/prism_train.json"
ddp_step ddp_train --no-allreduce --json="$work/ddp_train.json"

# ---- Python: each library against its peer ----------------------------------------------
# (their own tables in the log and prism_python_<library>.json): prism.train against
# torchrun (perf/python_train_benchmark.py) and prism.tune against Optuna
# (perf/python_tune_benchmark.py), each alternating Prism and the peer launch by launch, 5
# launches of each; issue 42's prism.data under mpirun -n 3 beside Dask's LocalCluster
# (perf/python_data_benchmark.py), prism.serve beside FastAPI on uvicorn and the C++ Serve
# under wrk (perf/python_serve_benchmark.py), prism.rllib beside prism_rl's C++ PPO
# (perf/python_rllib_benchmark.py)
py_bench_quick=()
((quick)) && py_bench_quick=(--quick)
if [[ ! -f "$build_dir/python/prism/__init__.py" ]]; then
  for s in prism_python_train prism_python_tune prism_python_data prism_python_serve prism_python_rllib; do
    skip "$s" "the prism Python package is not built ($build_dir/python)"
  done
else
  if [[ -n "$torch_py" ]]; then
    step prism_python_train prism "$torch_py" perf/python_train_benchmark.py --build="$build_dir" \
      "${py_bench_quick[@]}" --json="$work/prism_python_train.json"
  else
    skip prism_python_train "python3 cannot import torch (Debian: python3-torch)"
  fi
  if py="$(find_python optuna)"; then
    step prism_python_tune prism "$py" perf/python_tune_benchmark.py --build="$build_dir" \
      "${py_bench_quick[@]}" --json="$work/prism_python_tune.json"
  else
    skip prism_python_tune "python3 cannot import optuna (Debian: python3-optuna)"
  fi
  if py="$(find_python numpy pandas)"; then
    dask_arg=()
    find_python dask.dataframe distributed >/dev/null || dask_arg=(--no-dask)
    step prism_python_data prism env PYTHONPATH="$build_dir/python" "${mpirun_cmd[@]}" \
      -x PYTHONPATH -n 3 "$py" perf/python_data_benchmark.py "${py_bench_quick[@]}" \
      "${dask_arg[@]}" --json="$work/prism_python_data.json"
  else
    skip prism_python_data "python3 cannot import numpy and pandas (Debian: python3-pandas)"
  fi
  if ! command -v wrk >/dev/null; then
    skip prism_python_serve "wrk is not installed (Debian: wrk)"
  elif py="$(find_python starlette)"; then
    step prism_python_serve prism "$py" perf/python_serve_benchmark.py --build="$build_dir" \
      "${py_bench_quick[@]}" --json="$work/prism_python_serve.json"
  else
    skip prism_python_serve "python3 cannot import starlette (Debian: python3-starlette)"
  fi
  step prism_python_rllib prism "${PYTHON:-/usr/bin/python3}" perf/python_rllib_benchmark.py \
    --build="$build_dir" "${py_bench_quick[@]}" --json="$work/prism_python_rllib.json"
fi

# ---- all-reduce -----------------------------------------------------------------------
built_step prism_collective "$coll" "${mpirun_cmd[@]}" -n 2 "$coll" "${coll_args[@]}" \
  --json="$work/prism_collective.json"
ddp_step ddp_allreduce --no-train --json="$work/ddp_allreduce.json"

# ---- a Data pipeline: map_batches + shuffle + groupby aggregate ------------------------
built_step prism_data "$data" "${mpirun_cmd[@]}" -n 3 "$data" "${data_args[@]}" --prism-num-cpus=2 \
  --json="$work/prism_data.json"
if py="$(find_python dask.dataframe pandas distributed)"; then
  step dask_data peer "$py" perf/peers/dask_data_bench.py "${data_args[@]}" --workers=3 \
    --json="$work/dask_data.json"
else
  skip dask_data "python3 cannot import dask.dataframe and pandas (Debian: python3-dask python3-pandas)"
fi

echo
echo "end: $(uptime | sed 's/^ *//'); $((SECONDS - t_run)) s in all"

cat >"$work/context.json" <<EOF
{"mode": "$( ((quick)) && echo quick || echo full)", "ranks": $ranks, "tasks": $tasks,
 "object_bytes": $object_bytes, "allreduce_mib": $ar_mib, "dask_workers": $((ranks - 1)),
 "train_ranks": 3, "allreduce_ranks": 2, "duration_s": $((SECONDS - t_run)),
 "build_dir": "$build_dir", "host": "$(hostname)", "nproc": $(nproc),
 "uptime_at_end": "$(uptime | sed 's/^ *//')"}
EOF

if ! "$report_py" perf/peers/report.py "$work" "$json"; then
  echo "run_peers.sh: the report failed; raw files kept in $work" >&2
  exit 1
fi

if ((prism_failed)); then
  echo "run_peers.sh: a Prism benchmark failed (see above); logs kept in $work" >&2
  exit 1
fi
if [[ "${KEEP:-0}" == 1 ]]; then
  echo "work directory kept: $work"
else
  rm -rf "$work"
fi
exit 0
