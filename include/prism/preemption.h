#pragma once
// Preemption and time limits. Slurm warns a job before its time limit (`--signal=B:USR1@T`,
// which the job script forwards to srun's tasks) and preempts it with SIGTERM. Prism
// catches SIGUSR1 and SIGTERM on every rank from Init to Shutdown (unless the program set
// its own handler for them first):
//   - A running TorchTrainer::Fit asks its workers to stop after their next Report that
//     carries a checkpoint, commits that checkpoint, and throws
//     prism::train::TrainingPreemptedError. Return kExitPreempted from main: the job
//     script requeues the job on that code, and the new run of the same name resumes.
//   - With no training running, SIGTERM ends the program as it would without Prism, and
//     SIGUSR1 is only recorded: poll PreemptionSignal() to act on it.
//   - Ranks other than 0 never end on these signals: the head decides and stops them.
//   - In a Slurm step (SLURM_STEP_ID set) or with PRISM_SIGNAL_ACK_FILE set, the signals
//     are caught from the moment the program has loaded, before Init: one that comes while
//     the ranks are starting is kept and acted on as soon as Init returns.
//   - With PRISM_SIGNAL_ACK_FILE set, rank 0 writes that file (the signal's name) as soon
//     as it has heard a stop signal. A job script forwards the signal until the file
//     appears or the step ends: srun can lose a signal that arrives while it is still
//     launching the step (jobs/train_fashion_mnist.sbatch does this).

namespace prism {

/// Exit status of a job that stopped early on a preemption or time-limit signal after
/// saving its state, and should be requeued (EX_TEMPFAIL from sysexits.h).
inline constexpr int kExitPreempted = 75;

/// The first of SIGUSR1 or SIGTERM this process received since Init (or, in a Slurm step,
/// since it started), or 0.
int PreemptionSignal();

}  // namespace prism
