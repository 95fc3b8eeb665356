# Sourced by the job scripts whose program stops at a checkpoint on a warning and is
# requeued (train_fashion_mnist, tune_fashion_mnist, train_script, python_train, python_tune):
#   source "$PRISM_BUILD/jobs/requeue_step.sh" || exit 1   # (the build dir holds a copy)
#   prism_step training srun --mpi=pmix --kill-on-bad-exit=1 "$PRISM_BUILD/apps/..." ...
#
# Time limits and preemption: Slurm sends USR1 to the job script before the time limit
# (--signal=B:USR1@120) and SIGTERM on preemption. A warning must never be lost. The traps
# are set when this file is sourced and remember the signal; once the step runs, the signal
# goes to its tasks, and again every 2 s until rank 0 says it heard it (it writes
# PRISM_SIGNAL_ACK_FILE): a signal that arrives while the step is still being launched can
# be lost on the way, and a program it ends before Prism is up exits 128+N. The signal goes
# through `scancel` to the job's steps, not to srun: srun answers SIGTERM by killing its
# tasks with SIGKILL. In a Slurm step Prism records the signal from the moment the program
# has loaded (before MPI_Init); only one that comes while a task is still loading ends it
# (128+N), and --kill-on-bad-exit then ends the whole step, so no rank waits for one that
# is gone.
#
# The program then exits 75 (prism::kExitPreempted) after its checkpoint, and prism_step
# requeues the job (same job id): the requeued job resumes the run or experiment named
# after the job id. A job cancelled with scancel is not requeued.
#
# A lost rank (recovery mode, issue 44): a job that must go on when one of its ranks dies
# runs its program with Open MPI's own mpirun --enable-recovery inside the allocation, not
# with srun (Slurm's pmix plugin ends the whole step 1.3 s after any task dies, --no-kill or
# not), through the source tree's scripts/mpirun-recovery.sh, as its last command:
#   exec "$PRISM_SOURCE/scripts/mpirun-recovery.sh" "$PRISM_BUILD/apps/..." ...
# mpirun takes the job's tasks from Slurm (on more nodes than one it starts a daemon per
# node with srun, without --kill-on-bad-exit in recovery mode). The job's status is the
# program's (mpirun --enable-recovery itself exits 0): 0 and COMPLETED when the driver ends
# well after a rank was lost; main's status, or 1 for an uncaught exception or a killed
# rank 0, and FAILED otherwise (tests/slurm: slurm_recovery). Not through prism_step (not
# tested): it forwards USR1/TERM with scancel to the job's steps, and the ranks mpirun
# starts on the batch shell's node are that shell's children, in no step of their own, so
# preemption and requeue of such a job are not covered.

prism_step_pid="" prism_forwarded="" prism_sent_at=0
export PRISM_SIGNAL_ACK_FILE="${TMPDIR:-/tmp}/prism-signal-ack-${SLURM_JOB_ID}-$$"
rm -f "$PRISM_SIGNAL_ACK_FILE"

prism_signal_step() {
  [[ -n $prism_step_pid ]] || return 0
  prism_sent_at=$SECONDS
  scancel --signal="$1" "$SLURM_JOB_ID" 2>/dev/null
}
prism_forward() {
  echo "$(date +%T) job got $1: forwarding it to the step"
  prism_forwarded=$1
  prism_signal_step "$1"
}
trap 'prism_forward USR1' USR1
trap 'prism_forward TERM' TERM

# prism_step WHAT COMMAND...: runs $SETUP (if set), then COMMAND as the job's step with
# the signals forwarded; exits the script with the step's status, or requeues the job
# (exit 0) when the step stopped at a checkpoint (75) or a forwarded signal ended it.
prism_step() {
  local what=$1
  shift
  echo "$(date +%T) job $SLURM_JOB_ID start (restart ${SLURM_RESTART_COUNT:-0})"
  if [[ -n ${SETUP:-} ]]; then
    echo "$(date +%T) setup: $SETUP"
    eval "$SETUP" || { echo "$(date +%T) setup failed: $SETUP"; exit 1; }
  fi
  "$@" &
  prism_step_pid=$!
  echo "$(date +%T) step started"
  # Sleeping in the background keeps the traps prompt (bash runs them between commands).
  while kill -0 "$prism_step_pid" 2>/dev/null; do
    if [[ -n $prism_forwarded && ! -e $PRISM_SIGNAL_ACK_FILE ]] && ((SECONDS - prism_sent_at >= 2)); then
      prism_signal_step "$prism_forwarded"
    fi
    sleep 2 & wait $!
  done
  wait "$prism_step_pid"
  local status=$?
  if [[ -n $prism_forwarded ]]; then
    if [[ -e $PRISM_SIGNAL_ACK_FILE ]]; then
      echo "$(date +%T) the step heard $prism_forwarded"
    else
      echo "$(date +%T) the step ended before Prism heard $prism_forwarded"
    fi
  fi
  rm -f "$PRISM_SIGNAL_ACK_FILE"
  # 75: stopped at a checkpoint. Any other failure after a forwarded signal: the signal
  # ended the step before Prism could catch it (a task still loading: 128+N), or ended one
  # task and --kill-on-bad-exit ended the rest. Checkpoints (and a tuning journal) are
  # written atomically, so the requeued job resumes from the latest one either way.
  if [[ $status == 75 ]] || [[ -n $prism_forwarded && $status != 0 ]]; then
    # scancel ends the job: it is then COMPLETING for no reason Slurm names (a time limit
    # says Reason=TimeLimit), and a requeue would undo the cancel.
    if [[ $(scontrol show job "$SLURM_JOB_ID" 2>/dev/null) =~ JobState=(COMPLETING|CANCELLED)\ Reason=None ]]; then
      echo "$(date +%T) job $SLURM_JOB_ID cancelled (status $status): not requeued"
      exit "$status"
    fi
    echo "$(date +%T) $what stopped (status $status): requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID"
    exit 0
  fi
  echo "$(date +%T) job $SLURM_JOB_ID end (status $status)"
  exit "$status"
}
