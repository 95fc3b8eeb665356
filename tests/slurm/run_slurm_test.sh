#!/usr/bin/env bash
# Slurm tests against a real local Slurm (slurm/start-slurm.sh, started here if none runs and
# stopped again at the end). Every Slurm command runs under `timeout`.
#
#   run_slurm_test.sh <build dir> <case>
#
#   core     sbatch of the core demo on 3 ranks (srun --mpi=pmix); the misuse messages:
#            srun --mpi=pmi2 and --mpi=none, and ./app run directly in a 3-task job
#   array    jobs/train_fashion_mnist.sbatch as a job array of 2: each task trains its own
#            run (distinct names and temp dirs), 2 workers each
#   usr1     the training demo with 2 workers, 8 epochs, through jobs/train_fashion_mnist.sbatch;
#            after the first epoch the batch shell gets USR1 (what --signal=B:USR1@T sends
#            before the time limit): the run checkpoints, exits 75, the script requeues, and
#            the requeued job resumes and finishes: epochs 1-8 once each, checkpoints intact
#   term     the same with SIGTERM to the job's step (what preemption sends)
#   perf     jobs/perf.sbatch with --quick --only=micro,train: the task and training
#            benchmarks of the regression suite through srun
#   timelimit  a 1-minute job with --signal=B:USR1@45, 80 epochs: Slurm's own warning before
#            the time limit, a checkpoint and a requeue; given 10 minutes, the requeued run
#            resumes from that checkpoint (two epochs in order after it); scancel then ends
#            it for good (the script does not requeue a cancelled job)
#   early    USR1 as srun starts launching the step, before Prism is up: requeued, nothing lost
#   setup    USR1 while the job script runs its setup, before the step exists: the same
#   tune     jobs/tune_fashion_mnist.sbatch (6 trials of 4 short epochs, ASHA, 3 ranks); once
#            the experiment's journal holds 2 results the batch shell gets USR1: running
#            trials stop at a checkpoint, exit 75, requeue, and the requeued job restores the
#            experiment and finishes it: every trial TERMINATED once, none lost or repeated
#   script   jobs/train_script.sbatch: the Fashion-MNIST DDP Python script under
#            prism-train-script on 2 workers, 5 short epochs; after epoch 1 the batch shell
#            gets USR1: the scripts see should_stop(), checkpoint and return, exit 75, the job
#            requeues, and the requeued job's scripts resume from get_checkpoint() and finish
#   python   jobs/python_demo.sbatch: Prism for Python (import prism) on 3 ranks through srun
#            --mpi=pmix; every prediction of its ActorPool checked against the driver's
#   python_train  jobs/python_train.sbatch: Ray Train's PyTorch quickstart in Python
#            (apps/python_train, resnet18) on 2 workers, 4 short epochs; after epoch 0 the batch
#            shell gets USR1: the workers stop at the next epoch's checkpoint, exit 75, the job
#            requeues, and the requeued job resumes the run (model and optimizer) and finishes:
#            epochs 0-3 once each
#   python_tune  jobs/python_tune.sbatch: Ray Tune's getting-started example in Python
#            (apps/python_tune, 6 trials of 4 epochs, ASHA, 3 ranks); once the journal holds 2
#            results the batch shell gets USR1: fit raises TunePreemptedError, exit 75, requeue,
#            and the requeued job restores the experiment and finishes it: every trial made
#            once and TERMINATED
#
#   python_libs  jobs/python_data.sbatch (Ray Data's batch inference, 2,000 images, the
#            predictions committed with _SUCCESS), jobs/python_rllib.sbatch (PPO on CartPole to
#            a return of 150) and jobs/python_serve.sbatch (the classifier over HTTP; a request
#            answered, then USR1 to the batch shell: rank 0 drains and the job ends 0)
#
#   recovery  a lost worker rank survived: a 3-task job whose script runs
#            scripts/mpirun-recovery.sh (mpirun --enable-recovery in the allocation, not srun)
#            with prism_lost_rank_test, which SIGKILLs its last rank mid-graph: the job goes on
#            and COMPLETED 0:0; a driver returning 4 without Shutdown: FAILED 4:0
#
#   start    only starts the local Slurm, for the cases that follow (ctest's fixture: the
#            cases then share one Slurm and run side by side), unless one already runs
#   stop     stops the Slurm that `start` started, and purges its state
#
# A case run alone starts Slurm if none runs and stops it again at its end.
# Exit 77 (ctest: skipped) when Slurm cannot be started here (not root, not installed).
set -uo pipefail
build=$(cd "$1" && pwd)
case=${2:-core}
root=$(cd "$(dirname "$0")/../.." && pwd)
export SLURM_BASE=${SLURM_BASE:-/tmp/prism-slurm-test}
export SLURM_CONF=${SLURM_CONF:-$SLURM_BASE/etc/slurm.conf}
work=$(mktemp -d /tmp/prism-slurm-XXXXXX)

[[ $(id -u) == 0 ]] || { echo "skip: starting a local Slurm needs root"; exit 77; }
command -v slurmctld >/dev/null || { echo "skip: slurm-wlm not installed"; exit 77; }

