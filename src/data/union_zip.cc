// Union and Zip: plans whose source is other plans' output (Ray Data's union and zip).
//
// Union runs its inputs one after another, each as its own StreamingExecutor started only
// when the one before it has ended, and feeds their blocks to the union's executor
// through its upstream puller (executor.h). The operators after the union that map one
// block to one block (up to the first Limit or Write) are pushed into each input's plan,
// where they fuse with the input's read; a Limit, a Write and what follows them run on the
// union's stream (a Write numbers its parts over the whole stream). The inputs must share
// one schema (names, dtypes, row shapes): Union() checks it when both schemas are known
// without running (a Range or stored blocks with no operators), and the execution checks
// every block against the first input's, failing the consumption with both schemas.
//
// Zip runs both of its inputs to the end first (their blocks stay in the object store;
// only their metadata reaches the driver), checks that the row counts match, and re-cuts
// the other side to this side's block boundaries (CutToBoundaries). Then, as the consumer
// takes blocks, one task per block of this side takes that block and the other side's
// pieces covering the same rows (a slice when they fall in one block, no copy; a
// concatenation of slices when they span several) and puts the columns side by side, the
// other side's duplicate names suffixed "_1" as Ray's zip does.

#include "data/union_zip.h"
#include "data/errors.h"

#include <algorithm>
#include <set>
#include <utility>

#include "prism/api.h"
#include "prism/remote.h"
#include "prism/task_caller.h"

namespace prism::data::internal {

namespace {

int ZipTimeoutMs(const ExecutionOptions& options) {
  return static_cast<int>(std::min(2.0e9, std::max(1.0, options.task_timeout_s * 1000)));
}

}  // namespace

/// One block of a Zip: `left` (cut to keep_rows if >= 0) with the other side's pieces
/// (indexes into `rights`) as columns named `right_names`.
Block PrismDataZipBlocks(Block left, int64_t keep_rows, std::vector<ObjectRef<Block>> rights,
                         std::vector<Piece> pieces, std::vector<std::string> right_names,
                         int64_t index, int timeout_ms) {
  try {
    if (keep_rows >= 0 && keep_rows < left.num_rows()) left = left.Slice(0, keep_rows);
    std::vector<Block> blocks;
    for (const ObjectRef<Block>& ref : rights) blocks.push_back(*Get(ref, timeout_ms));
    Block right = AssemblePieces(blocks, pieces);
    if (right.num_rows() != left.num_rows()) {
      throw Error("the other side's pieces hold " + std::to_string(right.num_rows()) +
                  " rows for a block of " + std::to_string(left.num_rows()) + " (a bug)");
    }
    if (right.num_columns() != right_names.size()) {
      throw Error("the other side's blocks have " + std::to_string(right.num_columns()) +
                  " columns, its first block " + std::to_string(right_names.size()) +
                  ": zip datasets whose blocks share one schema");
    }
    std::vector<std::pair<std::string, Column>> columns;
    for (size_t i = 0; i < left.num_columns(); ++i) columns.push_back(left.column_at(i));
    for (size_t i = 0; i < right.num_columns(); ++i) {
      columns.emplace_back(right_names[i], right.column_at(i).second);
    }
    return Block::FromColumns(std::move(columns));
  } catch (...) {
    throw OpError("prism::data: Zip failed on block " + std::to_string(index) + ": " +
                  platform::DescribeException(std::current_exception()));
  }
}

}  // namespace prism::data::internal

PRISM_REMOTE(prism::data::internal::PrismDataZipBlocks);

