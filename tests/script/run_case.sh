#!/usr/bin/env bash
# run_case.sh <case> <build dir>: one ScriptTrainer test through prism-train-script on 3
# ranks (2 workers), with Debian's python3. Prints "PASS: script <case>" on success.
#
#   torch_env    every worker's torchrun variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*, ...)
#   tf_config    backend tensorflow: TF_CONFIG's cluster spec and task index on every worker
#   crash        a worker exits 3 in epoch 2: the group restarts from the epoch-1 checkpoint
#   no_command   a program that does not exist: a clear error at once, nothing started
#   no_report    a script that never reports: killed after --report-timeout, a clear error
#   bad_ckpt     report(checkpoint_dir=<a file>): the script's ValueError reaches the driver
#   preempt      SIGUSR1 to mpirun: the scripts checkpoint and return, exit 75; a second
#                run of the same name resumes and finishes
#   fmnist       apps/train_fashion_mnist_py on 2 workers, 1 short epoch: a real DDP run
set -uo pipefail
case=$1 build=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
app=$build/apps/prism-train-script
py=/usr/bin/python3
work=$(mktemp -d /tmp/prism-script-test-XXXXXX)
trap 'rm -rf "$work"' EXIT
out=$work/out err=$work/err
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail() { echo "FAIL: script $case: $*"; echo "--- stdout"; tail -c 6000 "$out"; echo "--- stderr"; tail -c 6000 "$err"; exit 1; }

# run SECONDS ARGS...: prism-train-script on 3 ranks; sets $status and $took (seconds).
run() {
  local limit=$1
  shift
  local t0=$SECONDS
  timeout "$limit" mpirun --oversubscribe -n 3 "$app" --storage-path="$work/store" "$@" >"$out" 2>"$err"
  status=$?
  took=$((SECONDS - t0))
}
# epochs_of RUN: the "epoch" of every line of RUN's result.json, in order.
epochs_of() {
  $py -c 'import json,sys; print(" ".join(str(int(json.loads(l)["epoch"])) for l in open(sys.argv[1]) if l.strip()))' "$1/result.json"
}

