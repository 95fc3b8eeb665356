#pragma once
// What the Data readers' fuzz targets share: reading every byte of a block, so that a
// column whose buffer is shorter than its rows say shows as an AddressSanitizer report.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "prism/data/block.h"

namespace prism::fuzz {

/// Reads every value of every column (string rows included); returns a checksum so the
/// reads are not optimized away.
inline uint64_t TouchBlock(const prism::data::Block& block) {
  uint64_t sum = 0;
  for (size_t c = 0; c < block.num_columns(); ++c) {
    const prism::data::Column& column = block.column_at(c).second;
    if (column.rows() != block.num_rows()) std::abort();
    if (column.dtype() == prism::data::DType::kString) {
      for (int64_t r = 0; r < column.rows(); ++r) {
        for (char ch : column.StringAt(r)) sum += static_cast<unsigned char>(ch);
      }
      continue;
    }
    // The values the column claims (rows x row elements) must be the bytes it holds: a
    // product that wrapped around would let a reader index past the buffer.
    unsigned __int128 claimed = prism::data::DTypeSize(column.dtype());
    claimed *= static_cast<uint64_t>(column.rows());
    for (int64_t d : column.row_shape()) {
      if (claimed > UINT64_MAX) break;  // stays below 2^128 either way
      claimed *= static_cast<uint64_t>(d);
    }
    if (claimed != column.size_bytes()) {
      std::fprintf(stderr, "prism fuzz: a column's rows and row shape claim more values than it holds\n");
      std::abort();
    }
    const auto* bytes = static_cast<const unsigned char*>(column.data());
    for (size_t i = 0; i < column.size_bytes(); ++i) sum += bytes[i];
  }
  return sum;
}

}  // namespace prism::fuzz
