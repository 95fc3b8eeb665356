#pragma once
// The consumer's side of IterBatches (internal): turns the executor's stream of blocks into
// batches of exactly batch_size rows. batcher.cc explains what it does to be fast.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "data/executor.h"
#include "prism/data/block.h"

namespace prism::data::internal {

/// Re-batches blocks for one consumer thread. Not thread-safe.
class Batcher {
 public:
  /// The next block of the stream, std::nullopt at its end (the executor's Next).
  using NextHandle = std::function<std::optional<BlockHandle>()>;

  Batcher(int64_t batch_size, int prefetch_batches, bool drop_last, int fetch_timeout_ms);
  /// Leaves its idle buffers to the next Batcher (up to a process-wide bound).
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  /// The next batch (batch_size rows; the last smaller unless drop_last), std::nullopt at
  /// the end. Throws what `next` and the fetches throw (prism::Error, TimeoutError).
  std::optional<Block> Next(const NextHandle& next);

  /// Batches handed out as slices of one block (no copy) and concatenated ones.
  int64_t sliced_batches() const { return sliced_; }
  int64_t copied_batches() const { return copied_; }

 private:
  struct Pending {
    BlockHandle handle;
    std::optional<Block> block;  // fetched (and cut to handle.rows()), else not yet
    int64_t offset = 0;          // rows of it already handed out
    int64_t rows() const { return handle.rows() - offset; }
  };
  /// The rows of `p` not handed out yet, fetched to this rank.
  Block Take(Pending& p);
  /// Copies `pieces` (one schema) into one batch, in a reused buffer when one is free.
  Block Concat(const std::vector<Block>& pieces);

  const int64_t batch_size_;
  const int prefetch_batches_;
  const bool drop_last_;
  const int fetch_timeout_ms_;
  std::deque<Pending> pending_;
  int64_t pending_rows_ = 0;
  size_t requested_ = 0;  // pending_[0, requested_) have had their pulls started
  bool exhausted_ = false;
  /// Bytes of a concatenated batch; uninitialized (the copy writes every byte).
  struct Buffer {
    explicit Buffer(size_t n) : data(new char[n]), size(n) {}
    std::unique_ptr<char[]> data;
    size_t size;
  };
  /// An idle buffer of at least `bytes` an earlier Batcher left, or null.
  static std::shared_ptr<Buffer> Unshelve(size_t bytes);
  /// Buffers of earlier concatenated batches: reused once no batch refers to them.
  std::vector<std::shared_ptr<Buffer>> buffers_;
  int64_t sliced_ = 0;
  int64_t copied_ = 0;
};

}  // namespace prism::data::internal
