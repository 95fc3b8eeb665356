// The streaming executor: runs a fused plan (plan.h) as Prism tasks, driven from the
// consumer's thread on the driver (Ray Data's StreamingExecutor, without its own thread).
//
// Physical operators, in plan order: the source (read tasks, each with the first fused
// stage; or blocks already in the store), then for each Limit a limit (driver-only: it
// counts rows from the blocks' metadata and cuts the block that crosses it) followed by
// the next fused stage as a transform (one task per input block). A class MapBatches ends
// the stage before it and is an actor pool of its own, with the function operators after
// it in its calls (actor_pool_op.cc: sizing, retries, when the actors are killed). Every
// task (and pool call) returns two objects: the block and its BlockMeta (rows, bytes,
// schema, a Write's part), so the driver schedules from metadata and never fetches a block
// it does not consume. A block whose UDF threw a RetryableError (plan.h) runs again.
//
// Scheduling, each time the consumer asks for a block (Next):
//   1. limits take what their upstream finished; a limit that has its rows stops every
//      operator before it (their running tasks are cancelled, their blocks dropped);
//   2. from the last operator to the first, an operator launches tasks while it has input,
//      fewer than max_tasks_in_flight_per_op running, and the bytes it holds (running
//      tasks' inputs and estimated outputs, finished blocks not yet taken downstream) plus
//      the next task's stay within its share of the budget; an operator holding nothing
//      may always launch one task, so the pipeline never stalls, and blocks not taken by
//      a slow consumer hold their producer back;
//   3. it waits at most 100 ms for any task (prism::Wait), records what finished, and
//      emits finished blocks in input order (a block waits for those before it).
// If no task finishes within task_timeout_s the execution fails with a TimeoutError; a
// failed task fails it with the task's message, which names the operator and block.
//
// All-to-all operators (Repartition, RandomShuffle, Sort, GroupBy; all_to_all.h) are
// barriers: one takes every block its upstream emits, and once the upstream is exhausted it
// starts one exchange (member tasks on every rank, reserved together), polled in the same
// 100 ms slices; its output blocks then flow downstream in order.

#include "data/executor.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <tuple>
#include <utility>

#include "data/actor_pool_op.h"
#include "data/progress.h"
#include "prism/platform/invoke.h"
#include "prism/platform/panel.h"
#include "prism/remote.h"
#include "prism/scheduling_strategy.h"
#include "prism/task_caller.h"

namespace prism::data::internal {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kBudgetWithoutStoreCapacity = 1ull << 30;
constexpr int kWaitSliceMs = 100;

std::tuple<Block, BlockMeta> Finished(const Block& block, const std::string& part_file,
                                      int64_t part_rows, uint64_t part_bytes) {
  BlockMeta meta = BlockMeta::Of(block);
  meta.part_file = part_file;
  meta.part_rows = part_rows;
  meta.part_bytes = part_bytes;
  meta.rank = GetRuntimeContext().GetRank();  // the block's object lives here
  if (!part_file.empty()) meta.SetPartWriter();
  return {block, std::move(meta)};
}

}  // namespace

}  // namespace prism::data::internal

namespace prism::data {

uint64_t DefaultObjectStoreBudget() {
  const auto resources = ClusterResources();
  auto store = resources.find("object_store_memory");
  if (store == resources.end() || store->second <= 0) return internal::kBudgetWithoutStoreCapacity;
  return std::max<uint64_t>(1, static_cast<uint64_t>(store->second * kDefaultObjectStoreFraction));
}

}  // namespace prism::data

