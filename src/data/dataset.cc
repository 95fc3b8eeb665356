// NOTES (issue 17, Nov 25 2026)
//
// Built: the lazy Dataset with every source, transform, consumption and sink of issue 17;
// fusion (plan.cc); the streaming executor (executor.cc) with a byte budget per operator
// (default: half of ClusterResources()["object_store_memory"]); IterBatches' batcher
// (batcher.cc: slices, pulls ahead, reused buffers); class MapBatches in an autoscaling actor
// pool, retries, progress lines (actor_pool_op.cc, progress.cc); Repartition, RandomShuffle,
// Sort, GroupBy over collective::Group::AllToAllV (all_to_all.cc, grouped_data.cc); Union,
// Zip, Split, StreamingSplit, DataIterator, local shuffle, IterTorchBatches,
// train::GetDatasetShard (union_zip.cc, split.cc). Tests: ctest -L data. Figures:
// perf/README.md "Data"; the Dask side by side: perf/run_peers.sh.
//
// Known limits (perf/README.md "Data" has the figures):
//   * Shuffle speed: RandomShuffle of 2 GiB at 0.37-0.44x of a raw MPI_Alltoallv (target
//     0.7x). Raw is one CMA pass; a uniform order needs at least one more (a scatter), and
//     a member makes two (bucket write, gather into the output objects). Next, if needed:
//     receive with MPI datatypes that scatter rows into place (loses CMA's single copy).
//   * The budget is one figure for the cluster while each rank has its own store: at a
//     64 MiB cap blocks gathered on one rank can spill (perf/data_memory_benchmark.cc).
//   * A StreamingSplit's coordinator holds the blocks an early-stopped consumer never takes
//     until the next epoch; Zip runs both sides to the end before its first block; a lost
//     rank ends an MPI job, so the task stages' SetMaxRetries path has no test.
//
// The Dataset API: sources, transforms (each a new Dataset sharing the source), and
// consumptions that each run one StreamingExecutor.

#include "prism/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <utility>

#include "data/batcher.h"
#include "data/executor.h"
#include "data/io.h"
#include "data/iterator_state.h"
#include "data/plan.h"
#include "data/union_zip.h"
#include "prism/platform/storage.h"

