#!/usr/bin/env bash
# Fuzzes Prism's readers of untrusted bytes for longer than the test suite does (ctest runs
# each target a few seconds, label fuzz): libFuzzer with AddressSanitizer and
# UndefinedBehaviorSanitizer, built with clang (tests/fuzz/).
#   ./scripts/fuzz.sh                 every target for 600 s, as many at once as there are cores
#   ./scripts/fuzz.sh 3600 http json  these targets for an hour each
# Targets: http (the HTTP server, routing, handlers), json (request bodies, ParseJson),
# checkpoint (commit records, metadata), journal (Tune's journal), spill (spill files),
# npy, csv, hdf5 (Data's readers), manifest (Data's _SUCCESS).
#
# The targets build in $BUILD_DIR/fuzz (BUILD_DIR defaults to build, as for
# scripts/build.sh; the main build makes them there too). Each target's new inputs
# collect in $BUILD_DIR/fuzz/runs/<target>/corpus (kept between runs; ctest's runs add to
# it), and an input that fails lands in $BUILD_DIR/fuzz/runs/<target>/crashes/. To keep a
# failure fixed: fix the reader, then copy the input to tests/fuzz/corpus/<target>/regress-<what>,
# which every later run (ctest's included) replays first, and add a unit test in the
# reader's own test binary.
#
# HDF5: Prism reads HDF5 through libhdf5, which is not instrumented: the hdf5 target finds
# what Prism does with what libhdf5 returns, and crashes inside libhdf5 (the stack's top is
# H5* frames; h5dump crashes on the same file), which Prism cannot fix; report those to
# the HDF Group, and keep them in tests/fuzz/libhdf5_crashes/, not in the corpus. Debian
# 12's libhdf5 1.10.8 crashes within minutes (a damaged variable-length string). It runs
# at tens to hundreds of inputs a second, not thousands.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(http json checkpoint journal spill npy csv hdf5 manifest)
fi
build_dir=$(mkdir -p "${BUILD_DIR:-build}" && cd "${BUILD_DIR:-build}" && pwd)
fuzz_dir=$build_dir/fuzz
cxx=${PRISM_FUZZ_CXX:-$(command -v clang++ || true)}
cc=${PRISM_FUZZ_CC:-$(command -v clang || true)}
if [[ -z $cxx || -z $cc ]]; then
  echo "fuzz.sh: clang++ is not installed: apt-get install clang libclang-rt-14-dev" >&2
  exit 1
fi
generator=()
if [[ ! -f $fuzz_dir/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S tests/fuzz -B "$fuzz_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DPRISM_SOURCE_DIR="$PWD" >/dev/null
cmake --build "$fuzz_dir" -j "$(nproc)" --target "${targets[@]/%/_fuzzer}"

mkdir -p "$fuzz_dir/runs"
echo "fuzz.sh: ${#targets[@]} targets, ${seconds} s each, $(nproc) at a time; logs in $fuzz_dir/runs/<target>.log"
export fuzz_dir seconds
printf '%s\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c \
  'tests/fuzz/run.sh "$fuzz_dir/{}_fuzzer" "$seconds" tests/fuzz/corpus/{} "$fuzz_dir/runs/{}" \
     > "$fuzz_dir/runs/{}.log" 2>&1 && echo "  {}: ok" || echo "  {}: FAILED (see $fuzz_dir/runs/{}.log)"' \
  | tee "$fuzz_dir/runs/summary.txt"
for t in "${targets[@]}"; do
  runs=$(awk '/^stat::number_of_executed_units/ {print $2}' "$fuzz_dir/runs/$t.log")
  rate=$(awk '/^stat::average_exec_per_sec/ {print $2}' "$fuzz_dir/runs/$t.log")
  echo "  $t: ${runs:-?} inputs (${rate:-?}/s); its corpus now holds $(ls "$fuzz_dir/runs/$t/corpus" | wc -l)"
done
! grep -q FAILED "$fuzz_dir/runs/summary.txt"