namespace prism::data::internal {

/// A read task and the stage fused after it (one task per read block).
std::tuple<Block, BlockMeta> PrismDataReadStage(ReadTask read, std::vector<Op> ops, int64_t index,
                                                int32_t attempt) {
  Block block;
  try {
    block = ExecuteRead(read);
  } catch (...) {
    throw OpError("prism::data: " + read.Name() + " failed on block " + std::to_string(index) + ": " +
                  platform::DescribeException(std::current_exception()));
  }
  std::string part_file;
  int64_t part_rows = 0;
  uint64_t part_bytes = 0;
  block = ApplyStage(std::move(block), ops, index, -1, &part_file, &part_rows, &part_bytes, attempt);
  return Finished(block, part_file, part_rows, part_bytes);
}

/// A fused stage on a block of the stream.
std::tuple<Block, BlockMeta> PrismDataTransformStage(Block input, int64_t keep_rows,
                                                     std::vector<Op> ops, int64_t index,
                                                     int32_t attempt) {
  std::string part_file;
  int64_t part_rows = 0;
  uint64_t part_bytes = 0;
  Block block = ApplyStage(std::move(input), ops, index, keep_rows, &part_file, &part_rows,
                           &part_bytes, attempt);
  return Finished(block, part_file, part_rows, part_bytes);
}

}  // namespace prism::data::internal

PRISM_REMOTE(prism::data::internal::PrismDataReadStage,
             prism::data::internal::PrismDataTransformStage);

namespace prism::data::internal {

BlockMeta BlockMeta::Of(const Block& block) {
  BlockMeta meta;
  meta.rows = block.num_rows();
  meta.bytes = block.size_bytes();
  for (const Field& f : block.schema().fields) {
    meta.names.push_back(f.name);
    meta.dtypes.push_back(static_cast<int32_t>(f.dtype));
    meta.shapes.push_back(f.row_shape);
  }
  return meta;
}

void BlockMeta::SetPartWriter() {
  part_rank = GetRuntimeContext().GetRank();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) part_host = host;
}

data::Schema BlockMeta::ToSchema() const {
  data::Schema schema;
  for (size_t i = 0; i < names.size(); ++i) {
    schema.fields.push_back({names[i], static_cast<DType>(dtypes.at(i)), shapes.at(i)});
  }
  return schema;
}

