// Placement groups as pure logic: bundle placement strategies and the head's accounting.
#include <gtest/gtest.h>

#include "head/head.h"
#include "scheduler/bundle_placement.h"
#include "cpus.h"

namespace prism::internal {
namespace {

// 4 ranks on 2 nodes of 2 ranks, 2 CPUs each.
const std::vector<std::string> kNodes{"a", "a", "b", "b"};
std::vector<ResourceSet> Free(double cpus = 2) { return {Cpus(cpus), Cpus(cpus), Cpus(cpus), Cpus(cpus)}; }

TEST(BundlePlacementTest, StrictPackKeepsEveryBundleOnOneNode) {
  auto r = PlaceBundles({Cpus(2), Cpus(2)}, PlacementStrategy::STRICT_PACK, Free(), kNodes);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(kNodes[r[0]], kNodes[r[1]]);
  EXPECT_TRUE(PlaceBundles({Cpus(2), Cpus(2), Cpus(2)}, PlacementStrategy::STRICT_PACK, Free(),
                           kNodes).empty())
      << "one node has only 4 CPUs";
}

TEST(BundlePlacementTest, OneBundlePerRankKeepsBundlesApartUnderEveryStrategy) {
  auto packed = PlaceBundles({Cpus(1), Cpus(1)}, PlacementStrategy::PACK, Free(), kNodes);
  ASSERT_EQ(packed.size(), 2u);
  EXPECT_EQ(packed[0], packed[1]) << "without it, PACK puts both on one 2-CPU rank";
  for (auto strategy : {PlacementStrategy::PACK, PlacementStrategy::STRICT_PACK, PlacementStrategy::SPREAD}) {
    auto r = PlaceBundles({Cpus(1), Cpus(1)}, strategy, Free(), kNodes, /*one_per_rank=*/true);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_NE(r[0], r[1]);
  }
  EXPECT_TRUE(PlaceBundles({Cpus(1), Cpus(1), Cpus(1)}, PlacementStrategy::STRICT_PACK, Free(), kNodes, true).empty())
      << "a node has only two ranks";
  EXPECT_EQ(PlaceBundles({Cpus(1), Cpus(1), Cpus(1), Cpus(1)}, PlacementStrategy::PACK, Free(), kNodes, true).size(), 4u);
  EXPECT_TRUE(PlaceBundles({Cpus(1), Cpus(1), Cpus(1), Cpus(1), Cpus(1)}, PlacementStrategy::PACK, Free(), kNodes, true).empty());
}

TEST(BundlePlacementTest, PackFallsBackToSeveralNodes) {
  auto r = PlaceBundles({Cpus(2), Cpus(2), Cpus(2)}, PlacementStrategy::PACK, Free(), kNodes);
  ASSERT_EQ(r.size(), 3u);
}

TEST(BundlePlacementTest, StrictSpreadNeedsDistinctNodes) {
  auto r = PlaceBundles({Cpus(1), Cpus(1)}, PlacementStrategy::STRICT_SPREAD, Free(), kNodes);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_NE(kNodes[r[0]], kNodes[r[1]]);
  EXPECT_TRUE(PlaceBundles({Cpus(1), Cpus(1), Cpus(1)}, PlacementStrategy::STRICT_SPREAD, Free(),
                           kNodes).empty());
}

// Issue 46: STRICT_SPREAD with more bundles than hosts was refused as "no rank can ever
// provide {CPU: 1}"; the reason is the hosts, and the message names them.
TEST(BundlePlacementTest, StrictSpreadOnTooFewHostsSaysSo) {
  const std::vector<std::string> nodes{"h1", "h1", "h2"};
  const std::vector<ResourceSet> idle{Cpus(2), Cpus(2), Cpus(2)};
  const std::vector<ResourceSet> bundles{Cpus(1), Cpus(1), Cpus(1)};
  ASSERT_TRUE(PlaceBundles(bundles, PlacementStrategy::STRICT_SPREAD, idle, nodes).empty());
  const std::string why = ExplainUnplaceable(bundles, PlacementStrategy::STRICT_SPREAD, idle, nodes, false);
  for (const char* part : {"3 bundles need 3 distinct hosts", "the job has 2 hosts: h1 (ranks 0-1), h2 (rank 2)",
                           "at most 2 bundles", "SPREAD", "launch the job on 3 nodes or more"}) {
    EXPECT_NE(why.find(part), std::string::npos) << "lacks \"" << part << "\": " << why;
  }
  EXPECT_EQ(why.find("no rank can ever provide"), std::string::npos) << why;

  // The other reasons, each said as itself.
  EXPECT_NE(ExplainUnplaceable({Cpus(3)}, PlacementStrategy::PACK, idle, nodes, false).find("bundle 0 {CPU: 3} fits on no rank"),
            std::string::npos);
  EXPECT_NE(ExplainUnplaceable({Cpus(1), Cpus(1), Cpus(1), Cpus(1)}, PlacementStrategy::PACK, idle, nodes, true)
                .find("4 bundles need 4 ranks, and the job has 3 ranks"),
            std::string::npos);
  EXPECT_NE(ExplainUnplaceable({Cpus(2), Cpus(2), Cpus(2)}, PlacementStrategy::STRICT_PACK, idle, nodes, false)
                .find("no host's ranks hold them all (hosts: h1 (ranks 0-1), h2 (rank 2))"),
            std::string::npos);
}

TEST(BundlePlacementTest, SpreadPrefersNewNodesButMayShare) {
  auto r = PlaceBundles({Cpus(1), Cpus(1), Cpus(1)}, PlacementStrategy::SPREAD, Free(), kNodes);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_NE(kNodes[r[0]], kNodes[r[1]]);
}

TEST(BundlePlacementTest, AllOrNothing) {
  auto busy = Free();
  busy[2] = Cpus(0);
  busy[3] = Cpus(0);
  EXPECT_TRUE(PlaceBundles({Cpus(2), Cpus(2), Cpus(2)}, PlacementStrategy::PACK, busy, kNodes)
                  .empty());
}

// Issue 44: a group rescheduling the bundles of a lost rank places them beside the ones
// that stay, as its strategy says.
TEST(BundlePlacementTest, BundlesAlreadyPlacedCountForEveryStrategy) {
  const std::vector<std::string> nodes{"a", "a", "b", "b", "c", "c"};
  const std::vector<ResourceSet> idle(6, Cpus(2));
  auto node = [&](const std::vector<int>& r) { return r.size() == 1 ? nodes[r[0]] : std::string("none"); };
  auto a_full = idle;  // node a's ranks have nothing free
  a_full[0] = a_full[1] = Cpus(0);
  auto b_full = idle;
  b_full[2] = b_full[3] = Cpus(0);
  auto c_full = idle;
  c_full[4] = c_full[5] = Cpus(0);

  EXPECT_EQ(node(PlaceBundles({Cpus(1)}, PlacementStrategy::STRICT_PACK, idle, nodes, false, {2})), "b")
      << "with the bundle that stays";
  EXPECT_TRUE(PlaceBundles({Cpus(1)}, PlacementStrategy::STRICT_PACK, b_full, nodes, false, {2}).empty())
      << "never on another node, though a and c are idle";
  EXPECT_EQ(node(PlaceBundles({Cpus(1)}, PlacementStrategy::PACK, idle, nodes, false, {2})), "b")
      << "PACK tries the node of the bundles that stay first";
  EXPECT_EQ(node(PlaceBundles({Cpus(1)}, PlacementStrategy::PACK, b_full, nodes, false, {2})), "a")
      << "then the others";
  EXPECT_EQ(node(PlaceBundles({Cpus(1)}, PlacementStrategy::STRICT_SPREAD, idle, nodes, false, {0, 2})), "c");
  EXPECT_TRUE(PlaceBundles({Cpus(1)}, PlacementStrategy::STRICT_SPREAD, c_full, nodes, false, {0, 2}).empty())
      << "a and b hold the group's other bundles";
  EXPECT_TRUE(PlaceBundles({Cpus(1), Cpus(1)}, PlacementStrategy::STRICT_SPREAD, idle, nodes, false, {0, 2}).empty())
      << "two bundles, one unused node";
  EXPECT_EQ(node(PlaceBundles({Cpus(1)}, PlacementStrategy::SPREAD, idle, nodes, false, {0, 2})), "c");
  EXPECT_EQ(node(PlaceBundles({Cpus(1)}, PlacementStrategy::SPREAD, a_full, nodes, false, {0, 4})), "b");
  EXPECT_EQ(node(PlaceBundles({Cpus(1)}, PlacementStrategy::SPREAD, c_full, nodes, false, {0, 2})), "a")
      << "SPREAD shares a used node when no other has room";
  EXPECT_EQ(PlaceBundles({Cpus(1)}, PlacementStrategy::PACK, idle, nodes, /*one_per_rank=*/true, {0}),
            std::vector<int>{1})
      << "one bundle per rank: not on the rank of a bundle that stays";
}

class HeadPgTest : public ::testing::Test {
 protected:
  HeadPgTest()
      : head_({Cpus(2), Cpus(2)}, [this](int dest, Message&& m) { sent_.push_back({dest, std::move(m)}); },
              {"a", "b"}) {}
  std::vector<std::pair<int, Message>> sent_;
  Head head_;
  TaskSpec Spec(uint64_t id, const std::string& pg, int bundle, double cpus = 1) {
    TaskSpec s;
    s.id = ObjectId(id);
    s.Edit().function = s.Edit().name = "f";
    s.Edit().demand = Cpus(cpus);
    s.Edit().placement_group = pg;
    s.Edit().bundle_index = bundle;
    return s;
  }
  std::vector<std::pair<int, DispatchTask>> Dispatched() {
    std::vector<std::pair<int, DispatchTask>> out;
    for (auto& [d, m] : sent_) {
      if (auto* t = std::get_if<DispatchTask>(&m)) out.push_back({d, *t});
    }
    sent_.clear();
    return out;
  }
};

TEST_F(HeadPgTest, ReservesAtomicallyAndRunsTasksInTheirBundle) {
  std::string id = head_.CreatePlacementGroup({"g", {{{"CPU", 2}}, {{"CPU", 2}}},
                                               PlacementStrategy::STRICT_SPREAD});
  EXPECT_EQ(head_.PlacementGroupState(id), PlacementGroupStatus::kCreated);
  auto ranks = head_.BundleRanks(id);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(head_.Available()["CPU"], 0) << "both ranks fully reserved";
  head_.Handle(0, SubmitTask{Spec(1, id, 1)});
  auto d = Dispatched();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].first, ranks[1]);
  // A plain task cannot run: everything is reserved.
  TaskSpec plain = Spec(2, "", -1);
  head_.Handle(0, SubmitTask{plain});
  EXPECT_TRUE(Dispatched().empty());
  // Removing the group frees its resources: the plain task runs.
  EXPECT_TRUE(head_.RemovePlacementGroup(id));
  EXPECT_EQ(Dispatched().size(), 1u);
  EXPECT_EQ(head_.PlacementGroupState(id), PlacementGroupStatus::kUnknown);
}

