// prism::data's plan without a runtime (src/data/plan.h): fusion, read splitting, row
// selection, what one fused stage does to a block (UDFs called by registered name), and
// the errors that name the operator and block.
#include "data/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/io.h"
#include "prism/data/actor_class.h"
#include "prism/platform/invoke.h"
#include "prism/remote.h"
#include "../../common/test_util.h"
#include "../../common/data_test_util.h"

namespace {

namespace fs = std::filesystem;
using prism::data::Block;
using prism::data::Column;
using prism::data::DType;
using prism::data::Row;
using prism::data::internal::ApplyStage;
using prism::data::internal::ExecuteRead;
using prism::data::internal::Fuse;
using prism::data::internal::IsOpError;
using prism::data::internal::IsRetryableError;
using prism::data::internal::FusedPlan;
using prism::data::internal::Op;
using prism::data::internal::ReadPlanOptions;
using prism::data::internal::ReadTask;
using prism::data::internal::SplitRows;
using prism::data::internal::TakeRows;
using ::testing::HasSubstr;
using prism_test::ErrorOf;
using prism_test::IdsOf;

Row PlanAddOne(Row r) {
  r["id"] = std::get<int64_t>(r["id"]) + 1;
  return r;
}
bool PlanIsEven(Row r) { return std::get<int64_t>(r["id"]) % 2 == 0; }
Block PlanDouble(Block b) {
  std::vector<int64_t> v;
  for (int64_t x : b.GetColumn("id").Values<int64_t>()) v.push_back(2 * x);
  return b.AddColumn("id", Column::FromVector(std::move(v)));
}
std::vector<Row> PlanTwice(Row r) { return {r, r}; }
Column PlanSquare(Block b) {
  std::vector<int64_t> v;
  for (int64_t x : b.GetColumn("id").Values<int64_t>()) v.push_back(x * x);
  return Column::FromVector(std::move(v));
}
Row PlanThrowAt7(Row r) {
  if (std::get<int64_t>(r["id"]) == 7) throw std::out_of_range("no sevens here");
  return r;
}
PRISM_REMOTE(PlanAddOne, PlanIsEven, PlanDouble, PlanTwice, PlanSquare, PlanThrowAt7);

Op UdfOp(int32_t kind, const std::string& fn, int64_t batch_size = 0) {
  Op op;
  op.kind = kind;
  op.fn = fn;
  op.batch_size = batch_size;
  return op;
}
Op LimitOp(int64_t n) {
  Op op;
  op.kind = Op::kLimit;
  op.limit = n;
  return op;
}
Op ColumnsOp(int32_t kind, std::vector<std::string> columns) {
  Op op;
  op.kind = kind;
  op.columns = std::move(columns);
  return op;
}

Block Ids(int64_t begin, int64_t end) {
  ReadTask read;
  read.kind = ReadTask::kRange;
  read.begin = begin;
  read.end = end;
  read.column = "id";
  return ExecuteRead(read);
}

TEST(DataPlan, RowAndOneToOneOperatorsFuseIntoOneStage) {
  FusedPlan plan = Fuse({UdfOp(Op::kMap, "a"), UdfOp(Op::kFilter, "b"), UdfOp(Op::kMapBatches, "c", 8),
                         ColumnsOp(Op::kSelectColumns, {"id"})});
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_TRUE(plan.limits.empty());
  EXPECT_EQ(plan.stages[0].ops.size(), 4u);
  EXPECT_EQ(plan.stages[0].Name(), "Map(a)->Filter(b)->MapBatches(c)->SelectColumns(id)");
}

TEST(DataPlan, LimitEndsAStageAndConsecutiveLimitsMerge) {
  FusedPlan plan = Fuse({UdfOp(Op::kMap, "a"), LimitOp(5), LimitOp(3), ColumnsOp(Op::kDropColumns, {"x"}),
                         LimitOp(2)});
  ASSERT_EQ(plan.stages.size(), 3u);
  EXPECT_EQ(plan.limits, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(plan.stages[0].Name(), "Map(a)");
  EXPECT_EQ(plan.stages[1].Name(), "DropColumns(x)");
  EXPECT_TRUE(plan.stages[2].ops.empty());

  FusedPlan only = Fuse({LimitOp(4)});
  ASSERT_EQ(only.stages.size(), 2u);
  EXPECT_TRUE(only.stages[0].ops.empty());
}

TEST(DataPlan, SplitRowsByBytesOrCount) {
  ReadPlanOptions by_bytes;
  by_bytes.target_block_bytes = 16;
  auto ranges = SplitRows(10, 8, by_bytes);
  ASSERT_EQ(ranges.size(), 5u);
  EXPECT_EQ(ranges.front(), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(ranges.back(), (std::pair<int64_t, int64_t>{8, 10}));

  ReadPlanOptions by_count;
  by_count.override_num_blocks = 3;
  ranges = SplitRows(10, 8, by_count);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0], (std::pair<int64_t, int64_t>{0, 4}));
  EXPECT_EQ(ranges[2], (std::pair<int64_t, int64_t>{8, 10}));

  EXPECT_TRUE(SplitRows(0, 8, by_bytes).empty());
  ReadPlanOptions tiny;
  tiny.target_block_bytes = 1;
  EXPECT_EQ(SplitRows(3, 100, tiny).size(), 3u);  // at least one row per block
}

TEST(DataPlan, TakeRowsKeepsDtypes) {
  Block b = Block::FromColumns({{"x", Column::FromVector(std::vector<int32_t>{1, 2, 3, 4, 5})},
                                {"s", Column::FromStrings({"a", "b", "c", "d", "e"})}});
  Block t = TakeRows(b, {0, 1, 3});
  ASSERT_EQ(t.num_rows(), 3);
  EXPECT_EQ(t.GetColumn("x").dtype(), DType::kInt32);
  auto x = t.GetColumn("x").Values<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(x.begin(), x.end()), (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(t.GetColumn("s").StringAt(2), "d");
  EXPECT_EQ(TakeRows(b, {}).num_rows(), 0);
  EXPECT_EQ(TakeRows(b, {0, 1, 2, 3, 4}).num_rows(), 5);
}

TEST(DataPlan, RowsAreValuesThatRoundTrip) {
  Row row{{"i", int64_t{-3}}, {"d", 2.5}, {"b", true}, {"s", std::string("hi")}};
  Row back = prism::platform::FromBytes<Row>(prism::platform::ToBytes(row));
  EXPECT_EQ(back, row);
  std::vector<Row> rows{row, Row{}};
  EXPECT_EQ(prism::platform::FromBytes<std::vector<Row>>(prism::platform::ToBytes(rows)), rows);
}

TEST(DataPlan, AStageAppliesEachOperatorInOrder) {
  const std::string add = prism::platform::RegisteredName(&PlanAddOne);
  const std::string even = prism::platform::RegisteredName(&PlanIsEven);
  const std::string dbl = prism::platform::RegisteredName(&PlanDouble);
  Block out = ApplyStage(Ids(0, 10),
                         {UdfOp(Op::kMap, add), UdfOp(Op::kFilter, even), UdfOp(Op::kMapBatches, dbl, 2)},
                         0, -1, nullptr, nullptr, nullptr);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 10; ++i) {
    if ((i + 1) % 2 == 0) expected.push_back(2 * (i + 1));
  }
  EXPECT_EQ(IdsOf(out), expected);

  Block flat = ApplyStage(Ids(0, 3), {UdfOp(Op::kFlatMap, prism::platform::RegisteredName(&PlanTwice))}, 0,
                          -1, nullptr, nullptr, nullptr);
  EXPECT_EQ(IdsOf(flat), (std::vector<int64_t>{0, 0, 1, 1, 2, 2}));

  Op square = UdfOp(Op::kAddColumn, prism::platform::RegisteredName(&PlanSquare));
  square.column = "sq";
  Block added = ApplyStage(Ids(0, 4), {square, ColumnsOp(Op::kDropColumns, {"id"})}, 0, 2, nullptr,
                           nullptr, nullptr);
  ASSERT_EQ(added.column_names(), (std::vector<std::string>{"sq"}));
  auto sq = added.GetColumn("sq").Values<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(sq.begin(), sq.end()), (std::vector<int64_t>{0, 1}));  // keep_rows 2
}