StreamingExecutor::StreamingExecutor(std::shared_ptr<const Source> source,
                                     const std::vector<Op>& ops, ExecutionOptions options,
                                     std::shared_ptr<DatasetState::StatsBox> stats,
                                     BlockPuller upstream,
                                     std::function<DatasetStats()> upstream_stats)
    : upstream_(std::move(upstream)),
      upstream_stats_(std::move(upstream_stats)),
      upstream_done_(!upstream_),
      options_(options),
      stats_box_(std::move(stats)) {
  FusedPlan plan = Fuse(ops);
  // A class MapBatches ends the stage before it and starts its own (actor_pool_op.h).
  std::vector<std::vector<Op>> first = SplitAtActorOps(plan.stages[0].ops);
  if (!source->blocks.empty() || source->reads.empty()) {
    PhysicalOp input;
    input.kind = PhysicalOp::kTransform;  // never launches: no upstream
    input.stats.name = source->name;
    for (const BlockHandle& h : source->blocks) {
      input.outputs.push_back(h);
      input.stats.blocks += 1;
      input.stats.rows += h.rows();
      input.stats.bytes += h.meta.bytes;
    }
    ops_.push_back(std::move(input));
    AddStages(plan.stages[0].ops);
  } else {
    PhysicalOp read;
    read.kind = PhysicalOp::kRead;
    read.ops = first[0];
    read.stats.name = source->name + (read.ops.empty() ? "" : "->" + Stage{read.ops}.Name());
    for (size_t i = 0; i < source->reads.size(); ++i) {
      read.reads.emplace_back(static_cast<int64_t>(i), source->reads[i]);
    }
    ops_.push_back(std::move(read));
    std::vector<Op> rest;
    for (size_t g = 1; g < first.size(); ++g) rest.insert(rest.end(), first[g].begin(), first[g].end());
    AddStages(rest);
  }
  for (size_t l = 0; l < plan.limits.size(); ++l) {
    PhysicalOp limit;
    if (plan.limits[l] < 0) {  // an all-to-all operator (all_to_all.h)
      limit.kind = PhysicalOp::kAllToAll;
      limit.exchange_spec = plan.barriers[l].exchange;
      limit.stats.name = limit.exchange_spec.Name();
    } else {
      limit.kind = PhysicalOp::kLimit;
      limit.limit = plan.limits[l];
      limit.stats.name = "Limit(" + std::to_string(limit.limit) + ")";
    }
    ops_.push_back(std::move(limit));
    AddStages(plan.stages[l + 1].ops);
  }

  size_t task_ops = 0;
  auto runs_tasks = [](const PhysicalOp& op) {
    return op.kind == PhysicalOp::kRead || op.kind == PhysicalOp::kActorPool ||
           (op.kind == PhysicalOp::kTransform && !op.ops.empty());
  };
  for (const PhysicalOp& op : ops_) task_ops += runs_tasks(op) ? 1 : 0;
  const uint64_t budget = options_.object_store_budget_bytes > 0 ? options_.object_store_budget_bytes
                                                                 : DefaultObjectStoreBudget();
  budget_per_op_ = std::max<uint64_t>(1, budget / std::max<size_t>(1, task_ops));
  for (PhysicalOp& op : ops_) op.stats.budget_bytes = runs_tasks(op) ? budget_per_op_ : 0;
  const auto resources = ClusterResources();
  auto cpu = resources.find("CPU");
  const double cpus = cpu == resources.end() ? 1.0 : cpu->second;
  if (options_.max_tasks_in_flight_per_op > 0) {
    max_in_flight_ = options_.max_tasks_in_flight_per_op;
  } else {
    max_in_flight_ = std::max(1, static_cast<int>(2 * cpus));
  }
  for (PhysicalOp& op : ops_) {
    if (op.kind != PhysicalOp::kActorPool) continue;
    op.pool = std::make_shared<ActorPoolOp>(op.ops, ResolveMaxActors(op.ops[0].min_actors,
                                                                     op.ops[0].max_actors, cpus));
  }
  // Every operator before the first limit produces one block per source block.
  const int64_t source_blocks = static_cast<int64_t>(
      source->blocks.empty() ? source->reads.size() : source->blocks.size());
  bool after_limit = false;
  for (const PhysicalOp& op : ops_) {
    after_limit = after_limit || op.kind == PhysicalOp::kLimit;
    totals_.push_back(after_limit ? -1 : source_blocks);
  }
  const bool tty = isatty(STDERR_FILENO) == 1;
  if (options_.progress_bars.value_or(tty)) {
    // A log file gets a snapshot a second at most; a terminal is redrawn 5 times a second.
    progress_ = std::make_unique<ProgressBars>(std::cerr, tty, std::chrono::milliseconds(tty ? 200 : 1000));
  }
  Publish();
}

StreamingExecutor::~StreamingExecutor() {
  ClosePools(true);
  if (progress_) progress_->Update(Stats(), totals_, Clock::now(), /*force=*/true);
  PublishPanel(true);
  for (PhysicalOp& op : ops_) {
    for (Running& run : op.running) {
      try {
        Cancel(run.meta);
      } catch (...) {  // Shutdown already ran, or the task is gone: nothing to stop
      }
    }
  }
}

bool StreamingExecutor::HasInput(size_t i) const {
  const PhysicalOp& op = ops_[i];
  if (op.stopped) return false;
  if (!op.retry.empty()) return true;
  if (op.kind == PhysicalOp::kRead) return !op.reads.empty();
  return i > 0 && !ops_[i - 1].outputs.empty();
}