namespace prism::data::internal {

// ---- Pure logic --------------------------------------------------------------------------

std::vector<std::vector<Piece>> CutToBoundaries(const std::vector<int64_t>& target_rows,
                                                const std::vector<int64_t>& source_rows) {
  int64_t targets = 0, sources = 0;
  for (int64_t r : target_rows) targets += r;
  for (int64_t r : source_rows) sources += r;
  if (targets > sources) {
    throw Error("prism::data: cannot cut " + std::to_string(sources) + " rows into runs of " +
                std::to_string(targets) + " rows");
  }
  std::vector<std::vector<Piece>> out(target_rows.size());
  int64_t block = 0, offset = 0;  // the next source row: block `block`, row `offset`
  for (size_t t = 0; t < target_rows.size(); ++t) {
    int64_t need = target_rows[t];
    while (need > 0) {
      while (offset >= source_rows[static_cast<size_t>(block)]) {
        ++block;
        offset = 0;
      }
      const int64_t take = std::min(need, source_rows[static_cast<size_t>(block)] - offset);
      out[t].push_back(Piece{block, offset, offset + take});
      offset += take;
      need -= take;
    }
  }
  return out;
}

std::vector<std::string> ZipColumnNames(const std::vector<std::string>& left,
                                        const std::vector<std::string>& right) {
  std::set<std::string> taken(left.begin(), left.end());
  std::vector<std::string> out;
  for (const std::string& name : right) {
    std::string unique = name;
    for (int suffix = 1; taken.count(unique) > 0; ++suffix) unique = name + "_" + std::to_string(suffix);
    taken.insert(unique);
    out.push_back(unique);
  }
  return out;
}

Block AssemblePieces(const std::vector<Block>& blocks, const std::vector<Piece>& pieces) {
  std::vector<Block> slices;
  for (const Piece& p : pieces) {
    const Block& b = blocks.at(static_cast<size_t>(p.block));
    slices.push_back(p.begin == 0 && p.end == b.num_rows() ? b : b.Slice(p.begin, p.end));
  }
  if (slices.empty()) return Block();
  return slices.size() == 1 ? slices[0] : Block::Concat(slices);
}

// ---- Known without running -----------------------------------------------------------------

std::optional<data::Schema> KnownSchema(const DatasetState& state) {
  if (!state.ops.empty()) return std::nullopt;
  const Source& source = *state.source;
  if (source.combine == Source::kUnion) return KnownSchema(*source.inputs.at(0));
  if (source.combine != Source::kNone) return std::nullopt;
  for (const BlockHandle& h : source.blocks) {
    if (!h.meta.names.empty()) return h.meta.ToSchema();
  }
  if (source.reads.empty()) return std::nullopt;
  for (const ReadTask& read : source.reads) {
    if (read.kind != ReadTask::kRange) return std::nullopt;
  }
  data::Schema schema;
  schema.fields.push_back({source.reads[0].column, DType::kInt64, {}});
  return schema;
}

namespace {

/// Rows of a plan when known without running it (stored blocks or a Range, no operators).
std::optional<int64_t> KnownRows(const DatasetState& state) {
  if (!state.ops.empty() || state.source->combine != Source::kNone) return std::nullopt;
  int64_t rows = 0;
  for (const BlockHandle& h : state.source->blocks) rows += h.rows();
  for (const ReadTask& read : state.source->reads) {
    if (read.kind != ReadTask::kRange) return std::nullopt;
    rows += read.end - read.begin;
  }
  return rows;
}

std::string SchemaMismatch(size_t input, const data::Schema& schema, size_t first,
                           const data::Schema& first_schema) {
  return "prism::data: Union: input " + std::to_string(input) + " has schema {" +
         schema.ToString() + "} but input " + std::to_string(first) + " has {" +
         first_schema.ToString() +
         "}; union datasets with the same column names, dtypes and row shapes (align them with "
         "SelectColumns, DropColumns or a Map first)";
}

std::string CountMismatch(int64_t left, int64_t right) {
  return "prism::data: Zip: this dataset has " + std::to_string(left) + " rows and the other " +
         std::to_string(right) + "; Zip needs the same number of rows on both sides (Limit the "
         "longer one)";
}

/// Operators that map one block to one block on their own (and so commute with a union).
bool PushesThroughUnion(const Op& op) {
  return op.kind != Op::kLimit && op.kind != Op::kWrite;
}

DatasetStats Prefixed(const DatasetStats& stats, const std::string& prefix) {
  DatasetStats out = stats;
  for (OperatorStats& op : out.operators) op.name = prefix + op.name;
  return out;
}

void Append(DatasetStats& to, const DatasetStats& from) {
  to.operators.insert(to.operators.end(), from.operators.begin(), from.operators.end());
}

/// The running state of a Union's inputs, shared by its puller and its stats.
struct UnionRun {
  std::vector<std::shared_ptr<const DatasetState>> inputs;
  std::vector<Op> pushed;  // the union's leading one-to-one operators
  size_t next = 0;         // the input running (or to run next)
  std::unique_ptr<StreamingExecutor> current;
  DatasetStats finished;   // the stats of the inputs that ended
  std::optional<data::Schema> first_schema;
  size_t first_input = 0;
  std::optional<std::string> failed;