namespace prism::data {

using internal::Batcher;
using internal::BlockHandle;
using internal::DatasetState;
using internal::Op;
using internal::ReadPlanOptions;
using internal::ReadTask;
using internal::Source;
using internal::StreamingExecutor;

namespace internal {

std::unique_ptr<StreamingExecutor> Execute(const DatasetState& state, const std::vector<Op>& ops) {
  if (state.source->combine != Source::kNone) return ExecuteCombined(state, ops);
  return std::make_unique<StreamingExecutor>(state.source, ops, state.options, state.stats);
}

namespace {

int TimeoutMs(const ExecutionOptions& options) {
  return static_cast<int>(std::min(2.0e9, std::max(1.0, options.task_timeout_s * 1000)));
}

// The block a handle names, fetched to this rank and cut to the rows that count.
Block Fetch(const BlockHandle& h, int timeout_ms) { return FetchBlock(h, timeout_ms); }

uint64_t RowBytes(DType dtype, const std::vector<int64_t>& row_shape) {
  int64_t elements = 1;
  for (int64_t d : row_shape) elements *= d;
  const uint64_t size = dtype == DType::kString ? 32 : DTypeSize(dtype);
  return size * static_cast<uint64_t>(std::max<int64_t>(1, elements));
}

// Per-file split options: override_num_blocks is for the whole source.
ReadPlanOptions PerFile(const ReadOptions& options, size_t files) {
  ReadPlanOptions out;
  out.target_block_bytes = std::max<uint64_t>(1, options.target_block_bytes);
  if (options.override_num_blocks > 0) {
    out.override_num_blocks =
        std::max<int64_t>(1, (options.override_num_blocks + static_cast<int64_t>(files) - 1) /
                                 static_cast<int64_t>(files));
  }
  return out;
}

void CheckReadOptions(const ReadOptions& options, const char* what) {
  if (options.target_block_bytes == 0) {
    throw Error(std::string("prism::data::") + what +
                ": ReadOptions::target_block_bytes is 0; give the bytes per read task (default 4 MiB)");
  }
  if (options.override_num_blocks < 0) {
    throw Error(std::string("prism::data::") + what + ": ReadOptions::override_num_blocks is " +
                std::to_string(options.override_num_blocks) + "; use 0 (automatic) or a positive count");
  }
}

Dataset FromSource(Source source) {
  auto state = std::make_shared<DatasetState>();
  state->source = std::make_shared<const Source>(std::move(source));
  return Dataset(std::move(state));
}

}  // namespace
}  // namespace internal

using internal::Execute;
using internal::Fetch;
using internal::TimeoutMs;

// ---- Stats ---------------------------------------------------------------------------

std::string DatasetStats::ToString() const {
  std::ostringstream out;
  for (const OperatorStats& op : operators) {
    out << op.name << ": " << op.tasks << " tasks, " << op.blocks << " blocks, " << op.rows
        << " rows, " << op.bytes << " bytes, peak " << op.peak_bytes << " bytes (budget "
        << op.budget_bytes << ") and " << op.peak_tasks_in_flight << " tasks in flight, "
        << std::fixed << std::setprecision(3) << op.seconds << " s";
    if (op.actors_started > 0) {
      out << ", " << op.actors_started << " actors started (peak " << op.peak_actors << ")";
    }
    if (op.retries > 0) out << ", " << op.retries << " retries";
    out << "\n";
  }
  return out.str();
}

// ---- BatchIterator ---------------------------------------------------------------------

BatchIterator::BatchIterator(std::unique_ptr<internal::IteratorState> state)
    : state_(std::move(state)) {}
BatchIterator::BatchIterator(BatchIterator&&) noexcept = default;
BatchIterator& BatchIterator::operator=(BatchIterator&&) noexcept = default;
BatchIterator::~BatchIterator() = default;

namespace {

// ---- Local shuffle (Ray's local_shuffle_buffer_size) ---------------------------------------

// The next batch of a shuffled iteration: once the buffer holds shuffle_buffer rows plus a
// batch (or the input ended), the rows not yet handed out and the new blocks are shuffled
// together, and batches are taken from the front of that order until new blocks come.
std::optional<Block> NextShuffled(internal::IteratorState& s) {
  const int64_t left = s.shuffled.num_rows() - s.shuffled_offset;
  const int64_t want = s.shuffle_buffer + s.batch_size;
  if (left < want) {
    while (!s.exhausted && left + s.pending_rows < want) {
      std::optional<BlockHandle> h = s.next_block ? s.next_block() : s.executor->Next();
      if (!h) {
        s.exhausted = true;
        break;
      }
      if (h->rows() == 0) continue;
      Block block = Fetch(*h, s.fetch_timeout_ms);
      s.pending_rows += block.num_rows();
      s.pending.push_back(std::move(block));
    }
    if (!s.pending.empty()) {
      std::vector<Block> parts;
      if (left > 0) parts.push_back(s.shuffled.Slice(s.shuffled_offset, s.shuffled.num_rows()));
      for (Block& b : s.pending) parts.push_back(std::move(b));
      s.pending.clear();
      s.pending_rows = 0;
      Block all = parts.size() == 1 ? parts[0] : Block::Concat(parts);
      std::vector<int64_t> order(static_cast<size_t>(all.num_rows()));
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
      std::shuffle(order.begin(), order.end(), s.rng);
      s.shuffled = internal::GatherRows(all, order);
      s.shuffled_offset = 0;
    }
  }
  const int64_t available = s.shuffled.num_rows() - s.shuffled_offset;
  if (available == 0 || (available < s.batch_size && s.drop_last)) return std::nullopt;
  const int64_t take = std::min(available, s.batch_size);
  Block batch = s.shuffled.Slice(s.shuffled_offset, s.shuffled_offset + take);
  s.shuffled_offset += take;
  return batch;
}

}  // namespace

namespace internal {

Block GatherRows(const Block& block, const std::vector<int64_t>& order) {
  std::vector<std::pair<std::string, Column>> columns;
  for (size_t c = 0; c < block.num_columns(); ++c) {
    const auto& [name, column] = block.column_at(c);
    if (column.dtype() == DType::kString) {
      std::vector<std::string> values;
      values.reserve(order.size());
      for (int64_t i : order) values.emplace_back(column.StringAt(i));
      columns.emplace_back(name, Column::FromStrings(values));
      continue;
    }
    const size_t row_bytes = DTypeSize(column.dtype()) * static_cast<size_t>(column.row_elements());
    // Bytes in a vector of 8-byte words, so every dtype is aligned.
    auto bytes = std::make_shared<std::vector<uint64_t>>((row_bytes * order.size() + 7) / 8);
    auto* out = reinterpret_cast<char*>(bytes->data());
    const auto* in = static_cast<const char*>(column.data());
    for (size_t r = 0; r < order.size(); ++r) {
      std::memcpy(out + r * row_bytes, in + static_cast<size_t>(order[r]) * row_bytes, row_bytes);
    }
    columns.emplace_back(name, Column::Wrap(column.dtype(), static_cast<int64_t>(order.size()),
                                            column.row_shape(), out, bytes));
  }
  return Block::FromColumns(std::move(columns));
}

}  // namespace internal

std::optional<Block> BatchIterator::Next() {
  internal::IteratorState& s = *state_;
  if (s.shuffle_buffer > 0) return NextShuffled(s);
  // The batcher (data/batcher.h: slices, pulls ahead, reused buffers) is made at the first
  // batch, once the block source and its fetch timeout are set.
  if (!s.batcher) {
    s.batcher = std::make_unique<Batcher>(s.batch_size, s.prefetch_batches, s.drop_last,
                                          s.fetch_timeout_ms);
  }
  return s.batcher->Next([&s] { return s.next_block ? s.next_block() : s.executor->Next(); });
}

DatasetStats BatchIterator::Stats() const {
  return state_->executor ? state_->executor->Stats() : DatasetStats{};
}

// ---- Dataset: transforms -----------------------------------------------------------------

Dataset::Dataset() {
  auto state = std::make_shared<DatasetState>();
  auto source = std::make_shared<Source>();
  source->name = "Empty";
  state->source = std::move(source);
  state_ = std::move(state);
}

Dataset::Dataset(std::shared_ptr<const DatasetState> state) : state_(std::move(state)) {}

namespace {

Dataset With(const DatasetState& from, Op op) {
  auto state = std::make_shared<DatasetState>();
  state->source = from.source;
  state->ops = from.ops;
  state->ops.push_back(std::move(op));
  state->options = from.options;
  return Dataset(std::move(state));
}

}  // namespace

Dataset Dataset::WithUdf(UdfOp kind, const std::string& fn) const {
  Op op;
  op.kind = kind == kMapOp ? Op::kMap : kind == kFilterOp ? Op::kFilter : Op::kFlatMap;
  op.fn = fn;
  return With(*state_, std::move(op));
}

Dataset Dataset::WithBound(UdfOp kind, const BoundUdf& fn, int max_retries,
                           const RetryExceptions& retry) const {
  if (fn.trampoline.empty()) throw Error("prism::data::Dataset: a BoundUdf without a trampoline");
  Op op;
  op.kind = kind == kMapOp ? Op::kMap : kind == kFilterOp ? Op::kFilter : Op::kFlatMap;
  op.fn = fn.trampoline;
  op.has_bound = true;
  op.bound = fn.bound;
  op.display = fn.name;
  return With(*state_, std::move(op)).WithRetries(max_retries, retry);
}

Dataset Dataset::Map(const BoundUdf& fn, const MapOptions& options) const {
  return WithBound(kMapOp, fn, options.max_retries, options.retry_exceptions);
}
Dataset Dataset::Filter(const BoundUdf& fn, const MapOptions& options) const {
  return WithBound(kFilterOp, fn, options.max_retries, options.retry_exceptions);
}
Dataset Dataset::FlatMap(const BoundUdf& fn, const MapOptions& options) const {
  return WithBound(kFlatMapOp, fn, options.max_retries, options.retry_exceptions);
}

Dataset Dataset::MapBatches(const BoundUdf& fn, const MapBatchesOptions& options) const {
  const std::string name = fn.name.empty() ? fn.trampoline : fn.name;
  if (fn.trampoline.empty()) throw Error("prism::data::Dataset: a BoundUdf without a trampoline");
  if (options.batch_size <= 0) {
    throw Error("prism::data::Dataset::MapBatches(" + name + ", batch_size=" +
                std::to_string(options.batch_size) + "): batch_size must be a positive number of rows");
  }
  Op op;
  op.kind = Op::kMapBatches;
  op.fn = fn.trampoline;
  op.has_bound = true;
  op.bound = fn.bound;
  op.display = fn.name;
  op.batch_size = options.batch_size;
  return With(*state_, std::move(op)).WithRetries(options.max_retries, options.retry_exceptions);
}

Dataset Dataset::WithMapBatches(const std::string& fn, int64_t batch_size) const {
  if (batch_size <= 0) {
    throw Error("prism::data::Dataset::MapBatches(" + fn + ", batch_size=" + std::to_string(batch_size) +
                "): batch_size must be a positive number of rows");
  }
  Op op;
  op.kind = Op::kMapBatches;
  op.fn = fn;
  op.batch_size = batch_size;
  return With(*state_, std::move(op));
}

Dataset Dataset::WithRetries(int max_retries, const RetryExceptions& retry) const {
  Op op = state_->ops.back();
  if (max_retries < 0) {
    throw Error("prism::data::Dataset::" + op.Name() + ": max_retries is " + std::to_string(max_retries) +
                "; use 0 (no retries) or more");
  }
  op.max_retries = max_retries;
  op.retry_all = retry.all();
  op.retry_types = retry.types();
  auto state = std::make_shared<DatasetState>();
  state->source = state_->source;
  state->ops = state_->ops;
  state->ops.back() = std::move(op);
  state->options = state_->options;
  return Dataset(std::move(state));
}

Dataset Dataset::WithActorClass(const std::string& name, const std::string& key,
                                const std::vector<std::string>& args,
                                const MapBatchesOptions& options) const {
  const std::string what = "prism::data::Dataset::MapBatches(" + name + ")";
  if (options.batch_size <= 0) {
    throw Error(what + ": batch_size is " + std::to_string(options.batch_size) +
                "; it must be a positive number of rows");
  }
  if (options.concurrency.min < 1) {
    throw Error(what + ": concurrency.min is " + std::to_string(options.concurrency.min) +
                "; a pool needs at least 1 actor");
  }
  if (options.concurrency.max != 0 && options.concurrency.max < options.concurrency.min) {
    throw Error(what + ": concurrency is {" + std::to_string(options.concurrency.min) + ", " +
                std::to_string(options.concurrency.max) +
                "}: max must be >= min (or 0: as many actors as the cluster has CPUs)");
  }
  if (options.num_cpus < 0 || options.num_gpus < 0) {
    throw Error(what + ": num_cpus and num_gpus must be >= 0");
  }
  if (options.max_retries < 0) {
    throw Error(what + ": max_retries is " + std::to_string(options.max_retries) + "; use 0 or more");
  }
  Op op;
  op.kind = Op::kMapBatchesClass;
  op.fn = name;
  op.batch_size = options.batch_size;
  op.class_key = key;
  op.class_args = args;
  op.min_actors = options.concurrency.min;
  op.max_actors = options.concurrency.max;
  op.num_cpus = options.num_cpus;
  op.num_gpus = options.num_gpus;
  op.max_retries = options.max_retries;
  op.retry_all = options.retry_exceptions.all();
  op.retry_types = options.retry_exceptions.types();
  return With(*state_, std::move(op));
}

Dataset Dataset::WithAddColumn(const std::string& name, const std::string& fn) const {
  if (name.empty()) throw Error("prism::data::Dataset::AddColumn: the column name is empty");
  Op op;
  op.kind = Op::kAddColumn;
  op.fn = fn;
  op.column = name;
  return With(*state_, std::move(op));
}

Dataset Dataset::SelectColumns(const std::vector<std::string>& names) const {
  if (names.empty()) {
    throw Error("prism::data::Dataset::SelectColumns: no columns given (name at least one)");
  }
  Op op;
  op.kind = Op::kSelectColumns;
  op.columns = names;
  return With(*state_, std::move(op));
}

Dataset Dataset::DropColumns(const std::vector<std::string>& names) const {
  Op op;
  op.kind = Op::kDropColumns;
  op.columns = names;
  return With(*state_, std::move(op));
}

Dataset Dataset::Limit(int64_t n) const {
  if (n < 0) {
    throw Error("prism::data::Dataset::Limit(" + std::to_string(n) + "): n must be >= 0");
  }
  Op op;
  op.kind = Op::kLimit;
  op.limit = n;
  return With(*state_, std::move(op));
}

Dataset Dataset::WithExecutionOptions(const ExecutionOptions& options) const {
  if (!(options.task_timeout_s > 0)) {
    throw Error("prism::data::ExecutionOptions::task_timeout_s must be positive (seconds)");
  }
  if (options.max_tasks_in_flight_per_op < 0) {
    throw Error("prism::data::ExecutionOptions::max_tasks_in_flight_per_op must be >= 0 (0: automatic)");
  }
  auto state = std::make_shared<DatasetState>();
  state->source = state_->source;
  state->ops = state_->ops;
  state->options = options;
  return Dataset(std::move(state));
}

// ---- Dataset: consumption ----------------------------------------------------------------

namespace internal {

std::unique_ptr<IteratorState> NewIteratorState(const char* what, int64_t batch_size,
                                                int prefetch_batches, bool drop_last,
                                                int64_t local_shuffle_buffer_size,
                                                std::optional<uint64_t> local_shuffle_seed) {
  if (batch_size <= 0) {
    throw Error(std::string("prism::data::") + what + "(batch_size=" + std::to_string(batch_size) +
                "): batch_size must be a positive number of rows");
  }
  if (prefetch_batches < 0) {
    throw Error(std::string("prism::data::") + what + ": prefetch_batches is " +
                std::to_string(prefetch_batches) + "; use 0 or more");
  }
  if (local_shuffle_buffer_size < 0) {
    throw Error(std::string("prism::data::") + what + ": local_shuffle_buffer_size is " +
                std::to_string(local_shuffle_buffer_size) + "; use 0 (no shuffle) or a number of rows");
  }
  auto s = std::make_unique<IteratorState>();
  s->batch_size = batch_size;
  s->prefetch_batches = prefetch_batches;
  s->drop_last = drop_last;
  s->shuffle_buffer = local_shuffle_buffer_size;
  s->rng.seed(local_shuffle_seed ? *local_shuffle_seed : std::random_device{}());
  return s;
}

}  // namespace internal

BatchIterator Dataset::IterBatches(int64_t batch_size, int prefetch_batches, bool drop_last,
                                   int64_t local_shuffle_buffer_size,
                                   std::optional<uint64_t> local_shuffle_seed) const {
  auto s = internal::NewIteratorState("Dataset::IterBatches", batch_size, prefetch_batches, drop_last,
                                      local_shuffle_buffer_size, local_shuffle_seed);
  s->executor = Execute(*state_, state_->ops);
  s->fetch_timeout_ms = TimeoutMs(state_->options);
  return BatchIterator(std::move(s));
}

std::vector<Row> Dataset::Take(int64_t n) const {
  if (n < 0) throw Error("prism::data::Dataset::Take(" + std::to_string(n) + "): n must be >= 0");
  std::vector<Row> rows;
  Dataset limited = Limit(n);
  auto executor = Execute(*limited.state_, limited.state_->ops);
  while (static_cast<int64_t>(rows.size()) < n) {
    std::optional<BlockHandle> h = executor->Next();
    if (!h) break;
    if (h->rows() == 0) continue;
    for (Row& row : Fetch(*h, TimeoutMs(state_->options)).ToRows()) rows.push_back(std::move(row));
  }
  if (static_cast<int64_t>(rows.size()) > n) rows.resize(static_cast<size_t>(n));
  std::lock_guard<std::mutex> lock(limited.state_->stats->mutex);
  std::lock_guard<std::mutex> mine(state_->stats->mutex);
  state_->stats->stats = limited.state_->stats->stats;
  return rows;
}

int64_t Dataset::Count() const {
  auto executor = Execute(*state_, state_->ops);
  int64_t rows = 0;
  while (std::optional<BlockHandle> h = executor->Next()) rows += h->rows();
  return rows;
}

data::Schema Dataset::Schema() const {
  auto executor = Execute(*state_, state_->ops);
  while (std::optional<BlockHandle> h = executor->Next()) {
    if (h->rows() > 0 || !h->meta.names.empty()) return h->meta.ToSchema();
  }
  return {};
}

Dataset Dataset::Materialize() const {
  auto executor = Execute(*state_, state_->ops);
  Source source;
  source.name = "Materialized";
  while (std::optional<BlockHandle> h = executor->Next()) {
    h->index = static_cast<int64_t>(source.blocks.size());
    source.blocks.push_back(std::move(*h));
  }
  auto state = std::make_shared<DatasetState>();
  state->source = std::make_shared<const Source>(std::move(source));
  state->options = state_->options;
  state->stats->stats = executor->Stats();
  return Dataset(std::move(state));
}

DatasetStats Dataset::Stats() const {
  std::lock_guard<std::mutex> lock(state_->stats->mutex);
  return state_->stats->stats;
}

int64_t Dataset::NumBlocks() const {
  const Source& source = *state_->source;
  return static_cast<int64_t>(source.blocks.empty() ? source.reads.size() : source.blocks.size());
}

// ---- Dataset: sinks --------------------------------------------------------------------

void Dataset::Write(int format, const std::string& dir, const std::string& column) const {
  if (dir.empty()) throw Error("prism::data::Dataset::Write*: the output directory is empty");
  Op op;
  op.kind = Op::kWrite;
  op.format = format;
  op.dir = dir;
  op.column = column;
  Dataset writing = With(*state_, op);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error("prism::data: " + op.Name() + ": cannot create the directory: " + ec.message());
  }
  // Write tasks run on every rank and the driver commits what they wrote: a node-local
  // directory would leave parts on other hosts (issue 46). Checked before any is written.
  platform::CheckStorageShared(dir, {"prism::data: " + op.Name(), "the output directory", ""});
  auto executor = Execute(*writing.state_, writing.state_->ops);
  std::vector<io::Part> parts;
  while (std::optional<BlockHandle> h = executor->Next()) {
    if (h->meta.part_file.empty()) continue;
    parts.push_back({h->meta.part_file, h->meta.part_rows, h->meta.part_bytes, h->meta.part_rank,
                     h->meta.part_host});
  }
  io::CommitParts(dir, parts);
  std::lock_guard<std::mutex> lock(state_->stats->mutex);
  state_->stats->stats = executor->Stats();
}