# Two cases run at once on the shared Slurm (tests/integration.cmake): its node offers 8
# CPUs, enough for any two of their jobs (at most 4 tasks each) without one queueing.
export SLURM_NODE_CPUS=${SLURM_NODE_CPUS:-8}
# Written by `start` when it started Slurm: `stop` stops only a Slurm that `start` started.
marker=$SLURM_BASE.started-by-tests
started=0
cleanup() {
  [[ $started == 1 ]] && timeout 60 "$root/slurm/stop-slurm.sh" --purge >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
start_slurm() {
  timeout 120 "$root/slurm/start-slurm.sh" >"$work/start.log" 2>&1 || {
    cat "$work/start.log"; echo "FAIL: could not start Slurm"; exit 1; }
}
case $case in
  start)
    if timeout 30 sinfo >/dev/null 2>&1; then
      echo "a local Slurm already runs ($SLURM_CONF): the cases use it"
    else
      start_slurm
      touch "$marker"
      echo "started a local Slurm ($SLURM_CONF, $SLURM_NODE_CPUS CPUs)"
    fi
    echo "PASS: slurm start"
    exit 0 ;;
  stop)
    if [[ -e $marker ]]; then
      rm -f "$marker"
      timeout 60 "$root/slurm/stop-slurm.sh" --purge || { echo "FAIL: could not stop Slurm"; exit 1; }
    fi
    echo "PASS: slurm stop"
    exit 0 ;;
esac
if ! timeout 30 sinfo >/dev/null 2>&1; then
  start_slurm
  started=1
fi

fail() { echo "FAIL: $*"; exit 1; }
# wait_gone JOB SECONDS: polls squeue until the job (all its array tasks) left the queue.
wait_gone() {
  for _ in $(seq $(($2 * 2))); do
    [[ -z $(timeout 10 squeue -h -j "$1" 2>/dev/null) ]] && return 0
    sleep 0.5
  done
  timeout 10 scancel "$1"
  return 1
}
# wait_for FILE PATTERN SECONDS: polls until FILE has a line matching PATTERN.
wait_for() {
  for _ in $(seq $(($3 * 4))); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.25
  done
  return 1
}

run_core() {
  # 1. sbatch the core demo on 3 ranks via srun --mpi=pmix.
  cat >"$work/demo.sbatch" <<JOB
#!/usr/bin/env bash
#SBATCH --ntasks=3
#SBATCH --time=00:05:00
#SBATCH --output=$work/demo-%j.out
srun --mpi=pmix $build/apps/core_demo
JOB
  local jobid out
  jobid=$(timeout 30 sbatch --parsable "$work/demo.sbatch") || fail "sbatch refused the job"
  wait_gone "$jobid" 120 || fail "job $jobid still queued/running after 120 s"
  out="$work/demo-$jobid.out"
  cat "$out"
  grep -q "Prism core demo on 3 rank(s), job $jobid" "$out" || fail "demo did not run on 3 ranks with the Slurm job id"
  grep -q "task .* ran on rank 2" "$out" || fail "no task ran on rank 2"
  grep -q "^done" "$out" || fail "demo did not finish"

  # Resources from Slurm: 2 CPUs per task, and GPUs counted from CUDA_VISIBLE_DEVICES
  # (no GPU is used; Slurm's NoDevFiles would count as none).
  CUDA_VISIBLE_DEVICES=0,1 timeout 120 srun --mpi=pmix -n 2 --cpus-per-task=2 \
    "$build/apps/core_demo" >"$work/cpus.out" 2>&1
  cat "$work/cpus.out"
  grep -q "Prism core demo on 2 rank(s), job [0-9]* (4 CPUs, 2 GPUs)" "$work/cpus.out" ||
    fail "srun -n 2 --cpus-per-task=2 with CUDA_VISIBLE_DEVICES=0,1 should give 4 CPUs, 2 GPUs"
  CUDA_VISIBLE_DEVICES=NoDevFiles timeout 120 srun --mpi=pmix -n 2 "$build/apps/core_demo" \
    >"$work/nodev.out" 2>&1
  grep -q "(2 CPUs, 0 GPUs)" "$work/nodev.out" || { cat "$work/nodev.out"; fail "NoDevFiles should count as no GPU"; }

  # 2. srun --mpi=pmi2 / none cannot form an MPI world with Debian's Open MPI: say so.
  local mpi rc
  for mpi in pmi2 none; do
    timeout 120 srun --mpi=$mpi -n 2 "$build/apps/core_demo" >"$work/$mpi.out" 2>&1
    rc=$?
    cat "$work/$mpi.out"
    [[ $rc != 0 && $rc != 124 ]] || fail "srun --mpi=$mpi exited $rc (expected a clean non-zero exit)"
    grep -q -- "--mpi=pmix" "$work/$mpi.out" || fail "srun --mpi=$mpi: no hint to use srun --mpi=pmix"
  done

  # 3. A 3-task job whose script runs ./app directly: it works on 1 rank and says so.
  cat >"$work/direct.sbatch" <<JOB
#!/usr/bin/env bash
#SBATCH --ntasks=3
#SBATCH --time=00:05:00
#SBATCH --output=$work/direct-%j.out
$build/apps/core_demo
JOB
  jobid=$(timeout 30 sbatch --parsable "$work/direct.sbatch") || fail "sbatch refused the job"
  wait_gone "$jobid" 120 || fail "job $jobid still queued/running after 120 s"
  out="$work/direct-$jobid.out"
  cat "$out"
  grep -q "asked for 3 tasks (SLURM_NTASKS=3) but Prism started as 1 rank" "$out" ||
    fail "no warning for a one-rank start in a 3-task job"
  grep -q "srun --mpi=pmix ./app" "$out" || fail "the warning does not say how to launch"
  grep -q "^done" "$out" || fail "the one-rank demo did not finish"
}

