#pragma once
// Helpers the prism::data tests share: int64 columns and datasets as vectors to compare
// with expected rows. Needs prism::data (Dataset); the generic ones: tests/common/test_util.h.
#include <cstdint>
#include <string>
#include <vector>

#include "prism/data/block.h"
#include "prism/data/dataset.h"

namespace prism_test {

/// The integers begin, begin + 1, ..., end - 1 (empty if end <= begin).
inline std::vector<int64_t> Iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

/// The values of `block`'s int64 column `column`, in row order.
inline std::vector<int64_t> IdsOf(const prism::data::Block& block, const std::string& column = "id") {
  auto v = block.GetColumn(column).Values<int64_t>();
  return {v.begin(), v.end()};
}

/// The values of `dataset`'s int64 column `column`, in order (runs the dataset: batches
/// of 64 rows).
inline std::vector<int64_t> AllIds(const prism::data::Dataset& dataset, const std::string& column = "id") {
  std::vector<int64_t> out;
  for (const prism::data::Block& batch : dataset.IterBatches(64)) {
    for (int64_t x : IdsOf(batch, column)) out.push_back(x);
  }
  return out;
}

}  // namespace prism_test
