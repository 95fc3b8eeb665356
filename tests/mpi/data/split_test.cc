// Union, Zip, Split and StreamingSplit end to end: against references computed here,
// schema and row-count mismatches, equal and unequal splits, a StreamingSplit consumed by
// tasks on ranks 1 and 2 at once over two epochs, a consumer that stops early, a consumer
// that never starts an epoch (a timeout naming it), an execution error reaching every
// consumer, and IterBatches' local shuffle buffer. Runs under mpirun -n 1 and -n 3
// (mpi_test_main.cc); at -n 1 the consumers share rank 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>

#include "prism/api.h"
#include "prism/data.h"
#include "../../common/test_util.h"
#include "../../common/data_test_util.h"

namespace {

using namespace prism::data;
using ::testing::HasSubstr;
using prism_test::AllIds;
using prism_test::ErrorOf;
using prism_test::IdsOf;
using prism_test::Iota;

Row AddTen(Row r) {
  r["id"] = std::get<int64_t>(r["id"]) + 10;
  return r;
}
bool KeepEven(Row r) { return std::get<int64_t>(r["id"]) % 2 == 0; }
Block Triple(Block b) {
  std::vector<int64_t> v;
  for (int64_t x : b.GetColumn("id").Values<int64_t>()) v.push_back(3 * x);
  return b.AddColumn("id", Column::FromVector(std::move(v)));
}
Row Fail500(Row r) {
  if (std::get<int64_t>(r["id"]) == 500) throw std::runtime_error("boom at 500");
  return r;
}

/// A consumer: per epoch, the ids its split got, then {the rank it ran on}. In epoch 1 it
/// stops after one batch if `stop_early` (dropping its iterator).
std::vector<std::vector<int64_t>> ConsumeEpochs(DataIterator it, int epochs, bool stop_early) {
  std::vector<std::vector<int64_t>> out;
  for (int e = 0; e < epochs; ++e) {
    std::vector<int64_t> ids;
    for (const Block& batch : it.IterBatches(32)) {
      for (int64_t x : IdsOf(batch)) ids.push_back(x);
      if (stop_early && e == 0) break;
    }
    out.push_back(std::move(ids));
  }
  out.push_back({prism::GetRuntimeContext().GetRank()});
  return out;
}

/// The rank:N resource of the rank where consumer i runs: ranks 1, 2, ... (rank 0 alone
/// at -n 1).
std::string ConsumerRank(int i) {
  const int world = prism::GetRuntimeContext().GetWorldSize();
  return "rank:" + std::to_string(world == 1 ? 0 : 1 + i % (world - 1));
}

PRISM_REMOTE(AddTen, KeepEven, Triple, Fail500, ConsumeEpochs);

std::vector<prism::ObjectRef<std::vector<std::vector<int64_t>>>> StartConsumers(
    const std::vector<DataIterator>& its, int epochs, const std::vector<bool>& stop_early) {
  std::vector<prism::ObjectRef<std::vector<std::vector<int64_t>>>> refs;
  for (size_t i = 0; i < its.size(); ++i) {
    refs.push_back(prism::Task(ConsumeEpochs)
                       .SetResource("CPU", 0)
                       .SetResource(ConsumerRank(static_cast<int>(i)), 0.001)
                       .Remote(its[i], epochs, static_cast<bool>(stop_early[i])));
  }
  return refs;
}

// ---- Union -------------------------------------------------------------------------------

TEST(Union, RowsOfEachInputInOrderEachRunLazily) {
  Dataset ds = Range(10, 3).Union({Range(5, 2).Map(AddTen), Range(3)});
  std::vector<int64_t> expected = Iota(0, 10);
  for (int64_t x : Iota(10, 15)) expected.push_back(x);
  for (int64_t x : Iota(0, 3)) expected.push_back(x);
  EXPECT_EQ(AllIds(ds), expected);
  EXPECT_EQ(ds.Count(), 18);

  // Operators after the union apply to every input (fused into each input's tasks)...
  std::vector<int64_t> tripled;
  for (int64_t x : expected) tripled.push_back(3 * x);
  Dataset mapped = ds.MapBatches(Triple, 4);
  EXPECT_EQ(AllIds(mapped), tripled);
  DatasetStats stats = mapped.Stats();
  ASSERT_GE(stats.operators.size(), 3u) << stats.ToString();
  EXPECT_THAT(stats.operators[0].name, HasSubstr("Union[0]: Range->MapBatches("));
  EXPECT_THAT(stats.ToString(), HasSubstr("Union[1]: Range->Map("));
  // ... and a limit counts across them.
  EXPECT_EQ(AllIds(ds.Limit(12)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(AllIds(Range(4).Union({})), Iota(0, 4));
}

TEST(Union, MismatchedSchemasNameBoth) {
  Dataset floats = FromItems({{{"x", 1.5}}, {{"x", 2.5}}});
  // Known without running: at the call.
  std::string at_call = ErrorOf([&] { Range(5).Union({floats}); });
  EXPECT_THAT(at_call, HasSubstr("Union: input 1 has schema {x: float64}"));
  EXPECT_THAT(at_call, HasSubstr("input 0 has {id: int64}"));
  // Known only once it runs: at the consumption.
  Dataset lazy = Range(5).Map(AddTen).Union({floats});
  std::string at_run = ErrorOf([&] { AllIds(lazy); });
  EXPECT_THAT(at_run, HasSubstr("Union: input 1 has schema {x: float64}"));
  EXPECT_THAT(at_run, HasSubstr("input 0 has {id: int64}"));
}

// ---- Zip ---------------------------------------------------------------------------------

TEST(Zip, ColumnsSideBySideReCutToThisSidesBlocks) {
  // 3 blocks of 34/33/33 rows against 7 blocks of about 14: the right side is re-cut.
  Dataset ds = Range(100, 3).Zip(Range(100, 7).MapBatches(Triple, 10));
  std::vector<int64_t> ids, tripled;
  for (const Block& batch : ds.IterBatches(17)) {
    EXPECT_EQ(batch.column_names(), (std::vector<std::string>{"id", "id_1"}));
    for (int64_t x : IdsOf(batch)) ids.push_back(x);
    for (int64_t x : IdsOf(batch, "id_1")) tripled.push_back(x);
  }
  EXPECT_EQ(ids, Iota(0, 100));
  std::vector<int64_t> expected;
  for (int64_t x : Iota(0, 100)) expected.push_back(3 * x);
  EXPECT_EQ(tripled, expected);
  EXPECT_EQ(ds.Count(), 100);
  EXPECT_EQ(ds.Schema().names(), (std::vector<std::string>{"id", "id_1"}));

  // Other names stay; operators apply after the zip.
  Dataset named = FromItems({{{"x", 1.0}}, {{"x", 2.0}}, {{"x", 3.0}}});
  Dataset zipped = Range(3, 2).Zip(named).Filter(KeepEven);
  std::vector<Row> rows = zipped.Take(10);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(rows[1].at("id")), 2);
  EXPECT_EQ(std::get<double>(rows[1].at("x")), 3.0);
}

TEST(Zip, ArrayColumnsFromBlocks) {
  // Rows that are arrays (FromBlocks), zipped with ids in blocks of another size.
  std::vector<Block> blocks;
  for (int b = 0; b < 2; ++b) {
    std::vector<float> v;
    for (int r = 0; r < 5; ++r) v.insert(v.end(), {float(b * 5 + r), -float(b * 5 + r)});
    blocks.push_back(Block::FromColumns({{"xy", Column::FromVector(std::move(v), {2})}}));
  }
  Dataset ds = Range(10, 3).Zip(FromBlocks(blocks));
  int64_t rows = 0;
  for (const Block& batch : ds.IterBatches(4)) {
    auto ids = IdsOf(batch);
    auto xy = batch.GetColumn("xy").Values<float>();
    EXPECT_EQ(batch.GetColumn("xy").row_shape(), (std::vector<int64_t>{2}));
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(xy[2 * i], float(ids[i]));
      EXPECT_EQ(xy[2 * i + 1], -float(ids[i]));
    }
    rows += batch.num_rows();
  }
  EXPECT_EQ(rows, 10);
  Block other = Block::FromColumns({{"xy", Column::FromVector(std::vector<int64_t>{1, 2})}});
  EXPECT_THAT(ErrorOf([&] { FromBlocks({blocks[0], other}); }), HasSubstr("block 1 has schema {xy: int64}"));
}

TEST(Zip, DifferentRowCountsNameBoth) {
  std::string at_call = ErrorOf([] { Range(10).Zip(Range(11)); });
  EXPECT_THAT(at_call, HasSubstr("Zip: this dataset has 10 rows and the other 11"));
  Dataset lazy = Range(10, 2).Filter(KeepEven).Zip(Range(10));
  std::string at_run = ErrorOf([&] { AllIds(lazy); });
  EXPECT_THAT(at_run, HasSubstr("Zip: this dataset has 5 rows and the other 10"));
}

// ---- Split ---------------------------------------------------------------------------------

TEST(Split, BlocksInConsecutiveRunsOrEqualRows) {
  std::vector<Dataset> parts = Range(100, 10).Split(3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].NumBlocks(), 4);
  EXPECT_EQ(parts[1].NumBlocks(), 3);
  EXPECT_EQ(parts[2].NumBlocks(), 3);
  std::vector<int64_t> all;
  for (const Dataset& p : parts) {
    for (int64_t x : AllIds(p)) all.push_back(x);
  }
  EXPECT_EQ(all, Iota(0, 100));