bool StreamingExecutor::Exhausted(size_t i) const {
  const PhysicalOp& op = ops_[i];
  if (!op.outputs.empty()) return false;
  if (op.stopped) return true;
  if (op.kind == PhysicalOp::kLimit) return op.limit_rows >= op.limit || Exhausted(i - 1);
  if (op.kind == PhysicalOp::kAllToAll) return op.exchange_done;
  if (!op.running.empty() || !op.done.empty() || !op.retry.empty()) return false;
  if (op.kind == PhysicalOp::kRead) return op.reads.empty();
  if (i == 0) return upstream_done_;
  return Exhausted(i - 1);
}

uint64_t StreamingExecutor::HeldBytes(const PhysicalOp& op) const {
  uint64_t held = 0;
  for (const Running& run : op.running) held += run.held_bytes;
  for (const Running& run : op.retry) held += run.held_bytes;
  for (const auto& [index, h] : op.done) held += h.meta.bytes;
  for (const BlockHandle& h : op.outputs) held += h.meta.bytes;
  return held;
}

uint64_t StreamingExecutor::Estimate(size_t i) const {
  const PhysicalOp& op = ops_[i];
  if (!op.retry.empty()) return 0;  // its bytes are held already (HeldBytes)
  if (op.kind == PhysicalOp::kRead) {
    const uint64_t output =
        op.stats.blocks > 0 ? op.output_bytes_total / static_cast<uint64_t>(op.stats.blocks)
                            : op.reads.front().second.estimated_bytes;
    return output;
  }
  const uint64_t input = ops_[i - 1].outputs.front().meta.bytes;
  const uint64_t output =
      op.stats.blocks > 0 ? op.output_bytes_total / static_cast<uint64_t>(op.stats.blocks) : input;
  return input + output;
}

bool StreamingExecutor::CanLaunch(size_t i) const {
  const PhysicalOp& op = ops_[i];
  if (op.kind == PhysicalOp::kLimit || op.kind == PhysicalOp::kAllToAll || !HasInput(i)) return false;
  // An actor pool's size bounds its calls instead (ScheduleActorPool).
  if (op.kind != PhysicalOp::kActorPool && static_cast<int>(op.running.size()) >= max_in_flight_) {
    return false;
  }
  if (op.running.empty() && op.done.empty() && op.outputs.empty()) return true;
  return HeldBytes(op) + Estimate(i) <= budget_per_op_;
}

void StreamingExecutor::Launch(size_t i) {
  PhysicalOp& op = ops_[i];
  Running run;
  if (!op.retry.empty()) {  // a block to run again: its index is in `order` already
    run = std::move(op.retry.front());
    op.retry.pop_front();
  } else {
    run.held_bytes = Estimate(i);
    if (op.kind == PhysicalOp::kRead) {
      auto [index, read] = std::move(op.reads.front());
      op.reads.pop_front();
      run.index = index;
      run.read = std::move(read);
    } else {
      run.input = std::move(ops_[i - 1].outputs.front());
      ops_[i - 1].outputs.pop_front();
      run.index = run.input.index;
    }
    op.order.push_back(run.index);
  }
  Submit(i, run);
  if (!op.started) op.started = Clock::now();
  op.running.push_back(std::move(run));
  op.stats.tasks += 1;
  op.stats.peak_tasks_in_flight =
      std::max<int64_t>(op.stats.peak_tasks_in_flight, static_cast<int64_t>(op.running.size()));
  op.stats.peak_bytes = std::max(op.stats.peak_bytes, HeldBytes(op));
}