TEST(DataPlan, AFailingOperatorNamesItselfTheBlockAndTheMessage) {
  const std::string thrower = prism::platform::RegisteredName(&PlanThrowAt7);
  std::string message = ErrorOf(
      [&] { ApplyStage(Ids(5, 10), {UdfOp(Op::kMap, thrower)}, 4, -1, nullptr, nullptr, nullptr); });
  EXPECT_THAT(message, HasSubstr("prism::data: Map(" + thrower + ") failed on block 4"));
  EXPECT_THAT(message, HasSubstr("std::out_of_range"));
  EXPECT_THAT(message, HasSubstr("no sevens here"));

  message = ErrorOf([&] {
    ApplyStage(Ids(0, 3), {ColumnsOp(Op::kSelectColumns, {"nope"})}, 2, -1, nullptr, nullptr, nullptr);
  });
  EXPECT_THAT(message, HasSubstr("SelectColumns(nope) failed on block 2"));
  EXPECT_THAT(message, HasSubstr("nope"));

  message = ErrorOf([&] {
    ApplyStage(Ids(0, 3), {UdfOp(Op::kMap, "NotRegistered")}, 0, -1, nullptr, nullptr, nullptr);
  });
  EXPECT_THAT(message, HasSubstr("NotRegistered"));
}

