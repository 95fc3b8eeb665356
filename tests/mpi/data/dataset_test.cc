// prism::data::Dataset end to end: every operator against a reference computed here,
// fusion (one task per block), exact re-batching, limits, backpressure under a slow
// consumer, a UDF's exception, bad input, and each file format written and read back.
// Runs under mpirun -n 1 and -n 3 (mpi_test_main.cc), and in one process on an
// in-process cluster of 3 ranks (tests/unit/data/in_process_main.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "prism/api.h"
#include "prism/data.h"
#include "../../common/test_util.h"
#include "../../common/data_test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace prism::data;
using ::testing::HasSubstr;
using prism_test::AllIds;
using prism_test::ErrorOf;
using prism_test::IdsOf;
using prism_test::Iota;
using prism_test::TempDir;

Row AddOne(Row r) {
  r["id"] = std::get<int64_t>(r["id"]) + 1;
  return r;
}
bool IsEven(Row r) { return std::get<int64_t>(r["id"]) % 2 == 0; }
Block Double(Block b) {
  std::vector<int64_t> v;
  for (int64_t x : b.GetColumn("id").Values<int64_t>()) v.push_back(2 * x);
  return b.AddColumn("id", Column::FromVector(std::move(v)));
}
std::vector<Row> Twice(Row r) { return {r, r}; }
Column Square(Block b) {
  std::vector<int64_t> v;
  for (int64_t x : b.GetColumn("id").Values<int64_t>()) v.push_back(x * x);
  return Column::FromVector(std::move(v));
}
Row ThrowAt42(Row r) {
  if (std::get<int64_t>(r["id"]) == 42) throw std::runtime_error("boom at 42");
  return r;
}
Row NotRegistered(Row r) { return r; }
Row SlowRow(Row r) {
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  return r;
}
PRISM_REMOTE(AddOne, IsEven, Double, Twice, Square, ThrowAt42, SlowRow);

// A binding's trampoline (BoundUdf): the bytes say what to do to the block it gets ("keep
// even", "add N", "count": one row with the group's size).
Block BoundOp(const std::string& bound, const Block& block) {
  std::vector<int64_t> out;
  auto ids = block.GetColumn("id").Values<int64_t>();
  if (bound == "keep even") {
    for (int64_t x : ids) {
      if (x % 2 == 0) out.push_back(x);
    }
  } else if (bound == "count") {
    return Block::FromColumns({{"key", block.GetColumn("key").Slice(0, 1)},
                               {"n", Column::FromVector(std::vector<int64_t>{block.num_rows()})}});
  } else {
    for (int64_t x : ids) out.push_back(x + std::stoll(bound));
  }
  return Block::FromColumns({{"id", Column::FromVector(std::move(out))}});
}
PRISM_REMOTE(BoundOp);

TEST(Dataset, MapFilterMapBatchesMatchAReferenceInOneTaskPerBlock) {
  Dataset ds = Range(1000, 10).Map(AddOne).Filter(IsEven).MapBatches(Double, 7);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 1000; ++i) {
    if ((i + 1) % 2 == 0) expected.push_back(2 * (i + 1));
  }
  EXPECT_EQ(AllIds(ds), expected);
  DatasetStats stats = ds.Stats();
  ASSERT_EQ(stats.operators.size(), 1u) << stats.ToString();
  EXPECT_EQ(stats.operators[0].tasks, 10) << stats.ToString();  // fused: one task per block
  EXPECT_EQ(stats.operators[0].blocks, 10);
  EXPECT_EQ(stats.operators[0].rows, 500);
  EXPECT_THAT(stats.operators[0].name, HasSubstr("Range->Map("));
  EXPECT_THAT(stats.operators[0].name, HasSubstr(")->Filter("));
  EXPECT_THAT(stats.operators[0].name, HasSubstr(")->MapBatches("));
}

