#pragma once
// A BatchIterator's state (internal): where its blocks come from (a Dataset's own
// execution, or a StreamingSplit coordinator) and the rows waiting to be batched.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "data/batcher.h"
#include "data/executor.h"

namespace prism::data::internal {

struct IteratorState {
  std::unique_ptr<StreamingExecutor> executor;
  /// Set instead of `executor` for a DataIterator: its coordinator's next block.
  BlockPuller next_block;
  int64_t batch_size = 0;
  int prefetch_batches = 0;
  bool drop_last = false;
  int fetch_timeout_ms = 0;
  std::deque<Block> pending;
  int64_t pending_rows = 0;
  bool exhausted = false;
  /// Re-batches the blocks (no local shuffle); made at the first batch.
  std::unique_ptr<Batcher> batcher;
  // Local shuffle (shuffle_buffer > 0): `shuffled` is the buffer in random order, handed
  // out from `shuffled_offset`; new blocks join it (and it is shuffled again) as it drains.
  int64_t shuffle_buffer = 0;
  std::mt19937_64 rng;
  Block shuffled;
  int64_t shuffled_offset = 0;
};

/// A new iterator's state with these settings, checked (prism::Error names `what`, e.g.
/// "Dataset::IterBatches", and the bad argument); its block source is still to be set.
std::unique_ptr<IteratorState> NewIteratorState(const char* what, int64_t batch_size,
                                                int prefetch_batches, bool drop_last,
                                                int64_t local_shuffle_buffer_size,
                                                std::optional<uint64_t> local_shuffle_seed);

/// The rows of `block` in the order `order` gives (any order; a copy of the values).
Block GatherRows(const Block& block, const std::vector<int64_t>& order);

}  // namespace prism::data::internal
