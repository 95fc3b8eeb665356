#pragma once
// TorchTrainer: runs a training loop on a group of workers, one per rank, placed by a
// placement group (Ray Train's TorchTrainer).

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "prism/data/dataset.h"
#include "prism/errors.h"
#include "prism/train/checkpoint.h"
#include "prism/train/config.h"

namespace prism::train {

/// Fit gave up: a worker failed more than FailureConfig::max_failures times. what() has the
/// cause (the worker's error type and message).
class TrainingFailedError : public Error {
 public:
  using Error::Error;
};

/// Fit stopped early because the job got SIGUSR1 or SIGTERM (a Slurm time-limit warning or
/// preemption, see prism/preemption.h): the workers stopped after committing a checkpoint,
/// so nothing is lost. Exit with prism::kExitPreempted so the job script requeues; a new
/// Fit of the same name and storage_path resumes from CheckpointPath().
class TrainingPreemptedError : public Error {
 public:
  TrainingPreemptedError(const std::string& what, int signal, std::string checkpoint_path)
      : Error(what), signal_(signal), checkpoint_path_(std::move(checkpoint_path)) {}
  /// SIGUSR1 or SIGTERM.
  int Signal() const { return signal_; }
  /// The checkpoint committed last (the one a new Fit resumes from).
  const std::string& CheckpointPath() const { return checkpoint_path_; }

 private:
  int signal_;
  std::string checkpoint_path_;
};

struct ScalingConfig {
  int num_workers = 1;
  /// The fewest workers a restart may run on (Ray Train's elastic range, min..num_workers):
  /// after a worker's rank is lost (mpirun --enable-recovery), Fit restarts the group from
  /// the latest checkpoint on as many of num_workers as the ranks left can hold, if that
  /// is at least min_workers. 0 (the default): num_workers, a fixed size.
  int min_workers = 0;
  bool use_gpu = false;
  /// Per worker; default {CPU: 1} ({CPU: 1, GPU: 1} with use_gpu).
  std::map<std::string, double> resources_per_worker;
  /// How workers spread over nodes: "PACK" (fill a node first), "SPREAD", "STRICT_PACK",
  /// "STRICT_SPREAD". Workers always sit on distinct ranks.
  std::string placement_strategy = "PACK";
};

struct FailureConfig {
  /// Group restarts (from the latest checkpoint) before Fit fails; -1: unlimited.
  int max_failures = 0;
};

struct RunConfig {
  /// The run's name. Default: "TorchTrainer_<job id>" under Slurm (array tasks get their
  /// own, "<job>_<task>"; a requeued job keeps its id, so it resumes its run), else
  /// "TorchTrainer_<timestamp>".
  std::string name;
  /// Where runs live (default: $PRISM_STORAGE_PATH, else ~/prism_results). Use a shared
  /// file system when ranks sit on several nodes.
  std::string storage_path;
  CheckpointConfig checkpoint_config;
  FailureConfig failure_config;
  /// Print each report on the driver's console.
  bool verbose = true;
  /// Called on Fit's thread for each report as the driver receives it: the metrics and the
  /// checkpoint committed with it (if any). Returning false asks the workers to stop at
  /// their next Report (after committing its checkpoint), and Fit then returns normally.
  /// For libraries: prism::tune runs a TorchTrainer as a trial through it.
  std::function<bool(const Metrics&, const std::optional<Checkpoint>&)> on_report;
};

struct TorchTrainerOptions {
  Config train_loop_config;
  ScalingConfig scaling_config;
  RunConfig run_config;
  /// Start from this checkpoint (else the run's newest intact one if the run has any, else
  /// none). A committed checkpoint given here is verified too: a damaged one throws.
  std::optional<Checkpoint> resume_from_checkpoint;
  /// Datasets the workers read by name (Ray's TorchTrainer(datasets=...)): for each, Fit
  /// makes one StreamingSplit(num_workers, equal=true) per attempt, and each worker reads
  /// its shard with GetDatasetShard(name) (equal row counts, so no worker waits for the
  /// others at an all-reduce). Every IterBatches on a shard is one epoch, which runs the
  /// dataset again; all workers must start each epoch. The coordinators run on the
  /// driver's rank.
  std::map<std::string, data::Dataset> datasets;
};

struct ReportedCheckpoint {
  Checkpoint checkpoint;
  Metrics metrics;
};

struct Result {
  Metrics metrics;                        // the last report
  std::optional<Checkpoint> checkpoint;   // the latest committed
  std::vector<ReportedCheckpoint> best_checkpoints;  // those kept, best first
  std::string path;                       // storage_path/name
  std::string error;                      // empty on success
  std::vector<Metrics> metrics_history;   // every report of this and earlier attempts
  /// The failures Fit restarted the group from (a worker's error, or its rank lost), oldest
  /// first; empty when the first attempt finished.
  std::vector<std::string> failures;
};

/// The training loop: a function registered with PRISM_REMOTE, taking the config.
using TrainLoop = void (*)(Config);

class TorchTrainer {
 public:
  TorchTrainer(TrainLoop train_loop_per_worker, TorchTrainerOptions options = {});
  /// The loop by the name it was registered under (platform::RegisteredName): for
  /// libraries that start a trainer on another rank, where function addresses differ.
  TorchTrainer(std::string loop_name, TorchTrainerOptions options);
  /// Runs the loop on the group until every worker returns. A resume starts from the
  /// newest checkpoint whose files match their commit's checksums (newer, damaged ones are
  /// named on stderr and skipped). Throws TrainingFailedError after too many failures or
  /// when the run has checkpoints and none is intact, TrainingPreemptedError when a
  /// SIGUSR1/SIGTERM stopped it after a checkpoint, prism::Error on bad options (more
  /// workers than the cluster can place, an unwritable storage path or one the workers'
  /// ranks cannot see, an unregistered loop).
  Result Fit();

 private:
  TrainLoop loop_ = nullptr;
  std::string loop_name_;
  TorchTrainerOptions options_;
};

}  // namespace prism::train
