#pragma once
// prism::data::Dataset: a lazy, streaming dataset of Blocks (Ray Data's Dataset).
//
//   using namespace prism::data;
//   Row AddOne(Row r) { r["id"] = std::get<int64_t>(r["id"]) + 1; return r; }
//   bool IsEven(Row r) { return std::get<int64_t>(r["id"]) % 2 == 0; }
//   Block Scale(Block b) { ... }
//   PRISM_REMOTE(AddOne, IsEven, Scale);
//
//   Dataset ds = ReadHdf5("/data/train-*.h5").Map(AddOne).Filter(IsEven).MapBatches(Scale, 1024);
//   for (const Block& batch : ds.IterBatches(256)) { ... }   // exactly 256 rows a batch
//   ds.WriteHdf5("/out/train");                              // parts + _SUCCESS
//
// A Dataset is a plan: a source and the operators applied to it. Nothing runs until it is
// consumed (IterBatches, Take, Count, Schema, Materialize, Write*); each consumption runs
// the plan again (Materialize keeps the blocks, to run it once). Copying a Dataset is cheap
// and shares the plan; every transform returns a new Dataset and leaves this one as is.
//
// Execution streams: the operators that map one block to one block (Map, MapBatches,
// Filter, FlatMap, AddColumn, SelectColumns, DropColumns, Write) fuse into one task per
// block, read included; the driver keeps a bounded number of bytes of blocks in flight per
// operator (ExecutionOptions) and holds producers back while the consumer is behind.
// Output keeps the source's order.
//
// UDFs are free functions registered with PRISM_REMOTE, passed by pointer and called by
// their registered name on the rank that runs the block (every rank runs the same binary).
// Row functions (Map, Filter, FlatMap) see a block's rows as Row maps, so they work on
// scalar columns only (a column whose rows are arrays is an error there: use MapBatches).
//
// Errors: an exception in a UDF (or a missing column, a bad file) fails the consumption
// with a prism::Error "prism::data: <operator> failed on block <index>: <type>: <message>".
// Bad arguments (an unregistered function, batch_size 0, a missing file) throw
// prism::Error at the call that takes them.
//
// Thread-safety: a Dataset is an immutable value, safe to share between threads; a
// BatchIterator is used by one thread. Call from the driver (rank 0).

#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "prism/data/actor_class.h"
#include "prism/actor.h"
#include "prism/data/block.h"
#include "prism/data/map_options.h"
#include "prism/data/next_iterator.h"
#include "prism/platform/invoke.h"

namespace prism::data {

/// A UDF as a language binding gives it (prism.data: a Python function): a trampoline
/// registered with PRISM_REMOTE as `Block(const std::string& bound, const Block& block)`
/// and bytes bound to it (the user's function, pickled), passed as the trampoline's first
/// argument on every call, on any rank. The binding registers one trampoline and carries
/// each user function in `bound`, as ActorClass carries a class's constructor arguments.
/// A value; thread-safe to copy.
struct BoundUdf {
  /// The trampoline's registered name (BoundUdf::Of finds it).
  std::string trampoline;
  /// The bytes every call gets first.
  std::string bound;
  /// The function's name in operator names ("Map(add_one)"); the trampoline's when empty.
  std::string name;

