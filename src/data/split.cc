// Split and StreamingSplit (Ray Data's split and streaming_split).
//
// Split runs the plan to the end (its blocks stay in the object store) and hands out
// blocks: consecutive runs of them without equal, consecutive runs of Count() / n rows
// with equal (CutToBoundaries; a block cut at a run's end becomes a slice task's output,
// or the same object with fewer rows kept when the cut leaves its start).
//
// StreamingSplit starts a coordinator actor (SplitCoordinator) on the calling rank,
// threaded so that consumers waiting for an epoch do not block those taking blocks. It
// takes the plan from this process's memory (PlanRegistry: the actor runs in the same
// process, so the plan's ObjectRefs and shared statistics need no serializing) and, per
// epoch, runs one StreamingExecutor on its own threads. A consumer (DataIterator, sent to
// any task or actor) calls StartEpoch, which waits until every split has started the
// same epoch (the first epoch, and each IterBatches after, is one epoch for all); then
// Next, which gives the split a piece of a block: from the split's queue, or a block the
// StreamSplitter lets it have now, else the coordinator pulls the next block from the
// execution (under its lock: one pull at a time) and asks again. Blocks go out as
// ObjectRefs inside the reply; the consumer fetches the bytes from wherever the block
// is. An execution error ends the epoch for every split with that error.

#include "data/split.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>

#include "data/iterator_state.h"
#include "prism/api.h"
#include "prism/remote.h"
#include "prism/runtime_context.h"
#include "prism/task_caller.h"

namespace prism::data::internal {

// ---- Pure logic --------------------------------------------------------------------------

std::vector<std::pair<size_t, size_t>> SplitBlockRanges(size_t blocks, int n) {
  std::vector<std::pair<size_t, size_t>> out;
  const size_t splits = static_cast<size_t>(std::max(n, 1));
  const size_t base = blocks / splits, longer = blocks % splits;
  size_t begin = 0;
  for (size_t i = 0; i < splits; ++i) {
    const size_t size = base + (i < longer ? 1 : 0);
    out.emplace_back(begin, begin + size);
    begin += size;
  }
  return out;
}

std::vector<int64_t> EqualSplitRows(int64_t total, int n) {
  return std::vector<int64_t>(static_cast<size_t>(std::max(n, 1)), total / std::max(n, 1));
}

StreamSplitter::StreamSplitter(int n, bool equal)
    : n_(n), equal_(equal), assigned_(static_cast<size_t>(n), 0), queues_(static_cast<size_t>(n)) {}

void StreamSplitter::Add(int64_t id, int64_t rows) {
  if (rows > 0) buffer_.push_back(Piece{id, 0, rows});
}

int64_t StreamSplitter::buffered_rows() const {
  int64_t rows = 0;
  for (const Piece& p : buffer_) rows += p.rows();
  return rows;
}

bool StreamSplitter::MayGive(int split, int64_t rows) const {
  if (!equal_) return true;
  std::vector<int64_t> after = assigned_;
  after[static_cast<size_t>(split)] += rows;
  const int64_t most = *std::max_element(after.begin(), after.end());
  int64_t needed = 0;  // rows that must stay held back to bring every split up to `most`
  for (int64_t a : after) needed += most - a;
  return buffered_rows() - rows >= needed;
}

std::optional<Piece> StreamSplitter::Take(int split) {
  std::deque<Piece>& queue = queues_.at(static_cast<size_t>(split));
  if (!queue.empty()) {
    Piece p = queue.front();
    queue.pop_front();
    return p;
  }
  if (finished_ || buffer_.empty() || !MayGive(split, buffer_.front().rows())) return std::nullopt;
  Piece p = buffer_.front();
  buffer_.pop_front();
  assigned_[static_cast<size_t>(split)] += p.rows();
  return p;
}

void StreamSplitter::Finish() {
  if (finished_) return;
  finished_ = true;
  if (buffer_.empty()) return;
  std::vector<int64_t> need(static_cast<size_t>(n_), 0);
  if (equal_) {
    int64_t total = buffered_rows();
    for (int64_t a : assigned_) total += a;
    const int64_t each = total / n_;
    for (size_t i = 0; i < need.size(); ++i) need[i] = each - assigned_[i];
  } else {
    // Only blocks nobody asked for are left: one after another to the split with fewest.
    for (const Piece& p : buffer_) {
      size_t fewest = 0;
      for (size_t i = 1; i < need.size(); ++i) {
        if (assigned_[i] + need[i] < assigned_[fewest] + need[fewest]) fewest = i;
      }
      need[fewest] += p.rows();
    }
  }
  std::vector<int64_t> rows;
  for (const Piece& p : buffer_) rows.push_back(p.rows());
  std::vector<std::vector<Piece>> cuts = CutToBoundaries(need, rows);
  for (size_t i = 0; i < cuts.size(); ++i) {
    for (const Piece& c : cuts[i]) {
      const Piece& from = buffer_[static_cast<size_t>(c.block)];
      queues_[i].push_back(Piece{from.block, from.begin + c.begin, from.begin + c.end});
    }
    assigned_[i] += need[i];
  }
  buffer_.clear();
}

}  // namespace prism::data::internal