TEST(Dataset, BoundUdfsRunTheirBytesOnEveryRankFusedAndNamed) {
  Dataset ds = Range(100, 4)
                   .Map(BoundUdf::Of(BoundOp, "1", "add_one"))
                   .Filter(BoundUdf::Of(BoundOp, "keep even", "is_even"))
                   .MapBatches(BoundUdf::Of(BoundOp, "1000", "shift"), {.batch_size = 7});
  std::vector<int64_t> expected;
  for (int64_t i = 1; i <= 100; ++i) {
    if (i % 2 == 0) expected.push_back(i + 1000);
  }
  EXPECT_EQ(AllIds(ds), expected);
  DatasetStats stats = ds.Stats();
  ASSERT_EQ(stats.operators.size(), 1u) << stats.ToString();
  EXPECT_EQ(stats.operators[0].name, "Range->Map(add_one)->Filter(is_even)->MapBatches(shift)");
  EXPECT_EQ(stats.operators[0].tasks, 4);
  // A failure names the function, and bad arguments are refused at the call.
  std::string message = ErrorOf([&] { Range(10, 2).Map(BoundUdf::Of(BoundOp, "x", "broken")).Count(); });
  EXPECT_THAT(message, ::testing::ContainsRegex("Map\\(broken\\) failed on block [01]: "));  // both fail
  EXPECT_THAT(ErrorOf([&] { Range(10).MapBatches(BoundUdf::Of(BoundOp, "1"), {.batch_size = 0}); }),
              HasSubstr("batch_size must be a positive number"));
  // MapGroups of a bound function: one call per group.
  std::vector<Row> items;
  for (int64_t i = 0; i < 30; ++i) items.push_back({{"key", i % 3}, {"id", i}});
  std::vector<Row> counts = FromItems(items, 4).GroupBy("key").MapGroups(BoundUdf::Of(BoundOp, "count", "size")).Take(10);
  ASSERT_EQ(counts.size(), 3u);
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(std::get<int64_t>(counts[k]["key"]), k);
    EXPECT_EQ(std::get<int64_t>(counts[k]["n"]), 10);
  }
}

TEST(Dataset, WriteJsonWritesJsonLinesPartsAndCommits) {
  TempDir dir;
  Range(10, 2).WriteJson(dir / "out");
  EXPECT_TRUE(fs::exists(dir / "out/_SUCCESS"));
  std::ifstream in(dir / "out/part-00001.json");
  std::string line, last;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    last = line;
  }
  EXPECT_EQ(lines, 5);
  EXPECT_EQ(last, "{\"id\":9}");
}

TEST(Dataset, IterBatchesGivesExactBatchesAcrossBlocks) {
  Dataset ds = Range(103, 7);  // blocks of 15 rows: batches of 10 span them
  std::vector<int64_t> sizes, ids;
  for (const Block& batch : ds.IterBatches(10)) {
    sizes.push_back(batch.num_rows());
    for (int64_t x : IdsOf(batch)) ids.push_back(x);
  }
  std::vector<int64_t> expected_sizes(10, 10);
  expected_sizes.push_back(3);
  EXPECT_EQ(sizes, expected_sizes);
  EXPECT_EQ(ids, Iota(0, 103));

  int64_t full = 0;
  BatchIterator it = ds.IterBatches(10, 2, /*drop_last=*/true);
  while (std::optional<Block> b = it.Next()) {
    EXPECT_EQ(b->num_rows(), 10);
    ++full;
  }
  EXPECT_EQ(full, 10);
  EXPECT_FALSE(it.Next().has_value());  // stays at the end

  std::vector<int64_t> one;
  for (const Block& b : Range(5).IterBatches(100)) one.push_back(b.num_rows());
  EXPECT_EQ(one, (std::vector<int64_t>{5}));
  EXPECT_TRUE(AllIds(Range(0)).empty());
}

TEST(Dataset, LimitTakeAndCount) {
  Dataset ds = Range(1000, 10);
  EXPECT_EQ(ds.Count(), 1000);
  EXPECT_EQ(ds.Limit(25).Count(), 25);
  EXPECT_EQ(ds.Limit(0).Count(), 0);
  EXPECT_EQ(ds.Limit(5000).Count(), 1000);
  EXPECT_EQ(AllIds(ds.Map(AddOne).Limit(15).Map(AddOne)), Iota(2, 17));
  std::vector<Row> rows = ds.Take(3);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(std::get<int64_t>(rows[2].at("id")), 2);
  EXPECT_EQ(ds.Take(0).size(), 0u);
}