  std::vector<Dataset> equal = Range(100, 7).Map(AddTen).Split(3, /*equal=*/true);
  ASSERT_EQ(equal.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(equal[i].Count(), 33);
    EXPECT_EQ(AllIds(equal[i]), Iota(10 + 33 * static_cast<int64_t>(i), 10 + 33 * static_cast<int64_t>(i + 1)));
  }
  // More splits than rows: empty ones.
  std::vector<Dataset> tiny = Range(2).Split(3, true);
  for (const Dataset& p : tiny) EXPECT_EQ(p.Count(), 0);
  EXPECT_THAT(ErrorOf([] { Range(5).Split(0); }), HasSubstr("n must be at least 1"));
}

// ---- StreamingSplit ------------------------------------------------------------------------

TEST(StreamingSplit, TasksOnTwoRanksShareOneExecutionEquallyOverTwoEpochs) {
  ExecutionOptions options;
  options.task_timeout_s = 60;
  Dataset ds = Range(1001, 23).WithExecutionOptions(options);
  std::vector<DataIterator> its = ds.StreamingSplit(2, /*equal=*/true);
  ASSERT_EQ(its.size(), 2u);
  EXPECT_EQ(its[1].SplitIndex(), 1);
  auto refs = StartConsumers(its, 2, {false, false});
  auto a = *prism::Get(refs[0], 120000);
  auto b = *prism::Get(refs[1], 120000);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  if (prism::GetRuntimeContext().GetWorldSize() >= 3) {  // at the same time, on ranks 1 and 2
    EXPECT_EQ(a[2], (std::vector<int64_t>{1}));
    EXPECT_EQ(b[2], (std::vector<int64_t>{2}));
  }
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(a[e].size(), 500u) << "epoch " << e;
    EXPECT_EQ(b[e].size(), 500u) << "epoch " << e;
    std::set<int64_t> seen(a[e].begin(), a[e].end());
    seen.insert(b[e].begin(), b[e].end());
    EXPECT_EQ(seen.size(), 1000u) << "a row given twice in epoch " << e;  // one row dropped
    EXPECT_LE(*seen.rbegin(), 1000);
  }
}