  /// `trampoline` (Block (*)(const std::string&, const Block&), registered) with `bound`.
  /// Throws prism::Error if it is not registered.
  template <typename F>
  static BoundUdf Of(F trampoline, std::string bound, std::string name = "") {
    static_assert(std::is_invocable_r_v<Block, F, const std::string&, const Block&>,
                  "prism::data::BoundUdf::Of takes a trampoline Block(const std::string& bound, "
                  "const Block&) registered with PRISM_REMOTE");
    return {platform::RegisteredName(trampoline, "prism::data::BoundUdf"), std::move(bound), std::move(name)};
  }
};

/// How a consumption runs (Ray's DataContext execution options, per Dataset here).
struct ExecutionOptions {
  /// Bytes of blocks the pipeline may hold in the object store at once (running tasks'
  /// inputs and expected outputs, and outputs not yet taken downstream), split evenly
  /// among its task operators; an operator with nothing running and nothing buffered may
  /// always run one task, so a pipeline never stalls. 0: DefaultObjectStoreBudget(), half
  /// of the cluster's object store.
  uint64_t object_store_budget_bytes = 0;
  /// Most tasks one operator runs at once. 0: twice the cluster's CPUs.
  int max_tasks_in_flight_per_op = 0;
  /// The longest the driver waits for any running task to finish, or for a block to be
  /// fetched, before throwing prism::TimeoutError naming the operator.
  double task_timeout_s = 600;
  /// A progress line per operator on the driver's stderr ("Map(AddOne): 12/40 blocks, 1.2M
  /// rows"), redrawn at most 5 times a second (Ray's progress bars). Unset: on when stderr
  /// is a terminal, off otherwise (so never in a test's or a batch job's log by default).
  std::optional<bool> progress_bars;
};

/// The budget of an execution whose ExecutionOptions::object_store_budget_bytes is 0:
/// kDefaultObjectStoreFraction (0.5, Ray's DataContext default) of the cluster's object
/// store, ClusterResources()["object_store_memory"] (every rank's
/// --prism-object-store-memory, summed). The other half is left for what the pipeline
/// does not count: the copies the consumer fetches, and the user's own objects. Throws
/// RuntimeError before prism::Init. Thread-safe.
inline constexpr double kDefaultObjectStoreFraction = 0.5;
uint64_t DefaultObjectStoreBudget();

/// One physical operator of an execution: a fused stage of tasks, or a limit.
struct OperatorStats {
  std::string name;              // "ReadHdf5->Map(AddOne)->Filter(IsEven)", "Limit(10)"
  int64_t tasks = 0;             // tasks launched
  int64_t blocks = 0;            // blocks produced
  int64_t rows = 0;              // rows produced
  uint64_t bytes = 0;            // bytes of the blocks produced
  uint64_t peak_bytes = 0;       // most bytes held at once (running + buffered)
  int64_t peak_tasks_in_flight = 0;
  uint64_t budget_bytes = 0;     // the share of the budget it had
  double seconds = 0;            // from its first launch to its last block
  int64_t retries = 0;           // blocks run again (a retried exception or a lost actor)
  int64_t actors_started = 0;    // an actor pool's actors started (class MapBatches)
  int64_t peak_actors = 0;       // most of its actors alive at once
};

/// What an execution did, per operator in plan order (Ray's ds.stats()).
struct DatasetStats {
  std::vector<OperatorStats> operators;
  /// One line per operator: name, tasks, blocks, rows, bytes, peak bytes, time.
  std::string ToString() const;
};

/// How a file source is cut into read tasks.
struct ReadOptions {
  /// Each read task reads about this many bytes (rows of HDF5 and .npy, bytes of CSV,
  /// files of binary files; at least one row or file).
  uint64_t target_block_bytes = 4 << 20;
  /// If > 0, about this many read tasks instead (Ray's override_num_blocks).
  int64_t override_num_blocks = 0;
};

namespace internal {
struct DatasetState;
struct IteratorState;
class SplitCoordinator;
struct AllToAllSpec;
}  // namespace internal

class GroupedData;

class DataIterator;
/// Batches as torch tensors (prism/data/torch.h, target prism_data_torch).
class TorchBatchIterator;

/// Batches of exactly batch_size rows (the last one smaller unless drop_last), in order,
/// re-batched across block boundaries (Ray's iter_batches). Move-only; one thread at a
/// time. Dropping it stops the execution (its running tasks are cancelled).
class BatchIterator {
 public:
  BatchIterator(BatchIterator&&) noexcept;
  BatchIterator& operator=(BatchIterator&&) noexcept;
  ~BatchIterator();

  /// The next batch; std::nullopt at the end. Throws prism::Error if a task failed (naming
  /// the operator and block), prism::TimeoutError past ExecutionOptions::task_timeout_s.
  std::optional<Block> Next();
  /// What the execution did so far.
  DatasetStats Stats() const;