// ---- Tasks and the coordinator actor ------------------------------------------------------

namespace prism::data::internal {

/// Rows [begin, end) of a block, as a block of its own.
Block PrismDataSliceBlock(Block block, int64_t begin, int64_t end) { return block.Slice(begin, end); }

namespace {

int SplitTimeoutMs(const ExecutionOptions& options) {
  return static_cast<int>(std::min(1.0e9, std::max(1.0, options.task_timeout_s * 1000)));
}

/// The rows `piece` names of the block `h` (rows counted as h.rows()): the same object
/// when it is the whole block or its start, else a slice task's output.
BlockHandle PieceOf(const BlockHandle& h, const Piece& piece) {
  if (piece.begin == 0 && piece.end == h.rows()) return h;
  BlockHandle out = h;
  if (h.meta.rows > 0) {
    out.meta.bytes = h.meta.bytes * static_cast<uint64_t>(piece.rows()) / static_cast<uint64_t>(h.meta.rows);
  }
  if (piece.begin == 0) {
    out.keep_rows = piece.end;
    return out;
  }
  out.block = Task(PrismDataSliceBlock).Remote(h.block, piece.begin, piece.end);
  out.keep_rows = -1;
  out.meta.rows = piece.rows();
  return out;
}

/// Plans handed from StreamingSplit to its coordinator, which runs in the same process.
struct PlanRegistry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const DatasetState>> plans;
  uint64_t next = 0;

  static PlanRegistry& Instance() {
    static PlanRegistry registry;
    return registry;
  }
  std::string Add(std::shared_ptr<const DatasetState> plan) {
    std::lock_guard<std::mutex> lock(mutex);
    std::string key = "plan-" + std::to_string(next++);
    plans[key] = std::move(plan);
    return key;
  }
  std::shared_ptr<const DatasetState> Take(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = plans.find(key);
    if (it == plans.end()) return nullptr;
    auto plan = std::move(it->second);
    plans.erase(it);
    return plan;
  }
};

}  // namespace

/// StartEpoch's answer: the epoch the split is in, or why it could not start.
struct EpochStart {
  int64_t epoch = 0;
  std::string error;  // a timeout waiting for the other splits
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & epoch & error;
  }
};

/// Next's answer: a block for the split, the end of its epoch, or the execution's error.
struct SplitBlock {
  enum Status : int32_t { kBlock, kEnd, kError, kTimeout };
  int32_t status = kEnd;
  ObjectRef<Block> block;
  int64_t rows = 0;
  int64_t keep_rows = -1;
  std::string error;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & status & block & rows & keep_rows & error;
  }
};

/// The coordinator of one StreamingSplit (see the top of this file). Thread-safe: its
/// methods run on the actor's threads at once.
class SplitCoordinator {
 public:
  static SplitCoordinator* Create(std::string plan_key, int n, bool equal) {
    std::shared_ptr<const DatasetState> plan = PlanRegistry::Instance().Take(plan_key);
    if (!plan) {
      throw Error("prism::data: StreamingSplit's coordinator found no plan " + plan_key +
                  ": it must start in the process that called StreamingSplit (a bug)");
    }
    return new SplitCoordinator(std::move(plan), n, equal);
  }

