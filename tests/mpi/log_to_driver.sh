#!/usr/bin/env bash
# log_to_driver.sh on|off|flood <mpiexec> <app>: runs the app on 3 ranks and checks what
# the driver's console shows of the workers' output.
set -uo pipefail
mode=$1 mpiexec=$2 app=$3
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
args=()
[[ $mode == off ]] && export PRISM_LOG_TO_DRIVER=0
[[ $mode == flood ]] && args=(flood)
timeout 100 "$mpiexec" --allow-run-as-root --oversubscribe -n 3 \
  "$app" "${args[@]}" >"$out" 2>"$err"
status=$?
fail() { echo "FAIL: $*"; echo "--- stdout"; head -c 4000 "$out"; echo "--- stderr"; head -c 4000 "$err"; exit 1; }
[[ $status == 0 ]] || fail "exit status $status"
grep -q '^driver-done$' "$out" || fail "the driver's own line is missing"
case $mode in
  on|flood)
    for r in 1 2; do
      grep -Eq "^\(rank=$r, host=[^)]+\) marker-out-$r$" "$out" || fail "no prefixed stdout marker of rank $r"
      grep -Eq "^\(rank=$r, host=[^)]+\) marker-err-$r$" "$err" || fail "no prefixed stderr marker of rank $r on stderr"
      grep -Eq "^\(rank=$r, host=[^)]+\) marker-cout-$r no newline at the end$" "$out" ||
        fail "rank $r's unterminated last line was lost at Shutdown"
    done
    # Whole lines only: every line from a worker starts with its prefix.
    if grep -E 'marker-(out|err)' "$out" "$err" | grep -Ev ':\(rank=[12], host=[^)]+\) marker-' ; then
      fail "a marker line without its prefix, or mixed with another"
    fi
    if [[ $mode == flood ]]; then
      grep -Eq '^\(rank=1, host=[^)]+\) flood-done$' "$out" ||
        grep -Eq '^\(rank=1, host=[^)]+\) prism: dropped [0-9]+ lines' "$err" ||
        fail "the flood neither ended on the console nor said what it dropped"
      [[ $(grep -Evc '^(\(rank=1, host=[^)]+\) flood [0-9]+ x{200}|\(rank=1, host=[^)]+\) flood-done|\(rank=[12], host=[^)]+\) marker-.*|driver-done)$' "$out") == 0 ]] ||
        fail "a flood line was cut or mixed"
    fi
    ;;
  off)
    if grep -Eq '\(rank=[0-9]+, host=' "$out" "$err"; then fail "prefixed lines with log_to_driver off"; fi
    ;;
esac
echo "log_to_driver $mode: ok"