  /// Input iterator for range-for: `for (const Block& batch : ds.IterBatches(64))`.
  using iterator = NextIterator<BatchIterator, const Block>;
  /// Starts the iteration (takes the first batch).
  iterator begin() { return iterator(this); }
  iterator end() { return iterator(); }

 private:
  friend class Dataset;
  friend class DataIterator;
  explicit BatchIterator(std::unique_ptr<internal::IteratorState> state);
  std::unique_ptr<internal::IteratorState> state_;
};

/// A lazy dataset: a source and the operators on it. A cheap value (shares its plan).
class Dataset {
 public:
  /// A dataset with no rows.
  Dataset();
  /// For the sources (internal): a dataset of this plan.
  explicit Dataset(std::shared_ptr<const internal::DatasetState> state);

  // ---- Transforms (lazy; each returns a new Dataset) -----------------------------------

  /// Applies `fn` (Row -> Row, registered with PRISM_REMOTE) to every row (Ray's map).
  /// Throws prism::Error if fn is not registered.
  template <typename F>
  Dataset Map(F fn) const {
    static_assert(std::is_invocable_r_v<Row, F, const Row&>,
                  "prism::data::Dataset::Map takes a function Row -> Row registered with PRISM_REMOTE");
    return WithUdf(kMapOp, platform::RegisteredName(fn, "prism::data::Dataset::Map"));
  }
  /// Applies `fn` (Block -> Block, registered) to batches of `batch_size` rows of each
  /// block (the last batch of a block smaller); the results are concatenated (Ray's
  /// map_batches; batches here never span blocks). Throws prism::Error if fn is not
  /// registered or batch_size <= 0.
  template <typename F>
  Dataset MapBatches(F fn, int64_t batch_size = 1024) const {
    static_assert(std::is_invocable_r_v<Block, F, const Block&>,
                  "prism::data::Dataset::MapBatches takes a function Block -> Block registered with "
                  "PRISM_REMOTE");
    return WithMapBatches(platform::RegisteredName(fn, "prism::data::Dataset::MapBatches"),
                          batch_size);
  }
  /// Keeps the rows for which `fn` (Row -> bool, registered) is true. Columns keep their
  /// dtypes. Throws prism::Error if fn is not registered.
  template <typename F>
  Dataset Filter(F fn) const {
    static_assert(std::is_invocable_r_v<bool, F, const Row&>,
                  "prism::data::Dataset::Filter takes a function Row -> bool registered with "
                  "PRISM_REMOTE");
    return WithUdf(kFilterOp, platform::RegisteredName(fn, "prism::data::Dataset::Filter"));
  }
  /// Replaces every row by the rows `fn` (Row -> std::vector<Row>, registered) returns.
  template <typename F>
  Dataset FlatMap(F fn) const {
    static_assert(std::is_invocable_r_v<std::vector<Row>, F, const Row&>,
                  "prism::data::Dataset::FlatMap takes a function Row -> std::vector<Row> "
                  "registered with PRISM_REMOTE");
    return WithUdf(kFlatMapOp, platform::RegisteredName(fn, "prism::data::Dataset::FlatMap"));
  }
  /// Adds (or replaces) the column `name`, computed by `fn` (Block -> Column, registered)
  /// from each block; it must return one row per row (Ray's add_column).
  template <typename F>
  Dataset AddColumn(const std::string& name, F fn) const {
    static_assert(std::is_invocable_r_v<Column, F, const Block&>,
                  "prism::data::Dataset::AddColumn takes a function Block -> Column registered "
                  "with PRISM_REMOTE");
    return WithAddColumn(name, platform::RegisteredName(fn, "prism::data::Dataset::AddColumn"));
  }
  // ---- Map operators with options: retries, and a callable class in an actor pool -------

