#pragma once
// Blocks and torch tensors, without copies (prism::data with LibTorch; target
// prism_data_torch).
//
//   torch::Tensor images = prism::data::ToTensor(block.GetColumn("image"));  // [rows, 28, 28]
//   auto batch = prism::data::ToTensors(block);             // {"image": ..., "label": ...}
//   Column c = prism::data::FromTensor(model_output);       // holds the tensor, no copy
//
// A tensor made by ToTensor is a CPU tensor over the column's bytes (shape {rows, row
// shape...}) whose storage holds the column's owner: the bytes stay valid for as long as
// the tensor lives, even after the block is gone, and when the block was read from the
// object store the tensor reads the store's buffer in place. Those bytes are shared with
// every other reader: clone() the tensor before writing to it in place.

#include <torch/torch.h>

#include <iterator>
#include <map>
#include <optional>
#include <string>

#include "prism/data/block.h"
#include "prism/data/dataset.h"
#include "prism/data/next_iterator.h"

namespace prism::data {

/// The torch dtype of a fixed-width DType (bool -> kBool, uint8 -> kByte, ...). Throws
/// prism::Error for string.
torch::ScalarType ToScalarType(DType dtype);

/// A CPU tensor of shape {rows, row_shape...} over the column's bytes, no copy (a copy
/// only if the bytes are misaligned for the dtype). Throws prism::Error for a string
/// column.
torch::Tensor ToTensor(const Column& column);

/// A column over a tensor's elements: dimension 0 is the rows, the others the row shape.
/// No copy for a contiguous CPU tensor (the column holds the tensor); other tensors are
/// first copied to a contiguous CPU one. Throws prism::Error for an undefined or
/// 0-dimensional tensor or a dtype without a DType (half, int16, ...), naming what to do.
Column FromTensor(const torch::Tensor& tensor);

/// ToTensor of every column, by name. Throws prism::Error naming a string column (drop it
/// with DropColumns first).
std::map<std::string, torch::Tensor> ToTensors(const Block& block);

/// One batch as CPU tensors by column name (Ray's iter_torch_batches' dict of tensors).
using TorchBatch = std::map<std::string, torch::Tensor>;

/// The batches of a BatchIterator as tensors (Dataset::IterTorchBatches,
/// DataIterator::IterTorchBatches): ToTensors of each batch, so a tensor reads the batch's
/// bytes in place (a batch cut from one block is a view of it; one that spans blocks is
/// one copy). Move the tensors to a device with .to(device). Move-only; one thread.
///
///   for (TorchBatch& batch : ds.IterTorchBatches(128)) Train(batch["image"], batch["label"]);
class TorchBatchIterator {
 public:
  explicit TorchBatchIterator(BatchIterator batches) : batches_(std::move(batches)) {}

  /// The next batch; std::nullopt at the end. Throws what BatchIterator::Next throws, and
  /// prism::Error for a string column (drop it with DropColumns first).
  std::optional<TorchBatch> Next();
  /// What the execution did so far (empty for a DataIterator's: its coordinator runs it).
  DatasetStats Stats() const { return batches_.Stats(); }

  /// Input iterator for range-for: `for (TorchBatch& batch : it)`.
  using iterator = NextIterator<TorchBatchIterator, TorchBatch>;
  /// Starts the iteration (takes the first batch).
  iterator begin() { return iterator(this); }
  iterator end() { return iterator(); }

 private:
  BatchIterator batches_;
};

}  // namespace prism::data
