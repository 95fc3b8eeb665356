#!/usr/bin/env bash
# The real runtime on many ranks of one machine, oversubscribed (perf/README.md, "Scale"):
# prism_many_ranks_benchmark at 16, 32 and 64 ranks (or the given counts), one JSON and one
# log per count. Builds nothing.
#
#   perf/run_many_ranks.sh [--quick] [--out=DIR] [N ...]
#
# Environment: BUILD_DIR (default build), MPIRUN (default mpirun).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-build}"
[[ "$build_dir" == /* ]] || build_dir="$root/$build_dir"
bin="$build_dir/perf/prism_many_ranks_benchmark"
out="$root/perf/results/many_ranks"
flags=()
counts=()
for a in "$@"; do
  case "$a" in
    --quick) flags+=(--quick) ;;
    --out=*) out="${a#--out=}" ;;
    -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) [[ "$a" =~ ^[0-9]+$ ]] || { echo "run_many_ranks.sh: unknown argument '$a'" >&2; exit 2; }
       counts+=("$a") ;;
  esac
done
(( ${#counts[@]} )) || counts=(16 32 64)
[[ -x "$bin" ]] || { echo "run_many_ranks.sh: build it first: cmake --build $build_dir --target prism_many_ranks_benchmark" >&2; exit 1; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for n in "${counts[@]}"; do
  echo "== $n ranks ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
  start=$SECONDS
  timeout --kill-after=10 600 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe -n "$n" \
    "$bin" "${flags[@]}" --json="$out/many_ranks_$n.json" 2>&1 | tee "$out/many_ranks_$n.log"
  echo "   mpirun took $(( SECONDS - start )) s"
done