# submit_training ARGS...: sbatch of the project's own job script, short epochs.
submit_training() {
  PRISM_BUILD=$build PRISM_STORAGE_PATH=$work/store EXTRA_ARGS="--train-samples=3000 --test-samples=1000" \
    timeout 30 sbatch --parsable --time=00:10:00 --output="$work/train-%j.out" "$@" \
    "$root/jobs/train_fashion_mnist.sbatch"
}

# reported_epochs DIR: how many epochs DIR/result.json holds (0 without the file).
reported_epochs() {
  [[ -f $1/result.json ]] || { echo 0; return; }
  grep -c '"epoch"' "$1/result.json"
}

# epochs_of FILE: the "epoch" of every report in FILE (a run's result.json), in order.
epochs_of() {
  python3 -c 'import json,sys; print(" ".join(str(int(json.loads(l)["epoch"])) for l in open(sys.argv[1]) if l.strip()))' "$1"
}

# check_run DIR EPOCHS: result.json holds epochs 1..EPOCHS once each, in order; every
# checkpoint left is a readable HDF5 model whose epoch is one of them.
check_run() {
  local dir=$1 epochs=$2
  [[ -f $dir/result.json ]] || fail "no $dir/result.json"
  local got want
  got=$(epochs_of "$dir/result.json")
  want=$(seq -s ' ' 1 "$epochs")
  [[ $got == "$want" ]] || fail "epochs in $dir/result.json are '$got', expected '$want'"
  local n=0 ckpt
  for ckpt in "$dir"/checkpoint_*; do
    [[ -d $ckpt ]] || continue
    h5ls "$ckpt/model.h5/model" >/dev/null 2>&1 || h5ls "$ckpt/model.h5" >/dev/null ||
      fail "$ckpt/model.h5 is not a readable HDF5 file"
    n=$((n + 1))
  done
  ((n > 0)) || fail "no checkpoint in $dir"
  echo "run $dir: epochs $got, $n checkpoint(s) readable"
}

run_array() {
  local jobid out t
  jobid=$(WORKERS=2 EPOCHS=1 submit_training --array=0-1 --ntasks=2) || fail "sbatch refused the array"
  wait_gone "$jobid" 300 || fail "array $jobid still queued/running after 300 s"
  for t in 0 1; do
    out=$(ls "$work"/train-*.out | xargs grep -l "fashion_mnist_cnn_${jobid}_$t" | head -1)
    [[ -n $out ]] || { cat "$work"/train-*.out; fail "no output names run fashion_mnist_cnn_${jobid}_$t"; }
    cat "$out"
    grep -q "OK: the restored model matches the reported accuracy" "$out" || fail "array task $t did not finish"
    check_run "$work/store/fashion_mnist_cnn_${jobid}_$t" 1
  done
}

# check_requeued JOB OUT RUN EPOCHS: the job requeued itself after the signal, the last run
# finished with its restored checkpoint verified, and RUN holds epochs 1..EPOCHS once each.
check_requeued() {
  local jobid=$1 out=$2 run=$3 epochs=$4
  grep -q "requeueing job $jobid" "$out" || fail "the job script did not requeue the job"
  grep -q "job $jobid start (restart 1)" "$out" || fail "the job did not run again after the requeue"
  grep -q "job $jobid end (status 0)" "$out" || fail "the requeued job did not end with status 0"
  grep -q "OK: the restored model matches the reported accuracy" "$out" || fail "the resumed run did not finish"
  check_run "$run" "$epochs"
  timeout 10 scontrol show job "$jobid" | grep -o "Restarts=[0-9]*"
}

# signal_job JOB OUT SIGNAL WHEN SCANCEL-FLAGS...: sends SIGNAL, waits for the job (and its
# requeued runs) to finish, prints its output.
signal_job() {
  local jobid=$1 out=$2 sig=$3 when=$4
  shift 4
  timeout 10 scancel --signal="$sig" "$@" "$jobid" || fail "scancel --signal=$sig refused"
  echo "sent $sig ($*) to job $jobid $when"
  wait_gone "$jobid" 400 || { cat "$out"; fail "job $jobid did not finish within 400 s of the signal"; }
  cat "$out"
}