  std::optional<BlockHandle> Next() {
    if (failed) throw Error(*failed);
    for (;;) {
      if (!current) {
        if (next == inputs.size()) return std::nullopt;
        std::vector<Op> ops = inputs[next]->ops;
        ops.insert(ops.end(), pushed.begin(), pushed.end());
        current = Execute(*inputs[next], ops);
      }
      std::optional<BlockHandle> h = current->Next();
      if (!h) {
        Append(finished, Prefixed(current->Stats(), "Union[" + std::to_string(next) + "]: "));
        current.reset();
        ++next;
        continue;
      }
      if (!h->meta.names.empty()) {
        data::Schema schema = h->meta.ToSchema();
        if (!first_schema) {
          first_schema = schema;
          first_input = next;
        } else if (schema != *first_schema) {
          failed = SchemaMismatch(next, schema, first_input, *first_schema);
          current.reset();
          throw Error(*failed);
        }
      }
      return h;
    }
  }

  DatasetStats Stats() const {
    DatasetStats out = finished;
    if (current) Append(out, Prefixed(current->Stats(), "Union[" + std::to_string(next) + "]: "));
    return out;
  }
};

/// Every block of a plan, run to the end.
std::vector<BlockHandle> RunToEnd(const DatasetState& state, DatasetStats& stats,
                                  const std::string& prefix) {
  auto executor = Execute(state, state.ops);
  std::vector<BlockHandle> out;
  while (std::optional<BlockHandle> h = executor->Next()) {
    if (h->rows() > 0) out.push_back(std::move(*h));
  }
  Append(stats, Prefixed(executor->Stats(), prefix));
  return out;
}

/// A Zip's two sides, run to the end, and the blocks it hands out one by one.
struct ZipRun {
  std::shared_ptr<const DatasetState> left_state, right_state;
  ExecutionOptions options;
  bool started = false;
  std::vector<BlockHandle> left, right;
  std::vector<std::vector<Piece>> cuts;
  std::vector<std::string> right_names;
  BlockMeta right_meta;
  size_t next = 0;
  DatasetStats stats;

  void Start() {
    started = true;
    left = RunToEnd(*left_state, stats, "Zip[0]: ");
    right = RunToEnd(*right_state, stats, "Zip[1]: ");
    std::vector<int64_t> left_rows, right_rows;
    int64_t left_total = 0, right_total = 0;
    for (const BlockHandle& h : left) left_total += left_rows.emplace_back(h.rows());
    for (const BlockHandle& h : right) right_total += right_rows.emplace_back(h.rows());
    if (left_total != right_total) throw Error(CountMismatch(left_total, right_total));
    cuts = CutToBoundaries(left_rows, right_rows);
    if (!right.empty()) {
      right_meta = right[0].meta;
      std::vector<std::string> left_names = left[0].meta.names;
      right_names = ZipColumnNames(left_names, right_meta.names);
    }
  }