TEST(DataPlan, AFailureIsAnOpErrorAndRetriesGoByTheExceptionsType) {
  Op map = UdfOp(Op::kMap, prism::platform::RegisteredName(&PlanThrowAt7));
  map.max_retries = 2;
  map.retry_types = {"std::out_of_range"};
  auto failure = [&](int32_t attempt) -> std::exception_ptr {
    try {
      ApplyStage(Ids(5, 10), {map}, 4, -1, nullptr, nullptr, nullptr, attempt);
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  };
  // Named type, attempts left: a RetryableError; the last attempt: an OpError.
  EXPECT_EQ(prism::platform::ExceptionType(failure(0)), "prism::data::internal::RetryableError");
  EXPECT_EQ(prism::platform::ExceptionType(failure(2)), "prism::data::internal::OpError");
  EXPECT_THAT(prism::platform::ExceptionMessage(failure(2)), HasSubstr("(after 3 attempts)"));
  // Another type is not retried.
  map.retry_types = {"std::runtime_error"};
  EXPECT_EQ(prism::platform::ExceptionType(failure(0)), "prism::data::internal::OpError");

  // The driver tells Data's errors by their type as a failed task reports it.
  prism::TaskError op("prism::data::internal::OpError", "prism::data: Map failed", "t", 1, "w");
  prism::TaskError retry("prism::data::internal::RetryableError", "prism::data: Map failed", "t", 1, "w");
  prism::TaskError other("std::runtime_error", "prism::data: looks like one", "t", 1, "w");
  EXPECT_TRUE(IsOpError(op));
  EXPECT_TRUE(IsOpError(retry));
  EXPECT_TRUE(IsRetryableError(retry));
  EXPECT_FALSE(IsRetryableError(op));
  EXPECT_FALSE(IsOpError(other));  // the message's prefix does not matter
}

TEST(DataPlan, AWriteWritesAPartNamedByTheBlockIndex) {
  char pattern[] = "/tmp/prism-data-plan-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  Op write;
  write.kind = Op::kWrite;
  write.format = Op::kCsv;
  write.dir = dir;
  std::string file;
  int64_t rows = 0;
  uint64_t bytes = 0;
  Block out = ApplyStage(Ids(0, 6), {write}, 3, -1, &file, &rows, &bytes);
  EXPECT_EQ(out.num_rows(), 0);
  EXPECT_EQ(file, "part-00003.csv");
  EXPECT_EQ(rows, 6);
  EXPECT_TRUE(fs::exists(dir + "/" + file));
  fs::remove_all(dir);
}

// A binding's UDF (BoundUdf): one trampoline, the function it runs carried as bytes.
// Here the bytes name a step added to every id; the trampoline gets whole blocks (row
// operators) or batches (MapBatches).
Block PlanBoundAdd(const std::string& bound, const Block& block) {
  const int64_t step = std::stoll(bound);
  std::vector<int64_t> ids;
  for (int64_t x : block.GetColumn("id").Values<int64_t>()) ids.push_back(x + step);
  ids.push_back(-1);  // one extra row a call: how many calls there were shows in the output
  return Block::FromColumns({{"id", Column::FromVector(std::move(ids))}});
}
PRISM_REMOTE(PlanBoundAdd);

TEST(DataPlan, ABoundUdfGetsItsBytesAndTheWholeBlockOrEachBatch) {
  const std::string name = prism::platform::RegisteredName(&PlanBoundAdd);
  Op map = UdfOp(Op::kMap, name);
  map.has_bound = true;
  map.bound = "10";
  map.display = "add_ten";
  EXPECT_EQ(map.Name(), "Map(add_ten)");
  // A row operator: one call for the block.
  EXPECT_EQ(IdsOf(ApplyStage(Ids(0, 3), {map}, 0, -1, nullptr, nullptr, nullptr)),
            (std::vector<int64_t>{10, 11, 12, -1}));
  // MapBatches: one call per batch of 2 rows; the bytes survive the trip as a task's value.
  Op batches = UdfOp(Op::kMapBatches, name, 2);
  batches.has_bound = true;
  batches.bound = "100";
  Op sent = prism::platform::FromBytes<Op>(prism::platform::ToBytes(batches));
  EXPECT_EQ(IdsOf(ApplyStage(Ids(0, 3), {sent}, 0, -1, nullptr, nullptr, nullptr)),
            (std::vector<int64_t>{100, 101, -1, 102, -1}));
  EXPECT_EQ(sent.Name(), "MapBatches(" + name + ")");  // no display name: the trampoline's
  // A failure names the display name.
  map.bound = "not a number";
  EXPECT_THAT(ErrorOf([&] { ApplyStage(Ids(0, 3), {map}, 5, -1, nullptr, nullptr, nullptr); }),
              HasSubstr("Map(add_ten) failed on block 5"));
}

struct NamedModel {
  explicit NamedModel(std::string) {}
  Block operator()(const Block& b) const { return b; }
};

TEST(DataPlan, AnActorClassShowsTheNameABindingGivesIt) {
  prism::data::ActorClass<NamedModel> cls{std::string("payload")};
  EXPECT_THAT(cls.Name(), HasSubstr("NamedModel"));
  const std::string key = cls.Key();
  cls.SetName("FashionClassifier");
  EXPECT_EQ(cls.Name(), "FashionClassifier");
  EXPECT_EQ(cls.Key(), key);  // the same registered class
  EXPECT_EQ(cls.Args().size(), 1u);
}

TEST(DataPlan, AJsonWriteWritesOneObjectARowWithArraysAsLists) {
  char pattern[] = "/tmp/prism-data-plan-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  Op write;
  write.kind = Op::kWrite;
  write.format = Op::kJson;
  write.dir = dir;
  EXPECT_EQ(write.Name(), "WriteJson(" + dir + ")");
  Block block = Block::FromColumns(
      {{"id", Column::FromVector(std::vector<int64_t>{1, 2})},
       {"x", Column::FromVector(std::vector<float>{0.5f, 1, 2, 3}, {2})},
       {"s", Column::FromStrings({"a\"b", "c"})},
       {"f", Column::FromVector(std::vector<double>{std::nan(""), 2.25})}});
  std::string file;
  int64_t rows = 0;
  ApplyStage(block, {write}, 2, -1, &file, &rows, nullptr);
  EXPECT_EQ(file, "part-00002.json");
  EXPECT_EQ(rows, 2);
  std::ifstream in(dir + "/" + file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "{\"id\":1,\"x\":[0.5,1.0],\"s\":\"a\\\"b\",\"f\":null}\n"
            "{\"id\":2,\"x\":[2.0,3.0],\"s\":\"c\",\"f\":2.25}\n");
  fs::remove_all(dir);
}

}  // namespace
