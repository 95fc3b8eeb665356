#pragma once
// The pure pieces of prism::collective's algorithms, with no MPI and no shared memory, so that
// unit tests can check them alone: element-wise reductions, and how a buffer is cut into
// members' parts, pipeline blocks and message chunks.

#include <algorithm>
#include <cstdint>
#include <string>

#include "prism/collective.h"

namespace prism::collective::internal {

/// A half-open range of elements [begin, end).
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

/// Part `i` of `count` elements cut into `parts` balanced, contiguous parts in order (sizes
/// differ by at most one; with count < parts, some parts are empty). Every member computes
/// the same cut from the same count.
inline Range PartOf(int64_t count, int parts, int i) {
  return {count * i / parts, count * (i + 1) / parts};
}

/// Piece `k` of a range of `size` elements cut into pieces of at most `max_piece` elements
/// (the last one may be shorter); NumPieces of an empty range is 0.
inline int64_t NumPieces(int64_t size, int64_t max_piece) {
  return size <= 0 ? 0 : (size + max_piece - 1) / max_piece;
}
inline Range PieceOf(int64_t size, int64_t max_piece, int64_t k) {
  return {k * max_piece, std::min(size, (k + 1) * max_piece)};
}

/// Whether `op` is defined on `type` (kAverage needs a floating type).
bool Supports(DataType type, ReduceOp op);

/// dst[i] = a[i] op b[i] for i < count (dst may be a). kAverage sums here: the caller
/// divides once every member's contribution is in (Finish).
void Combine(DataType type, ReduceOp op, void* dst, const void* a, const void* b, int64_t count);

/// For kAverage, dst[i] /= members; nothing for the other operations.
void Finish(DataType type, ReduceOp op, void* dst, int64_t count, int members);

/// The message for a type/op pair that Supports rejects.
std::string UnsupportedText(DataType type, ReduceOp op);

}  // namespace prism::collective::internal