void Dataset::WriteHdf5(const std::string& dir) const { Write(Op::kHdf5, dir, ""); }
void Dataset::WriteNumpy(const std::string& dir, const std::string& column) const {
  Write(Op::kNumpy, dir, column);
}
void Dataset::WriteCsv(const std::string& dir) const { Write(Op::kCsv, dir, ""); }
void Dataset::WriteJson(const std::string& dir) const { Write(Op::kJson, dir, ""); }

// ---- Sources -----------------------------------------------------------------------------

Dataset Range(int64_t n, int64_t override_num_blocks) {
  if (n < 0) throw Error("prism::data::Range(" + std::to_string(n) + "): n must be >= 0");
  ReadPlanOptions options;
  options.override_num_blocks = std::max<int64_t>(0, override_num_blocks);
  Source source;
  source.name = "Range";
  for (auto [begin, end] : internal::SplitRows(n, sizeof(int64_t), options)) {
    ReadTask read;
    read.kind = ReadTask::kRange;
    read.begin = begin;
    read.end = end;
    read.column = "id";
    read.estimated_bytes = static_cast<uint64_t>(end - begin) * sizeof(int64_t);
    source.reads.push_back(std::move(read));
  }
  return internal::FromSource(std::move(source));
}

Dataset FromItems(const std::vector<Row>& items, int64_t override_num_blocks) {
  Block all = Block::FromRows(items);
  ReadPlanOptions options;
  options.override_num_blocks = std::max<int64_t>(0, override_num_blocks);
  const uint64_t row_bytes = all.num_rows() > 0 ? all.size_bytes() / static_cast<uint64_t>(all.num_rows()) : 1;
  Source source;
  source.name = "FromItems";
  for (auto [begin, end] : internal::SplitRows(all.num_rows(), row_bytes, options)) {
    Block block = all.Slice(begin, end);
    BlockHandle h;
    h.index = static_cast<int64_t>(source.blocks.size());
    h.meta = internal::BlockMeta::Of(block);
    h.block = Put(block);
    source.blocks.push_back(std::move(h));
  }
  return internal::FromSource(std::move(source));
}

