#pragma once
// The streaming executor (internal): runs a fused plan as tasks, driven from the driver.
// executor.cc explains the scheduling rule.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "data/all_to_all.h"
#include "data/block_meta.h"
#include "data/plan.h"
#include "prism/api.h"
#include "prism/data/dataset.h"

namespace prism::data::internal {

/// A block of the stream: its position, its object and what is known of it.
struct PoolLineage;

struct BlockHandle {
  int64_t index = 0;
  ObjectRef<Block> block;
  BlockMeta meta;
  int64_t keep_rows = -1;  // a limit cut it: only its first keep_rows rows count
  /// An actor pool's block: how to make it again (FetchBlock). Null for a task's block,
  /// which the core rebuilds itself by running the task again.
  std::shared_ptr<const PoolLineage> lineage;
  int64_t rows() const { return keep_rows >= 0 ? std::min(keep_rows, meta.rows) : meta.rows; }
};

/// What made an actor pool's block: the core does not rebuild an actor call's result
/// whose only copy was lost with its rank, so the executor keeps the call's input (which
/// stays in the store until the block is consumed, as Ray pins a task's arguments for
/// lineage) and the pool's operators.
struct PoolLineage {
  BlockHandle input;
  std::vector<Op> ops;  // ops[0] is the class MapBatches
  int64_t index = 0;
  int32_t attempt = 0;
};

/// The block `h` names, fetched to this rank and cut to its keep_rows. A pool's block
/// whose only copy was lost with its rank (ObjectLostError) is made again by a new actor
/// of the pool's class on a live rank, from its input (fetched the same way). Throws what
/// Get and the class throw.
Block FetchBlock(const BlockHandle& h, int timeout_ms);

struct DatasetState;

/// Where a plan starts: read tasks, or blocks already in the store (FromItems,
/// Materialize), or other plans' output (Union, Zip: union_zip.h runs them).
struct Source {
  std::vector<ReadTask> reads;
  std::vector<BlockHandle> blocks;
  std::string name;  // "ReadHdf5", "FromItems", "Union", "Zip"
  /// Union: these plans' outputs one after another; Zip: inputs[0]'s columns, then
  /// inputs[1]'s, row by row. Empty for the other sources.
  enum Combine : int32_t { kNone, kUnion, kZip };
  int32_t combine = kNone;
  std::vector<std::shared_ptr<const DatasetState>> inputs;
};

/// The blocks of another execution, for a plan whose source is not read tasks or stored
/// blocks (Union, Zip): the next one in order (its index is renumbered), std::nullopt at
/// the end. May block; throws what that execution throws.
using BlockPuller = std::function<std::optional<BlockHandle>()>;

/// A Dataset's plan: its source and operators, shared by the copies of the Dataset.
struct DatasetState {
  std::shared_ptr<const Source> source;
  std::vector<Op> ops;
  ExecutionOptions options;
  /// The latest execution's statistics, shared with every copy of this Dataset.
  struct StatsBox {
    std::mutex mutex;
    DatasetStats stats;
  };
  std::shared_ptr<StatsBox> stats = std::make_shared<StatsBox>();
};

class ActorPoolOp;   // data/actor_pool_op.h
class ProgressBars;  // data/progress.h

/// Runs one execution of a plan. Not thread-safe: one consumer thread.
class StreamingExecutor {
 public:
  /// With `upstream`, the source's blocks come from it as the first operator needs them
  /// (Union, Zip), and `upstream_stats` gives that execution's operators for Stats().
  StreamingExecutor(std::shared_ptr<const Source> source, const std::vector<Op>& ops,
                    ExecutionOptions options, std::shared_ptr<DatasetState::StatsBox> stats,
                    BlockPuller upstream = {}, std::function<DatasetStats()> upstream_stats = {});
  /// Cancels the tasks still running.
  ~StreamingExecutor();
  StreamingExecutor(const StreamingExecutor&) = delete;
  StreamingExecutor& operator=(const StreamingExecutor&) = delete;

  /// The next block of the output, in order; std::nullopt at the end. Throws prism::Error
  /// naming the operator and block when a task failed (and again on every later call),
  /// prism::TimeoutError when no task finished within options.task_timeout_s.
  std::optional<BlockHandle> Next();
  DatasetStats Stats() const;