  /// Map with retries (MapOptions: Ray's max_retries, retry_exceptions). Throws
  /// prism::Error if fn is not registered or options.max_retries < 0.
  template <typename F>
  Dataset Map(F fn, const MapOptions& options) const {
    return Map(fn).WithRetries(options.max_retries, options.retry_exceptions);
  }
  /// Filter with retries (MapOptions).
  template <typename F>
  Dataset Filter(F fn, const MapOptions& options) const {
    return Filter(fn).WithRetries(options.max_retries, options.retry_exceptions);
  }
  /// FlatMap with retries (MapOptions).
  template <typename F>
  Dataset FlatMap(F fn, const MapOptions& options) const {
    return FlatMap(fn).WithRetries(options.max_retries, options.retry_exceptions);
  }
  /// MapBatches of a function with options (batch_size and retries; the pool options are
  /// for a class). Throws as MapBatches(fn, batch_size), or for max_retries < 0.
  template <typename F>
    requires(!IsActorClass<F>::value)
  Dataset MapBatches(F fn, const MapBatchesOptions& options) const {
    return MapBatches(fn, options.batch_size).WithRetries(options.max_retries, options.retry_exceptions);
  }
  /// Applies a callable class to batches of options.batch_size rows, in a pool of actors
  /// (Ray's map_batches(Class, concurrency=(min, max), fn_constructor_args=...)): each
  /// actor constructs the class once, then takes one block at a time; the pool starts at
  /// options.concurrency.min actors and grows to .max while blocks wait and every actor is
  /// busy. Output keeps the source's order; the actors are killed when the execution ends
  /// (or its iterator is dropped). An exception in the constructor or a call fails the
  /// consumption naming the operator ("MapBatches(Model)") and block. The operators after
  /// it that map a block to a block run in the same actor call.
  /// Throws prism::Error for batch_size <= 0, min < 1, max < min (max 0: the cluster's
  /// CPUs), negative resources or max_retries < 0.
  template <typename C>
  Dataset MapBatches(const ActorClass<C>& cls, const MapBatchesOptions& options = {}) const {
    return WithActorClass(cls.Name(), cls.Key(), cls.Args(), options);
  }

  // ---- A binding's UDFs (BoundUdf: a trampoline and the bytes bound to it) -------------
  //
  // The trampoline gets a whole block (Map, Filter, FlatMap) or batch (MapBatches) and
  // returns the block that replaces it: a binding crosses into its interpreter once per
  // block and applies a row function to each row itself (rows may then hold arrays). They
  // fuse, retry and fail as the operators above do, named by `fn.name`.

  /// Map: fn returns the block's mapped rows. Throws as Map(fn, options).
  Dataset Map(const BoundUdf& fn, const MapOptions& options = {}) const;
  /// Filter: fn returns the block's kept rows. Throws as Filter(fn, options).
  Dataset Filter(const BoundUdf& fn, const MapOptions& options = {}) const;
  /// FlatMap: fn returns the rows that replace the block's rows. Throws as FlatMap.
  Dataset FlatMap(const BoundUdf& fn, const MapOptions& options = {}) const;
  /// MapBatches: fn maps each batch of options.batch_size rows (the pool options do not
  /// apply). Throws as MapBatches(fn, options).
  Dataset MapBatches(const BoundUdf& fn, const MapBatchesOptions& options) const;

  /// Keeps these columns, in this order. A missing column fails the consumption naming it.
  /// Throws prism::Error for an empty list.
  Dataset SelectColumns(const std::vector<std::string>& names) const;
  /// Drops these columns. A missing column fails the consumption naming it.
  Dataset DropColumns(const std::vector<std::string>& names) const;
  /// The first n rows (in the source's order); once they are read, the rest of the
  /// pipeline stops. Throws prism::Error for n < 0.
  Dataset Limit(int64_t n) const;
  /// The same plan, run with these options.
  Dataset WithExecutionOptions(const ExecutionOptions& options) const;
  /// The rows of this dataset, then those of each of `others`, in order (Ray's union).
  /// Each input runs when the one before it has ended. Every input must have the same
  /// column names, dtypes and row shapes: throws prism::Error naming both schemas here
  /// when they are known without running (a Range, stored blocks), else the consumption
  /// fails with that error.
  Dataset Union(const std::vector<Dataset>& others) const;
  /// This dataset's columns and `other`'s side by side, row by row (Ray's zip); a name
  /// this side has already gets "_1" on the other side. Both sides run to the end first
  /// (their blocks stay in the object store), then the other side's rows are re-cut to
  /// this side's blocks (slices where they fall in one block). Both must have the same
  /// number of rows: a prism::Error with both counts, here when known without running,
  /// else from the consumption.
  Dataset Zip(const Dataset& other) const;