# run_preempt SIGNAL SCANCEL-FLAGS...: signal the job after its first epoch; expect a
# checkpoint, exit 75, a requeue, and a resumed run that finishes.
run_preempt() {
  local sig=$1
  shift
  local jobid out run
  jobid=$(EPOCHS=8 submit_training) || fail "sbatch refused the job"
  out="$work/train-$jobid.out"
  run="$work/store/fashion_mnist_cnn_$jobid"
  wait_for "$run/result.json" '"epoch": \?1' 180 || { cat "$out"; timeout 10 scancel "$jobid"; fail "no epoch reported within 180 s"; }
  signal_job "$jobid" "$out" "$sig" "after epoch 1" "$@"
  grep -q "received SIG$sig (preemption or time limit)" "$out" || fail "the head did not report SIG$sig"
  grep -q "stopped on SIG$sig" "$out" || fail "training did not stop on SIG$sig"
  if [[ $* == *--batch* ]]; then
    grep -q "the step heard $sig" "$out" || fail "the job script got no word that rank 0 heard $sig"
  fi
  grep -q "resuming after epoch [1-7] from" "$out" || fail "the requeued job did not resume from a checkpoint"
  check_requeued "$jobid" "$out" "$run" 8
}

# The real time-limit path: a 1-minute job with --signal=B:USR1@45. slurmctld checks time
# limits every 30 s and sends that warning at its first check after the job started, so
# the first run is warned 0-30 s in. 80 short epochs take 55-160 s here and about 80 s on
# CI's machine: they cannot finish before the warning. The run checkpoints, exits 75 and
# requeues itself (or, warned while still starting, ends on the signal and requeues: the
# early case); while the job waits to restart, the test gives it 10 minutes (a restart that
# wins that race is warned again and requeues once more, which the checks accept). The
# resumed run must go on from the checkpoint; then the test cancels it, and the cancel holds.
run_timelimit() {
  local jobid out run epochs=80 stopped n=0
  jobid=$(EPOCHS=$epochs submit_training --time=00:01:00 --signal=B:USR1@45) || fail "sbatch refused the job"
  out="$work/train-$jobid.out"
  run="$work/store/fashion_mnist_cnn_$jobid"
  wait_for "$out" "requeueing job $jobid" 150 ||
    { cat "$out"; timeout 10 scancel "$jobid"; fail "no time-limit warning and requeue within 150 s"; }
  timeout 10 scontrol update JobId="$jobid" TimeLimit=00:10:00 || fail "scontrol update TimeLimit refused"
  echo "job $jobid requeued after Slurm's warning; its time limit is now 10 minutes"
  stopped=$(reported_epochs "$run")
  # The requeued run resumes from the checkpoint: two more epochs, in order after the stop,
  # are enough; then the user cancels it, and it stays cancelled (the script does not
  # requeue a cancelled job). That a requeued run goes on to finish is what usr1, term,
  # early and setup check; the other 70-odd epochs took 4 minutes here.
  for _ in $(seq 720); do
    n=$(reported_epochs "$run")
    ((n >= stopped + 2)) && break
    [[ -z $(timeout 10 squeue -h -j "$jobid" 2>/dev/null) ]] && break
    sleep 0.25
  done
  timeout 10 scancel "$jobid"
  wait_gone "$jobid" 60 || { cat "$out"; fail "job $jobid still there 60 s after scancel"; }
  cat "$out"
  local state
  state=$(timeout 10 scontrol show job "$jobid" 2>/dev/null | grep -o 'JobState=[A-Z_]*')
  [[ $state == JobState=CANCELLED ]] || fail "job $jobid ended in ${state:-no state}, expected JobState=CANCELLED"
  grep -q "job got USR1" "$out" || fail "Slurm did not send USR1 before the time limit"
  if grep -q "stopped on SIGUSR1" "$out"; then
    echo "the warning came during training: it stopped after a checkpoint at epoch $stopped"
  elif grep -q "training stopped (status 138)" "$out"; then
    echo "the warning came while the program was starting: it ended on USR1"
  else
    fail "training did not stop on Slurm's USR1"
  fi
  grep -q "DUE TO TIME LIMIT" "$out" && fail "the time limit killed the job"
  grep -q "job $jobid start (restart 1)" "$out" || fail "the job did not run again after the requeue"
  grep -q "job $jobid cancelled (status [0-9]*): not requeued" "$out" || fail "the job script did not see the cancel"
  sed -n '/cancelled (status [0-9]*): not requeued/,$p' "$out" | grep -q "start (restart" &&
    fail "the job ran again after scancel"
  n=$(reported_epochs "$run")
  ((n >= stopped + 2)) || fail "the requeued run reported epochs up to $n, expected at least $((stopped + 2))"
  check_run "$run" "$n"
}

