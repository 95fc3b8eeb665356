#pragma once
// All-to-all operators (internal): Repartition, RandomShuffle, Sort, GroupBy's Aggregate and
// MapGroups. Each is a barrier in the streaming executor: it takes every block of its input,
// then runs one exchange and emits the new blocks in order.
//
// The exchange (AllToAllExchange, on the driver): a platform::WorkerGroup of one member per
// rank with a CPU (SPREAD, one per rank, reserved with a timeout, so a busy cluster is a
// clear error and never a hang). The driver gives each member the blocks that live on its
// rank (a block's BlockMeta says where its task ran), moving blocks to the least loaded
// member when a rank holds more than its share of bytes. A member that fails ends as a
// kFailed event; the driver aborts the others (their collectives stop) and throws. Each
// member (MemberMain):
//   1. makes a collective::Group with the others (none when it is alone: mpirun -n 1, or an
//      InProcessCluster, where there is no MPI and one member does the whole operator);
//   2. Gets its blocks and gives every row a destination member: by global row position
//      (Repartition), by a random 64-bit key that depends only on the seed and the row's
//      place in the input (RandomShuffle: the same seed gives the same output at the same
//      number of members, wherever the blocks live), or by key range (Sort, GroupBy: every
//      member samples its keys, the samples go to everyone with an AllToAllV, and all pick
//      the same member-1 boundaries from them);
//   3. writes each destination's rows straight into one send buffer, column by column as
//      raw bytes (a fixed-width column is a memcpy per run of rows; strings are offsets and
//      bytes), and swaps the buckets with collective::Group::AllToAllV;
//   4. reads the received buckets in place (their columns alias the receive buffer) and
//      orders their rows: by input block (Repartition), by the random key (RandomShuffle),
//      by the sort key, stable by input block and row (Sort, GroupBy); then cuts them into
//      output blocks, or runs the aggregations or the UDF once per group;
//   5. Puts its output blocks and returns their refs and metadata as its result's bytes (the
//      group holds the member's task result, which counts those refs, until the driver has
//      read them; then the driver's refs keep the blocks until the consumer drops them).
// Send, receive and output staging buffers come from a process-wide pool (ScratchBuffer)
// and are reused by the next exchange: this VM faults fresh pages at 0.3 GB/s, so a 2 GiB
// shuffle must not allocate 2 GiB afresh each time.
//
// The partitioning, boundary, ordering and aggregation logic below the runtime part is pure
// (unit-tested in tests/unit/data/all_to_all_test.cc).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/block_meta.h"
#include "data/errors.h"
#include "prism/data/block.h"
#include "prism/object_ref.h"

namespace prism::platform {
class WorkerGroup;
struct WorkerEvent;
}  // namespace prism::platform

namespace prism::data::internal {

/// One aggregation of GroupBy(key).Aggregate (AggregateFn's value).
struct AggSpec {
  enum Kind : int32_t { kCount, kSum, kMin, kMax, kMean, kStd };
  int32_t kind = kCount;
  std::string column;  // "" for Count
  int32_t ddof = 1;    // Std

  /// The output column's name, as Ray's: "count()", "sum(x)", "mean(x)", "std(x)".
  std::string Name() const;

  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & kind & column & ddof;
  }
};

/// What an all-to-all operator does. A value sent to its member tasks.
struct AllToAllSpec {
  enum Kind : int32_t { kRepartition, kRandomShuffle, kSort, kAggregate, kMapGroups };
  int32_t kind = kRepartition;
  int64_t num_blocks = 0;   // Repartition
  bool shuffle = false;     // Repartition
  bool has_seed = false;    // RandomShuffle
  uint64_t seed = 0;        // RandomShuffle (and Repartition(shuffle)); chosen at run time if unset
  std::string key;          // Sort, Aggregate, MapGroups
  bool descending = false;  // Sort
  std::vector<AggSpec> aggs;
  std::string fn;  // MapGroups: the UDF's registered name
  // MapGroups of a BoundUdf: fn(bound, group), named `display`.
  bool has_bound = false;
  std::string bound;
  std::string display;

  /// "Repartition(4)", "RandomShuffle(seed=7)", "Sort(x, descending)",
  /// "Aggregate(k: count(), sum(v))", "MapGroups(k, Fn)".
  std::string Name() const;

  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & kind & num_blocks & shuffle & has_seed & seed & key & descending & aggs & fn & has_bound & bound & display;
  }
};

// ---- The runtime part (driver) --------------------------------------------------------------

