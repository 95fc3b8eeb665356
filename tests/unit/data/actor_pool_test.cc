// The pure parts of prism::data's actor pool and progress lines: the pool's sizing rule,
// its upper bound, where a class MapBatches cuts a fused stage, the progress formatter and
// the throttled writer (fake clock, string stream).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "data/actor_pool_op.h"
#include "data/progress.h"

namespace {

using namespace prism::data;
using namespace prism::data::internal;

PoolView View(int min, int max, int alive, int idle, bool waiting, bool budget) {
  PoolView v;
  v.min = min;
  v.max = max;
  v.alive = alive;
  v.idle = idle;
  v.input_waiting = waiting;
  v.budget_allows = budget;
  return v;
}

TEST(ActorPoolSizing, StartsMinAtOnce) {
  EXPECT_EQ(ActorsToStart(View(3, 5, 0, 0, false, false)), 3);
  EXPECT_EQ(ActorsToStart(View(3, 5, 1, 1, false, false)), 2);
}

TEST(ActorPoolSizing, GrowsOneAtATimeOnlyWhenABlockWaitsAndEveryActorIsBusy) {
  EXPECT_EQ(ActorsToStart(View(1, 4, 1, 0, true, true)), 1);
  EXPECT_EQ(ActorsToStart(View(1, 4, 3, 0, true, true)), 1);
  EXPECT_EQ(ActorsToStart(View(1, 4, 2, 1, true, true)), 0);   // an idle actor takes it
  EXPECT_EQ(ActorsToStart(View(1, 4, 2, 0, false, true)), 0);  // nothing waits
  EXPECT_EQ(ActorsToStart(View(1, 4, 2, 0, true, false)), 0);  // backpressure, not lack of actors
}

TEST(ActorPoolSizing, NeverBeyondMaxAndFixedWhenMinIsMax) {
  EXPECT_EQ(ActorsToStart(View(1, 4, 4, 0, true, true)), 0);
  EXPECT_EQ(ActorsToStart(View(2, 2, 2, 0, true, true)), 0);
  EXPECT_EQ(ActorsToStart(View(2, 2, 0, 0, true, true)), 2);
}

TEST(ActorPoolSizing, MaxZeroMeansTheClusterCpus) {
  EXPECT_EQ(ResolveMaxActors(1, 0, 6), 6);
  EXPECT_EQ(ResolveMaxActors(8, 0, 6), 8);  // at least min
  EXPECT_EQ(ResolveMaxActors(1, 0, 0.5), 1);
  EXPECT_EQ(ResolveMaxActors(2, 3, 64), 3);
}

Op MakeOp(Op::Kind kind, const std::string& fn) {
  Op op;
  op.kind = kind;
  op.fn = fn;
  return op;
}

TEST(ActorPoolSizing, AClassMapBatchesCutsTheStageAndTakesTheOperatorsAfterIt) {
  std::vector<Op> ops = {MakeOp(Op::kMap, "A"), MakeOp(Op::kMapBatchesClass, "Model"),
                         MakeOp(Op::kFilter, "B"), MakeOp(Op::kMapBatchesClass, "Other"),
                         MakeOp(Op::kMap, "C")};
  auto groups = SplitAtActorOps(ops);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(Stage{groups[0]}.Name(), "Map(A)");
  EXPECT_EQ(Stage{groups[1]}.Name(), "MapBatches(Model)->Filter(B)");
  EXPECT_EQ(Stage{groups[2]}.Name(), "MapBatches(Other)->Map(C)");
  auto leading = SplitAtActorOps({MakeOp(Op::kMapBatchesClass, "Model")});
  ASSERT_EQ(leading.size(), 2u);
  EXPECT_TRUE(leading[0].empty());
}

TEST(Progress, CountsReadLikeRay) {
  EXPECT_EQ(FormatCount(0), "0");
  EXPECT_EQ(FormatCount(950), "950");
  EXPECT_EQ(FormatCount(12345), "12.3K");
  EXPECT_EQ(FormatCount(1200000), "1.2M");
  EXPECT_EQ(FormatCount(345000000), "345M");
  EXPECT_EQ(FormatCount(3400000000), "3.4B");
}

TEST(Progress, OneLinePerOperator) {
  OperatorStats op;
  op.name = "Map(AddOne)";
  op.blocks = 12;
  op.rows = 1200000;
  EXPECT_EQ(FormatProgressLine(op, 40), "Map(AddOne): 12/40 blocks, 1.2M rows");
  EXPECT_EQ(FormatProgressLine(op, -1), "Map(AddOne): 12 blocks, 1.2M rows");
  op.actors_started = 5;
  op.peak_actors = 4;
  op.retries = 2;
  EXPECT_EQ(FormatProgressLine(op, 40), "Map(AddOne): 12/40 blocks, 1.2M rows, peak 4 actors, 2 retries");
}

TEST(Progress, DrawsAtMostOncePerIntervalAndInPlaceOnATerminal) {
  using Clock = ProgressBars::Clock;
  std::ostringstream out;
  ProgressBars bars(out, /*terminal=*/true, std::chrono::milliseconds(200));
  DatasetStats stats;
  stats.operators.resize(2);
  stats.operators[0].name = "Range";
  stats.operators[1].name = "Map(F)";
  const Clock::time_point t0{};
  bars.Update(stats, {4, 4}, t0);
  EXPECT_EQ(out.str(), "\x1b[2KRange: 0/4 blocks, 0 rows\n\x1b[2KMap(F): 0/4 blocks, 0 rows\n");
  out.str("");
  stats.operators[0].blocks = 1;
  bars.Update(stats, {4, 4}, t0 + std::chrono::milliseconds(100));
  EXPECT_EQ(out.str(), "");  // too soon
  bars.Update(stats, {4, 4}, t0 + std::chrono::milliseconds(250));
  EXPECT_EQ(out.str(), "\x1b[2F\x1b[2KRange: 1/4 blocks, 0 rows\n\x1b[2KMap(F): 0/4 blocks, 0 rows\n");
  out.str("");
  bars.Update(stats, {4, 4}, t0 + std::chrono::seconds(5));
  EXPECT_EQ(out.str(), "");  // nothing changed
  stats.operators[1].blocks = 4;
  bars.Update(stats, {4, 4}, t0 + std::chrono::milliseconds(5001), /*force=*/true);
  EXPECT_THAT(out.str(), ::testing::HasSubstr("Map(F): 4/4 blocks"));
}

TEST(Progress, PlainLinesOffATerminal) {
  std::ostringstream out;
  ProgressBars bars(out, /*terminal=*/false);
  DatasetStats stats;
  stats.operators.resize(1);
  stats.operators[0].name = "Range";
  bars.Update(stats, {1}, ProgressBars::Clock::time_point{});
  EXPECT_EQ(out.str(), "Range: 0/1 blocks, 0 rows\n");
}

}  // namespace
