#!/usr/bin/env bash
# session_dir.sh <mpirun...> -- <failure_helper>
# The session directory ($TMPDIR/prism-<job>...: logs, spilled objects) is private to the
# user (0700 directories, 0600 files) and goes at a clean end; after a failure the logs stay
# and the error says where, and a failed run that wrote no log leaves nothing. A session path someone else prepared as a symbolic link is
# refused, not written through.
set -uo pipefail
mpirun=()
while [[ $# -gt 0 && $1 != -- ]]; do mpirun+=("$1"); shift; done
shift
app=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/prism-session-test-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { TMPDIR=$tmp/t timeout 60 "${mpirun[@]}" -n 2 -x TMPDIR -x SLURM_JOB_ID=777 "$app" "$@"; }
mkdir -p "$tmp/t"

# A clean run that logs (info) and spills: nothing is left behind.
run spill_check 1 --prism-object-store-memory=64M --prism-log-level=info >"$tmp/clean.out" 2>&1 ||
  { cat "$tmp/clean.out"; fail "the clean run failed"; }
grep -q "session directory $tmp/t/prism-777-" "$tmp/clean.out" || { cat "$tmp/clean.out"; fail "no session directory logged"; }
left=$(find "$tmp/t" -mindepth 1 | wc -l)
[[ $left == 0 ]] || { find "$tmp/t" -ls; fail "a clean run left $left paths behind"; }

# A failing run: its logs stay, private, and the error names them.
run driver_throws --prism-log-level=info >"$tmp/fail.out" 2>&1 && fail "driver_throws exited 0"
grep -q "rank-0.log" "$tmp/fail.out" || { cat "$tmp/fail.out"; fail "the error does not say where the log is"; }
session=$(find "$tmp/t" -mindepth 1 -maxdepth 1 -name 'prism-777-*')
[[ -n $session ]] || fail "the failed run's session directory is gone"
for d in "$session" "$session/logs"; do
  [[ $(stat -c %a "$d") == 700 ]] || fail "$d has mode $(stat -c %a "$d"), not 700"
done
[[ -f $session/logs/rank-0.log ]] || fail "no rank-0.log kept"
[[ $(stat -c %a "$session/logs/rank-0.log") == 600 ]] || fail "the log has mode $(stat -c %a "$session/logs/rank-0.log")"
rm -rf "$tmp/t"/*

# A failing run that wrote no log (the default level): nothing is kept, and the error names
# no log file (it named a rank-0.log that did not exist and left the directories, empty).
run driver_throws >"$tmp/fail_quiet.out" 2>&1 && fail "driver_throws exited 0"
grep -q "boom from the driver" "$tmp/fail_quiet.out" || { cat "$tmp/fail_quiet.out"; fail "no error"; }
grep -q "rank-0.log" "$tmp/fail_quiet.out" && { cat "$tmp/fail_quiet.out"; fail "the error names a log never written"; }
left=$(find "$tmp/t" -mindepth 1 | wc -l)
[[ $left == 0 ]] || { find "$tmp/t" -ls; fail "a failed run without logs left $left paths behind"; }

# The session path is a symbolic link someone left: refused, nothing written through it.
# (The launch id is unknown in advance, so the link is planted on the logs directory of a
# run whose log directory is given explicitly.)
mkdir -p "$tmp/elsewhere"
ln -s "$tmp/elsewhere" "$tmp/t/planted"
run init_only --prism-log-level=info --prism-log-dir="$tmp/t/planted" >"$tmp/link.out" 2>&1
grep -q "symbolic link" "$tmp/link.out" || { cat "$tmp/link.out"; fail "the planted link was not refused"; }
[[ -z $(ls -A "$tmp/elsewhere") ]] || fail "a log was written through the planted link"
echo "session directory ok"
