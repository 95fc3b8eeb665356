#!/usr/bin/env bash
# tune_kill9.sh <mpirun...> -- <tune_fashion_mnist>
# A tuning experiment killed with SIGKILL (the whole launch: mpirun and every rank, as a
# node failure or `scancel --signal=KILL` would leave it) once its journal holds a few
# results, then run again with --restore: it must finish (exit 0) with every trial
# TERMINATED at the last epoch, no trial lost or added, and no report repeated in the
# journal (each trial's iterations 1..epochs once each; a trial resumes from its latest
# checkpoint, which every report carries). In a trial's result.json a report made between
# the checkpoint's commit and the kill may appear twice, nothing else.
set -uo pipefail
mpirun=()
while [[ $# -gt 0 && $1 != -- ]]; do mpirun+=("$1"); shift; done
shift
app=$1
store=$(mktemp -d "${TMPDIR:-/tmp}/prism-tune-kill9-XXXXXX")
launch=""
cleanup() {
  [[ -n $launch ]] && kill -9 -- "-$launch" 2>/dev/null
  rm -rf "$store"
}
trap cleanup EXIT
samples=4 epochs=3
exp=$store/kill9
journal=$exp/experiment_state.jsonl
args=(--num-samples=$samples --epochs=$epochs --scheduler=fifo --train-samples=2000 --test-samples=300
      --storage-path="$store" --name=kill9)

fail() {
  echo "FAIL: $*"
  exit 1
}
results() {
  local n
  n=$(grep -c '"e":"result"' "$journal" 2>/dev/null)
  echo "${n:-0}"
}
# The pids of $1 and all its descendants.
tree() {
  local p
  echo "$1"
  for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do tree "$p"; done
}

echo "== 1. the experiment, killed with SIGKILL once its journal holds 4 results"
# Its own process group (setsid), so that one kill reaches mpirun and what it started.
setsid "${mpirun[@]}" -n 3 "$app" "${args[@]}" >"$store/first.out" 2>&1 &
launch=$!
for _ in $(seq 600); do
  (( $(results) >= 4 )) && break
  kill -0 "$launch" 2>/dev/null || break
  sleep 0.2
done
got=$(results)
pids=$(tree "$launch")
kill -9 -- "-$launch" $pids 2>/dev/null
wait "$launch" 2>/dev/null
launch=""
cat "$store/first.out"
(( got >= 4 )) || fail "the journal had $got results when the run ended or 120 s passed"
grep -q '"e":"fit_end"' "$journal" && fail "the experiment finished before the kill: nothing was tested"
# Every process of the launch is gone (an orphaned rank would go on writing the journal).
for _ in $(seq 50); do
  alive=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
  [[ -z $alive ]] && break
  sleep 0.1
done
[[ -z $alive ]] && echo "killed: mpirun and its ranks ($(echo $pids | wc -w) processes), with $got results in the journal" ||
  fail "processes $alive survived kill -9"
cp "$journal" "$store/journal_at_kill"

echo "== 2. --restore"
timeout 150 "${mpirun[@]}" -n 3 "$app" "${args[@]}" --restore >"$store/second.out" 2>&1
rc=$?
cat "$store/second.out"
[[ $rc == 124 ]] && fail "the restored run hung"
[[ $rc == 0 ]] || fail "the restored run exited with status $rc"
grep -q "^restoring: $exp" "$store/second.out" || fail "the second run did not restore the experiment"
grep -q "OK: the best checkpoint scores what its trial reported" "$store/second.out" ||
  fail "the best trial's checkpoint does not score what it reported"

echo "== 3. every trial finished once, none lost or added, no report repeated"
python3 - "$exp" "$samples" "$epochs" <<'EOF' || fail "the restored experiment is not what it should be"
import csv, json, os, sys
exp, samples, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ok = True
def bad(msg):
    global ok
    ok = False
    print("  bad:", msg)

rows = list(csv.DictReader(open(os.path.join(exp, "results.csv"))))
ids = [r["trial_id"] for r in rows]
if len(rows) != samples or len(set(ids)) != samples:
    bad(f"results.csv has {len(rows)} rows, {len(set(ids))} distinct trials; expected {samples}")
for r in rows:
    if r["status"] != "TERMINATED":
        bad(f"{r['trial_id']} is {r['status']}")
    if float(r["training_iteration"]) != epochs:
        bad(f"{r['trial_id']} ended at training_iteration {r['training_iteration']}, not {epochs}")

events = [json.loads(l) for l in open(os.path.join(exp, "experiment_state.jsonl")) if l.strip()]
created = [e["id"] for e in events if e["e"] == "trial"]
if sorted(created) != sorted(ids) or len(set(created)) != len(created):
    bad(f"the journal created trials {created}, results.csv has {ids}")
if not any(e["e"] == "restore" for e in events):
    bad("the journal has no restore event")
for t in ids:
    its = [int(e["iteration"]) for e in events if e["e"] == "result" and e["id"] == t]
    if its != list(range(1, epochs + 1)):
        bad(f"{t}: the journal's reports are iterations {its}, expected 1..{epochs} once each")
    lines = [json.loads(l) for l in open(os.path.join(exp, t, "result.json")) if l.strip()]
    seq = [int(l["training_iteration"]) for l in lines]
    # A report written just before the kill is made again after the restore: allowed.
    if sorted(set(seq)) != list(range(1, epochs + 1)) or seq[-1] != epochs or \
       any(b < a for a, b in zip(seq, seq[1:])):
        bad(f"{t}: result.json has iterations {seq}")
    print(f"  {t}: journal {its}, result.json {seq}")
sys.exit(0 if ok else 1)
EOF
echo "PASS: tune kill9"
