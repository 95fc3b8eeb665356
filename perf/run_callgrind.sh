#!/usr/bin/env bash
# Instruction counts of Prism's hot paths (prism_hotpath_benchmark) under callgrind: no-op
# task round trip, sync actor call, serialising and deserialising a 1 KiB struct. Each path
# runs in its own valgrind process, --repeat times (to show the counts are reproducible),
# pinned to one CPU. The task and actor paths count every thread minus the instructions
# spent waiting for another thread (perf/README.md, "Instruction counts (callgrind)").
# One rank, no MPI launcher. Builds nothing.
#
#   perf/run_callgrind.sh [--quick] [--out=DIR] [--iterations=K] [--repeat=R] [--paths=a,b] [--cpu=N]
#
#   --quick         K=200, one run per path (CI smoke)
#   --out=DIR       default perf/results/callgrind; DIR/callgrind.json holds the counts
#   --iterations=K  calls per path inside the counted window (default 1000)
#   --repeat=R      valgrind runs per path (default 5)
#   --paths=a,b     only these paths (default all: task_roundtrip, actor_call, serialize_1kib,
#                   deserialize_1kib, serialize_1kib_pod)
#   --cpu=N         the CPU valgrind runs on (default auto: the highest allowed; none: not pinned)
#   BUILD_DIR       build directory (default build)
#
# Exit status: 0 done, 1 a run failed, 2 bad usage, 77 valgrind or the binary is missing
# (ctest's "skipped").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

out="$root/perf/results/callgrind"
iterations=1000
repeat=5
paths=""
cpu=auto
for a in "$@"; do
  case "$a" in
    --quick) iterations=200; repeat=1 ;;
    --out=*) out="${a#--out=}" ;;
    --iterations=*) iterations="${a#--iterations=}" ;;
    --repeat=*) repeat="${a#--repeat=}" ;;
    --paths=*) paths="${a#--paths=}" ;;
    --cpu=*) cpu="${a#--cpu=}" ;;
    -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_callgrind.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done

build_dir="${BUILD_DIR:-build}"
[[ "$build_dir" == /* ]] || build_dir="$root/$build_dir"
bin="$build_dir/perf/prism_hotpath_benchmark"
if ! command -v valgrind > /dev/null; then
  echo "run_callgrind.sh: valgrind is not installed (apt-get install valgrind); skipping" >&2
  exit 77
fi
if [[ ! -x "$bin" ]]; then
  echo "run_callgrind.sh: $bin not found; build it: cmake --build ${BUILD_DIR:-build} --target prism_hotpath_benchmark" >&2
  exit 77
fi
exec python3 "$root/perf/suite.py" callgrind --binary="$bin" --out="$out" \
  --iterations="$iterations" --repeat="$repeat" --paths="$paths" --cpu="$cpu"