TEST(Dataset, FlatMapAddColumnSelectDropAndSchema) {
  Dataset ds = Range(20, 4).FlatMap(Twice).AddColumn("sq", Square);
  std::vector<int64_t> ids, squares;
  for (int64_t i = 0; i < 20; ++i) {
    ids.insert(ids.end(), {i, i});
    squares.insert(squares.end(), {i * i, i * i});
  }
  EXPECT_EQ(AllIds(ds), ids);
  EXPECT_EQ(AllIds(ds, "sq"), squares);
  EXPECT_EQ(ds.Schema().names(), (std::vector<std::string>{"id", "sq"}));
  EXPECT_EQ(ds.Schema().fields[1].dtype, DType::kInt64);
  EXPECT_EQ(ds.SelectColumns({"sq"}).Schema().names(), (std::vector<std::string>{"sq"}));
  EXPECT_EQ(ds.DropColumns({"sq"}).Schema().names(), (std::vector<std::string>{"id"}));
  EXPECT_EQ(AllIds(ds.SelectColumns({"sq", "id"}), "sq"), squares);
  EXPECT_EQ(Range(0).Schema().fields.size(), 0u);
}

TEST(Dataset, FromItemsAndMaterialize) {
  std::vector<Row> items;
  for (int64_t i = 0; i < 50; ++i) {
    items.push_back({{"id", i}, {"name", "row" + std::to_string(i)}, {"x", 0.5 * static_cast<double>(i)}});
  }
  Dataset ds = FromItems(items, 4);
  EXPECT_EQ(ds.NumBlocks(), 4);
  EXPECT_EQ(ds.Take(100), items);
  EXPECT_EQ(ds.Filter(IsEven).Count(), 25);

  Dataset m = Range(100, 5).Map(AddOne).Materialize();
  EXPECT_EQ(m.NumBlocks(), 5);
  EXPECT_EQ(m.Count(), 100);
  EXPECT_EQ(AllIds(m), Iota(1, 101));
  EXPECT_EQ(AllIds(m.Map(AddOne)), Iota(2, 102));
  Dataset cut = Range(100, 5).Limit(33).Materialize();
  EXPECT_EQ(cut.Count(), 33);
  EXPECT_EQ(AllIds(cut), Iota(0, 33));
}

