#!/usr/bin/env bash
# host_lost_recovery.sh <recovery_app> [rank timeout in s, default 3]
# A host lost in the middle of a job run in recovery mode (issue 44): the job runs through
# scripts/mpirun-recovery.sh (mpirun --enable-recovery, exiting with the job's real
# status), 2 ranks on prism-h1 and 1 on prism-h2. Once rank 2 runs tasks, every process of
# the job on prism-h2 (its rank and Open MPI's daemon, orted) is killed with SIGKILL, as
# when a node crashes. The head cannot see prism-h2's /proc, so it finds the loss by the
# missing heartbeats: PRISM_RANK_TIMEOUT (given with -x, as a fresh environment on the
# other host needs) is short. The job must go on and end with status 0, every result
# correct, rank 2 DEAD; the time from the kill to the head's DEAD is printed.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
app=$1
timeout_s=${2:-3}
"$here/hosts.sh" check || exit $?
shared=$("$here/hosts.sh" shared)
dir=$(mktemp -d "$shared/host-lost-recovery-XXXXXX")
launch=""
cleanup() {
  [[ -n $launch ]] && kill -9 "$launch" 2>/dev/null
  pkill -9 -f "$app $dir" 2>/dev/null
  rm -rf "$dir" "$dir.out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$dir.out"; exit 1; }

# mpirun-recovery.sh adds --enable-recovery and the status file (in $dir, which rank 0 on
# prism-h1 can write) and runs $MPIRUN: here the bed's mpirun.sh, which passes options
# before -- on to mpirun.
cat >"$dir/mpirun" <<EOF
#!/usr/bin/env bash
unset PRISM_STATUS_DIR  # the wrapper's, not a setting of the ranks
opts=()
while [[ \$# -gt 0 && \$1 != "$app" ]]; do opts+=("\$1"); shift; done
exec "$here/mpirun.sh" 2 1 "\${opts[@]}" -- "\$@"
EOF
chmod +x "$dir/mpirun"
MPIRUN=$dir/mpirun PRISM_STATUS_DIR=$dir "$here/../../scripts/mpirun-recovery.sh" \
  -x PRISM_RANK_TIMEOUT="$timeout_s" "$app" "$dir" >"$dir.out" 2>&1 </dev/null &
launch=$!
for _ in $(seq 600); do
  [[ -s $dir/ready ]] && break
  kill -0 "$launch" 2>/dev/null || fail "the job ended before rank 2 ran tasks"
  sleep 0.1
done
[[ -s $dir/ready ]] || fail "rank 2 ran no task within 60 s"

# The job's processes on prism-h2: Open MPI's daemon and its rank, killed at once (the
# daemon first, as when the host crashes: it cannot report its rank's end).
victims=()
for pid in $("$here/hosts.sh" pids h2); do
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$app $dir"; then
    victims+=("$(ps -o ppid= -p "$pid" | tr -d ' ')" "$pid")
  fi
done
[[ ${#victims[@]} -ge 2 ]] || fail "found no rank of the job on prism-h2"
ps -o pid=,comm= -p "$(IFS=,; echo "${victims[*]}")" | sed 's/^/prism-h2 process: /'
killed_ms=$(date +%s%3N)
kill -9 "${victims[@]}"
echo "prism-h2 lost: kill -9 ${victims[*]}"

# Open MPI 4.1's mpirun in recovery mode takes a lost daemon as gone but never marks its
# ranks ended (errmgr default_hnp: "if recovery is enabled, then we are done"), so unless
# the daemon reported its rank's end before it died, mpirun waits for that rank for ever
# after the others have ended. Then (rank 0 has recorded its status, no rank of the job is
# left on prism-h1 for 5 s) end mpirun as a user would, and the wrapper still exits with the
# recorded status.
mpirun_hung=""
ranks_ended_ms=""
quiet=0
for _ in $(seq 600); do
  kill -0 "$launch" 2>/dev/null || break
  if [[ -s $(ls "$dir"/.prism-exit-status.* 2>/dev/null | head -1) ]] &&
     ! pgrep -f "^$app $dir" >/dev/null; then
    quiet=$((quiet + 1))
    ((quiet == 1)) && ranks_ended_ms=$(date +%s%3N)
    if ((quiet == 50)); then
      mpirun_hung=$(( ($(date +%s%3N) - killed_ms) / 1000 ))
      pkill -TERM -f "^mpirun .*$app $dir"
    fi
    ((quiet == 100)) && pkill -KILL -f "^mpirun .*$app $dir"
  fi
  sleep 0.1
done
kill -0 "$launch" 2>/dev/null && fail "the job still runs 60 s after it lost prism-h2"
wait "$launch"
rc=$?
launch=""
ended_ms=$(date +%s%3N)
cat "$dir.out"
if [[ -n $mpirun_hung ]]; then
  echo "mpirun did not end after the ranks on prism-h1 had (it waits for rank 2, whose daemon died before reporting it): ended with SIGTERM $mpirun_hung s after the loss"
else
  echo "mpirun ended by itself (prism-h2's daemon reported rank 2's end before it died)"
fi
[[ -n $ranks_ended_ms ]] && echo "the ranks on prism-h1 ended $(( ranks_ended_ms - killed_ms )) ms after the loss"
echo "the job ended $(( (ended_ms - killed_ms) / 1000 )) s after the loss, status $rc"
dead_ms=$(sed -n 's/^recovery_app: rank 2 (host prism-h2) DEAD at \([0-9]*\) ms$/\1/p' "$dir.out")
[[ -n $dead_ms ]] && echo "rank 2 DEAD $((dead_ms - killed_ms)) ms after the kill (rank_timeout_s $timeout_s)"
[[ $rc -eq 0 ]] || fail "the job's status is $rc, not 0"
grep -q "^recovery_app ok: " "$dir.out" || fail "the driver did not finish its work"
[[ -n $dead_ms ]] || fail "the driver did not report rank 2 DEAD"
pgrep -f "$app $dir" >/dev/null && fail "a process of the job is left running: $(pgrep -af "$app $dir")"
echo "PASS: a lost host survived in recovery mode"