# A signal before Prism is up: while the job script runs its setup, before the step exists
# (setup), or the moment srun starts launching the step (early). The script remembers it,
# signals the step until rank 0 says it heard it; the step ends on it (status 138) or
# stops before training (75), and the script requeues. The requeued job runs the whole
# training. Together with usr1 (a signal during training) this covers the three timings.
run_early() {
  local when=$1 jobid out run setup=""
  [[ $when == setup ]] && setup="sleep 8"
  jobid=$(EPOCHS=2 SETUP=$setup submit_training) || fail "sbatch refused the job"
  out="$work/train-$jobid.out"
  run="$work/store/fashion_mnist_cnn_$jobid"
  local mark="step started"
  [[ $when == setup ]] && mark="setup: sleep"
  wait_for "$out" "$mark" 120 ||
    { cat "$out"; timeout 10 scancel "$jobid"; fail "job $jobid did not reach '$mark' within 120 s"; }
  signal_job "$jobid" "$out" USR1 "at '$mark'" --batch
  grep -q "job got USR1" "$out" || fail "the job script did not get USR1"
  grep -q "requeueing job $jobid" "$out" || fail "USR1 at '$mark' was lost: the job was not requeued"
  check_requeued "$jobid" "$out" "$run" 2
}

# usr1_after_results JOB OUT EXP: once the experiment EXP's journal holds 2 results, USR1
# to the batch shell (signal_job: waits for the job and its requeued runs).
usr1_after_results() {
  local jobid=$1 out=$2 exp=$3 n=0
  for _ in $(seq 720); do
    n=$(grep -c '"e":"result"' "$exp/experiment_state.jsonl" 2>/dev/null)
    ((${n:-0} >= 2)) && break
    sleep 0.25
  done
  ((${n:-0} >= 2)) || { cat "$out"; timeout 10 scancel "$jobid"; fail "the journal had no 2 results within 180 s"; }
  signal_job "$jobid" "$out" USR1 "after $n results" --batch
}

# check_usr1_requeued JOB OUT WHAT: after USR1 to the batch shell, rank 0 heard it, the step
# (WHAT: training, tuning) exited 75, the script requeued the job, and the requeued job ran
# and ended with status 0.
check_usr1_requeued() {
  local jobid=$1 out=$2 what=$3
  grep -q "received SIGUSR1 (preemption or time limit)" "$out" || fail "the head did not report SIGUSR1"
  grep -q "the step heard USR1" "$out" || fail "the job script got no word that rank 0 heard USR1"
  grep -q "$what stopped (status 75): requeueing job $jobid" "$out" || fail "the job script did not requeue on 75"
  grep -q "job $jobid start (restart 1)" "$out" || fail "the job did not run again after the requeue"
  grep -q "job $jobid end (status 0)" "$out" || fail "the requeued job did not end with status 0"
}

# The tuning demo preempted: USR1 to the batch shell once the journal holds 2 results. The
# trials that run stop at their next report (each carries a checkpoint), the app exits 75,
# the script requeues, and the requeued job (--restore, the experiment named after the job
# id) finishes it. Each trial's reports in the journal are iterations 1..k once each, k the
# last epoch or where ASHA stopped it (a stopped trial ends at its next report).
run_tune() {
  local jobid out exp samples=6 epochs=4
  jobid=$(PRISM_BUILD=$build PRISM_STORAGE_PATH=$work/store NUM_SAMPLES=$samples EPOCHS=$epochs \
          EXTRA_ARGS="--train-samples=3000 --test-samples=500" \
          timeout 30 sbatch --parsable --ntasks=3 --time=00:10:00 --output="$work/tune-%j.out" \
          "$root/jobs/tune_fashion_mnist.sbatch") || fail "sbatch refused jobs/tune_fashion_mnist.sbatch"
  out="$work/tune-$jobid.out"
  exp="$work/store/tune_fmnist_$jobid"
  usr1_after_results "$jobid" "$out" "$exp"
  check_usr1_requeued "$jobid" "$out" tuning
  grep -q "^preempted: .*SIGUSR1" "$out" || fail "the experiment finished or failed before USR1 stopped it"
  grep -q "^restoring: $exp" "$out" || fail "the requeued job did not restore $exp"
  grep -q "^best trial: " "$out" || fail "no best trial printed"
  grep -q "OK: the best checkpoint scores what its trial reported" "$out" || fail "the best checkpoint was not verified"
  python3 - "$exp" "$samples" "$epochs" <<'EOF' || fail "the restored experiment is not what it should be"
import csv, json, os, sys
exp, samples, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
errors = []
rows = list(csv.DictReader(open(os.path.join(exp, "results.csv"))))
ids = [r["trial_id"] for r in rows]
if len(rows) != samples or len(set(ids)) != samples:
    errors.append(f"results.csv has {len(rows)} rows, {len(set(ids))} distinct trials; expected {samples}")
events = [json.loads(l) for l in open(os.path.join(exp, "experiment_state.jsonl")) if l.strip()]
created = [e["id"] for e in events if e["e"] == "trial"]
if sorted(created) != sorted(ids) or len(set(created)) != len(created):
    errors.append(f"the journal created trials {created}; results.csv has {ids}")
if not any(e["e"] == "fit_end" and e.get("preempted") for e in events):
    errors.append("the journal has no preempted fit_end")
if not any(e["e"] == "restore" for e in events):
    errors.append("the journal has no restore")
full = 0
for r in rows:
    t = r["trial_id"]
    its = [int(e["iteration"]) for e in events if e["e"] == "result" and e["id"] == t]
    k = len(its)
    if r["status"] != "TERMINATED":
        errors.append(f"{t} is {r['status']}")
    if its != list(range(1, k + 1)) or k > epochs or float(r["training_iteration"]) != k:
        errors.append(f"{t}: journal iterations {its}, results.csv training_iteration {r['training_iteration']}")
    seq = [int(json.loads(l)["training_iteration"]) for l in open(os.path.join(exp, t, "result.json")) if l.strip()]
    if seq != its:
        errors.append(f"{t}: result.json has iterations {seq}, the journal {its}")
    full += k == epochs
    print(f"  {t}: iterations {its}")
if full == 0:
    errors.append(f"no trial reached epoch {epochs}")
for e in errors:
    print("  bad:", e)
sys.exit(1 if errors else 0)
EOF
}

