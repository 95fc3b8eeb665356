#pragma once
// A Dataset's plan (internal, pure logic: no runtime calls, no locks): its source as read
// tasks, its operators, how consecutive operators fuse into stages, and what one fused
// stage does to one block (ApplyStage, run inside the executor's tasks).
//
// Fusion (Ray Data's operator fusion, one rule): every operator that maps one block to one
// block without looking at other blocks (Map, MapBatches, Filter, FlatMap, AddColumn,
// SelectColumns, DropColumns, and the Write that ends a plan) joins the stage before it;
// the read is the first stage's start. Limit is the only operator here that needs the
// stream (it counts rows over blocks), so it ends a stage and runs on the driver. A plan
// Read -> Map -> Filter -> MapBatches is one stage: one task per read block.

#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "data/all_to_all.h"
#include "data/errors.h"
#include "prism/data/block.h"

namespace prism::data::internal {

/// One logical operator. A value sent to the tasks that run it (Boost-serialized).
struct Op {
  enum Kind : int32_t {
    kMap,
    kMapBatches,
    kFilter,
    kFlatMap,
    kAddColumn,
    kSelectColumns,
    kDropColumns,
    kLimit,
    kWrite,
    kMapBatchesClass,  // a callable class in an actor pool (actor_pool_op.h): ends a stage
    kAllToAll,  // Repartition, RandomShuffle, Sort, GroupBy: `exchange` says which
  };
  enum Format : int32_t { kHdf5, kNumpy, kCsv, kJson };

  int32_t kind = kMap;
  std::string fn;                    // the UDF's registered name (Map ... AddColumn)
  // A binding's UDF (BoundUdf): fn is its trampoline, called as fn(bound, block) on the
  // whole block (Map, Filter, FlatMap) or each batch (MapBatches); `display` names it.
  bool has_bound = false;
  std::string bound;
  std::string display;
  int64_t batch_size = 0;            // MapBatches
  std::string column;                // AddColumn: the new column; Write(NumPy): the column
  std::vector<std::string> columns;  // SelectColumns, DropColumns
  int64_t limit = 0;                 // Limit
  int32_t format = kHdf5;            // Write
  std::string dir;                   // Write
  // Retries of a UDF (MapOptions; Ray's max_retries and retry_exceptions).
  int32_t max_retries = 3;
  bool retry_all = false;                 // retry every exception
  std::vector<std::string> retry_types;   // else these demangled types
  // MapBatchesClass: the class (fn: its readable name), its constructor's argument bytes,
  // and its pool (MapBatchesOptions).
  std::string class_key;
  std::vector<std::string> class_args;
  int32_t min_actors = 1, max_actors = 0;
  double num_cpus = 0, num_gpus = 0;
  AllToAllSpec exchange;             // AllToAll

  /// "Map(AddOne)", "MapBatches(Normalize)", "Limit(10)", "WriteCsv(/out)".
  std::string Name() const;

  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & kind & fn & has_bound & bound & display & batch_size & column & columns & limit & format & dir;
    ar & max_retries & retry_all & retry_types & class_key & class_args & min_actors & max_actors &
        num_cpus & num_gpus &
        exchange;
  }
};

/// One read task of a file source: a row range (HDF5, .npy), a byte range (CSV) or a group
/// of files (binary); or a range of integers (Range). A value sent to the read task.
struct ReadTask {
  enum Kind : int32_t { kRange, kHdf5, kNumpy, kCsv, kBinary };

  int32_t kind = kRange;
  std::vector<std::string> paths;  // one file (HDF5, .npy, CSV) or the group (binary)
  std::vector<std::string> names;  // HDF5: the datasets (empty: all)
  int64_t begin = 0, end = 0;      // rows (Range, HDF5, .npy) or bytes (CSV)
  std::string column;              // Range: "id"; .npy: "data"
  char delimiter = ',';
  std::map<std::string, int32_t> column_types;  // CSV: DType by column name
  std::vector<std::string> inferred_columns;    // CSV: those of column_types inferred
  bool include_paths = true;                    // binary
  uint64_t estimated_bytes = 0;                 // of the block it reads

  /// "ReadHdf5", "ReadNumpy", "ReadCsv", "ReadBinaryFiles", "Range".
  std::string Name() const;

  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & kind & paths & names & begin & end & column & delimiter & column_types & inferred_columns & include_paths &
        estimated_bytes;
  }
};

/// Reads what a read task names, as one block. Throws prism::Error (from data/io.h) naming
/// the file for a missing or bad file.
Block ExecuteRead(const ReadTask& read);

/// Fused operators that run together in one task per block.
struct Stage {
  std::vector<Op> ops;
  /// "Map(AddOne)->Filter(IsEven)"; "" for no operators.
  std::string Name() const;
};

/// A plan after fusion: stages separated by limits and all-to-all operators (barriers).
/// stages.size() == limits.size() + 1; stages[0] starts at the source (its ops may be
/// empty), stage i + 1 follows barrier i: the limit limits[i], or, where limits[i] is -1,
/// the all-to-all operator barriers[i] (barriers[i] is the Limit op otherwise).
struct FusedPlan {
  std::vector<Stage> stages;
  std::vector<int64_t> limits;
  std::vector<Op> barriers;
};

/// Fuses `ops` (Limit and all-to-all operators end a stage; consecutive limits merge to
/// the smallest). Pure.
FusedPlan Fuse(const std::vector<Op>& ops);

/// What a stage does to one block, with `index` the block's position in the stream (for
/// error messages and part numbers). `keep_rows` >= 0 first keeps only the first
/// keep_rows rows (a limit upstream cut the block). A Write writes the block as part
/// `index` and returns an empty block; `part` then says what it wrote.
///
/// Throws OpError "prism::data: <operator> failed on block <index>: <type>: <message>" for
/// any exception in an operator (a UDF's, a missing column, ...); a RetryableError (same
/// message) when the operator's retry_exceptions names the exception's type and `attempt`
/// (0 for the block's first run) is below its max_retries: the executor runs it again.
Block ApplyStage(Block block, const std::vector<Op>& ops, int64_t index, int64_t keep_rows,
                 std::string* part_file, int64_t* part_rows, uint64_t* part_bytes,
                 int32_t attempt = 0);

/// The error ApplyStage throws for `op` failing on block `index` with `current` (the
/// exception being handled): a RetryableError if op's options retry the exception's type
/// (platform::ExceptionType) at `attempt`, else an OpError. Used by the actor pool's calls too.
[[noreturn]] void ThrowOpFailure(const Op& op, int64_t index, int32_t attempt,
                                 std::exception_ptr current);

/// The rows at `indices` (ascending) of `block`, in order, keeping every column's dtype.
Block TakeRows(const Block& block, const std::vector<int64_t>& indices);

/// How a file source is cut into read tasks.
struct ReadPlanOptions {
  /// Rows (or bytes) per read task are chosen so that each block is about this size.
  uint64_t target_block_bytes = 4 << 20;
  /// If > 0, cut the source into about this many read tasks instead (Ray's
  /// override_num_blocks).
  int64_t override_num_blocks = 0;
};

/// Row ranges [begin, end) covering `rows` rows whose size is about `row_bytes` each:
/// blocks of about options.target_block_bytes (at least 1 row), or
/// options.override_num_blocks blocks. No rows: no ranges. Pure.
std::vector<std::pair<int64_t, int64_t>> SplitRows(int64_t rows, uint64_t row_bytes,
                                                   const ReadPlanOptions& options);

}  // namespace prism::data::internal