void StreamingExecutor::Submit(size_t i, Running& run) {
  PhysicalOp& op = ops_[i];
  // System failures (a lost rank) are the core's retries; a stage takes its operators'
  // largest max_retries (reads: Ray's default, 3).
  int max_retries = op.kind == PhysicalOp::kRead ? 3 : 0;
  for (const Op& o : op.ops) max_retries = std::max<int>(max_retries, o.max_retries);
  if (op.kind == PhysicalOp::kRead) {
    std::tie(run.block, run.meta) = Task(PrismDataReadStage)
                                        .SetSchedulingStrategy(SpreadSchedulingStrategy{})
                                        .SetMaxRetries(max_retries)
                                        .SetNumReturns(2)
                                        .Remote(*run.read, op.ops, run.index, run.attempt);
  } else if (op.kind == PhysicalOp::kActorPool) {
    std::tie(run.block, run.meta, run.actor) = op.pool->Submit(run.input, run.attempt);
  } else {
    std::tie(run.block, run.meta) = Task(PrismDataTransformStage)
                                        .SetMaxRetries(max_retries)
                                        .SetNumReturns(2)
                                        .Remote(run.input.block, run.input.keep_rows, op.ops,
                                                run.index, run.attempt);
  }
}

void StreamingExecutor::Schedule() {
  for (size_t i = ops_.size(); i-- > 0;) {
    if (ops_[i].kind == PhysicalOp::kActorPool) {
      ScheduleActorPool(i);
    } else {
      while (CanLaunch(i)) Launch(i);
    }
  }
  ClosePools(false);
}

void StreamingExecutor::Stop(size_t upto) {
  for (size_t j = 0; j < upto; ++j) {
    PhysicalOp& op = ops_[j];
    op.stopped = true;
    op.reads.clear();
    op.retry.clear();
    if (op.pool) op.pool->Close();
    for (Running& run : op.running) {
      try {
        Cancel(run.meta);
      } catch (...) {  // finished meanwhile: nothing to stop
      }
    }
    op.running.clear();
    op.done.clear();
    op.order.clear();
    op.outputs.clear();
    op.exchange.reset();  // cancels its members and gives their reservation back
    op.exchange_inputs.clear();
  }
}

void StreamingExecutor::MoveLimits() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    PhysicalOp& op = ops_[i];
    if (op.kind != PhysicalOp::kLimit || op.stopped) continue;
    while (op.limit_rows < op.limit && !ops_[i - 1].outputs.empty()) {
      BlockHandle h = std::move(ops_[i - 1].outputs.front());
      ops_[i - 1].outputs.pop_front();
      const int64_t rows = std::min(h.rows(), op.limit - op.limit_rows);
      if (rows < h.rows()) h.keep_rows = rows;
      op.limit_rows += rows;
      op.stats.blocks += 1;
      op.stats.rows += rows;
      op.stats.bytes += h.meta.bytes;
      op.outputs.push_back(std::move(h));
    }
    if (op.limit_rows >= op.limit && !ops_[i - 1].stopped) Stop(i);
  }
}

void StreamingExecutor::MoveAllToAll() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    PhysicalOp& op = ops_[i];
    if (op.kind != PhysicalOp::kAllToAll || op.stopped || op.exchange_done) continue;
    while (!ops_[i - 1].outputs.empty()) {
      op.exchange_inputs.push_back(std::move(ops_[i - 1].outputs.front()));
      ops_[i - 1].outputs.pop_front();
    }
    if (op.exchange || !Exhausted(i - 1)) continue;
    std::vector<ExchangeInput> inputs;
    for (const BlockHandle& h : op.exchange_inputs) {
      inputs.push_back({h.block, h.rows(), h.keep_rows, h.meta.bytes, h.meta.rank, h.meta.names,
                        h.meta.dtypes, h.meta.shapes});
      op.stats.peak_bytes += h.meta.bytes;
    }
    op.started = Clock::now();
    try {
      op.exchange = std::make_unique<AllToAllExchange>(op.exchange_spec, std::move(inputs),
                                                       options_.task_timeout_s);
    } catch (const std::exception& e) {
      Fail(e.what());
    }
    op.stats.tasks = op.exchange->Tasks();
    op.stats.peak_tasks_in_flight = op.exchange->Tasks();
    bool running = false;
    PollExchanges(0, &running);
  }
}

