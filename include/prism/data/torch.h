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

#include <map>
#include <string>

#include "prism/data/block.h"

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

}  // namespace prism::data
