// Ray Core options beyond the basics, at 1 and 3 ranks: SPREAD and node-affinity scheduling
// strategies, namespaces of named actors, actor max_task_retries across a restart, and
// PlacementGroup::GetState.
#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "test_util.h"

namespace {

int RankAfter(int ms) {
  prism_test::SleepMs(ms);
  return prism_test::MyRank();
}
std::string NamespaceHere() { return prism::GetNamespace(); }
int AddInNamespace(std::string name, std::string ns, int x);

class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  static Counter* Create(int start) { return new Counter(start); }
  int Add(int x) { return value_ += x; }
  /// Marks `key` in the KV when it starts, then sleeps.
  int SleepThenGet(std::string key, int ms) {
    prism::kv::Put(key, "started");
    prism_test::SleepMs(ms);
    return value_;
  }

 private:
  int value_;
};

int AddInNamespace(std::string name, std::string ns, int x) {
  auto c = prism::GetActor<Counter>(name, ns);
  if (!c) return -1;
  return *c->Task(&Counter::Add).Remote(x).Get();
}

PRISM_REMOTE(RankAfter, NamespaceHere, AddInNamespace, Counter::Create, &Counter::Add, &Counter::SleepThenGet);

using prism::NodeAffinitySchedulingStrategy;
using prism::SpreadSchedulingStrategy;

TEST(Scheduling, SpreadTasksLandOnDistinctRanks) {
  // Small tasks (0.1 CPU): the default policy keeps them on the submitting rank while it is
  // under half loaded; SPREAD puts consecutive ones on different ranks.
  const int n = prism_test::World();
  auto ranks_of = [&](bool spread) {
    std::vector<prism::ObjectRef<int>> refs;
    for (int i = 0; i < n; ++i) {
      auto caller = prism::Task(RankAfter).SetResource("CPU", 0.1);
      if (spread) caller.SetSchedulingStrategy(SpreadSchedulingStrategy{});
      refs.push_back(caller.Remote(100));
    }
    std::multiset<int> ranks;
    for (auto& r : refs) ranks.insert(*r.Get(30000));
    return ranks;
  };
  std::multiset<int> spread = ranks_of(true);
  EXPECT_EQ(static_cast<int>(std::set<int>(spread.begin(), spread.end()).size()), n)
      << "one SPREAD task on each of the " << n << " ranks";
  std::multiset<int> packed = ranks_of(false);
  EXPECT_EQ(packed.count(0), static_cast<size_t>(n)) << "the default packs them on rank 0";
}

TEST(Scheduling, SoftAffinityToAFullRankRunsElsewhereAndToAFreeOneRunsThere) {
  const int n = prism_test::World();
  const int target = n - 1;
  EXPECT_EQ(*prism::Task(RankAfter).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{target, true}).Remote(0).Get(30000),
            target)
      << "free: it runs on its rank";
  if (n == 1) return;  // one rank: nowhere else to go
  // Fill the target's 2 CPUs with hard-pinned tasks, then ask softly for it.
  std::vector<prism::ObjectRef<int>> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(prism::Task(RankAfter).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{target, false}).Remote(1500));
  }
  auto start = std::chrono::steady_clock::now();
  int soft = *prism::Task(RankAfter).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{target, true}).Remote(0).Get(30000);
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_NE(soft, target) << "its rank is full: it ran elsewhere";
  EXPECT_LT(waited, std::chrono::milliseconds(1200)) << "and did not wait for the rank";
  for (auto& b : busy) EXPECT_EQ(*b.Get(30000), target) << "hard affinity ran on its rank";
  // A rank that does not exist: soft runs anywhere.
  EXPECT_GE(*prism::Task(RankAfter).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{n + 5, true}).Remote(0).Get(30000), 0);
}

