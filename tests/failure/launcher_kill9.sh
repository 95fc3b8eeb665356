#!/usr/bin/env bash
# launcher_kill9.sh <mpirun...> -- <failure_helper>
# kill -9 of mpirun alone (not of the ranks): every rank must notice the lost launcher and
# end at once, not go on writing files (a Tune journal, a checkpoint) that a restarted job
# is about to read (issue 39, item 4). Each rank appends a line to its own file every 20 ms;
# after the kill the files must stop growing within a second and no rank may be left.
set -uo pipefail
mpirun=()
while [[ $# -gt 0 && $1 != -- ]]; do mpirun+=("$1"); shift; done
shift
app=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/prism-launcher-kill9-XXXXXX")
launch=""
cleanup() {
  [[ -n $launch ]] && kill -9 "$launch" 2>/dev/null
  [[ -n ${ranks:-} ]] && kill -9 $ranks 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
sizes() { for r in 0 1 2; do stat -c %s "$dir/rank$r" 2>/dev/null || echo 0; done | tr '\n' ' '; }

"${mpirun[@]}" -n 3 "$app" heartbeat "$dir" >"$dir.out" 2>&1 &
launch=$!
for _ in $(seq 300); do
  [[ -s $dir/rank0 && -s $dir/rank1 && -s $dir/rank2 ]] && break
  kill -0 "$launch" 2>/dev/null || { cat "$dir.out"; fail "the job ended before every rank wrote"; }
  sleep 0.1
done
[[ -s $dir/rank2 ]] || fail "not every rank wrote within 30 s"
ranks=$(ps -o pid= --ppid "$launch" | tr '\n' ' ')
echo "mpirun $launch, its ranks: $ranks"
kill -9 "$launch"
at_kill=$(sizes)
start=$(date +%s%N)
wait "$launch" 2>/dev/null
launch=""
for _ in $(seq 100); do
  # A rank killed but not yet reaped by its new parent is a zombie: it writes nothing.
  alive=$(for p in $ranks; do [[ $(ps -o stat= -p "$p" 2>/dev/null) == [^Z]* ]] && echo "$p"; done)
  [[ -z $alive ]] && break
  sleep 0.02
done
gone_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[[ -z $alive ]] || fail "ranks $alive still run 2 s after mpirun was killed"
sleep 0.2
after=$(sizes)
echo "files at the kill: $at_kill; once every rank was gone ($gone_ms ms): $after"
# Without the parent-death signal the ranks lived on about a second (until Open MPI's own
# connection to the launcher failed), 50 lines each; with it, at most a line or two.
read -r -a a <<<"$at_kill"
read -r -a b <<<"$after"
for r in 0 1 2; do
  (( b[r] - a[r] <= 25 )) || fail "rank $r wrote $(( b[r] - a[r] )) bytes after mpirun was killed"
done
rm -f "$dir.out"
echo "ranks end with their launcher"
