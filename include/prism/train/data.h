#pragma once
// Data for a training group: an in-memory tensor dataset, each worker's shard of it, and
// Fashion-MNIST from the Debian package dataset-fashion-mnist.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace prism::train {

/// Inputs and targets, indexed along the first dimension.
struct TensorDataset {
  torch::Tensor inputs;
  torch::Tensor targets;
  int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

/// A worker's share of a dataset (Ray's prepared DataLoader with a DistributedSampler):
/// the dataset is split into world-size disjoint shards of equal length (padded by wrapping
/// around, as torch's DistributedSampler does), reshuffled each epoch from (seed, epoch) so
/// every worker agrees, and batches are moved to the worker's device.
class DataLoader {
 public:
  DataLoader(TensorDataset dataset, int64_t batch_size, bool shuffle, uint64_t seed, int rank,
             int world_size, torch::Device device = torch::kCPU, bool drop_last = false);
  /// Picks the epoch's shuffle; call before each epoch.
  void SetEpoch(int64_t epoch);
  /// This worker's batches for the current epoch.
  std::vector<Batch> Batches() const;
  int64_t NumBatches() const;
  /// Samples in this worker's shard.
  int64_t ShardSize() const { return shard_size_; }

 private:
  std::vector<int64_t> ShardIndices() const;
  TensorDataset dataset_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  int rank_;
  int world_size_;
  torch::Device device_;
  bool drop_last_;
  int64_t epoch_ = 0;
  int64_t shard_size_ = 0;
};

/// Where Debian's dataset-fashion-mnist puts the IDX files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Reads Fashion-MNIST ("train": 60000 images, "test": 10000) from `dir`
/// ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]): inputs float [N,1,28,28] scaled to
/// [0,1] and normalised (mean 0.2860, std 0.3530), targets int64 [N]. Throws prism::Error
/// naming the missing file and the package to install when the files are not there.
TensorDataset LoadFashionMnist(const std::string& split, const std::string& dir = kFashionMnistDir);

}  // namespace prism::train
