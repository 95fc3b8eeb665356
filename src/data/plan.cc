// A Dataset's plan: operator names, fusion, read splitting and what a fused stage does to a
// block. UDFs are called by their registered name through platform::Invoke on the rank
// that runs the stage (every rank runs the same binary).

#include "data/plan.h"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "data/io.h"
#include "prism/platform/invoke.h"

namespace prism::data::internal {

namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Rows [0, keep) of the batches of `block` of `batch_size` rows each (the last smaller).
std::vector<Block> Batches(const Block& block, int64_t batch_size) {
  std::vector<Block> out;
  if (block.num_rows() <= batch_size) {
    out.push_back(block);
    return out;
  }
  for (int64_t b = 0; b < block.num_rows(); b += batch_size) {
    out.push_back(block.Slice(b, std::min(block.num_rows(), b + batch_size)));
  }
  return out;
}

Block ApplyOne(const Block& block, const Op& op, int64_t index, std::string* part_file,
               int64_t* part_rows, uint64_t* part_bytes) {
  // An empty block (a Filter or FlatMap left no rows) passes through without calling UDFs,
  // which may expect columns that a block without rows need not have.
  const bool udf = op.kind == Op::kMap || op.kind == Op::kFilter || op.kind == Op::kFlatMap ||
                   op.kind == Op::kMapBatches || op.kind == Op::kAddColumn;
  if (block.num_rows() == 0 && (udf || block.num_columns() == 0) && op.kind != Op::kWrite) {
    return block;
  }
  if (op.has_bound) {
    switch (op.kind) {
      case Op::kMap:
      case Op::kFilter:
      case Op::kFlatMap:
        return platform::Invoke<Block>(op.fn, op.bound, block);
      case Op::kMapBatches: {
        std::vector<Block> out;
        for (const Block& batch : Batches(block, op.batch_size)) {
          out.push_back(platform::Invoke<Block>(op.fn, op.bound, batch));
        }
        return out.size() == 1 ? out[0] : Block::Concat(out);
      }
      default:
        throw Error("a bound UDF on " + op.Name() + " (a bug in prism::data)");
    }
  }
  switch (op.kind) {
    case Op::kMap: {
      std::vector<Row> out;
      for (const Row& row : block.ToRows()) out.push_back(platform::Invoke<Row>(op.fn, row));
      return Block::FromRows(out);
    }
    case Op::kFilter: {
      std::vector<int64_t> keep;
      std::vector<Row> rows = block.ToRows();
      for (size_t i = 0; i < rows.size(); ++i) {
        if (platform::Invoke<bool>(op.fn, rows[i])) keep.push_back(static_cast<int64_t>(i));
      }
      return TakeRows(block, keep);
    }
    case Op::kFlatMap: {
      std::vector<Row> out;
      for (const Row& row : block.ToRows()) {
        for (Row& r : platform::Invoke<std::vector<Row>>(op.fn, row)) out.push_back(std::move(r));
      }
      return Block::FromRows(out);
    }
    case Op::kMapBatches: {
      std::vector<Block> out;
      for (const Block& batch : Batches(block, op.batch_size)) {
        out.push_back(platform::Invoke<Block>(op.fn, batch));
      }
      return out.size() == 1 ? out[0] : Block::Concat(out);
    }
    case Op::kAddColumn: {
      Column column = platform::Invoke<Column>(op.fn, block);
      if (column.rows() != block.num_rows()) {
        throw Error("the function returned a column of " + std::to_string(column.rows()) +
                    " rows for a block of " + std::to_string(block.num_rows()) +
                    ": return one value per row");
      }
      return block.AddColumn(op.column, std::move(column));
    }
    case Op::kSelectColumns:
      return block.SelectColumns(op.columns);
    case Op::kDropColumns:
      return block.DropColumns(op.columns);
    case Op::kWrite: {
      if (block.num_rows() == 0) return Block();  // no part for an empty block
      io::Part part;
      std::vector<Block> blocks{block};
      if (op.format == Op::kHdf5) {
        part = io::WriteHdf5Part(op.dir, index, blocks);
      } else if (op.format == Op::kNumpy) {
        part = io::WriteNumpyPart(op.dir, index, blocks, op.column);
      } else if (op.format == Op::kJson) {
        part = io::WriteJsonPart(op.dir, index, blocks);
      } else {
        part = io::WriteCsvPart(op.dir, index, blocks);
      }
      if (part_file != nullptr) *part_file = part.file;
      if (part_rows != nullptr) *part_rows = part.rows;
      if (part_bytes != nullptr) *part_bytes = part.bytes;
      return Block();
    }
    case Op::kLimit:
      throw Error("a Limit inside a fused stage (a bug in prism::data's fusion)");
    case Op::kMapBatchesClass:
      throw Error("a class MapBatches inside a task stage (a bug in prism::data's executor)");
    case Op::kAllToAll:
      throw Error("a " + op.Name() + " inside a fused stage (a bug in prism::data's fusion)");
  }
  throw Error("unknown operator kind " + std::to_string(op.kind));
}

}  // namespace

std::string Op::Name() const {
  const std::string& fn = display.empty() ? this->fn : display;
  switch (kind) {
    case kMap:
      return "Map(" + fn + ")";
    case kMapBatches:
    case kMapBatchesClass:
      return "MapBatches(" + fn + ")";
    case kFilter:
      return "Filter(" + fn + ")";
    case kFlatMap:
      return "FlatMap(" + fn + ")";
    case kAddColumn:
      return "AddColumn(" + column + ", " + fn + ")";
    case kSelectColumns:
      return "SelectColumns(" + Join(columns) + ")";
    case kDropColumns:
      return "DropColumns(" + Join(columns) + ")";
    case kLimit:
      return "Limit(" + std::to_string(limit) + ")";
    case kWrite:
      return std::string(format == kHdf5    ? "WriteHdf5("
                         : format == kNumpy ? "WriteNumpy("
                         : format == kJson  ? "WriteJson("
                                            : "WriteCsv(") +
             dir + ")";
    case kAllToAll:
      return exchange.Name();
  }
  return "Unknown";
}