TEST(Scheduling, HardAffinityToAMissingRankOrOneTooSmallIsAClearError) {
  const int n = prism_test::World();
  try {
    prism::Task(RankAfter).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{n, false}).Remote(0);
    FAIL() << "expected ResourceError";
  } catch (const prism::ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 0.." + std::to_string(n - 1)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("soft"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prism::Task(RankAfter).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{-1, false}).Remote(0),
               prism::ResourceError);
  try {
    prism::Task(RankAfter).SetResource("CPU", 3).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{0, false}).Remote(0);
    FAIL() << "expected ResourceError";
  } catch (const prism::ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("can never provide"), std::string::npos) << e.what();
  }
  auto pg = prism::CreatePlacementGroup({"", {{{"CPU", 1}}}, prism::PlacementStrategy::PACK});
  EXPECT_THROW(prism::Task(RankAfter).SetPlacementGroup(pg, 0).SetSchedulingStrategy(SpreadSchedulingStrategy{}).Remote(0),
               prism::Error);
  prism::RemovePlacementGroup(pg.GetID());
}

TEST(Scheduling, ActorsFollowNodeAffinity) {
  const int target = prism_test::World() - 1;
  auto a = prism::Actor(Counter::Create).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{target, false}).Remote(0);
  EXPECT_EQ(*prism::Get(a.Task(&Counter::Add).Remote(1), 30000), 1);
  bool found = false;
  for (const auto& s : prism::state::ListActors()) {
    if (s.actor_id == a.ID().Hex()) {
      EXPECT_EQ(s.rank, target);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  a.Kill();
}

TEST(Namespaces, OneNameInTwoNamespacesAndTheJobsAnonymousOne) {
  const std::string job_ns = prism::GetNamespace();
  EXPECT_EQ(job_ns.rfind("anonymous-", 0), 0u) << job_ns;
  EXPECT_EQ(*prism::Task(NamespaceHere).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{prism_test::World() - 1, false})
                 .Remote()
                 .Get(30000),
            job_ns)
      << "every rank knows the job's namespace";

  auto colors = prism::Actor(Counter::Create).SetName("orange", "colors").Remote(100);
  auto fruits = prism::Actor(Counter::Create).SetName("orange", "fruits").Remote(200);
  EXPECT_EQ(*colors.Task(&Counter::Add).Remote(1).Get(30000), 101);
  EXPECT_EQ(*fruits.Task(&Counter::Add).Remote(1).Get(30000), 201);
  auto found = prism::GetActor<Counter>("orange", "colors");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->ID(), colors.ID());
  EXPECT_FALSE(prism::GetActor<Counter>("orange")) << "not in the job's namespace";
  EXPECT_FALSE(prism::GetActor<Counter>("orange", "veg"));
  // From a task on another rank, by namespace.
  EXPECT_EQ(*prism::Task(AddInNamespace).Remote(std::string("orange"), std::string("fruits"), 10).Get(30000), 211);

  // Same name, same namespace: the second fails with ActorError.
  auto dup = prism::Actor(Counter::Create).SetName("orange", "colors").Remote(0);
  EXPECT_THROW(dup.Task(&Counter::Add).Remote(1).Get(30000), prism::ActorError);
  // A name in the job's namespace, by SetName(name) and by SetName(name, GetNamespace()).
  auto plain = prism::Actor(Counter::Create).SetName("plain").Remote(5);
  auto same = prism::GetActor<Counter>("plain", job_ns);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->ID(), plain.ID());
  colors.Kill();
  fruits.Kill();
  plain.Kill();
}

// The restart happens while SleepThenGet runs; Add waits behind it in the actor's mailbox,
// so the restart fails it on the actor's rank. The handle is returned too: an actor ends
// when its last handle goes.
std::pair<prism::ActorHandle<Counter>, prism::ObjectRef<int>> AddAcrossARestart(int max_task_retries) {
  auto c = prism::Actor(Counter::Create).SetMaxRestarts(1).SetMaxTaskRetries(max_task_retries).Remote(10);
  EXPECT_EQ(*c.Task(&Counter::Add).Remote(0).Get(30000), 10);
  const std::string key = "running-" + c.ID().Hex();
  auto running = c.Task(&Counter::SleepThenGet).Remote(key, 600);
  auto queued = c.Task(&Counter::Add).Remote(5);
  for (int i = 0; i < 10000 && !prism::kv::Exists(key); ++i) prism_test::SleepMs(1);
  EXPECT_TRUE(prism::kv::Exists(key)) << "the first call is under way";
  c.Kill(/*no_restart=*/false);
  EXPECT_EQ(*running.Get(30000), 10) << "a running call ends on the old instance";
  return {c, queued};
}