 private:
  struct Running {
    int64_t index = 0;
    ObjectRef<Block> block;
    ObjectRef<BlockMeta> meta;
    uint64_t held_bytes = 0;  // the input's bytes and the output's estimate
    // What to run again on a retry: the read, or the input block.
    std::optional<ReadTask> read;
    BlockHandle input;
    int32_t attempt = 0;   // 0: the block's first run
    int64_t actor = -1;    // kActorPool: the actor that runs it
  };
  struct PhysicalOp {
    enum Kind { kRead, kTransform, kLimit, kActorPool, kAllToAll } kind = kRead;
    std::vector<Op> ops;                // kRead, kTransform
    int64_t limit = 0;                  // kLimit
    int64_t limit_rows = 0;             // kLimit: rows passed so far
    std::deque<std::pair<int64_t, ReadTask>> reads;  // kRead: not launched yet
    std::vector<Running> running;
    std::deque<int64_t> order;             // launched indexes, oldest first
    std::map<int64_t, BlockHandle> done;   // finished, waiting for those before them
    std::deque<BlockHandle> outputs;       // in order, not yet taken downstream
    uint64_t output_bytes_total = 0;       // for the output estimate
    bool stopped = false;                  // a limit downstream has all its rows
    std::deque<Running> retry;             // blocks to run again, before new input
    std::shared_ptr<ActorPoolOp> pool;     // kActorPool: its actors (ops[0] is the class)
    // kAllToAll: the operator, its input so far, and its exchange once the input is complete.
    AllToAllSpec exchange_spec;
    std::vector<BlockHandle> exchange_inputs;
    std::unique_ptr<AllToAllExchange> exchange;
    bool exchange_done = false;
    OperatorStats stats;
    std::optional<std::chrono::steady_clock::time_point> started;
  };

  bool Exhausted(size_t i) const;
  bool HasInput(size_t i) const;
  uint64_t HeldBytes(const PhysicalOp& op) const;
  uint64_t Estimate(size_t i) const;
  bool CanLaunch(size_t i) const;
  void Launch(size_t i);
  void Schedule();
  void MoveLimits();
  /// All-to-all operators take their upstream's blocks; one whose input is complete starts
  /// its exchange (all_to_all.h).
  void MoveAllToAll();
  /// Polls a running exchange for up to timeout_ms; true if it finished.
  bool PollExchanges(int timeout_ms, bool* running);
  void Stop(size_t upto);
  /// Waits (bounded) for running tasks; records the finished ones. False if none finished.
  bool WaitForTasks(int timeout_ms);
  void Finish(size_t i, size_t r);
  void Publish();
  [[noreturn]] void Fail(const std::string& message);
  // Actor pools and retries (actor_pool_op.cc has the pool's rules).
  void AddStages(const std::vector<Op>& ops);
  void ScheduleActorPool(size_t i);
  void Submit(size_t i, Running& run);
  bool Retry(size_t i, Running& run);
  void ClosePools(bool all);
  /// Takes one block from upstream_ into the first operator's outputs if it needs one;
  /// false if it did not (no upstream, it is done, or the next operator is full).
  bool Pull(bool force);

  std::vector<PhysicalOp> ops_;
  BlockPuller upstream_;
  std::function<DatasetStats()> upstream_stats_;
  bool upstream_done_ = true;
  int64_t upstream_index_ = 0;
  ExecutionOptions options_;
  uint64_t budget_per_op_ = 0;
  int max_in_flight_ = 1;
  std::shared_ptr<DatasetState::StatsBox> stats_box_;
  std::optional<std::string> failed_;
  std::vector<int64_t> totals_;  // blocks each operator will produce; -1: unknown
  std::unique_ptr<ProgressBars> progress_;
  /// The operators on the job's dashboard (platform::PublishPanel "data": the latest
  /// execution), every 2 s while it runs and once at its end. Never throws.
  void PublishPanel(bool done);
  std::chrono::steady_clock::time_point last_panel_{};
  bool panel_done_ = false;
};

}  // namespace prism::data::internal

// A stage task's (block, metadata) as one value, for the registry's whole-result invoker:
// the generic std::tuple goes through Boost, which has no Block. Callers always split it
// (SetNumReturns(2)), so this encoding only has to exist; it is here for the
// stage tasks and the actor pool's calls (actor_pool_op.cc).
namespace prism::internal {
template <>
struct Serializer<std::tuple<data::Block, data::internal::BlockMeta>> {
  static void Write(Writer& w, const std::tuple<data::Block, data::internal::BlockMeta>& value) {
    Serializer<data::Block>::Write(w, std::get<0>(value));
    Serializer<data::internal::BlockMeta>::Write(w, std::get<1>(value));
  }
  static std::tuple<data::Block, data::internal::BlockMeta> Read(Reader& r) {
    data::Block block = Serializer<data::Block>::Read(r);
    return {std::move(block), Serializer<data::internal::BlockMeta>::Read(r)};
  }
};
}  // namespace prism::internal