bool StreamingExecutor::PollExchanges(int timeout_ms, bool* running) {
  for (PhysicalOp& op : ops_) {
    if (!op.exchange) continue;
    *running = true;
    bool finished = false;
    try {
      finished = op.exchange->Poll(timeout_ms);
    } catch (const std::exception& e) {
      Fail(e.what());
    }
    if (!finished) return false;
    int64_t index = 0;
    for (ExchangeOutput& out : op.exchange->Outputs()) {
      BlockHandle h;
      h.index = index++;
      h.block = std::move(out.block);
      h.meta = std::move(out.meta);
      op.stats.blocks += 1;
      op.stats.rows += h.meta.rows;
      op.stats.bytes += h.meta.bytes;
      op.outputs.push_back(std::move(h));
    }
    op.stats.seconds = std::chrono::duration<double>(Clock::now() - *op.started).count();
    op.exchange.reset();
    op.exchange_inputs.clear();  // the input blocks may go now
    op.exchange_done = true;
    return true;
  }
  return false;
}

void StreamingExecutor::Finish(size_t i, size_t r) {
  PhysicalOp& op = ops_[i];
  Running run = std::move(op.running[r]);
  op.running.erase(op.running.begin() + static_cast<std::ptrdiff_t>(r));
  if (op.pool && run.actor >= 0) op.pool->Release(run.actor);
  BlockMeta meta;
  try {
    meta = *Get(run.meta, 10000);
  } catch (const ActorError& e) {
    // The actor died under the call (its rank was lost): another actor takes the block.
    if (op.pool) op.pool->Remove(run.actor);
    if (Retry(i, run)) return;
    Fail("prism::data: " + op.stats.name + " failed on block " + std::to_string(run.index) + ": " +
         e.what());
  } catch (const TaskError& e) {
    if (IsRetryableError(e) && Retry(i, run)) return;
    if (IsOpError(e)) Fail(e.OriginalMessage() + " (on rank " + std::to_string(e.Rank()) + ")");
    Fail("prism::data: " + op.stats.name + " failed on block " + std::to_string(run.index) + ": " +
         e.what());
  } catch (const std::exception& e) {
    Fail("prism::data: " + op.stats.name + " failed on block " + std::to_string(run.index) + ": " +
         e.what());
  }
  op.stats.blocks += 1;
  op.stats.rows += meta.rows;
  op.stats.bytes += meta.bytes;
  op.output_bytes_total += meta.bytes;
  op.stats.seconds = std::chrono::duration<double>(Clock::now() - *op.started).count();
  BlockHandle done{run.index, std::move(run.block), std::move(meta), -1, nullptr};
  if (op.kind == PhysicalOp::kActorPool) {
    done.lineage = std::make_shared<const PoolLineage>(PoolLineage{std::move(run.input), op.ops, run.index, run.attempt});
  }
  op.done[run.index] = std::move(done);
  while (!op.order.empty()) {
    auto it = op.done.find(op.order.front());
    if (it == op.done.end()) break;
    op.outputs.push_back(std::move(it->second));
    op.done.erase(it);
    op.order.pop_front();
  }
  op.stats.peak_bytes = std::max(op.stats.peak_bytes, HeldBytes(op));
}

bool StreamingExecutor::WaitForTasks(int timeout_ms) {
  // An exchange runs alone: its upstream is finished and nothing downstream has input yet.
  bool exchange_running = false;
  if (PollExchanges(timeout_ms, &exchange_running)) return true;
  if (exchange_running) return false;
  std::vector<ObjectRef<BlockMeta>> refs;
  for (const PhysicalOp& op : ops_) {
    for (const Running& run : op.running) refs.push_back(run.meta);
  }
  if (refs.empty()) return false;
  WaitResult<BlockMeta> first = Wait(refs, 1, timeout_ms);
  if (first.ready.empty()) return false;
  WaitResult<BlockMeta> all = Wait(refs, static_cast<int>(refs.size()), 0);
  for (const ObjectRef<BlockMeta>& ready : all.ready) {
    for (size_t i = 0; i < ops_.size(); ++i) {
      auto& running = ops_[i].running;
      auto it = std::find_if(running.begin(), running.end(),
                             [&](const Running& run) { return run.meta == ready; });
      if (it != running.end()) {
        Finish(i, static_cast<size_t>(it - running.begin()));
        break;
      }
    }
  }
  return true;
}

