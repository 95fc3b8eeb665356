#pragma once
// Split and StreamingSplit (internal): the arithmetic of splits (pure logic) and the
// coordinator actor of a StreamingSplit. split.cc explains how they run.

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "data/union_zip.h"

namespace prism::data::internal {

/// Ray's split without equal (np.array_split of the blocks): n runs [begin, end) of
/// consecutive blocks whose lengths differ by at most one, the longer ones first. Pure.
std::vector<std::pair<size_t, size_t>> SplitBlockRanges(size_t blocks, int n);

/// The rows of each of n equal splits of `total` rows: total / n each (the remainder, at
/// most n - 1 rows, is dropped). Pure.
std::vector<int64_t> EqualSplitRows(int64_t total, int n);

/// Hands a stream of blocks to n consumers as they ask (Ray's OutputSplitter). Blocks are
/// ids with row counts; a consumer gets Pieces (piece.block is the id). Without equal, the
/// consumer that asks gets the next block. With equal, a block goes to the consumer that
/// asks only while the blocks held back can still bring every other consumer up to it
/// (held-back rows >= the sum over consumers of (most rows given - rows given)); at the
/// end (Finish) the held-back blocks are cut into each consumer's remainder, so all end
/// with (rows in the stream) / n rows each, at most n - 1 rows dropped. A consumer that
/// stops asking never stalls the others: their blocks come from the held-back ones. Pure;
/// not thread-safe.
class StreamSplitter {
 public:
  StreamSplitter(int n, bool equal);
  /// A block of the stream (blocks without rows are dropped).
  void Add(int64_t id, int64_t rows);
  /// The next piece for `split`: from its queue after Finish, else a held-back block if
  /// it may have it now. std::nullopt: Add more blocks (or Finish), or after Finish, the
  /// split has had all its rows.
  std::optional<Piece> Take(int split);
  /// No more blocks: the held-back ones are cut into the splits' queues.
  void Finish();
  bool finished() const { return finished_; }
  /// Rows given to (or queued for) `split` so far.
  int64_t assigned(int split) const { return assigned_.at(static_cast<size_t>(split)); }
  /// The pieces queued for `split` after Finish, not yet taken.
  const std::deque<Piece>& queue(int split) const { return queues_.at(static_cast<size_t>(split)); }
  /// Rows held back (not given to any split yet).
  int64_t buffered_rows() const;

 private:
  bool MayGive(int split, int64_t rows) const;

  int n_;
  bool equal_;
  std::deque<Piece> buffer_;
  std::vector<int64_t> assigned_;
  std::vector<std::deque<Piece>> queues_;
  bool finished_ = false;
};

}  // namespace prism::data::internal