  // ---- All-to-all transforms (lazy; each a barrier: it runs once its input is complete) --
  //
  // Each reads every block of its input, then exchanges rows between one task per rank
  // (collective::Group::AllToAllV in an MPI job; one task does it all on an in-process
  // cluster) and emits new blocks in order. Errors (a missing key column, an aggregate on a
  // non-numeric column, a MapGroups function's exception) fail the consumption with a
  // prism::Error naming the operator; an empty dataset gives an empty result.

  /// `num_blocks` blocks of near-equal rows, in the same row order (Ray's repartition);
  /// with `shuffle`, the rows are also shuffled across blocks (each member's share of the
  /// blocks is near-equal; the shares vary by about the square root of the rows). Throws
  /// prism::Error for num_blocks <= 0.
  Dataset Repartition(int64_t num_blocks, bool shuffle = false) const;
  /// A uniformly random permutation of all rows (Ray's random_shuffle), in about as many
  /// blocks as the input. The same seed gives the same order at the same number of ranks;
  /// no seed: a new order on every execution.
  Dataset RandomShuffle(std::optional<uint64_t> seed = std::nullopt) const;
  /// The rows sorted by column `key` (numeric or string; scalars), ascending or descending,
  /// stable (equal keys keep their input order); the output blocks in order are globally
  /// sorted (Ray's sort: sampled range boundaries, then a sort per range). NaN sorts last.
  /// Throws prism::Error for an empty key.
  Dataset Sort(const std::string& key, bool descending = false) const;
  /// Groups rows by column `key`, for GroupedData::Aggregate or MapGroups (Ray's groupby).
  /// Throws prism::Error for an empty key.
  GroupedData GroupBy(const std::string& key) const;

  // ---- Consumption (runs the plan) ---------------------------------------------------