  /// Starts `split`'s next epoch once every split has started it; waits up to
  /// `timeout_ms`.
  EpochStart StartEpoch(int split, int64_t timeout_ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (split < 0 || split >= n_) return {0, "prism::data: StreamingSplit: no split " + std::to_string(split)};
    const int64_t mine = ++started_[static_cast<size_t>(split)];
    if (*std::min_element(started_.begin(), started_.end()) >= mine && epoch_ < mine) {
      BeginEpoch(mine);
      changed_.notify_all();
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    if (!changed_.wait_until(lock, deadline, [&] { return epoch_ >= mine; })) {
      std::string missing;
      for (int j = 0; j < n_; ++j) {
        if (started_[static_cast<size_t>(j)] < mine) missing += (missing.empty() ? "" : ", ") + std::to_string(j);
      }
      --started_[static_cast<size_t>(split)];  // it may try again
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.1f", static_cast<double>(timeout_ms) / 1000.0);
      return {0, "prism::data: StreamingSplit: split " + std::to_string(split) + " waited " +
                     waited + " s for epoch " + std::to_string(mine) +
                     " to start, but split(s) " + missing +
                     " did not start it (every split's iterator must call IterBatches once per "
                     "epoch: an epoch runs for all consumers together)"};
    }
    return {mine, ""};
  }

  /// The next piece of a block for `split` in `epoch`.
  SplitBlock Next(int split, int64_t epoch) {
    std::lock_guard<std::mutex> lock(mutex_);
    SplitBlock out;
    if (split < 0 || split >= n_ || epoch != epoch_) return out;  // that epoch is over
    for (;;) {
      if (failed_) {
        out.status = timed_out_ ? SplitBlock::kTimeout : SplitBlock::kError;
        out.error = *failed_;
        return out;
      }
      if (std::optional<Piece> piece = splitter_.Take(split)) return Hand(*piece);
      if (splitter_.finished()) return out;
      if (!executor_) executor_ = Execute(*plan_, plan_->ops);
      std::optional<BlockHandle> h;
      try {
        h = executor_->Next();
      } catch (const TimeoutError& e) {
        Fail(e.what(), true);
        continue;
      } catch (const std::exception& e) {
        Fail(e.what(), false);
        continue;
      }
      if (!h) {
        splitter_.Finish();
        CountPieces();
        continue;
      }
      if (h->rows() == 0) continue;
      const int64_t id = next_id_++;
      splitter_.Add(id, h->rows());
      pieces_left_[id] = 1;
      blocks_[id] = std::move(*h);
    }
  }

 private:
  SplitCoordinator(std::shared_ptr<const DatasetState> plan, int n, bool equal)
      : plan_(std::move(plan)), n_(n), equal_(equal), started_(static_cast<size_t>(n), 0), splitter_(n, equal) {}

  void BeginEpoch(int64_t epoch) {
    executor_.reset();  // cancels what the last epoch still ran
    splitter_ = StreamSplitter(n_, equal_);
    blocks_.clear();
    pieces_left_.clear();
    failed_.reset();
    timed_out_ = false;
    epoch_ = epoch;
  }

  void Fail(const std::string& message, bool timeout) {
    failed_ = message;
    timed_out_ = timeout;
    executor_.reset();
    blocks_.clear();
  }

  // After Finish: how many pieces each held-back block was cut into; blocks whose rows
  // were all dropped are let go.
  void CountPieces() {
    std::map<int64_t, int> counts;
    for (int s = 0; s < n_; ++s) {
      for (const Piece& p : splitter_.queue(s)) counts[p.block] += 1;
    }
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      if (counts.count(it->first) == 0 && pieces_left_[it->first] == 1) {
        pieces_left_.erase(it->first);
        it = blocks_.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& [id, count] : counts) pieces_left_[id] = count;
  }

  SplitBlock Hand(const Piece& piece) {
    const BlockHandle& h = blocks_.at(piece.block);
    BlockHandle part = PieceOf(h, piece);
    SplitBlock out;
    out.status = SplitBlock::kBlock;
    out.block = part.block;
    out.rows = part.meta.rows;
    out.keep_rows = part.keep_rows;
    if (--pieces_left_[piece.block] <= 0) {
      pieces_left_.erase(piece.block);
      blocks_.erase(piece.block);
    }
    return out;
  }

  std::shared_ptr<const DatasetState> plan_;
  int n_;
  bool equal_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int64_t> started_;  // epochs each split has started
  int64_t epoch_ = 0;             // the epoch running (0: none yet)
  std::unique_ptr<StreamingExecutor> executor_;
  StreamSplitter splitter_;
  std::map<int64_t, BlockHandle> blocks_;  // held back or partly handed out, by id
  std::map<int64_t, int> pieces_left_;
  int64_t next_id_ = 0;
  std::optional<std::string> failed_;
  bool timed_out_ = false;
};

}  // namespace prism::data::internal

PRISM_REMOTE(prism::data::internal::PrismDataSliceBlock,
             prism::data::internal::SplitCoordinator::Create,
             &prism::data::internal::SplitCoordinator::StartEpoch,
             &prism::data::internal::SplitCoordinator::Next);

namespace prism::data {

using internal::BlockHandle;
using internal::DatasetState;
using internal::Piece;
using internal::Source;
using internal::SplitCoordinator;

namespace {

Dataset OfBlocks(std::vector<BlockHandle> blocks, const ExecutionOptions& options) {
  auto source = std::make_shared<Source>();
  source->name = "Split";
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i].index = static_cast<int64_t>(i);
  source->blocks = std::move(blocks);
  auto state = std::make_shared<DatasetState>();
  state->source = std::move(source);
  state->options = options;
  return Dataset(std::move(state));
}

}  // namespace

