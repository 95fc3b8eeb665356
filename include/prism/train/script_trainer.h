#pragma once
// ScriptTrainer: runs an existing training script (PyTorch DDP, TensorFlow
// MultiWorkerMirroredStrategy, anything that reads its place in the group from environment
// variables) as one process per worker on ranks placed like TorchTrainer's, with the same
// run directory, checkpoint commits and retention, failure restarts and preemption.
//
//   // on rank 0, after prism::Init (mpirun -n 3 ./app)
//   train::ScriptTrainerOptions options;
//   options.scaling_config.num_workers = 2;
//   options.backend = "torch";
//   train::Result result = train::ScriptTrainer({"python3", "train.py", "--epochs=4"}, options).Fit();
//
// Each worker's process gets, besides the rank's environment:
//   backend "torch":      MASTER_ADDR, MASTER_PORT (a free port on world rank 0's host, picked
//                         per attempt), RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//                         NODE_RANK, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, GROUP_WORLD_SIZE,
//                         TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,
//                         TORCHELASTIC_RUN_ID, as torchrun sets them;
//   backend "tensorflow": TF_CONFIG = {"cluster": {"worker": ["host:port", ...]},
//                         "task": {"type": "worker", "index": i}}, as Ray Train writes it;
//   both:                 PRISM_TRAIN_RUN_DIR, PRISM_TRAIN_CHECKPOINT (when resuming),
//                         PRISM_TRAIN_TRIAL_NAME, PRISM_TRAIN_ATTEMPT, PRISM_TRAIN_WORLD_RANK
//                         and the rest (README, "Training existing Python scripts"), the pipe
//                         to its worker for the prism_train Python module, PYTHONPATH with
//                         that module, PYTHONUNBUFFERED=1, and OMP_NUM_THREADS = the worker's
//                         CPUs unless set.
// The script reports with prism_train.report(metrics, checkpoint_dir=None): world rank 0's
// reports are recorded and shown like TorchTrainer's, and its checkpoint directory is
// copied into the run as checkpoint_NNNNNN. Its output reaches the driver's console, each
// line prefixed "(worker W) ". Exiting non-zero fails the worker (a restart from the latest
// checkpoint, up to max_failures); no report within report_timeout_s kills it (a failure
// too). On SIGUSR1/SIGTERM, or when on_report returns false, every script gets SIGUSR1:
// prism_train.should_stop() turns true, and a script that then checkpoints, reports and
// returns ends the run as preempted (TrainingPreemptedError).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "prism/train/trainer.h"

namespace prism::train {

struct ScriptTrainerOptions {
  ScalingConfig scaling_config;
  RunConfig run_config;
  /// "torch" (torchrun's variables) or "tensorflow" (TF_CONFIG).
  std::string backend = "torch";
  /// Start from this checkpoint (else the run's newest intact one, else none).
  std::optional<Checkpoint> resume_from_checkpoint;
  /// A worker whose script has not called prism_train.report for this long (since it
  /// started or since its last report) is killed and counts as failed. 0: no limit.
  double report_timeout_s = 3600;
  /// Extra environment variables for every script (over the rank's own; Prism's variables
  /// above win over them, except OMP_NUM_THREADS, which is only set when absent).
  std::map<std::string, std::string> env;
  /// The scripts' working directory (default: the ranks').
  std::string working_dir;
};

class ScriptTrainer {
 public:
  /// `command`: the program and its arguments, run as is (no shell); the program is looked
  /// up in PATH when it has no '/'.
  ScriptTrainer(std::vector<std::string> command, ScriptTrainerOptions options = {});
  /// Runs the command on every worker until all exit. Throws prism::Error on bad options
  /// (an empty command, a program not found, an unknown backend, more workers than the
  /// cluster can place, an unwritable storage path), TrainingFailedError after too many
  /// failures (with the failed script's exit status and last lines of stderr),
  /// TrainingPreemptedError when a SIGUSR1/SIGTERM stopped the scripts after a checkpoint.
  /// Call it on the driver (rank 0's main, after prism::Init); several Fits may run at once
  /// (each reserves its own workers), but not two of one ScriptTrainer.
  Result Fit();

 private:
  std::vector<std::string> command_;
  ScriptTrainerOptions options_;
};

/// The directory the scripts' PYTHONPATH gets, which holds the prism_train module:
/// $PRISM_PYTHON_DIR if set, else this build's python/ folder if it is still there, else
/// the installed one (<prefix>/lib/prism/python, the prefix Prism was configured with; after
/// `cmake --install --prefix` elsewhere, set PRISM_PYTHON_DIR). Throws prism::Error when
/// none holds it. Thread-safe.
std::string PrismPythonDir();

}  // namespace prism::train