/// An input block of an exchange: its object, the rows that count, and where it lives.
struct ExchangeInput {
  ObjectRef<Block> block;
  int64_t rows = 0;        // after a limit's cut
  int64_t keep_rows = -1;  // a limit cut it
  uint64_t bytes = 0;
  int32_t rank = -1;       // where its task ran; -1 unknown
  std::vector<std::string> names;  // its schema
  std::vector<int32_t> dtypes;
  std::vector<std::vector<int64_t>> shapes;
};

/// An output block of an exchange, with what the executor needs to know of it.
struct ExchangeOutput {
  ObjectRef<Block> block;
  BlockMeta meta;

  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & block & meta;
  }
};

/// One run of an all-to-all operator, started by the executor once its input is complete.
/// Not thread-safe (the executor's thread).
class AllToAllExchange {
 public:
  /// Checks the input against the operator (a missing key column, an aggregate on a
  /// non-numeric column, blocks of different schemas: prism::Error naming the operator),
  /// reserves the members (throws prism::Error if they are not free within
  /// `reserve_timeout_s`) and starts their tasks. No rows: no tasks (Repartition(n) then
  /// yields n empty blocks).
  AllToAllExchange(const AllToAllSpec& spec, std::vector<ExchangeInput> inputs,
                   double reserve_timeout_s);
  /// Aborts members still running (waiting up to 30 s for them to stop) and gives the
  /// reservation back.
  ~AllToAllExchange();
  AllToAllExchange(const AllToAllExchange&) = delete;
  AllToAllExchange& operator=(const AllToAllExchange&) = delete;

  /// Waits up to `timeout_ms` (< 0: no bound) for the members; true once all finished (then
  /// Outputs). Throws prism::Error "prism::data: <operator> failed on member <i> (rank <r>):
  /// ..." if a member failed, after aborting the others (waiting up to 30 s for them), and
  /// the same again on a later call.
  bool Poll(int timeout_ms);
  bool Done() const { return done_; }
  /// The output blocks in order (after Poll returned true).
  std::vector<ExchangeOutput>& Outputs() { return outputs_; }
  /// Member tasks launched.
  int64_t Tasks() const { return tasks_; }

 private:
  [[noreturn]] void Fail(const platform::WorkerEvent& e);

  AllToAllSpec spec_;
  std::unique_ptr<platform::WorkerGroup> group_;  // until the members ended
  std::vector<ObjectRef<Block>> inputs_;          // held for the members until they ended
  std::vector<std::vector<ExchangeOutput>> results_;  // each member's, read as it finishes
  std::vector<ExchangeOutput> outputs_;
  int64_t tasks_ = 0;
  std::string failure_;
  std::string timing_;  // the driver's phases, with PRISM_DATA_A2A_TIMING
  bool done_ = false;
};

// ---- Pure logic (unit-tested) --------------------------------------------------------------

/// Rows of each of `n` near-equal parts of `rows` (the first rows % n parts one row more).
std::vector<int64_t> EqualParts(int64_t rows, int64_t n);

/// Assigns input blocks (bytes and rank each) to members on `member_ranks`: a block goes
/// to the member on its rank unless that member already holds more than 1.25x an even
/// share of the bytes (or the rank has no member); then to the member holding the fewest
/// bytes. Returns the member of each block.
std::vector<int> AssignBlocks(const std::vector<uint64_t>& bytes, const std::vector<int>& ranks,
                              const std::vector<int>& member_ranks);

/// The random key of row `row` of input block `block` under `seed` (splitmix64 of the
/// three): RandomShuffle sends the row to member key % members and orders by key.
uint64_t ShuffleKey(uint64_t seed, int64_t block, int64_t row);

/// Compares row i of column a with row j of column b (same dtype, scalar rows): <0, 0, >0.
/// NaN sorts after every number.
int CompareRows(const Column& a, int64_t i, const Column& b, int64_t j);

/// Picks members - 1 boundaries from the sorted sample `sample` (one column, sorted in the
/// operator's direction): the rows at i * size / members. Returns their row indices.
std::vector<int64_t> ChooseBoundaries(int64_t sample_rows, int members);

/// The member of each row of `keys` given the boundary rows `boundaries` of `sample`
/// (ascending, or descending when `descending`): the number of boundaries at or before the
/// row's key in the operator's order.
std::vector<int32_t> RangePartition(const Column& keys, const Column& sample,
                                    const std::vector<int64_t>& boundaries, bool descending);

