#!/usr/bin/env bash
# Runs prism_microbenchmark (built beforehand; this script builds nothing) under mpirun.
#
#   perf/run_microbenchmarks.sh [RANKS] [--quick] [more benchmark flags...]
#
#   RANKS      number of MPI ranks (default 3); 1 also goes through mpirun
#   --quick    tiny sizes, a few seconds in total (CI smoke run)
#   BUILD_DIR  build directory, relative to the repository root or absolute (default: build)
#   JSON       where the JSON goes (or --json=PATH; default: perf/results/microbenchmark.json, or
#              perf/results/microbenchmark_quick.json with --quick)
#   MPIRUN     launcher (default: mpirun)
#
# Any other argument is passed to the benchmark (e.g. --rounds=7, --filter=tasks_sync).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

ranks=3
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then
  ranks="$1"
  shift
fi
quick=0
json_flag=""
for a in "$@"; do
  [[ "$a" == "--quick" ]] && quick=1
  [[ "$a" == --json=* ]] && json_flag="${a#--json=}"
done

build_dir="${BUILD_DIR:-build}"
bin="$build_dir/perf/prism_microbenchmark"
if [[ ! -x "$bin" ]]; then
  echo "run_microbenchmarks.sh: $bin not found; build it first:" >&2
  echo "  BUILD_DIR=$build_dir ./scripts/build.sh prism_microbenchmark" >&2
  exit 1
fi

if [[ -n "$json_flag" ]]; then
  json="$json_flag"  # --json=PATH given: it wins, and is passed through as given
elif [[ -n "${JSON:-}" ]]; then
  json="$JSON"
elif [[ $quick == 1 ]]; then
  json="perf/results/microbenchmark_quick.json"
else
  json="perf/results/microbenchmark.json"
fi
mkdir -p "$(dirname "$json")"

# Open MPI refuses to run as root unless told; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

"${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe -n "$ranks" \
  "$bin" --json="$json" "$@"

[[ "$json" == /* ]] || json="$root/$json"
echo "JSON results: $json"
