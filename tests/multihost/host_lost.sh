#!/usr/bin/env bash
# host_lost.sh <failure_helper>
# A host lost in the middle of a job: every process of the job on prism-h2 (its rank and
# Open MPI's daemon) is killed with SIGKILL, as when a node crashes. Until a lost worker can
# be survived, the job must end, soon and entirely: mpirun names the host it lost, the
# ranks on prism-h1 stop (no rank left writing), and nothing hangs. Each rank appends to
# its own file every 20 ms (failure_helper heartbeat).
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
app=$1
"$here/hosts.sh" check || exit $?
shared=$("$here/hosts.sh" shared)
dir=$(mktemp -d "$shared/host-lost-XXXXXX")
launch=""
cleanup() {
  [[ -n $launch ]] && kill -9 "$launch" 2>/dev/null
  pkill -9 -f "$app heartbeat $dir" 2>/dev/null
  rm -rf "$dir" "$dir.out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$dir.out"; exit 1; }

"$here/mpirun.sh" 2 1 -- "$app" heartbeat "$dir" >"$dir.out" 2>&1 </dev/null &
launch=$!
for _ in $(seq 300); do
  [[ -s $dir/rank0 && -s $dir/rank1 && -s $dir/rank2 ]] && break
  kill -0 "$launch" 2>/dev/null || fail "the job ended before every rank wrote"
  sleep 0.1
done
[[ -s $dir/rank2 ]] || fail "not every rank wrote within 30 s"

# The job's processes on prism-h2: its rank, and the rank's parent, Open MPI's daemon.
victims=()
for pid in $("$here/hosts.sh" pids h2); do
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "heartbeat $dir"; then
    victims+=("$pid" "$(ps -o ppid= -p "$pid" | tr -d ' ')")
  fi
done
[[ ${#victims[@]} -ge 2 ]] || fail "found no rank of the job on prism-h2"
echo "prism-h2 lost: kill -9 ${victims[*]}"
kill -9 "${victims[@]}"
start=$(date +%s)
for _ in $(seq 300); do
  kill -0 "$launch" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$launch" 2>/dev/null && fail "the job still runs 30 s after it lost prism-h2"
wait "$launch"
rc=$?
launch=""
echo "the job ended $(( $(date +%s) - start )) s after the loss, status $rc"
cat "$dir.out"
grep -q "prism-h2" "$dir.out" || fail "no message names the lost host prism-h2"
sizes=$(stat -c %s "$dir"/rank0 "$dir"/rank1)
sleep 1
[[ $(stat -c %s "$dir"/rank0 "$dir"/rank1) == "$sizes" ]] || fail "a rank on prism-h1 still writes"
pgrep -f "heartbeat $dir" >/dev/null && fail "a rank is left running: $(pgrep -af "heartbeat $dir")"
echo "PASS: a lost host ends the job, named"
