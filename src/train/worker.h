#pragma once
// What the driver (TorchTrainer::Fit) and a training worker share: the worker's spec, the
// report records world rank 0 sends the driver (WorkerContext::Report), and the worker's
// entry point, which trainer.cc runs as a platform::WorkerGroup loop.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prism/data/dataset.h"
#include "prism/train/checkpoint.h"
#include "prism/train/config.h"

namespace prism::train::internal {

struct WorkerSpec {
  std::string run_id;  // unique per Fit call
  int attempt = 0;  // the WorkerGroup's
  std::vector<int> world_ranks;  // the group's MPI ranks, by world rank (from the WorkerGroup)
  int world_rank = 0, local_rank = 0, local_world_size = 1, node_rank = 0;
  std::string experiment_name, trial_dir, loop_name;
  Config config;
  std::string resume_path;  // checkpoint to resume from; empty: none
  CheckpointConfig checkpoint_config;
  bool use_gpu = false;
  /// TorchTrainerOptions::datasets: by name, one StreamingSplit iterator per world rank.
  std::map<std::string, std::vector<data::DataIterator>> dataset_shards;

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& run_id& attempt& world_ranks& world_rank& local_rank& local_world_size& node_rank;
    ar& experiment_name& trial_dir& loop_name& config& resume_path& checkpoint_config& use_gpu;
    ar& dataset_shards;
  }
};

/// One Report of world rank 0, as the driver reads it.
struct ReportRecord {
  int attempt = 0;
  int64_t iteration = 0;  // 1, 2, ... within the attempt
  Metrics metrics;
  std::string checkpoint_path;  // committed checkpoint; empty: none
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& attempt& iteration& metrics& checkpoint_path;
  }
};

/// How a worker ended (when it did not throw).
struct WorkerOutcome {
  int64_t reports = 0;
  bool stopped = false;  // stopped early on the driver's request, after a checkpoint
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& reports& stopped;
  }
};

/// Runs the user's loop as one worker of the group, inside a platform::WorkerGroup's loop
/// (its reports go to the driver through CurrentWorker(); an abort makes every collective
/// throw CollectiveAborted; a stop request ends it at the next Report with a checkpoint).
/// Throws what the loop throws.
WorkerOutcome RunWorker(const WorkerSpec& spec);

/// result.json (one JSON object per report) and progress.csv in the run directory.
void AppendHistory(const std::string& trial_dir, const ReportRecord& record);
/// The metrics of every report in result.json, oldest first.
std::vector<Metrics> ReadHistory(const std::string& trial_dir);

}  // namespace prism::train::internal