Dataset FromBlocks(const std::vector<Block>& blocks) {
  Source source;
  source.name = "FromBlocks";
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].num_columns() == 0) continue;
    if (!source.blocks.empty() && !(blocks[i].schema() == source.blocks[0].meta.ToSchema())) {
      throw Error("prism::data::FromBlocks: block " + std::to_string(i) + " has schema {" +
                  blocks[i].schema().ToString() + "} but the first has {" +
                  source.blocks[0].meta.ToSchema().ToString() + "}; give blocks of one schema");
    }
    BlockHandle h;
    h.index = static_cast<int64_t>(source.blocks.size());
    h.meta = internal::BlockMeta::Of(blocks[i]);
    h.block = Put(blocks[i]);
    source.blocks.push_back(std::move(h));
  }
  return internal::FromSource(std::move(source));
}

Dataset ReadHdf5(const std::string& path_or_glob, const std::vector<std::string>& datasets,
                 const ReadOptions& options) {
  internal::CheckReadOptions(options, "ReadHdf5");
  std::vector<io::Hdf5File> files = io::ListHdf5(path_or_glob, datasets);
  const ReadPlanOptions split = internal::PerFile(options, files.size());
  Source source;
  source.name = "ReadHdf5";
  for (const io::Hdf5File& file : files) {
    uint64_t row_bytes = 0;
    for (const io::Hdf5Dataset& d : file.datasets) row_bytes += internal::RowBytes(d.dtype, d.row_shape);
    for (auto [begin, end] : internal::SplitRows(file.rows, row_bytes, split)) {
      ReadTask read;
      read.kind = ReadTask::kHdf5;
      read.paths = {file.path};
      read.names = datasets;
      read.begin = begin;
      read.end = end;
      read.estimated_bytes = static_cast<uint64_t>(end - begin) * row_bytes;
      source.reads.push_back(std::move(read));
    }
  }
  return internal::FromSource(std::move(source));
}

