#pragma once
// A Block's wire format written from pieces (internal to prism::data): the bytes
// Serializer<Block>::Write writes for the block made of `runs` of rows of `sources`, written
// straight into an object's buffer (platform::PutWritten) without building that block first.
// The all-to-all exchange gathers each output block this way: one copy of each row from
// the received buckets into the store, not two.

#include <cstdint>
#include <vector>

#include "prism/data/block.h"
#include "prism/serialization.h"

namespace prism::data::internal {

/// Every column's bytes start on a multiple of kAlign bytes (a cache line; NumPy and
/// LibTorch views need no copy), as do the all-to-all exchange's pieces and the batcher's.
inline constexpr uint64_t kAlign = 64;
inline uint64_t AlignUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// `count` rows of sources[source] from row `begin`.
struct RowRun {
  int32_t source = 0;
  int64_t begin = 0;
  int64_t count = 0;
};

/// A block's head: the magic, the column count and the row count.
void WriteBlockHead(prism::internal::Writer& w, uint64_t columns, int64_t rows);
/// A column's head up to its bytes: dtype, row shape, rows, then the pad that puts the bytes
/// after the next u64 length on a 64-byte boundary.
void WriteColumnHead(prism::internal::Writer& w, DType dtype, const std::vector<int64_t>& row_shape, int64_t rows);
/// The first of `sources` that has columns (every source with rows has the same schema;
/// empty ones may have none), or nullptr.
const Block* FirstWithColumns(const std::vector<Block>& sources);
/// At least the bytes WriteGatheredBlock writes (a reservation for PutWritten).
uint64_t GatheredBlockBytes(const std::vector<Block>& sources, const std::vector<RowRun>& runs);
/// Writes the block of `runs` (the columns of the first source that has any; every source
/// with rows has the same schema) as Serializer<Block>::Write would write it.
void WriteGatheredBlock(prism::internal::Writer& w, const std::vector<Block>& sources,
                        const std::vector<RowRun>& runs);

}  // namespace prism::data::internal
