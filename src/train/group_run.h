#pragma once
// The driver's side of a training run, shared by TorchTrainer (a registered C++ loop per
// worker) and ScriptTrainer (a process per worker): pick the run directory and the
// checkpoint to resume from, reserve one rank per worker with a platform::WorkerGroup,
// check the storage path is shared, then run attempts: start the group's loop, show world
// rank 0's reports (internal::ReportRecord) as they come, stop the group after its next
// checkpoint on SIGUSR1/SIGTERM (TrainingPreemptedError), and on a worker's failure abort
// the others and start again from the latest intact checkpoint, up to max_failures.
// What differs between the trainers is only what each attempt's workers are given
// (GroupRun::make_config) and the loop they run.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "prism/platform/worker_group.h"
#include "prism/train/trainer.h"

namespace prism::train::internal {

/// One attempt, as make_config sees it.
struct AttemptInfo {
  std::string run_id;    // unique per Fit call
  int attempt = 0;       // 0, 1, ... (restarts after failures)
  std::string name;      // the run's name
  std::string trial_dir; // storage_path/name
  std::string resume;    // checkpoint to resume from; empty: none
  const std::vector<platform::WorkerInfo>* workers = nullptr;  // where the workers are
};

struct GroupRun {
  /// "TorchTrainer", "ScriptTrainer": the default run name's prefix.
  std::string kind;
  ScalingConfig scaling;
  RunConfig run;
  std::optional<Checkpoint> resume_from_checkpoint;
  /// The WorkerGroup loop every worker runs (a registered name); its result is a
  /// WorkerOutcome's bytes, and world rank 0 reports ReportRecords.
  std::string loop_entry;
  /// The loop's config for one attempt (called on the driver before each Start).
  std::function<std::string(const AttemptInfo&)> make_config;
  /// Called once the group is reserved and the storage checked, before the first attempt
  /// (may throw a clear error about the workers' ranks).
  std::function<void(const std::vector<platform::WorkerInfo>&)> check_workers;
};

/// Runs `spec` to the end. Throws what TorchTrainer::Fit documents.
Result RunGroup(const GroupRun& spec);

/// A task of `fn` pinned to `rank` with no CPU (the rank's worker task holds its CPUs): how
/// the driver probes a worker's rank.
template <typename F>
auto PinnedToRank(F fn, int rank) {
  auto task = prism::Task(fn);
  task.SetResource("CPU", 0).SetResource("rank:" + std::to_string(rank), 0.001);
  return task;
}

}  // namespace prism::train::internal