TEST(StreamingSplit, WithoutEqualEveryRowGoesToOneConsumer) {
  std::vector<DataIterator> its = Range(600, 12).Map(AddTen).StreamingSplit(3);
  auto refs = StartConsumers(its, 1, {false, false, false});
  std::vector<int64_t> all;
  for (auto& ref : refs) {
    auto got = *prism::Get(ref, 120000);
    all.insert(all.end(), got[0].begin(), got[0].end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, Iota(10, 610));
}

TEST(StreamingSplit, AConsumerThatStopsEarlyDoesNotHoldTheOthers) {
  ExecutionOptions options;
  options.task_timeout_s = 60;
  Dataset ds = Range(800, 16).WithExecutionOptions(options);
  std::vector<DataIterator> its = ds.StreamingSplit(2, /*equal=*/true);
  auto refs = StartConsumers(its, 2, {true, false});  // consumer 0 drops epoch 1 early
  auto a = *prism::Get(refs[0], 120000);
  auto b = *prism::Get(refs[1], 120000);
  EXPECT_EQ(a[0].size(), 32u);  // one batch
  EXPECT_EQ(b[0].size(), 400u);
  EXPECT_EQ(a[1].size(), 400u);  // the next epoch runs whole for both
  EXPECT_EQ(b[1].size(), 400u);
  std::set<int64_t> seen(a[1].begin(), a[1].end());
  seen.insert(b[1].begin(), b[1].end());
  EXPECT_EQ(seen.size(), 800u);
}

TEST(StreamingSplit, AConsumerThatNeverStartsTheEpochIsNamedAfterTheTimeout) {
  ExecutionOptions options;
  options.task_timeout_s = 2;
  std::vector<DataIterator> its = Range(100, 4).WithExecutionOptions(options).StreamingSplit(3);
  const auto start = std::chrono::steady_clock::now();
  try {
    BatchIterator it = its[0].IterBatches(10);
    it.Next();
    FAIL() << "no timeout";
  } catch (const prism::TimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("split(s) 1, 2 did not start it"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(StreamingSplit, AnExecutionErrorReachesEveryConsumer) {
  ExecutionOptions options;
  options.task_timeout_s = 60;
  std::vector<DataIterator> its =
      Range(1000, 10).Map(Fail500).WithExecutionOptions(options).StreamingSplit(2, true);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      errors[static_cast<size_t>(i)] = ErrorOf([&] {
        for (const Block& batch : its[static_cast<size_t>(i)].IterBatches(50)) (void)batch;
      });
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_THAT(e, HasSubstr("boom at 500"));
}

TEST(StreamingSplit, BadArguments) {
  EXPECT_THAT(ErrorOf([] { Range(5).StreamingSplit(0); }), HasSubstr("n must be at least 1"));
  EXPECT_THAT(ErrorOf([] { DataIterator().IterBatches(10); }), HasSubstr("not from a StreamingSplit"));
  std::vector<DataIterator> its = Range(5).StreamingSplit(1);
  EXPECT_THAT(ErrorOf([&] { its[0].IterBatches(0); }), HasSubstr("batch_size must be a positive"));
  EXPECT_EQ(ConsumeEpochs(its[0], 1, false)[0], Iota(0, 5));
  EXPECT_EQ(ConsumeEpochs(its[0], 1, false)[0], Iota(0, 5));  // a second epoch  // n = 1 on the driver
}

// ---- Local shuffle ---------------------------------------------------------------------------

TEST(LocalShuffle, EveryRowOnceInAnOrderTheSeedFixes) {
  Dataset ds = Range(1000, 8);
  auto shuffled = [&](uint64_t seed) {
    std::vector<int64_t> ids;
    std::vector<int64_t> sizes;
    for (const Block& b : ds.IterBatches(64, 1, false, 200, seed)) {
      sizes.push_back(b.num_rows());
      for (int64_t x : IdsOf(b)) ids.push_back(x);
    }
    EXPECT_EQ(sizes.size(), 16u);
    EXPECT_EQ(sizes.back(), 1000 - 15 * 64);
    return ids;
  };
  std::vector<int64_t> a = shuffled(7), b = shuffled(7), c = shuffled(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, Iota(0, 1000));
  std::sort(a.begin(), a.end());
  EXPECT_EQ(a, Iota(0, 1000));
  // Local: the first batch comes from the first blocks only (a buffer of 200 + 64 rows).
  std::vector<int64_t> first;
  for (const Block& b : ds.IterBatches(64, 1, false, 200, 1)) {
    first = IdsOf(b);
    break;
  }
  EXPECT_LT(*std::max_element(first.begin(), first.end()), 375);
  EXPECT_THAT(ErrorOf([&] { ds.IterBatches(8, 1, false, -1); }), HasSubstr("local_shuffle_buffer_size"));
}

}  // namespace