# The Python DDP script under prism-train-script, preempted after epoch 1 and resumed.
run_script() {
  local jobid out run epochs=5
  jobid=$(PRISM_BUILD=$build PRISM_STORAGE_PATH=$work/store WORKERS=2 EXTRA_ARGS="--report-timeout=120" \
          SCRIPT="/usr/bin/python3 $root/apps/train_fashion_mnist_py/train.py --epochs=$epochs --train-samples=6000 --test-samples=1000" \
          timeout 30 sbatch --parsable --time=00:10:00 --output="$work/script-%j.out" \
          "$root/jobs/train_script.sbatch") || fail "sbatch refused jobs/train_script.sbatch"
  out="$work/script-$jobid.out"
  run="$work/store/ScriptTrainer_$jobid"
  wait_for "$run/result.json" '"epoch": \?1' 180 || { cat "$out"; timeout 10 scancel "$jobid"; fail "no epoch reported within 180 s"; }
  signal_job "$jobid" "$out" USR1 "after epoch 1" --batch
  grep -q "received SIGUSR1 (preemption or time limit)" "$out" || fail "the head did not report SIGUSR1"
  grep -q "stopping after epoch [1-4]'s checkpoint" "$out" || fail "the Python scripts did not stop on should_stop()"
  grep -q "stopped on SIGUSR1" "$out" || fail "the run did not end as preempted"
  grep -q "requeueing job $jobid" "$out" || fail "the job script did not requeue the job"
  grep -q "job $jobid start (restart 1)" "$out" || fail "the job did not run again after the requeue"
  grep -q "(worker 0) resuming after epoch [1-4] from $run/checkpoint_" "$out" || fail "the requeued scripts did not resume from a checkpoint"
  grep -q "job $jobid end (status 0)" "$out" || fail "the requeued job did not end with status 0"
  local got
  got=$(epochs_of "$run/result.json")
  [[ $got == "$(seq -s ' ' 1 $epochs)" ]] || fail "epochs in $run/result.json are '$got', expected 1..$epochs once each"
  echo "run $run: epochs $got"
}

# jobs/perf.sbatch in quick mode: the suite's MPI parts through srun, one well-formed JSON.
run_perf() {
  local jobid out
  # The parts that run through srun (the others run without Slurm in perf_suite_quick).
  jobid=$(cd "$root" && BUILD_DIR=$build SUITE_ARGS="--quick --only=micro,train" SUITE_OUT=$work/suite \
          timeout 30 sbatch --parsable --output="$work/perf-%j.out" "$root/jobs/perf.sbatch") ||
    fail "sbatch refused jobs/perf.sbatch"
  wait_gone "$jobid" 400 || { cat "$work/perf-$jobid.out"; fail "perf job $jobid did not finish within 400 s"; }
  out="$work/perf-$jobid.out"
  cat "$out"
  python3 "$root/perf/suite.py" check "$work/suite/suite.json" || fail "the suite's JSON is not well formed"
  grep -q "single_client_tasks_sync" "$work/suite/suite.md" || fail "no task benchmark in the suite table"
  grep -q "train_" "$work/suite/suite.md" || fail "no training benchmark in the suite table"
}

# jobs/python_demo.sbatch: the Python package from the build tree on 3 ranks.
run_python() {
  local jobid out
  jobid=$(cd "$root" && PRISM_BUILD=$build timeout 30 sbatch --parsable --output="$work/python-%j.out" \
          "$root/jobs/python_demo.sbatch") || fail "sbatch refused jobs/python_demo.sbatch"
  wait_gone "$jobid" 240 || { cat "$work/python-$jobid.out"; fail "python job $jobid did not finish within 240 s"; }
  out="$work/python-$jobid.out"
  cat "$out"
  grep -q "prism: 3 rank(s)" "$out" || fail "the Python demo did not run on 3 ranks"
  grep -q "mismatches vs the driver: 0" "$out" || fail "the Python demo's predictions were not checked clean"
}