case $case in
  torch_env)
    run 90 --num-workers=2 --backend=torch --name=env -- $py "$here/check_torch_env.py" 2
    [[ $status == 0 ]] || fail "exit status $status"
    grep -q "ENV-FAIL" "$out" "$err" && fail "a worker saw a wrong environment"
    for r in 0 1; do
      grep -Eq "\(worker $r\) ENV-OK rank=$r world=2 local=$r/2 master=[^:]+:[0-9]+$" "$out" ||
        fail "no ENV-OK line of worker $r with its prefix"
    done
    [[ $(grep -o "ENV-OK.*master=.*" "$out" | sed 's/.*master=//' | sort -u | wc -l) == 1 ]] ||
      fail "the workers were given different MASTER_ADDR:MASTER_PORT"
    grep -q "prism.train: report 1 (attempt 1): master_port=[0-9]*, rank=0" "$err" || fail "world rank 0's report not shown"
    ;;
  tf_config)
    run 90 --num-workers=2 --backend=tensorflow --name=tf -- $py "$here/check_tf_config.py" 2
    [[ $status == 0 ]] || fail "exit status $status"
    grep -q "TF-FAIL" "$out" "$err" && fail "a worker's TF_CONFIG was wrong"
    for r in 0 1; do
      grep -Eq "\(worker $r\) TF-OK index=$r of 2 workers=" "$out" || fail "no TF-OK line of worker $r"
    done
    [[ $(grep -o "TF-OK.*workers=.*" "$out" | sed 's/.*workers=//' | sort -u | wc -l) == 1 ]] ||
      fail "the workers were given different cluster specs"
    ;;
  crash)
    run 120 --num-workers=2 --name=crash --max-failures=1 -- $py "$here/epochs.py" 4 crash
    [[ $status == 0 ]] || fail "exit status $status"
    grep -q "worker 0: .*exited with status 3; its last lines on stderr:" "$err" || fail "the failure does not name exit status 3"
    grep -q "crashing in epoch 2" "$err" || fail "the script's stderr is not in the failure"
    grep -q "restarting the group (failure 1 of 1) from .*/checkpoint_000001" "$err" || fail "no restart from the epoch-1 checkpoint"
    grep -q "(worker 0) resuming after epoch 1 from .*checkpoint_000001 (attempt 1)" "$out" || fail "the script did not resume after epoch 1"
    epochs=$(epochs_of "$work/store/crash")
    [[ $epochs == "1 2 3 4" ]] || fail "result.json epochs '$epochs', expected 1 2 3 4"
    [[ -f $work/store/crash/checkpoint_000004/epoch.json ]] || fail "no committed checkpoint_000004/epoch.json"
    ;;
  no_command)
    run 60 --num-workers=2 --name=nocmd -- no-such-program-prism --flag
    [[ $status == 1 ]] || fail "exit status $status, expected 1"
    grep -q "cannot run \`no-such-program-prism\`: not found in PATH" "$err" || fail "no clear error"
    ((took < 30)) || fail "took $took s"
    ;;
  no_report)
    run 90 --num-workers=2 --name=hang --report-timeout=3 -- $py "$here/epochs.py" 3 hang
    [[ $status == 1 ]] || fail "exit status $status, expected 1"
    grep -q "was killed: no prism_train.report() for 3 s" "$err" || fail "no clear timeout error"
    ((took < 40)) || fail "took $took s"
    ;;
  bad_ckpt)
    run 90 --num-workers=2 --name=badckpt -- $py "$here/epochs.py" 3 bad-ckpt
    [[ $status == 1 ]] || fail "exit status $status, expected 1"
    grep -q "training failed.*exited with status 1" "$err" || fail "no failure naming the exit status"
    grep -q "ValueError: prism_train.report: checkpoint_dir '/etc/hostname' is not a directory" "$err" ||
      fail "the error does not say checkpoint_dir is not a directory"
    ;;
  preempt)
    timeout 120 mpirun --oversubscribe -n 3 "$app" --storage-path="$work/store" --num-workers=2 --name=pre \
      -- $py "$here/epochs.py" 30 preempt >"$out" 2>"$err" &
    pid=$!
    for _ in $(seq 240); do
      grep -q '"epoch": \?2' "$work/store/pre/result.json" 2>/dev/null && break
      sleep 0.25
    done
    grep -q '"epoch": \?2' "$work/store/pre/result.json" 2>/dev/null || fail "no epoch 2 within 60 s"
    kill -USR1 "$(pgrep -P $pid -x mpirun)"  # mpirun forwards SIGUSR1 to every rank (not timeout: it would die)
    wait $pid
    status=$?
    [[ $status == 75 ]] || fail "exit status $status after SIGUSR1, expected 75"
    grep -q "stopped on SIGUSR1" "$err" || fail "no 'stopped on SIGUSR1'"
    grep -q "(worker 0) stopping after epoch" "$out" || fail "the script did not see should_stop()"
    first=$(epochs_of "$work/store/pre")
    run 120 --num-workers=2 --name=pre -- $py "$here/epochs.py" 6 ok
    [[ $status == 0 ]] || fail "the resumed run: exit status $status"
    grep -q "(worker 0) resuming after epoch" "$out" || fail "the second run did not resume"
    epochs=$(epochs_of "$work/store/pre")
    [[ $epochs == "$(seq -s ' ' 1 6)" ]] || fail "epochs '$epochs' (first run: '$first'), expected 1..6 once each"
    ;;
  fmnist)
    run 240 --num-workers=2 --name=fmnist -- $py "$root/apps/train_fashion_mnist_py/train.py" \
      --epochs=1 --train-samples=12000 --test-samples=2000 --min-accuracy=0.7
    [[ $status == 0 ]] || fail "exit status $status"
    grep -q "(worker 0) epoch 1: .*test_accuracy" "$out" || fail "no epoch line from worker 0"
    grep -q "prism.train: report 1 (attempt 1): .*test_accuracy=" "$err" || fail "no report on the driver"
    [[ -s $work/store/fmnist/checkpoint_000001/model.pt ]] || fail "no checkpoint_000001/model.pt committed"
    ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
echo "PASS: script $case (${took:-?} s)"
