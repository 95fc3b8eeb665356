// Placement groups on 4 ranks grouped into 2 simulated nodes (--prism-ranks-per-node=2).
#include <gtest/gtest.h>

#include "test_util.h"

namespace {

int RankOfTask() { return prism::GetRuntimeContext().GetRank(); }
std::string NodeOfTask() { return prism::GetRuntimeContext().GetNodeId(); }
int SleepThenRank(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return prism::GetRuntimeContext().GetRank();
}
PRISM_REMOTE(RankOfTask, NodeOfTask, SleepThenRank);

class Worker {
 public:
  static Worker* Create() { return new Worker(); }
  int Rank() { return prism::GetRuntimeContext().GetRank(); }
};
PRISM_REMOTE(Worker::Create, &Worker::Rank);

using prism::PlacementStrategy;

TEST(PlacementGroup, StrictSpreadPutsBundlesOnDifferentNodesAndTasksFollowThem) {
  auto pg = prism::CreatePlacementGroup(
      {"spread", {{{"CPU", 1}}, {{"CPU", 1}}}, PlacementStrategy::STRICT_SPREAD});
  ASSERT_TRUE(pg.Wait(10));
  auto n0 = *prism::Task(NodeOfTask).SetPlacementGroup(pg, 0).Remote().Get();
  auto n1 = *prism::Task(NodeOfTask).SetPlacementGroup(pg, 1).Remote().Get();
  EXPECT_NE(n0, n1);
  // Same bundle, same rank, every time.
  int r = *prism::Task(RankOfTask).SetPlacementGroup(pg, 1).Remote().Get();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(*prism::Task(RankOfTask).SetPlacementGroup(pg, 1).Remote().Get(), r);
  }
  prism::RemovePlacementGroup(pg.GetID());
}

TEST(PlacementGroup, StrictPackKeepsBundlesOnOneNode) {
  auto pg = prism::CreatePlacementGroup(
      {"pack", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, PlacementStrategy::STRICT_PACK});
  ASSERT_TRUE(pg.Wait(10));
  std::vector<prism::ObjectRef<std::string>> nodes;
  for (int b = 0; b < 3; ++b) nodes.push_back(prism::Task(NodeOfTask).SetPlacementGroup(pg, b).Remote());
  auto got = prism::Get(nodes);
  EXPECT_EQ(*got[0], *got[1]);
  EXPECT_EQ(*got[1], *got[2]);
  prism::RemovePlacementGroup(pg.GetID());
}

TEST(PlacementGroup, LookupByNameAndList) {
  auto pg = prism::CreatePlacementGroup({"named", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  EXPECT_EQ(prism::GetPlacementGroup("named").GetID(), pg.GetID());
  EXPECT_TRUE(prism::GetPlacementGroup("nope").Empty());
  EXPECT_EQ(prism::GetAllPlacementGroups().size(), 1u);
  prism::RemovePlacementGroup(pg.GetID());
  EXPECT_TRUE(prism::GetAllPlacementGroups().empty());
  EXPECT_FALSE(pg.Wait(1)) << "a removed group never becomes ready";
}

TEST(PlacementGroup, InfeasibleFailsAtCreation) {
  EXPECT_THROW(prism::CreatePlacementGroup(
                   {"too-wide", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
                    PlacementStrategy::STRICT_SPREAD}),
               prism::ResourceError)
      << "only two nodes";
  EXPECT_THROW(prism::CreatePlacementGroup({"too-big", {{{"CPU", 64}}}, PlacementStrategy::PACK}),
               prism::ResourceError);
  EXPECT_THROW(prism::CreatePlacementGroup({"gpu", {{{"GPU", 1}}}, PlacementStrategy::PACK}),
               prism::ResourceError);
}

TEST(PlacementGroup, WaitingGroupIsCreatedWhenAnotherIsRemoved) {
  // 4 ranks x 2 CPUs: the first group takes everything.
  std::vector<std::unordered_map<std::string, double>> all(4, {{"CPU", 2}});
  auto big = prism::CreatePlacementGroup({"all", all, PlacementStrategy::SPREAD});
  ASSERT_TRUE(big.Wait(10));
  auto small = prism::CreatePlacementGroup({"small", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  EXPECT_FALSE(small.Wait(1));
  prism::RemovePlacementGroup(big.GetID());
  EXPECT_TRUE(small.Wait(10));
  prism::RemovePlacementGroup(small.GetID());
}

TEST(PlacementGroup, RemovalFailsQueuedTasksAndLetsRunningOnesFinish) {
  auto pg = prism::CreatePlacementGroup({"short", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  ASSERT_TRUE(pg.Wait(10));
  auto running = prism::Task(SleepThenRank).SetPlacementGroup(pg, 0).Remote(500);
  prism_test::SleepMs(100);
  auto queued = prism::Task(SleepThenRank).SetPlacementGroup(pg, 0).Remote(0);  // waits for the bundle
  prism::RemovePlacementGroup(pg.GetID());
  EXPECT_NO_THROW(running.Get(10000));
  try {
    queued.Get(10000);
    ADD_FAILURE() << "a task queued in a removed group must fail";
  } catch (const prism::TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("removed"), std::string::npos) << e.what();
  }
  // Tasks naming a group that no longer exists fail too.
  EXPECT_THROW(prism::Task(RankOfTask).SetPlacementGroup(pg, 0).Remote().Get(10000), prism::TaskError);
}

TEST(PlacementGroup, ActorsLiveInTheirBundleAndDieWithTheGroup) {
  auto pg = prism::CreatePlacementGroup(
      {"actors", {{{"CPU", 1}}, {{"CPU", 1}}}, PlacementStrategy::STRICT_SPREAD});
  ASSERT_TRUE(pg.Wait(10));
  auto a = prism::Actor(Worker::Create).SetPlacementGroup(pg, 0).Remote();
  auto b = prism::Actor(Worker::Create).SetPlacementGroup(pg, 1).Remote();
  std::vector<int> bundle_ranks;  // as the state API shows them
  for (const auto& g : prism::state::ListPlacementGroups()) {
    if (g.placement_group_id == pg.GetID()) bundle_ranks = g.bundle_ranks;
  }
  ASSERT_EQ(bundle_ranks.size(), 2u);
  EXPECT_EQ(*a.Task(&Worker::Rank).Remote().Get(10000), bundle_ranks[0]);
  EXPECT_EQ(*b.Task(&Worker::Rank).Remote().Get(10000), bundle_ranks[1]);
  const double cpu_before = prism::AvailableResources().at("CPU");

  prism::RemovePlacementGroup(pg.GetID());
  try {
    a.Task(&Worker::Rank).Remote().Get(10000);
    ADD_FAILURE() << "an actor of a removed group must be dead";
  } catch (const prism::ActorError& e) {
    EXPECT_NE(std::string(e.what()).find("placement group"), std::string::npos) << e.what();
  }
  EXPECT_THROW(b.Task(&Worker::Rank).Remote().Get(10000), prism::ActorError);
  EXPECT_EQ(prism::AvailableResources().at("CPU"), cpu_before + 2);
}

TEST(PlacementGroup, TaskLargerThanItsBundleFails) {
  auto pg = prism::CreatePlacementGroup({"small2", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  ASSERT_TRUE(pg.Wait(10));
  EXPECT_THROW(prism::Task(RankOfTask).SetResource("CPU", 2).SetPlacementGroup(pg, 0).Remote().Get(10000),
               prism::TaskError);
  prism::RemovePlacementGroup(pg.GetID());
}

}  // namespace
