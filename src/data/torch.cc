// Blocks and torch tensors without copies (prism/data/torch.h): a tensor from a column is
// torch::from_blob over the column's bytes with a deleter that holds the column's owner;
// a column from a tensor holds a copy of the tensor handle (sharing its storage).

#include "prism/data/torch.h"

#include <cstdint>
#include <cstring>
#include <memory>

namespace prism::data {

torch::ScalarType ToScalarType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return torch::kFloat32;
    case DType::kFloat64:
      return torch::kFloat64;
    case DType::kInt32:
      return torch::kInt32;
    case DType::kInt64:
      return torch::kInt64;
    case DType::kUInt8:
      return torch::kUInt8;
    case DType::kBool:
      return torch::kBool;
    case DType::kString:
      break;
  }
  throw Error(
      "prism::data: a string column has no torch dtype: drop it (DropColumns) or "
      "encode it as numbers before converting to tensors");
}

torch::Tensor ToTensor(const Column& column) {
  const auto type = ToScalarType(column.dtype());
  std::vector<int64_t> sizes{column.rows()};
  sizes.insert(sizes.end(), column.row_shape().begin(), column.row_shape().end());
  auto options = torch::TensorOptions().dtype(type);
  const size_t bytes = column.size_bytes();
  if (bytes == 0) return torch::empty(sizes, options);
  if (reinterpret_cast<uintptr_t>(column.data()) % DTypeSize(column.dtype()) != 0) {
    torch::Tensor t = torch::empty(sizes, options);
    std::memcpy(t.data_ptr(), column.data(), bytes);
    return t;
  }
  auto* keep = new std::shared_ptr<const void>(column.owner());  // released by the storage
  return torch::from_blob(
      const_cast<void*>(column.data()), sizes, [keep](void*) { delete keep; }, options);
}

Column FromTensor(const torch::Tensor& tensor) {
  if (!tensor.defined()) throw Error("prism::data: FromTensor of an undefined tensor");
  if (tensor.dim() == 0) {
    throw Error(
        "prism::data: FromTensor of a 0-dimensional tensor: a column needs a row "
        "dimension (unsqueeze(0) it for one row)");
  }
  DType dtype;
  switch (tensor.scalar_type()) {
    case torch::kFloat32:
      dtype = DType::kFloat32;
      break;
    case torch::kFloat64:
      dtype = DType::kFloat64;
      break;
    case torch::kInt32:
      dtype = DType::kInt32;
      break;
    case torch::kInt64:
      dtype = DType::kInt64;
      break;
    case torch::kUInt8:
      dtype = DType::kUInt8;
      break;
    case torch::kBool:
      dtype = DType::kBool;
      break;
    default:
      throw Error(std::string("prism::data: a column cannot hold ") +
                  c10::toString(tensor.scalar_type()) +
                  " tensors: convert with .to(torch::kFloat32) (or kInt64) first");
  }
  torch::Tensor t = tensor.device().is_cpu() ? tensor : tensor.to(torch::kCPU);
  t = t.contiguous();  // no copy if it already is
  auto held = std::make_shared<torch::Tensor>(t);
  std::vector<int64_t> row_shape(t.sizes().begin() + 1, t.sizes().end());
  const void* data = t.numel() > 0 ? t.data_ptr() : nullptr;
  return Column::Wrap(dtype, t.size(0), std::move(row_shape), data, std::move(held));
}

std::map<std::string, torch::Tensor> ToTensors(const Block& block) {
  std::map<std::string, torch::Tensor> out;
  for (size_t i = 0; i < block.num_columns(); ++i) {
    const auto& [name, column] = block.column_at(i);
    if (column.dtype() == DType::kString) {
      throw Error("prism::data: ToTensors: column \"" + name +
                  "\" holds strings, which have no "
                  "tensor: drop it first (block.DropColumns({\"" +
                  name + "\"}))");
    }
    out.emplace(name, ToTensor(column));
  }
  return out;
}

// ---- Batches as tensors -------------------------------------------------------------------

std::optional<TorchBatch> TorchBatchIterator::Next() {
  std::optional<Block> batch = batches_.Next();
  if (!batch) return std::nullopt;
  return ToTensors(*batch);
}

TorchBatchIterator Dataset::IterTorchBatches(int64_t batch_size, int prefetch_batches, bool drop_last,
                                             int64_t local_shuffle_buffer_size,
                                             std::optional<uint64_t> local_shuffle_seed) const {
  return TorchBatchIterator(
      IterBatches(batch_size, prefetch_batches, drop_last, local_shuffle_buffer_size, local_shuffle_seed));
}

TorchBatchIterator DataIterator::IterTorchBatches(int64_t batch_size, int prefetch_batches,
                                                  bool drop_last, int64_t local_shuffle_buffer_size,
                                                  std::optional<uint64_t> local_shuffle_seed) const {
  return TorchBatchIterator(
      IterBatches(batch_size, prefetch_batches, drop_last, local_shuffle_buffer_size, local_shuffle_seed));
}

}  // namespace prism::data