void StreamingExecutor::Fail(const std::string& message) {
  failed_ = message;
  Stop(ops_.size());
  Publish();
  throw Error(message);
}

std::optional<BlockHandle> StreamingExecutor::Next() {
  if (failed_) throw Error(*failed_);
  auto last_progress = Clock::now();
  const auto timeout = std::chrono::duration<double>(options_.task_timeout_s);
  for (;;) {
    // In turns, as often as there are operators: an exchange that finishes at once feeds a
    // limit after it, whose output may feed another exchange.
    for (size_t k = 0; k < ops_.size(); ++k) {
      MoveLimits();
      MoveAllToAll();
    }
    PhysicalOp& last = ops_.back();
    if (!last.outputs.empty()) {
      BlockHandle h = std::move(last.outputs.front());
      last.outputs.pop_front();
      Schedule();  // refill what the consumer just freed while it works on this block
      Publish();
      return h;
    }
    if (Exhausted(ops_.size() - 1)) {
      ClosePools(true);
      Publish();
      if (progress_) progress_->Update(Stats(), totals_, Clock::now(), /*force=*/true);
      PublishPanel(true);
      return std::nullopt;
    }
    Schedule();
    if (Pull(false)) continue;
    bool any_running = false;
    for (const PhysicalOp& op : ops_) any_running = any_running || !op.running.empty() || op.exchange;
    if (!any_running && Pull(true)) continue;
    if (!any_running) {
      // Not reached by the rules above (an operator holding nothing may always launch);
      // kept so that a mistake in them shows as an error, not a hang.
      Fail("prism::data: the executor has nothing to run but the pipeline is not finished (a bug: "
           "please report it with the plan: " + Stats().ToString() + ")");
    }
    if (WaitForTasks(kWaitSliceMs)) {
      last_progress = Clock::now();
    } else if (Clock::now() - last_progress > timeout) {
      std::string names;
      for (const PhysicalOp& op : ops_) {
        if (!op.running.empty() || op.exchange) names += (names.empty() ? "" : ", ") + op.stats.name;
      }
      failed_ = "prism::data: no task of " + names + " finished in " +
                std::to_string(options_.task_timeout_s) +
                " s (ExecutionOptions::task_timeout_s): a UDF may be stuck";
      Stop(ops_.size());
      Publish();
      throw TimeoutError(*failed_);
    }
  }
}

bool StreamingExecutor::Pull(bool force) {
  PhysicalOp& input = ops_.front();
  if (upstream_done_ || input.stopped || !input.outputs.empty()) return false;
  // The next operator takes a block now (a limit, the consumer, or a stage with room).
  const bool wanted = ops_.size() == 1 || ops_[1].kind == PhysicalOp::kLimit ||
                      static_cast<int>(ops_[1].running.size()) < max_in_flight_;
  if (!wanted && !force) return false;
  std::optional<BlockHandle> h = upstream_();
  if (!h) {
    upstream_done_ = true;
    return true;
  }
  h->index = upstream_index_++;
  input.stats.blocks += 1;
  input.stats.rows += h->rows();
  input.stats.bytes += h->meta.bytes;
  input.outputs.push_back(std::move(*h));
  return true;
}

DatasetStats StreamingExecutor::Stats() const {
  DatasetStats out;
  if (upstream_stats_) out = upstream_stats_();
  for (const PhysicalOp& op : ops_) out.operators.push_back(op.stats);
  return out;
}