TEST(Dataset, ASlowConsumerHoldsTheProducersBack) {
  // 200 blocks of 1000 int64 rows (8000 bytes each); a budget of 4 blocks.
  ExecutionOptions options;
  options.object_store_budget_bytes = 4 * 8000;
  options.max_tasks_in_flight_per_op = 64;
  Dataset ds = Range(200 * 1000, 200).Map(AddOne).WithExecutionOptions(options);
  BatchIterator it = ds.IterBatches(1000, /*prefetch_batches=*/0);
  for (int taken = 1; taken <= 12; ++taken) {
    std::optional<Block> batch = it.Next();
    ASSERT_TRUE(batch.has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const OperatorStats op = it.Stats().operators.at(0);
    EXPECT_LE(op.tasks, taken + 5) << it.Stats().ToString();
  }
  int64_t rows = 12 * 1000;
  while (std::optional<Block> batch = it.Next()) rows += batch->num_rows();
  EXPECT_EQ(rows, 200 * 1000);
  const OperatorStats op = it.Stats().operators.at(0);
  EXPECT_EQ(op.tasks, 200);
  EXPECT_LE(op.peak_bytes, options.object_store_budget_bytes) << it.Stats().ToString();
  EXPECT_LE(op.peak_tasks_in_flight, 4) << it.Stats().ToString();
}

TEST(Dataset, TheDefaultBudgetIsHalfTheClusterObjectStore) {
  // Ray's DataContext rule: half of cluster_resources()["object_store_memory"], split among
  // the task operators (here one: the fused Range->Map).
  const double store = prism::ClusterResources().at("object_store_memory");
  EXPECT_EQ(DefaultObjectStoreBudget(), static_cast<uint64_t>(store * 0.5));
  BatchIterator it = Range(1000, 4).Map(AddOne).IterBatches(100);
  ASSERT_TRUE(it.Next().has_value());
  EXPECT_EQ(it.Stats().operators.at(0).budget_bytes, DefaultObjectStoreBudget());
  // Two task operators (a limit splits the stages) share it.
  BatchIterator two = Range(1000, 4).Map(AddOne).Limit(500).Map(AddOne).IterBatches(100);
  ASSERT_TRUE(two.Next().has_value());
  EXPECT_EQ(two.Stats().operators.front().budget_bytes, DefaultObjectStoreBudget() / 2);
  // An explicit budget wins.
  ExecutionOptions options;
  options.object_store_budget_bytes = 12345;
  BatchIterator set = Range(1000, 4).Map(AddOne).WithExecutionOptions(options).IterBatches(100);
  ASSERT_TRUE(set.Next().has_value());
  EXPECT_EQ(set.Stats().operators.at(0).budget_bytes, 12345u);
}

TEST(Dataset, ALimitStopsTheRestOfThePipeline) {
  // 40 blocks of one slow row: once Take has its 2 rows, no further task is launched.
  Dataset ds = Range(40, 40).Map(SlowRow);
  EXPECT_EQ(AllIds(ds.Limit(2)), Iota(0, 2));
  const DatasetStats stats = ds.Limit(2).Map(AddOne).Materialize().Stats();
  ASSERT_EQ(stats.operators.size(), 3u) << stats.ToString();
  EXPECT_LT(stats.operators[0].tasks, 40) << stats.ToString();
  EXPECT_EQ(stats.operators[1].rows, 2) << stats.ToString();   // the limit
  EXPECT_EQ(stats.operators[2].tasks, 2) << stats.ToString();  // the stage after it
}

TEST(Dataset, DroppingAnIteratorStopsItsExecution) {
  // A budget of a few blocks (each ~16 KB in and out) holds the pipeline back until the
  // consumer takes a block, so however slowly this thread runs, the drop comes first.
  ExecutionOptions options;
  options.object_store_budget_bytes = 64 << 10;
  Dataset ds = Range(100000, 100).Map(AddOne).WithExecutionOptions(options);
  {
    BatchIterator it = ds.IterBatches(10);
    ASSERT_TRUE(it.Next().has_value());
  }  // dropped after one batch: its running tasks are cancelled
  EXPECT_LT(ds.Stats().operators.at(0).tasks, 100);
  EXPECT_EQ(ds.Count(), 100000);  // a new execution runs from the start
}

TEST(Dataset, AnExceptionInAUdfNamesTheOperatorBlockAndMessage) {
  Dataset ds = Range(100, 10).Map(ThrowAt42);
  const std::string name = prism::platform::RegisteredName(&ThrowAt42);
  BatchIterator it = ds.IterBatches(10);
  std::string message = ErrorOf([&] {
    while (it.Next()) {
    }
  });
  EXPECT_THAT(message, HasSubstr("Map(" + name + ") failed on block 4"));
  EXPECT_THAT(message, HasSubstr("boom at 42"));
  EXPECT_EQ(ErrorOf([&] { it.Next(); }), message);  // the iteration stays failed
  EXPECT_THAT(ErrorOf([&] { ds.Count(); }), HasSubstr("boom at 42"));
}

TEST(Dataset, AStuckTaskEndsTheIterationWithATimeout) {
  ExecutionOptions options;
  options.task_timeout_s = 0.3;
  Dataset ds = Range(10, 1).Map(SlowRow).WithExecutionOptions(options);  // one task of 1.5 s
  std::string message;
  try {
    ds.Count();
  } catch (const prism::TimeoutError& e) {
    message = e.what();
  }
  EXPECT_THAT(message, HasSubstr("task_timeout_s"));
  EXPECT_THAT(message, HasSubstr("Map("));
  EXPECT_THAT(ErrorOf([] { Range(1).WithExecutionOptions(ExecutionOptions{0, 0, 0}); }),
              HasSubstr("task_timeout_s must be positive"));
}

TEST(Dataset, BadInputSaysWhatIsWrong) {
  EXPECT_THAT(ErrorOf([] { ReadHdf5("/nonexistent/prism/x.h5"); }), HasSubstr("/nonexistent/prism/x.h5"));
  EXPECT_THAT(ErrorOf([] { ReadCsv("/nonexistent/prism/x.csv"); }), HasSubstr("/nonexistent/prism/x.csv"));
  EXPECT_THAT(ErrorOf([] { Range(10).IterBatches(0); }), HasSubstr("batch_size must be a positive"));
  EXPECT_THAT(ErrorOf([] { Range(10).MapBatches(Double, 0); }), HasSubstr("batch_size must be a positive"));
  EXPECT_THAT(ErrorOf([] { Range(10).Limit(-1); }), HasSubstr("n must be >= 0"));
  EXPECT_THAT(ErrorOf([] { Range(10).Map(NotRegistered); }), HasSubstr("not registered"));
  std::string missing = ErrorOf([] { Range(10, 2).SelectColumns({"nope"}).Count(); });
  // Both blocks fail; whichever finishes first is reported.
  EXPECT_THAT(missing, ::testing::ContainsRegex("SelectColumns\\(nope\\) failed on block [01]: "));
  EXPECT_THAT(missing, HasSubstr("nope"));
  EXPECT_THAT(ErrorOf([] { Range(10).DropColumns({"nope"}).Take(1); }), HasSubstr("nope"));
}

TEST(Dataset, FilesWrittenAndReadBack) {
  TempDir dir;
  Dataset ds = Range(100, 4).AddColumn("sq", Square);
  std::vector<int64_t> squares;
  for (int64_t i = 0; i < 100; ++i) squares.push_back(i * i);

  ds.WriteHdf5(dir / "h5");
  EXPECT_TRUE(fs::exists(dir / "h5/_SUCCESS"));
  ReadOptions three;
  three.override_num_blocks = 12;  // 3 per file
  Dataset h5 = ReadHdf5(dir / "h5", {}, three);
  EXPECT_EQ(h5.NumBlocks(), 12);
  EXPECT_EQ(AllIds(h5), Iota(0, 100));
  EXPECT_EQ(AllIds(h5, "sq"), squares);
  EXPECT_EQ(ReadHdf5(dir / "h5", {"sq"}).Schema().names(), (std::vector<std::string>{"sq"}));
  EXPECT_THAT(ErrorOf([&] { ReadHdf5(dir / "h5", {"nope"}); }), HasSubstr("nope"));

  ds.WriteCsv(dir / "csv");
  ReadOptions small;
  small.target_block_bytes = 64;  // many byte ranges per file
  Dataset csv = ReadCsv(dir / "csv", ',', small);
  EXPECT_GT(csv.NumBlocks(), 4);
  EXPECT_EQ(AllIds(csv), Iota(0, 100));
  EXPECT_EQ(AllIds(csv, "sq"), squares);

  ds.WriteNumpy(dir / "npy", "sq");
  EXPECT_EQ(AllIds(ReadNumpy(dir / "npy"), "data"), squares);

  Dataset bin = ReadBinaryFiles(dir / "csv");
  std::vector<Row> rows = bin.Take(10);
  ASSERT_EQ(rows.size(), 4u);  // one row per part file (_SUCCESS is skipped)
  const std::string path = std::get<std::string>(rows[0].at("path"));
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  EXPECT_EQ(std::get<std::string>(rows[0].at("bytes")), contents.str());

  // A limit then a write: only the rows kept are written.
  ds.Limit(30).WriteCsv(dir / "limited");
  EXPECT_EQ(ReadCsv(dir / "limited").Count(), 30);
}

// A CSV column whose first MiB holds integers and a later row text: the inferred type fails
// naming the field and saying to pass column_types; with column_types the file reads.
TEST(Dataset, CsvColumnTypesOverrideInference) {
  TempDir dir;
  fs::create_directories(dir / "late");
  {
    std::ofstream out(dir / "late/a.csv");
    out << "id,v\n";
    for (int i = 0; i < 150000; ++i) out << i << "," << i % 7 << "\n";  // ~1.4 MiB of ints
    out << "150000,seven\n";
  }
  const std::string late = ErrorOf([&] { ReadCsv(dir / "late").Count(); });
  EXPECT_THAT(late, HasSubstr("\"seven\" in column \"v\", which is not an int64"));
  EXPECT_THAT(late, HasSubstr("column_types"));
  Dataset typed = ReadCsv(dir / "late", ',', {}, {{"v", DType::kString}});
  EXPECT_EQ(typed.Count(), 150001);
  EXPECT_EQ(typed.Schema().fields.at(1).dtype, DType::kString);
  EXPECT_EQ(typed.Schema().fields.at(0).dtype, DType::kInt64);  // still inferred
  EXPECT_THAT(ErrorOf([&] { ReadCsv(dir / "late", ',', {}, {{"w", DType::kString}}); }),
              HasSubstr("\"w\", which is not a column"));
  EXPECT_THAT(ErrorOf([&] { ReadCsv(dir / "late", ',', {}, {{"v", DType::kUInt8}}); }),
              HasSubstr("int64, float64, bool or string"));
}

}  // namespace