TEST(ActorRetries, ACallFailedByARestartSucceedsWithMaxTaskRetries) {
  for (int retries : {1, -1}) {
    auto [actor, queued] = AddAcrossARestart(retries);
    EXPECT_EQ(*queued.Get(30000), 15) << "ran on the restarted actor (10 + 5); max_task_retries " << retries;
    EXPECT_EQ(*actor.Task(&Counter::Add).Remote(1).Get(30000), 16);
    actor.Kill();
  }
}

TEST(ActorRetries, WithoutMaxTaskRetriesItFailsWithActorError) {
  auto [actor, queued] = AddAcrossARestart(0);
  try {
    queued.Get(30000);
    FAIL() << "expected ActorError";
  } catch (const prism::ActorError& e) {
    EXPECT_NE(std::string(e.what()).find("restarting"), std::string::npos) << e.what();
  }
  EXPECT_EQ(*actor.Task(&Counter::Add).Remote(1).Get(30000), 11) << "the restarted actor serves later calls";
  actor.Kill();
  EXPECT_THROW(prism::Actor(Counter::Create).SetMaxTaskRetries(-2), prism::Error);
}

TEST(PlacementGroups, GetStateFollowsTheGroup) {
  EXPECT_EQ(prism::PlacementGroup().GetState(), prism::PlacementGroupState::UNRECOGNIZED);
  // Larger than the cluster's free CPUs while a task holds them: PENDING, then CREATED.
  const int n = prism_test::World();
  std::vector<prism::ObjectRef<int>> busy;
  for (int r = 0; r < n; ++r) {
    busy.push_back(prism::Task(RankAfter).SetResource("CPU", 2).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{r, false}).Remote(2000));
  }
  prism_test::SleepMs(100);
  auto pg = prism::CreatePlacementGroup({"", {{{"CPU", 2}}}, prism::PlacementStrategy::PACK});
  EXPECT_EQ(pg.GetState(), prism::PlacementGroupState::PENDING);
  ASSERT_TRUE(pg.Wait(30));
  EXPECT_EQ(pg.GetState(), prism::PlacementGroupState::CREATED);
  prism::RemovePlacementGroup(pg.GetID());
  EXPECT_EQ(pg.GetState(), prism::PlacementGroupState::REMOVED);
  for (auto& b : busy) b.Get(30000);
}

TEST(PlacementGroups, ARemovedGroupReadsRemovedByIdAndRemovingItAgainIsANoOp) {
  auto pg = prism::CreatePlacementGroup({"removed-twice", {{{"CPU", 1}}}, prism::PlacementStrategy::PACK});
  ASSERT_TRUE(pg.Wait(30));
  prism::RemovePlacementGroup(pg.GetID());
  prism::PlacementGroup again = prism::GetPlacementGroupById(pg.GetID());
  EXPECT_EQ(again.GetID(), pg.GetID()) << "Ray's GetPlacementGroupById finds a removed group";
  EXPECT_EQ(again.GetName(), "removed-twice");
  EXPECT_EQ(again.GetState(), prism::PlacementGroupState::REMOVED);
  EXPECT_FALSE(again.Wait(1));
  EXPECT_TRUE(prism::GetPlacementGroup("removed-twice").Empty()) << "its name is free again";
  for (const auto& g : prism::GetAllPlacementGroups()) EXPECT_NE(g.GetID(), pg.GetID());
  EXPECT_NO_THROW(prism::RemovePlacementGroup(pg.GetID())) << "removing twice is a no-op";
  EXPECT_THROW(prism::RemovePlacementGroup("no-such-group"), prism::Error);
  // The name can be used again, by a new group.
  auto reused = prism::CreatePlacementGroup({"removed-twice", {{{"CPU", 1}}}, prism::PlacementStrategy::PACK});
  EXPECT_NE(reused.GetID(), pg.GetID());
  prism::RemovePlacementGroup(reused.GetID());
}

}  // namespace