  /// Iterates over batches of exactly batch_size rows (re-batched across blocks; the last
  /// one smaller unless drop_last), fetching `prefetch_batches` batches' worth of blocks
  /// ahead to the driver. With local_shuffle_buffer_size > 0, each batch is a random
  /// sample of a buffer of at least that many rows (plus a batch) that fills as it drains
  /// (Ray's local shuffle: rows mix within the buffer, not across the whole dataset; the
  /// same seed gives the same order for the same blocks). Throws prism::Error for
  /// batch_size <= 0, prefetch_batches < 0 or local_shuffle_buffer_size < 0.
  BatchIterator IterBatches(int64_t batch_size = 256, int prefetch_batches = 1,
                            bool drop_last = false, int64_t local_shuffle_buffer_size = 0,
                            std::optional<uint64_t> local_shuffle_seed = std::nullopt) const;
  /// IterBatches with each batch as torch tensors by column name (Ray's
  /// iter_torch_batches). Defined in prism_data_torch: include prism/data/torch.h and link
  /// prism::data_torch. Throws as IterBatches, and prism::Error for a string column.
  TorchBatchIterator IterTorchBatches(int64_t batch_size = 256, int prefetch_batches = 1,
                                      bool drop_last = false, int64_t local_shuffle_buffer_size = 0,
                                      std::optional<uint64_t> local_shuffle_seed = std::nullopt) const;
  /// The first n rows as Row maps (scalar columns only). Throws as IterBatches.
  std::vector<Row> Take(int64_t n = 20) const;
  /// The number of rows (counts from the blocks' metadata: no block reaches the driver).
  int64_t Count() const;
  /// The schema of the first non-empty block (runs the plan until it has one); an empty
  /// schema if there are no rows.
  data::Schema Schema() const;
  /// Runs the plan and keeps its blocks in the object store: the returned Dataset reads
  /// them (Ray's materialize).
  Dataset Materialize() const;
  /// The statistics of this Dataset's latest execution (empty before one).
  DatasetStats Stats() const;
  /// The number of blocks of the source (read tasks, or materialized blocks).
  int64_t NumBlocks() const;
  /// Runs the plan and splits its blocks into n datasets of consecutive blocks, block
  /// counts differing by at most one (Ray's split). With equal, each gets exactly
  /// Count() / n rows instead, consecutive runs of rows (blocks cut where a run ends; at
  /// most n - 1 rows are dropped). Throws prism::Error for n < 1, and as a consumption.
  std::vector<Dataset> Split(int n, bool equal = false) const;
  /// n iterators over one shared streaming execution of this dataset (Ray's
  /// streaming_split), for n consumers on any threads or ranks: a coordinator actor on
  /// this rank runs the plan and hands each block to the consumer that asks for one. With
  /// equal, every consumer gets the same number of rows (blocks are held back and cut so
  /// that it can; at most n - 1 rows are dropped), and one that stops early does not hold
  /// the others up. Each IterBatches on an iterator starts that consumer's next epoch:
  /// the plan runs again once every consumer has started it (each waits for the others,
  /// up to ExecutionOptions::task_timeout_s, then throws prism::TimeoutError naming those
  /// missing). Throws prism::Error for n < 1. Lazy: nothing runs until a consumer asks.
  std::vector<DataIterator> StreamingSplit(int n, bool equal = false) const;

  // ---- Sinks (run the plan; the output is committed only when complete) -------------

  /// Writes each block as `dir/part-NNNNN.h5` (one dataset per column) and commits the
  /// directory with a `_SUCCESS` manifest. Throws prism::Error as the consumption does.
  void WriteHdf5(const std::string& dir) const;
  /// Writes the column `column` of each block as `dir/part-NNNNN.npy`, then `_SUCCESS`.
  void WriteNumpy(const std::string& dir, const std::string& column = "data") const;
  /// Writes each block as `dir/part-NNNNN.csv` with a header row, then `_SUCCESS`.
  void WriteCsv(const std::string& dir) const;
  /// Writes each block as `dir/part-NNNNN.json`, JSON lines (one object a row; a row's
  /// array as nested lists), then `_SUCCESS`. Throws prism::Error as the consumption does.
  void WriteJson(const std::string& dir) const;

 private:
  enum UdfOp { kMapOp, kFilterOp, kFlatMapOp };
  Dataset WithUdf(UdfOp op, const std::string& fn) const;
  Dataset WithBound(UdfOp op, const BoundUdf& fn, int max_retries, const RetryExceptions& retry) const;
  Dataset WithMapBatches(const std::string& fn, int64_t batch_size) const;
  Dataset WithAddColumn(const std::string& name, const std::string& fn) const;
  void Write(int format, const std::string& dir, const std::string& column) const;
  Dataset WithRetries(int max_retries, const RetryExceptions& retry) const;
  Dataset WithActorClass(const std::string& name, const std::string& key,
                         const std::vector<std::string>& args, const MapBatchesOptions& options) const;
  friend class GroupedData;
  Dataset WithAllToAll(const internal::AllToAllSpec& spec) const;