# jobs/python_train.sbatch: the Python TorchTrainer app preempted after epoch 0 and resumed.
run_python_train() {
  local jobid out run epochs=4 got
  jobid=$(PRISM_BUILD=$build PRISM_SOURCE=$root PRISM_STORAGE_PATH=$work/store EPOCHS=$epochs \
          EXTRA_ARGS="--train-samples=512 --test-samples=256 --batch-size=64 --data-root=$work/fashion_mnist" \
          timeout 30 sbatch --parsable --time=00:10:00 --output="$work/python-train-%j.out" \
          "$root/jobs/python_train.sbatch") || fail "sbatch refused jobs/python_train.sbatch"
  out="$work/python-train-$jobid.out"
  run="$work/store/TorchTrainer_$jobid"
  wait_for "$run/result.json" '"epoch":0' 180 || { cat "$out"; timeout 10 scancel "$jobid"; fail "no epoch reported within 180 s"; }
  signal_job "$jobid" "$out" USR1 "after epoch 0" --batch
  check_usr1_requeued "$jobid" "$out" training
  grep -q "^preempted after $run/checkpoint_" "$out" || fail "the training finished or failed before USR1 stopped it"
  grep -q "^resuming after epoch [0-2] from $run/checkpoint_" "$out" || fail "the requeued job did not resume from a checkpoint"
  grep -q "^trained $epochs epochs on 2 worker(s); the checkpoint of epoch $((epochs - 1)) classifies" "$out" ||
    fail "the requeued job did not score its last checkpoint"
  got=$(epochs_of "$run/result.json")
  [[ $got == "$(seq -s ' ' 0 $((epochs - 1)))" ]] || fail "epochs in $run/result.json are '$got', expected 0..$((epochs - 1)) once each"
  echo "run $run: epochs $got"
}

# jobs/python_tune.sbatch: the Python Tuner app preempted once its journal holds 2 results,
# requeued and restored. Its trials report no checkpoint, so a restored trial that was
# running starts again (its journal iterations then restart at 1); each trial is made once
# and ends TERMINATED.
run_python_tune() {
  local jobid out exp samples=6 epochs=4
  jobid=$(PRISM_BUILD=$build PRISM_SOURCE=$root PRISM_STORAGE_PATH=$work/store NUM_SAMPLES=$samples EPOCHS=$epochs \
          EXTRA_ARGS="--data-root=$work/fashion_mnist" \
          timeout 30 sbatch --parsable --time=00:10:00 --output="$work/python-tune-%j.out" \
          "$root/jobs/python_tune.sbatch") || fail "sbatch refused jobs/python_tune.sbatch"
  out="$work/python-tune-$jobid.out"
  exp="$work/store/tune_fmnist_py_$jobid"
  usr1_after_results "$jobid" "$out" "$exp"
  check_usr1_requeued "$jobid" "$out" tuning
  grep -q "^preempted (prism::tune: SIGUSR1" "$out" || fail "the experiment finished or failed before USR1 stopped it"
  grep -q "^$samples trials, 0 errors; best mean_accuracy" "$out" || fail "the restored experiment did not finish clean"
  python3 - "$exp" "$samples" <<'EOF' || fail "the restored experiment is not what it should be"
import json, os, sys
exp, samples = sys.argv[1], int(sys.argv[2])
events = [json.loads(l) for l in open(os.path.join(exp, "experiment_state.jsonl")) if l.strip()]
errors = []
created = [e["id"] for e in events if e["e"] == "trial"]
if len(created) != samples or len(set(created)) != samples:
    errors.append(f"the journal made trials {created}; expected {samples} distinct")
if not any(e["e"] == "fit_end" and e.get("preempted") for e in events):
    errors.append("the journal has no preempted fit_end")
if not any(e["e"] == "restore" for e in events):
    errors.append("the journal has no restore")
last = {}
for e in events:
    if e["e"] == "status":
        last[e["id"]] = e["status"]
for t in created:
    if last.get(t) != "TERMINATED":
        errors.append(f"{t} ends {last.get(t)}")
    print(f"  {t}: {last.get(t)}")
for e in errors:
    print("  bad:", e)
sys.exit(1 if errors else 0)
EOF
}