std::string ReadTask::Name() const {
  switch (kind) {
    case kRange:
      return "Range";
    case kHdf5:
      return "ReadHdf5";
    case kNumpy:
      return "ReadNumpy";
    case kCsv:
      return "ReadCsv";
    case kBinary:
      return "ReadBinaryFiles";
  }
  return "Read";
}

Block ExecuteRead(const ReadTask& read) {
  switch (read.kind) {
    case ReadTask::kRange: {
      std::vector<int64_t> ids(static_cast<size_t>(std::max<int64_t>(0, read.end - read.begin)));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = read.begin + static_cast<int64_t>(i);
      return Block::FromColumns({{read.column, Column::FromVector(std::move(ids))}});
    }
    case ReadTask::kHdf5:
      return io::ReadHdf5Rows(read.paths.at(0), read.names, read.begin, read.end);
    case ReadTask::kNumpy:
      return io::ReadNpyRows(read.paths.at(0), read.begin, read.end, read.column);
    case ReadTask::kCsv: {
      io::CsvOptions options;
      options.delimiter = read.delimiter;
      options.inferred = read.inferred_columns;
      for (const auto& [name, dtype] : read.column_types) {
        options.column_types[name] = static_cast<DType>(dtype);
      }
      return io::ReadCsvRange(read.paths.at(0), static_cast<uint64_t>(read.begin),
                              static_cast<uint64_t>(read.end), options);
    }
    case ReadTask::kBinary:
      return io::ReadBinaryFiles(read.paths, read.include_paths);
  }
  throw Error("prism::data: unknown read task kind " + std::to_string(read.kind));
}

std::string Stage::Name() const {
  std::string out;
  for (const Op& op : ops) out += (out.empty() ? "" : "->") + op.Name();
  return out;
}

FusedPlan Fuse(const std::vector<Op>& ops) {
  FusedPlan plan;
  plan.stages.emplace_back();
  bool after_limit = false;
  for (const Op& op : ops) {
    if (op.kind == Op::kLimit) {
      if (after_limit) {
        plan.limits.back() = std::min(plan.limits.back(), op.limit);
        plan.barriers.back().limit = plan.limits.back();
      } else {
        plan.limits.push_back(op.limit);
        plan.barriers.push_back(op);
        plan.stages.emplace_back();
        after_limit = true;
      }
      continue;
    }
    if (op.kind == Op::kAllToAll) {  // a barrier: it needs every block of its input
      plan.limits.push_back(-1);
      plan.barriers.push_back(op);
      plan.stages.emplace_back();
      after_limit = false;
      continue;
    }
    after_limit = false;
    plan.stages.back().ops.push_back(op);
  }
  return plan;
}

void ThrowOpFailure(const Op& op, int64_t index, int32_t attempt, std::exception_ptr current) {
  const std::string message = "prism::data: " + op.Name() + " failed on block " + std::to_string(index) +
                              ": " + platform::DescribeException(current);
  const std::string type = platform::ExceptionType(current);
  const bool retried = op.retry_all || std::find(op.retry_types.begin(), op.retry_types.end(),
                                                 type) != op.retry_types.end();
  if (retried && attempt < op.max_retries) {
    throw RetryableError(message + " (attempt " + std::to_string(attempt + 1) + " of " +
                         std::to_string(op.max_retries + 1) + ")");
  }
  throw OpError(retried ? message + " (after " + std::to_string(attempt + 1) + " attempts)" : message);
}

Block ApplyStage(Block block, const std::vector<Op>& ops, int64_t index, int64_t keep_rows,
                 std::string* part_file, int64_t* part_rows, uint64_t* part_bytes, int32_t attempt) {
  if (keep_rows >= 0 && keep_rows < block.num_rows()) block = block.Slice(0, keep_rows);
  for (const Op& op : ops) {
    try {
      block = ApplyOne(block, op, index, part_file, part_rows, part_bytes);
    } catch (...) {
      ThrowOpFailure(op, index, attempt, std::current_exception());
    }
  }
  return block;
}

Block TakeRows(const Block& block, const std::vector<int64_t>& indices) {
  if (static_cast<int64_t>(indices.size()) == block.num_rows()) return block;
  if (indices.empty()) return block.Slice(0, 0);
  // Runs of consecutive rows become slices (no copy); Concat copies them once.
  std::vector<Block> runs;
  size_t start = 0;
  for (size_t i = 1; i <= indices.size(); ++i) {
    if (i == indices.size() || indices[i] != indices[i - 1] + 1) {
      runs.push_back(block.Slice(indices[start], indices[i - 1] + 1));
      start = i;
    }
  }
  return runs.size() == 1 ? runs[0] : Block::Concat(runs);
}

std::vector<std::pair<int64_t, int64_t>> SplitRows(int64_t rows, uint64_t row_bytes,
                                                   const ReadPlanOptions& options) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (rows <= 0) return out;
  int64_t per_block;
  if (options.override_num_blocks > 0) {
    per_block = (rows + options.override_num_blocks - 1) / options.override_num_blocks;
  } else {
    per_block = static_cast<int64_t>(options.target_block_bytes / std::max<uint64_t>(1, row_bytes));
  }
  per_block = std::max<int64_t>(1, per_block);
  for (int64_t b = 0; b < rows; b += per_block) out.emplace_back(b, std::min(rows, b + per_block));
  return out;
}

}  // namespace prism::data::internal
