#pragma once
// What a training loop calls from inside a worker (Ray's ray.train.* functions). Outside a
// worker they throw prism::Error.

#include <torch/torch.h>

#include <optional>
#include <string>

#include "prism/data/dataset.h"
#include "prism/train/checkpoint.h"
#include "prism/train/config.h"
#include "prism/train/data.h"

namespace prism::train {

class Collective;

/// Who this worker is (Ray's TrainContext).
class TrainContext {
 public:
  int GetWorldRank() const { return world_rank_; }
  int GetLocalRank() const { return local_rank_; }
  int GetWorldSize() const { return world_size_; }
  int GetLocalWorldSize() const { return local_world_size_; }
  int GetNodeRank() const { return node_rank_; }
  const std::string& GetExperimentName() const { return experiment_name_; }
  /// The storage directory of this run (storage_path/name).
  const std::string& GetTrialDir() const { return trial_dir_; }
  /// The device this worker trains on: CPU, or with use_gpu the GPU its task holds
  /// (cuda:<GetGpuDeviceIndices()[0]>, its index among the rank's visible devices).
  torch::Device GetDevice() const { return device_; }
  /// The group's collectives (all-reduce, broadcast, all-gather, barrier).
  Collective& GetCollective() const;

 private:
  friend struct WorkerAccess;
  int world_rank_ = 0, local_rank_ = 0, world_size_ = 1, local_world_size_ = 1, node_rank_ = 0;
  std::string experiment_name_, trial_dir_;
  torch::Device device_ = torch::kCPU;
  Collective* collective_ = nullptr;
};

/// This worker's context. Throws prism::Error outside a training worker.
const TrainContext& GetContext();

/// The checkpoint to resume from: the run's latest when this attempt resumes (after a
/// failure, or a new Fit of the same name and storage_path), else none.
std::optional<Checkpoint> GetCheckpoint();

/// Reports metrics (and optionally a checkpoint) for this step: a barrier across the group;
/// world rank 0's metrics are recorded (result.json, progress.csv) and shown on the
/// driver's console, and its checkpoint is committed to storage_path/name/checkpoint_NNNNNN.
/// When the job got SIGUSR1 or SIGTERM (prism/preemption.h), the first Report whose
/// checkpoint world rank 0 commits ends the loop on every worker: it returns by throwing a
/// private type that is not a std::exception (do not swallow it with `catch (...)`).
void Report(const Metrics& metrics, const std::optional<Checkpoint>& checkpoint = std::nullopt);

/// DDP: moves the module to the worker's device, broadcasts its parameters and buffers from
/// world rank 0, and from then on averages gradients across the group after each backward
/// pass (all-reduce in buckets of `bucket_bytes`, started while backward still runs).
/// Training on N workers matches one process on the concatenated batch.
template <typename ModuleHolder>
ModuleHolder PrepareModel(ModuleHolder module, size_t bucket_bytes = 25u << 20);
/// The untyped form PrepareModel uses.
void PrepareModule(const std::shared_ptr<torch::nn::Module>& module, size_t bucket_bytes);

template <typename ModuleHolder>
ModuleHolder PrepareModel(ModuleHolder module, size_t bucket_bytes) {
  PrepareModule(module.ptr(), bucket_bytes);
  return module;
}

/// This worker's shard of the dataset `name` of TorchTrainerOptions::datasets (Ray's
/// train.get_dataset_shard): an iterator over one equal share of every epoch, e.g.
///   for (auto& batch : GetDatasetShard("train").IterTorchBatches(128)) { ... }
/// (each IterBatches/IterTorchBatches call is one epoch: call it once per epoch on every
/// worker). Throws prism::Error outside a worker or for a name the trainer was not given
/// (listing the names it was).
data::DataIterator GetDatasetShard(const std::string& name);

/// This worker's shard of `dataset`, batched (see DataLoader). Call SetEpoch each epoch.
DataLoader PrepareDataLoader(TensorDataset dataset, int64_t batch_size, bool shuffle = true,
                             uint64_t seed = 0, bool drop_last = false);

}  // namespace prism::train