void StreamingExecutor::PublishPanel(bool done) {
  const Clock::time_point now = Clock::now();
  if (panel_done_ || (!done && now - last_panel_ < std::chrono::seconds(2))) return;
  last_panel_ = now;
  panel_done_ = done;
  if (!platform::DashboardOn()) return;
  try {
    const DatasetStats stats = Stats();
    platform::Panel p;
    p.title = std::string("Data: the latest execution") + (done ? " (done)" : " (running)");
    p.columns = {"operator", "blocks", "rows", "tasks", "peak tasks in flight", "peak bytes",
                 "retries", "peak actors", "seconds"};
    // Operators of upstream executions come first; totals_ are this one's.
    const size_t first = stats.operators.size() - std::min(stats.operators.size(), totals_.size());
    for (size_t i = 0; i < stats.operators.size(); ++i) {
      const OperatorStats& op = stats.operators[i];
      const int64_t total = i >= first ? totals_[i - first] : -1;
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.2f", op.seconds);
      p.rows.push_back({op.name, std::to_string(op.blocks) + (total >= 0 ? "/" + std::to_string(total) : ""),
                        std::to_string(op.rows), std::to_string(op.tasks), std::to_string(op.peak_tasks_in_flight),
                        std::to_string(op.peak_bytes), std::to_string(op.retries), std::to_string(op.peak_actors),
                        seconds});
    }
    platform::PublishPanel("data", p);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism::data: the dashboard's Data panel was not updated: %s\n", e.what());
  }
}

void StreamingExecutor::Publish() {
  if (progress_) progress_->Update(Stats(), totals_, Clock::now());
  PublishPanel(false);
  if (!stats_box_) return;
  std::lock_guard<std::mutex> lock(stats_box_->mutex);
  stats_box_->stats = Stats();
}

// ---- Actor pools and retries -------------------------------------------------------------

void StreamingExecutor::AddStages(const std::vector<Op>& ops) {
  for (std::vector<Op>& group : SplitAtActorOps(ops)) {
    if (group.empty()) continue;
    PhysicalOp stage;
    stage.kind = group[0].kind == Op::kMapBatchesClass ? PhysicalOp::kActorPool : PhysicalOp::kTransform;
    stage.stats.name = Stage{group}.Name();
    stage.ops = std::move(group);
    ops_.push_back(std::move(stage));
  }
}

void StreamingExecutor::ScheduleActorPool(size_t i) {
  PhysicalOp& op = ops_[i];
  if (op.stopped) return;
  op.pool->Scale(false, false);  // up to min, from the start (Ray starts min actors eagerly)
  while (CanLaunch(i)) {
    if (!op.pool->HasIdle() && op.pool->Scale(true, true) == 0) break;
    Launch(i);
  }
  op.stats.actors_started = op.pool->started();
  op.stats.peak_actors = op.pool->peak();
}

bool StreamingExecutor::Retry(size_t i, Running& run) {
  PhysicalOp& op = ops_[i];
  int max_retries = 0;
  for (const Op& o : op.ops) max_retries = std::max<int>(max_retries, o.max_retries);
  if (op.kind == PhysicalOp::kRead) max_retries = std::max(max_retries, 3);
  if (run.attempt >= max_retries || op.stopped) return false;
  run.attempt += 1;
  run.actor = -1;
  run.block = ObjectRef<Block>();
  run.meta = ObjectRef<BlockMeta>();
  op.stats.retries += 1;
  op.retry.push_back(std::move(run));
  return true;
}

void StreamingExecutor::ClosePools(bool all) {
  for (size_t i = 0; i < ops_.size(); ++i) {
    PhysicalOp& op = ops_[i];
    if (!op.pool) continue;
    // Kill the actors once no block can reach them any more.
    if (all || op.stopped || (op.running.empty() && op.retry.empty() && Exhausted(i - 1))) {
      op.pool->Close();
    }
  }
}

}  // namespace prism::data::internal