/// The rows of `sources` in the order `order` ((source, row) pairs) as one block: fixed-width
/// columns copied in runs, strings re-packed. Every source has the same schema.
Block Gather(const std::vector<Block>& sources, const std::vector<std::pair<int32_t, int64_t>>& order,
             size_t begin, size_t end);

/// A stable order of rows ((source, row) pairs) by the key column `key` of `sources`
/// (ties: by source, then row).
std::vector<std::pair<int32_t, int64_t>> SortedOrder(const std::vector<Block>& sources,
                                                     const std::string& key, bool descending);

/// GroupBy(key).Aggregate on `sorted` (sorted by key): one row per distinct key, in order,
/// with the key column and one column per aggregation. Throws prism::Error for a missing
/// or non-numeric column.
Block AggregateSorted(const Block& sorted, const std::string& key, const std::vector<AggSpec>& aggs);

/// GroupBy(key).Aggregate's map-side combine: one row per distinct key of `blocks` (in no
/// particular order) holding each aggregation's partial state: the key, "count" (int64
/// rows), then per aggregation i "s<i>" (Sum, Min, Max: int64 for integer columns, else
/// float64; Mean: the float64 sum), or "m<i>" and "q<i>" (Std: the mean and the sum of
/// squared deviations, float64): PartialSchema's columns. No rows: Block() (no columns).
/// Throws prism::Error for a missing or non-numeric column.
Block CombinePartials(const std::vector<Block>& blocks, const Schema& schema, const std::string& key,
                      const std::vector<AggSpec>& aggs);
/// The schema of CombinePartials' blocks for input `schema`.
Schema PartialSchema(const Schema& schema, const std::string& key, const std::vector<AggSpec>& aggs);
/// Aggregate's reduce side: `sorted` holds partial rows sorted by key (several per key, from
/// the members); merges each key's partials (Chan et al.'s pairwise update for Std) into the
/// final row, as AggregateSorted would have computed from all the rows.
Block MergePartialsSorted(const Block& sorted, const std::string& key, const std::vector<AggSpec>& aggs);

/// Numeric helpers shared by the exchange and the combine.
bool IsNumeric(DType d);
bool IsFloat(DType d);
/// Row i of a numeric column as a double / as an int64 (integer dtypes only).
double AsDouble(const Column& c, int64_t i);
int64_t AsInt(const Column& c, int64_t i);

/// The [begin, end) row ranges of equal keys in `sorted` (sorted by key).
std::vector<std::pair<int64_t, int64_t>> GroupRanges(const Column& sorted_keys);

/// Encodes rows of blocks as one bucket of the wire format (below) and decodes it in place.
/// A bucket: int64 rows, int64 pieces, then per piece (input block, rows), int64 whether a
/// uint64 key column follows; then each column of `schema` at a 64-byte boundary: raw values
/// (fixed width) or rows + 1 int64 offsets from 0 and then the bytes (strings); then the keys.
struct BucketPiece {
  const Block* block = nullptr;
  int64_t input_block = -1;
  std::vector<int64_t> rows;  // row indices into *block, in order
};
/// Bytes the bucket of `pieces` takes (a multiple of 64).
uint64_t BucketBytes(const Schema& schema, const std::vector<BucketPiece>& pieces, bool with_keys);
/// Writes the bucket at `out` (64-byte aligned, BucketBytes long); `keys` (one per row of
/// the pieces, in order) when with_keys.
void WriteBucket(const Schema& schema, const std::vector<BucketPiece>& pieces, const uint64_t* keys,
                 char* out);
/// A bucket read in place: its rows as a block whose columns alias `data` (kept alive by
/// `owner`), its pieces' (input block, rows), and its keys if it has them.
struct DecodedBucket {
  Block block;
  std::vector<std::pair<int64_t, int64_t>> pieces;
  const uint64_t* keys = nullptr;
};
DecodedBucket ReadBucket(const Schema& schema, const char* data, uint64_t size,
                         const std::shared_ptr<const void>& owner);

/// A 64-byte aligned buffer of at least `bytes` from a process-wide pool of buffers that
/// earlier exchanges gave back (freshly allocated if none fits); returned to the pool when
/// the last copy of the pointer goes. The pool keeps at most PRISM_DATA_SCRATCH_BYTES bytes
/// (default 8 GiB) of idle buffers.
std::shared_ptr<char> ScratchBuffer(uint64_t bytes);

}  // namespace prism::data::internal