std::vector<Dataset> Dataset::Split(int n, bool equal) const {
  if (n < 1) {
    throw Error("prism::data::Dataset::Split(" + std::to_string(n) + "): n must be at least 1");
  }
  auto executor = internal::Execute(*state_, state_->ops);
  std::vector<BlockHandle> blocks;
  while (std::optional<BlockHandle> h = executor->Next()) {
    if (h->rows() > 0) blocks.push_back(std::move(*h));
  }
  {
    std::lock_guard<std::mutex> lock(state_->stats->mutex);
    state_->stats->stats = executor->Stats();
  }
  std::vector<Dataset> out;
  if (!equal) {
    for (auto [begin, end] : internal::SplitBlockRanges(blocks.size(), n)) {
      out.push_back(OfBlocks({blocks.begin() + static_cast<std::ptrdiff_t>(begin),
                              blocks.begin() + static_cast<std::ptrdiff_t>(end)},
                             state_->options));
    }
    return out;
  }
  std::vector<int64_t> rows;
  int64_t total = 0;
  for (const BlockHandle& h : blocks) total += rows.emplace_back(h.rows());
  for (const std::vector<Piece>& pieces : internal::CutToBoundaries(internal::EqualSplitRows(total, n), rows)) {
    std::vector<BlockHandle> split;
    for (const Piece& p : pieces) split.push_back(internal::PieceOf(blocks[static_cast<size_t>(p.block)], p));
    out.push_back(OfBlocks(std::move(split), state_->options));
  }
  return out;
}

std::vector<DataIterator> Dataset::StreamingSplit(int n, bool equal) const {
  if (n < 1) {
    throw Error("prism::data::Dataset::StreamingSplit(" + std::to_string(n) + "): n must be at least 1");
  }
  const std::string key = internal::PlanRegistry::Instance().Add(state_);
  const int rank = GetRuntimeContext().GetRank();
  ActorHandle<SplitCoordinator> coordinator;
  try {
    coordinator = Actor(SplitCoordinator::Create)
                      .SetResource("rank:" + std::to_string(rank), 0.001)
                      .SetMaxConcurrency(2 * n + 2)
                      .Remote(key, n, equal);
  } catch (...) {
    internal::PlanRegistry::Instance().Take(key);
    throw;
  }
  std::vector<DataIterator> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)].coordinator_ = coordinator;
    out[static_cast<size_t>(i)].split_ = i;
    out[static_cast<size_t>(i)].num_splits_ = n;
    out[static_cast<size_t>(i)].timeout_s_ = state_->options.task_timeout_s;
  }
  return out;
}

BatchIterator DataIterator::IterBatches(int64_t batch_size, int prefetch_batches, bool drop_last,
                                        int64_t local_shuffle_buffer_size,
                                        std::optional<uint64_t> local_shuffle_seed) const {
  if (split_ < 0) {
    throw Error("prism::data::DataIterator::IterBatches: this iterator is not from a StreamingSplit "
                "(default-constructed); get one from Dataset::StreamingSplit");
  }
  auto s = internal::NewIteratorState("DataIterator::IterBatches", batch_size, prefetch_batches,
                                      drop_last, local_shuffle_buffer_size, local_shuffle_seed);
  ExecutionOptions options;
  options.task_timeout_s = timeout_s_;
  const int timeout_ms = internal::SplitTimeoutMs(options);
  s->fetch_timeout_ms = timeout_ms;
  struct Pull {
    ActorHandle<SplitCoordinator> coordinator;
    int split = 0;
    int timeout_ms = 0;
    int64_t epoch = 0;
    int64_t index = 0;
    bool ended = false;
  };
  auto pull = std::make_shared<Pull>(Pull{coordinator_, split_, timeout_ms});
  s->next_block = [pull]() -> std::optional<BlockHandle> {
    if (pull->ended) return std::nullopt;
    // Waiting for a reply is bounded by the coordinator's own timeouts, plus a margin.
    const int reply_ms = 2 * pull->timeout_ms + 60000;
    if (pull->epoch == 0) {
      auto started = pull->coordinator.Task(&SplitCoordinator::StartEpoch)
                         .Remote(pull->split, static_cast<int64_t>(pull->timeout_ms));
      internal::EpochStart e = *Get(started, reply_ms);
      if (!e.error.empty()) throw TimeoutError(e.error);
      pull->epoch = e.epoch;
    }
    internal::SplitBlock b =
        *Get(pull->coordinator.Task(&SplitCoordinator::Next).Remote(pull->split, pull->epoch), reply_ms);
    if (b.status == internal::SplitBlock::kTimeout) throw TimeoutError(b.error);
    if (b.status == internal::SplitBlock::kError) throw Error(b.error);
    if (b.status == internal::SplitBlock::kEnd) {
      pull->ended = true;
      return std::nullopt;
    }
    BlockHandle h;
    h.index = pull->index++;
    h.block = std::move(b.block);
    h.meta.rows = b.rows;
    h.keep_rows = b.keep_rows;
    return h;
  };
  return BatchIterator(std::move(s));
}

}  // namespace prism::data
