#!/bin/sh
# expect_failure.sh [--success | --exit-status S] [--max-seconds N] <expected-regex> <command> [args...]
#
# Runs the command under `timeout 60` and checks that it
#   * ends on its own: exit status 124 (killed by timeout) means it hung, a failure;
#   * exits non-zero (or zero with --success, or exactly S with --exit-status S);
#   * prints output (stdout and stderr together) matching the extended regex;
#   * with --max-seconds N: took at most N seconds.
# The command's output is echoed so that ctest --output-on-failure shows it.
set -u
expect_success=0
expect_status=""
max_seconds=""
while [ $# -gt 0 ]; do
  case "$1" in
    --success) expect_success=1; shift ;;
    --exit-status) expect_status="$2"; shift 2 ;;
    --max-seconds) max_seconds="$2"; shift 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "usage: $0 [--success | --exit-status S] [--max-seconds N] <expected-regex> <command> [args...]" >&2
  exit 2
fi
regex="$1"
shift

out=$(mktemp "${TMPDIR:-/tmp}/prism-expect-failure.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout 60 "$@" >"$out" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))

echo "---- command: $*"
echo "---- exit status $status after ${elapsed}s; output:"
cat "$out"
echo "----"

fail() {
  echo "FAILED: $*"
  exit 1
}
if [ "$status" -eq 124 ]; then
  fail "the command hung (killed by timeout after ${elapsed}s)"
fi
if [ -n "$expect_status" ]; then
  [ "$status" -eq "$expect_status" ] || fail "expected exit status $expect_status, got $status"
elif [ "$expect_success" -eq 1 ]; then
  [ "$status" -eq 0 ] || fail "expected exit status 0, got $status"
else
  [ "$status" -ne 0 ] || fail "expected a non-zero exit status, got 0"
fi
if ! grep -Eq -- "$regex" "$out"; then
  fail "output does not match /$regex/"
fi
if [ -n "$max_seconds" ] && [ "$elapsed" -gt "$max_seconds" ]; then
  fail "took ${elapsed}s, more than the allowed ${max_seconds}s"
fi
echo "OK: exit status $status, output matches /$regex/"
exit 0