  std::shared_ptr<const internal::DatasetState> state_;
};

/// One consumer's share of a StreamingSplit (Ray's DataIterator): a small value to send
/// to a task or actor on any rank (it names the coordinator and its split), e.g. a
/// training worker's shard (prism::train::GetDatasetShard). The coordinator lives while
/// any copy of its iterators does. Thread-safe to copy; one IterBatches at a time per
/// split.
class DataIterator {
 public:
  /// An iterator of no split (IterBatches throws).
  DataIterator() = default;
  /// Starts this split's next epoch (waiting for the other splits to start it too, up to
  /// ExecutionOptions::task_timeout_s) and iterates over its batches as
  /// Dataset::IterBatches does. Throws prism::TimeoutError when the others did not start
  /// the epoch in time (naming them), prism::Error when the execution failed (every
  /// split's iterator gets the error), and as Dataset::IterBatches for bad arguments.
  BatchIterator IterBatches(int64_t batch_size = 256, int prefetch_batches = 1,
                            bool drop_last = false, int64_t local_shuffle_buffer_size = 0,
                            std::optional<uint64_t> local_shuffle_seed = std::nullopt) const;
  /// IterBatches as torch tensors (defined in prism_data_torch; include
  /// prism/data/torch.h).
  TorchBatchIterator IterTorchBatches(int64_t batch_size = 256, int prefetch_batches = 1,
                                      bool drop_last = false, int64_t local_shuffle_buffer_size = 0,
                                      std::optional<uint64_t> local_shuffle_seed = std::nullopt) const;
  /// This iterator's split (0 .. NumSplits() - 1).
  int SplitIndex() const { return split_; }
  int NumSplits() const { return num_splits_; }

  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & coordinator_ & split_ & num_splits_ & timeout_s_;
  }

 private:
  friend class Dataset;
  ActorHandle<internal::SplitCoordinator> coordinator_;
  int split_ = -1;
  int num_splits_ = 0;
  double timeout_s_ = 600;
};

// ---- Sources ----------------------------------------------------------------------------

/// Rows 0..n-1 in an int64 column "id" (Ray's range), in blocks of about 4 MiB (or
/// override_num_blocks blocks). Throws prism::Error for n < 0.
Dataset Range(int64_t n, int64_t override_num_blocks = 0);
/// These rows (scalar values; Block::FromRows's rules), put into the object store now in
/// blocks of about 4 MiB (or override_num_blocks blocks). Throws prism::Error as FromRows.
Dataset FromItems(const std::vector<Row>& items, int64_t override_num_blocks = 0);
/// These blocks, put into the object store now, one block each (Ray's from_arrow /
/// from_numpy for columns already in memory, e.g. arrays that rows cannot hold). Throws
/// prism::Error naming the first block whose schema differs from the first's.
Dataset FromBlocks(const std::vector<Block>& blocks);
/// The named datasets (all when empty) of an HDF5 file, a directory of them or a glob
/// ("/data/train-*.h5"), one column per dataset, read in row ranges by tasks spread over
/// the ranks. Lists the files now: throws prism::Error naming a missing file or dataset.
Dataset ReadHdf5(const std::string& path_or_glob, const std::vector<std::string>& datasets = {},
                 const ReadOptions& options = {});
/// The arrays of .npy files (a file, directory or glob) as a column "data", read in row
/// ranges. Throws prism::Error naming a missing or bad file.
Dataset ReadNumpy(const std::string& path_or_glob, const ReadOptions& options = {});
/// CSV files with a header row, read in byte ranges. A column's type is `column_types`'s
/// (DType::kInt64, kFloat64, kBool or kString) when it names the column, else inferred from
/// the first MiB of the first file (int64, float64, bool, string: the narrowest that fits
/// every field there) and used for every block, so all blocks share one schema. A later
/// field that does not fit its column's type fails the consumption with a prism::Error
/// naming the file, the row's byte offset, the field and the type, and saying to pass
/// column_types when the type was inferred. Throws prism::Error naming a missing file, or
/// for a column_types entry that is not a column of the header or not one of those types.
Dataset ReadCsv(const std::string& path_or_glob, char delimiter = ',', const ReadOptions& options = {},
                const std::map<std::string, DType>& column_types = {});
/// One row per file: "path" (with include_paths) and "bytes" (Ray's read_binary_files).
Dataset ReadBinaryFiles(const std::string& path_or_glob, bool include_paths = true,
                        const ReadOptions& options = {});

}  // namespace prism::data

#include "prism/data/grouped_data.h"