# jobs/python_data.sbatch, jobs/python_rllib.sbatch and jobs/python_serve.sbatch: Ray's
# Data, RLlib and Serve examples in Python as batch jobs.
run_python_libs() {
  local data rl serve out endpoint code
  data=$(PRISM_BUILD=$build PRISM_SOURCE=$root OUTPUT=$work/predictions \
         EXTRA_ARGS="--limit=2000 --train-size=1000 --data-root=$work/fashion_mnist" \
         timeout 30 sbatch --parsable --output="$work/py-data-%j.out" "$root/jobs/python_data.sbatch") ||
    fail "sbatch refused jobs/python_data.sbatch"
  rl=$(PRISM_BUILD=$build PRISM_SOURCE=$root CHECKPOINT_DIR=$work/ppo EXTRA_ARGS="--stop-return=150 --eval-episodes=1" \
       timeout 30 sbatch --parsable --output="$work/py-rllib-%j.out" "$root/jobs/python_rllib.sbatch") ||
    fail "sbatch refused jobs/python_rllib.sbatch"
  wait_gone "$data" 240 || { cat "$work/py-data-$data.out"; fail "the data job $data did not finish within 240 s"; }
  out="$work/py-data-$data.out"
  cat "$out"
  grep -q "^2000 images classified on 3 rank(s): accuracy 0\.[5-9]" "$out" || fail "the data job classified no 2000 images well on 3 ranks"
  [[ -f $work/predictions/_SUCCESS ]] || fail "the data job committed no predictions (_SUCCESS)"
  wait_gone "$rl" 240 || { cat "$work/py-rllib-$rl.out"; fail "the RLlib job $rl did not finish within 240 s"; }
  out="$work/py-rllib-$rl.out"
  cat "$out"
  grep -q "^reached return" "$out" || fail "PPO did not reach a return of 150"
  endpoint=$work/py-serve.endpoint
  serve=$(PRISM_BUILD=$build PRISM_SOURCE=$root ENDPOINT_FILE=$endpoint \
          EXTRA_ARGS="--train-steps=50 --checkpoint=$work/py_cnn.pt" \
          timeout 30 sbatch --parsable --output="$work/py-serve-%j.out" "$root/jobs/python_serve.sbatch") ||
    fail "sbatch refused jobs/python_serve.sbatch"
  out="$work/py-serve-$serve.out"
  for _ in $(seq 480); do [[ -s $endpoint ]] && break; sleep 0.25; done
  [[ -s $endpoint ]] || { cat "$out"; timeout 10 scancel "$serve"; fail "the serve job wrote no endpoint within 120 s"; }
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$(head -1 "$endpoint")/fashion_mnist")
  [[ $code =~ ^[1-5][0-9][0-9]$ ]] || { cat "$out"; timeout 10 scancel "$serve"; fail "the served model did not answer HTTP (got '$code')"; }
  timeout 10 scancel --signal=USR1 --batch "$serve" || fail "scancel refused to signal job $serve"
  wait_gone "$serve" 120 || { cat "$out"; fail "the serve job $serve did not end within 120 s of USR1"; }
  cat "$out"
  grep -q "^drained and stopped" "$out" || fail "the serve job did not drain on USR1"
}

# A lost worker rank survived (issue 44, item 6). srun --mpi=pmix cannot: Slurm's pmix
# plugin ends the step 1.3 s after any task dies. Open MPI's own mpirun --enable-recovery
# inside the allocation can: the job script runs scripts/mpirun-recovery.sh (its ranks are
# mpirun's children on this one node; on several, mpirun starts an orted per node with
# srun, without --kill-on-bad-exit in recovery mode). prism_lost_rank_test SIGKILLs its
# last rank mid-graph: every result correct, the job COMPLETED with ExitCode 0:0. A driver
# that returns 4 without Shutdown: the job FAILED with ExitCode 4:0, its own status.
run_recovery() {
  local name jobid out state
  for name in lost_rank exit_status; do
    local cmd="$build/tests/failure/prism_lost_rank_test"
    [[ $name == exit_status ]] && cmd="$build/tests/failure/prism_failure_helper no_shutdown"
    cat >"$work/$name.sbatch" <<JOB
#!/usr/bin/env bash
#SBATCH --ntasks=3
#SBATCH --time=00:05:00
#SBATCH --output=$work/$name-%j.out
cd "$work"
exec "$root/scripts/mpirun-recovery.sh" --allow-run-as-root $cmd
JOB
    jobid=$(timeout 30 sbatch --parsable "$work/$name.sbatch") || fail "sbatch refused the $name job"
    wait_gone "$jobid" 120 || fail "job $jobid ($name) still queued/running after 120 s"
    out="$work/$name-$jobid.out"
    cat "$out"
    state=$(timeout 10 scontrol show job "$jobid" | grep -o "JobState=[A-Z]*\|ExitCode=[0-9:]*" | tr '\n' ' ')
    echo "job $jobid ($name): $state"
    if [[ $name == lost_rank ]]; then
      grep -q "rank 2 was lost: its process ended; the job goes on without it" "$out" ||
        fail "the head did not report rank 2 lost"
      grep -q "^lost_rank ok: 1000 results correct at 3 ranks" "$out" || fail "the job did not survive its lost rank"
      [[ $state == "JobState=COMPLETED ExitCode=0:0 " ]] || fail "job $jobid: $state (expected COMPLETED, 0:0)"
    else
      grep -q "no_shutdown: 9, returning 4" "$out" || fail "the driver did not run"
      [[ $state == "JobState=FAILED ExitCode=4:0 " ]] || fail "job $jobid: $state (expected FAILED, 4:0)"
    fi
  done
}

case $case in
  core) run_core ;;
  array) run_array ;;
  usr1) run_preempt USR1 --batch ;;
  term) run_preempt TERM ;;
  timelimit) run_timelimit ;;
  early) run_early step ;;
  setup) run_early setup ;;
  perf) run_perf ;;
  tune) run_tune ;;
  script) run_script ;;
  python) run_python ;;
  python_train) run_python_train ;;
  python_tune) run_python_tune ;;
  python_libs) run_python_libs ;;
  recovery) run_recovery ;;
  *) echo "unknown case '$case' (core, array, usr1, term, timelimit, early, setup, perf, tune, script, python, python_train, python_tune, python_libs, recovery)"; exit 2 ;;
esac
echo "PASS: slurm $case"