  std::optional<BlockHandle> Next() {
    if (!started) Start();
    if (next == left.size()) return std::nullopt;
    const size_t i = next++;
    const BlockHandle& l = left[i];
    std::vector<ObjectRef<Block>> refs;
    std::vector<Piece> pieces;
    BlockHandle out;
    out.index = static_cast<int64_t>(i);
    out.meta = l.meta;
    out.meta.rows = l.rows();
    if (l.meta.rows > 0) out.meta.bytes = l.meta.bytes * static_cast<uint64_t>(l.rows()) / static_cast<uint64_t>(l.meta.rows);
    for (const Piece& p : cuts[i]) {
      const BlockHandle& r = right[static_cast<size_t>(p.block)];
      refs.push_back(r.block);
      pieces.push_back(Piece{static_cast<int64_t>(refs.size() - 1), p.begin, p.end});
      if (r.meta.rows > 0) {
        out.meta.bytes += r.meta.bytes * static_cast<uint64_t>(p.rows()) / static_cast<uint64_t>(r.meta.rows);
      }
    }
    for (size_t c = 0; c < right_names.size(); ++c) {
      out.meta.names.push_back(right_names[c]);
      out.meta.dtypes.push_back(right_meta.dtypes.at(c));
      out.meta.shapes.push_back(right_meta.shapes.at(c));
    }
    out.block = Task(PrismDataZipBlocks)
                    .Remote(l.block, l.keep_rows, refs, pieces, right_names, out.index,
                            ZipTimeoutMs(options));
    return out;
  }
};

}  // namespace

std::unique_ptr<StreamingExecutor> ExecuteCombined(const DatasetState& state, const std::vector<Op>& ops) {
  const Source& source = *state.source;
  auto bare = std::make_shared<Source>();
  bare->name = source.name;
  if (source.combine == Source::kUnion) {
    auto run = std::make_shared<UnionRun>();
    run->inputs = source.inputs;
    size_t first_rest = 0;
    while (first_rest < ops.size() && PushesThroughUnion(ops[first_rest])) ++first_rest;
    run->pushed.assign(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(first_rest));
    std::vector<Op> rest(ops.begin() + static_cast<std::ptrdiff_t>(first_rest), ops.end());
    return std::make_unique<StreamingExecutor>(
        bare, rest, state.options, state.stats, [run] { return run->Next(); },
        [run] { return run->Stats(); });
  }
  auto run = std::make_shared<ZipRun>();
  run->left_state = source.inputs.at(0);
  run->right_state = source.inputs.at(1);
  run->options = state.options;
  return std::make_unique<StreamingExecutor>(
      bare, ops, state.options, state.stats, [run] { return run->Next(); },
      [run] { return run->stats; });
}

}  // namespace prism::data::internal

namespace prism::data {

using internal::DatasetState;
using internal::Source;

Dataset Dataset::Union(const std::vector<Dataset>& others) const {
  auto source = std::make_shared<Source>();
  source->name = "Union";
  source->combine = Source::kUnion;
  source->inputs.push_back(state_);
  const std::optional<data::Schema> first = internal::KnownSchema(*state_);
  for (size_t i = 0; i < others.size(); ++i) {
    source->inputs.push_back(others[i].state_);
    const std::optional<data::Schema> schema = internal::KnownSchema(*others[i].state_);
    if (first && schema && *first != *schema) {
      throw Error(internal::SchemaMismatch(i + 1, *schema, 0, *first));
    }
  }
  auto state = std::make_shared<DatasetState>();
  state->source = std::move(source);
  state->options = state_->options;
  return Dataset(std::move(state));
}

Dataset Dataset::Zip(const Dataset& other) const {
  const std::optional<int64_t> left = internal::KnownRows(*state_);
  const std::optional<int64_t> right = internal::KnownRows(*other.state_);
  if (left && right && *left != *right) throw Error(internal::CountMismatch(*left, *right));
  auto source = std::make_shared<Source>();
  source->name = "Zip";
  source->combine = Source::kZip;
  source->inputs = {state_, other.state_};
  auto state = std::make_shared<DatasetState>();
  state->source = std::move(source);
  state->options = state_->options;
  return Dataset(std::move(state));
}

}  // namespace prism::data
