#!/usr/bin/env bash
# Runs one fuzz target for a while: tests/fuzz/run.sh FUZZER SECONDS SEEDS WORK [FLAG...]
#   FUZZER  the target's binary (<build>/fuzz/<name>_fuzzer)
#   SECONDS how long to fuzz (replaying every input already found included)
#   SEEDS   its checked-in corpus (tests/fuzz/corpus/<name>/: seeds and regressions, read only)
#   WORK    a directory of this run's own: WORK/corpus collects new inputs, WORK/crashes the
#           inputs that failed (crash-*, leak-*, timeout-*, oom-*)
#   FLAG    more libFuzzer flags, e.g. -seed=1 -runs=200
# With PRISM_FUZZ_FRESH=1 (ctest), WORK starts empty, so a run depends only on the
# checked-in corpus and its flags. Exits non-zero when an input crashes, trips a sanitizer,
# breaks a property (the target aborts), or runs longer than 25 s. ctest (label fuzz) and
# scripts/fuzz.sh call it.
set -euo pipefail
fuzzer=$1 seconds=$2 seeds=$3 work=$4
shift 4
if [[ ${PRISM_FUZZ_FRESH:-0} == 1 ]]; then rm -rf "$work"; fi
mkdir -p "$work/corpus" "$work/crashes"
# Leaks are failures too, except in the HDF5 target: libhdf5 keeps caches of its own
# between files.
# Nor is a malloc libhdf5 asks of a damaged size there: glibc would return NULL, which
# libhdf5 checks, where ASan by default stops the run (allocator_may_return_null).
# libhdf5's own bad reads through libc are suppressed there too (hdf5.supp says why).
leaks=1 null=0 supp=
if [[ $(basename "$fuzzer") == hdf5_fuzzer ]]; then
  leaks=0 null=1 supp=":suppressions=$(cd "$(dirname "$0")" && pwd)/hdf5.supp"
fi
export ASAN_OPTIONS="detect_leaks=$leaks:allocator_may_return_null=$null$supp:symbolize=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export TMPDIR="$work"  # the targets' scratch files: in the run's own directory
# Tokens of the input's language (dicts/), which libFuzzer inserts whole.
dict=()
case $(basename "$fuzzer" _fuzzer) in
  json|checkpoint|journal|manifest) dict=(-dict="$(dirname "$0")/dicts/json.dict") ;;
  http) dict=(-dict="$(dirname "$0")/dicts/http.dict") ;;
esac
status=0
# The progress lines of new inputs are left out: thousands of them say little.
"$fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -max_len=16384 \
  -print_final_stats=1 -detect_leaks=$leaks -artifact_prefix="$work/crashes/" "${dict[@]}" "$@" \
  "$work/corpus" "$seeds" 2>&1 | grep -v -E '^#[0-9]+\s+(NEW|REDUCE|pulse)' || status=${PIPESTATUS[0]}
if ((status != 0)); then
  echo "run.sh: $(basename "$fuzzer") failed (exit $status); the input is in $work/crashes/:" >&2
  ls -l "$work/crashes/" >&2 || true
  echo "replay it with: $fuzzer $work/crashes/<file>; once fixed, copy it to $seeds/regress-<what>" >&2
fi
exit "$status"