TEST_F(HeadPgTest, PendingGroupIsCreatedWhenResourcesFree) {
  std::string a = head_.CreatePlacementGroup({"a", {{{"CPU", 2}}, {{"CPU", 2}}}, PlacementStrategy::PACK});
  std::string b = head_.CreatePlacementGroup({"b", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  EXPECT_EQ(head_.PlacementGroupState(b), PlacementGroupStatus::kPending);
  head_.RemovePlacementGroup(a);
  EXPECT_EQ(head_.PlacementGroupState(b), PlacementGroupStatus::kCreated);
}

TEST_F(HeadPgTest, InfeasibleAndBadGroupsFailClearly) {
  EXPECT_THROW(head_.CreatePlacementGroup({"x", {{{"CPU", 3}}}, PlacementStrategy::PACK}), ResourceError);
  EXPECT_THROW(head_.CreatePlacementGroup(
                   {"y", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, PlacementStrategy::STRICT_SPREAD}),
               ResourceError)
      << "two nodes only";
  EXPECT_THROW(head_.CreatePlacementGroup({"z", {}, PlacementStrategy::PACK}), Error);
  head_.CreatePlacementGroup({"dup", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  EXPECT_THROW(head_.CreatePlacementGroup({"dup", {{{"CPU", 1}}}, PlacementStrategy::PACK}), Error);
}

TEST(HeadPgHostsTest, StrictSpreadOnTooFewHostsNamesTheHosts) {
  Head head({Cpus(2), Cpus(2), Cpus(2)}, [](int, Message&&) {}, {"h1", "h1", "h2"});
  try {
    head.CreatePlacementGroup({"w", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, PlacementStrategy::STRICT_SPREAD});
    ADD_FAILURE() << "3 bundles were spread strictly over 2 hosts";
  } catch (const ResourceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("placement group \"w\" can never be placed"), std::string::npos) << what;
    EXPECT_NE(what.find("need 3 distinct hosts, and the job has 2 hosts: h1 (ranks 0-1), h2 (rank 2)"),
              std::string::npos) << what;
    EXPECT_EQ(what.find("no rank can ever provide"), std::string::npos) << what;
  }
}

TEST_F(HeadPgTest, TaskLargerThanItsBundleFailsInsteadOfPending) {
  std::string id = head_.CreatePlacementGroup({"g", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  head_.Handle(0, SubmitTask{Spec(1, id, 0, /*cpus=*/2)});
  head_.Handle(0, Subscribe{{ObjectId(1)}});
  bool failed = false;
  for (auto& [d, m] : sent_) {
    if (auto* r = std::get_if<ObjectReady>(&m)) failed = r->failed && r->error.type == "ResourceError";
  }
  EXPECT_TRUE(failed);
}

}  // namespace
}  // namespace prism::internal