Dataset ReadNumpy(const std::string& path_or_glob, const ReadOptions& options) {
  internal::CheckReadOptions(options, "ReadNumpy");
  std::vector<std::string> files = io::ExpandPaths(path_or_glob, {".npy"});
  const ReadPlanOptions split = internal::PerFile(options, files.size());
  Source source;
  source.name = "ReadNumpy";
  for (const std::string& file : files) {
    io::NpyHeader header = io::ReadNpyHeader(file);
    std::vector<int64_t> row_shape(header.shape.begin() + 1, header.shape.end());
    const uint64_t row_bytes = internal::RowBytes(header.dtype, row_shape);
    for (auto [begin, end] : internal::SplitRows(header.shape[0], row_bytes, split)) {
      ReadTask read;
      read.kind = ReadTask::kNumpy;
      read.paths = {file};
      read.begin = begin;
      read.end = end;
      read.column = "data";
      read.estimated_bytes = static_cast<uint64_t>(end - begin) * row_bytes;
      source.reads.push_back(std::move(read));
    }
  }
  return internal::FromSource(std::move(source));
}

Dataset ReadCsv(const std::string& path_or_glob, char delimiter, const ReadOptions& options,
                const std::map<std::string, DType>& column_types) {
  internal::CheckReadOptions(options, "ReadCsv");
  std::vector<std::string> files = io::ExpandPaths(path_or_glob, {".csv"});
  const std::vector<std::string> header = io::ReadCsvHeader(files[0], delimiter);
  for (const auto& [name, dtype] : column_types) {
    if (std::find(header.begin(), header.end(), name) == header.end()) {
      std::string have;
      for (const std::string& h : header) have += (have.empty() ? "" : ", ") + h;
      throw Error("prism::data::ReadCsv: column_types names \"" + name + "\", which is not a column of " +
                  files[0] + " (its header has: " + have + ")");
    }
    if (dtype != DType::kInt64 && dtype != DType::kFloat64 && dtype != DType::kBool &&
        dtype != DType::kString) {
      throw Error("prism::data::ReadCsv: column_types gives \"" + name + "\" the type " +
                  DTypeName(dtype) + "; a CSV column is int64, float64, bool or string");
    }
  }
  // One schema for every block: the types given, and for the other columns those the first
  // MiB of the first file shows.
  std::map<std::string, int32_t> types;
  std::vector<std::string> inferred;
  {
    io::CsvOptions csv;
    csv.delimiter = delimiter;
    csv.column_types = column_types;
    const uint64_t size = io::FileSize(files[0]);
    Block sample = io::ReadCsvRange(files[0], 0, std::min<uint64_t>(size, 1 << 20), csv);
    if (sample.num_rows() > 0) {
      for (const Field& f : sample.schema().fields) {
        types[f.name] = static_cast<int32_t>(f.dtype);
        if (column_types.count(f.name) == 0) inferred.push_back(f.name);
      }
    }
  }
  const ReadPlanOptions split = internal::PerFile(options, files.size());
  Source source;
  source.name = "ReadCsv";
  for (const std::string& file : files) {
    const uint64_t size = io::FileSize(file);
    // Byte ranges: SplitRows over bytes (one "row" = one byte).
    for (auto [begin, end] : internal::SplitRows(static_cast<int64_t>(size), 1, split)) {
      ReadTask read;
      read.kind = ReadTask::kCsv;
      read.paths = {file};
      read.begin = begin;
      read.end = end;
      read.delimiter = delimiter;
      read.column_types = types;
      read.inferred_columns = inferred;
      read.estimated_bytes = static_cast<uint64_t>(end - begin);
      source.reads.push_back(std::move(read));
    }
  }
  return internal::FromSource(std::move(source));
}

Dataset ReadBinaryFiles(const std::string& path_or_glob, bool include_paths, const ReadOptions& options) {
  internal::CheckReadOptions(options, "ReadBinaryFiles");
  std::vector<std::string> files = io::ExpandPaths(path_or_glob);
  Source source;
  source.name = "ReadBinaryFiles";
  const int64_t per_group =
      options.override_num_blocks > 0
          ? (static_cast<int64_t>(files.size()) + options.override_num_blocks - 1) / options.override_num_blocks
          : 0;
  ReadTask group;
  auto flush = [&] {
    if (group.paths.empty()) return;
    group.kind = ReadTask::kBinary;
    group.include_paths = include_paths;
    source.reads.push_back(std::move(group));
    group = ReadTask();
  };
  for (const std::string& file : files) {
    const uint64_t size = io::FileSize(file);
    group.paths.push_back(file);
    group.estimated_bytes += size;
    const bool full = per_group > 0 ? static_cast<int64_t>(group.paths.size()) >= per_group
                                    : group.estimated_bytes >= options.target_block_bytes;
    if (full) flush();
  }
  flush();
  return internal::FromSource(std::move(source));
}

}  // namespace prism::data
