// Scheduler and object directory as pure logic: no MPI, no threads.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "head/object_directory.h"
#include "cpus.h"

namespace prism::internal {
namespace {

TEST(ResourceSetTest, FixedPointArithmeticDoesNotDrift) {
  ResourceSet cap = Cpus(1);
  ResourceSet used;
  for (int i = 0; i < 10; ++i) used.Add(Cpus(0.1));
  EXPECT_TRUE(used.FitsIn(cap));
  used.Add(Cpus(0.1));
  EXPECT_FALSE(used.FitsIn(cap));
  for (int i = 0; i < 11; ++i) used.Subtract(Cpus(0.1));
  EXPECT_TRUE(used.Empty());
}

TEST(ResourceSetTest, MissingResourceDoesNotFit) {
  EXPECT_FALSE(ResourceSet({{"GPU", 1}}).FitsIn(Cpus(8)));
  EXPECT_EQ(ResourceSet({{"CPU", 1.5}, {"GPU", 0.25}}).ToString(), "{CPU: 1.5, GPU: 0.25}");
}

TEST(SchedulerTest, PrefersSubmitterUntilHalfLoadedThenLeastLoaded) {
  Scheduler s({Cpus(2), Cpus(2), Cpus(2)});
  int first = s.Place("f", Cpus(1), /*submitter=*/0, {});
  EXPECT_EQ(first, 0);
  s.Commit(first, Cpus(1));  // rank 0 now half loaded
  int second = s.Place("f", Cpus(1), 0, {});
  EXPECT_NE(second, 0);
  s.Commit(second, Cpus(1));
  int third = s.Place("f", Cpus(1), 0, {});
  EXPECT_NE(third, second);  // least loaded, spread
}

TEST(SchedulerTest, ReturnsMinusOneWhenFullAndRespectsRelease) {
  Scheduler s({Cpus(1), Cpus(1)});
  s.Commit(0, Cpus(1));
  s.Commit(1, Cpus(1));
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {}), -1);
  s.Release(1, Cpus(1));
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {}), 1);
}

TEST(SchedulerTest, LocalityPicksRankHoldingMostArgumentBytes) {
  Scheduler s({Cpus(4), Cpus(4), Cpus(4)});
  s.Commit(0, Cpus(3));  // submitter busy: locality decides
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {0, 10, 5000}), 2);
}

TEST(SchedulerTest, PipelinesOnlyMeasuredShortFunctions) {
  Scheduler s({Cpus(1)});
  s.Commit(0, Cpus(1));
  EXPECT_EQ(s.Place("slow", Cpus(1), 0, {}), -1) << "unknown functions get depth 1";
  s.RecordRunTime("fast", 2'000);  // 2 us
  EXPECT_EQ(s.PipelineDepth("fast"), Scheduler::kMaxDepth);
  EXPECT_EQ(s.Place("fast", Cpus(1), 0, {}), 0);
  s.RecordRunTime("slow", 50'000'000);
  EXPECT_EQ(s.PipelineDepth("slow"), 1);
}

TEST(SchedulerTest, PipeliningNeverSendsATaskLargerThanTheRank) {
  Scheduler s({Cpus(1), Cpus(4)});
  s.RecordRunTime("fast", 1'000);
  EXPECT_EQ(s.Place("fast", Cpus(2), 0, {}), 1);
}

TEST(SchedulerTest, FeasibilityLooksAtSingleRanks) {
  Scheduler s({Cpus(2), Cpus(2)});
  EXPECT_TRUE(s.Feasible(Cpus(2)));
  EXPECT_FALSE(s.Feasible(Cpus(3))) << "4 CPUs in total, but no single rank has 3";
  EXPECT_FALSE(s.Feasible(ResourceSet({{"GPU", 1}})));
  EXPECT_NE(s.DescribeInfeasible(Cpus(3)).find("rank 1 {CPU: 2}"), std::string::npos);
}

SchedulingStrategy Spread() { return {SchedulingStrategy::Kind::kSpread, -1, false}; }
SchedulingStrategy Affinity(int rank, bool soft) {
  return {SchedulingStrategy::Kind::kNodeAffinity, rank, soft};
}

TEST(SchedulerTest, SpreadPutsConsecutiveTasksOnDistinctRanks) {
  Scheduler s({Cpus(4), Cpus(4), Cpus(4)});
  std::vector<int> ranks;
  for (int i = 0; i < 6; ++i) {
    int r = s.Place("f", Cpus(1), /*submitter=*/0, {}, Spread());
    ASSERT_GE(r, 0);
    s.Commit(r, Cpus(1));
    ranks.push_back(r);
  }
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 0, 1, 2}))
      << "round-robin, where the default packs the submitter";
  Scheduler d({Cpus(4), Cpus(4), Cpus(4)});
  EXPECT_EQ(d.Place("f", Cpus(1), 0, {}), 0);
  d.Commit(0, Cpus(1));
  EXPECT_EQ(d.Place("f", Cpus(1), 0, {}), 0)
      << "the default keeps the submitter while under half loaded";
}

TEST(SchedulerTest, SpreadSkipsFullRanksAndWaitsWhenAllAreFull) {
  Scheduler s({Cpus(1), Cpus(1), Cpus(1)});
  s.Commit(1, Cpus(1));
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {}, Spread()), 0);
  s.Commit(0, Cpus(1));
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {}, Spread()), 2) << "rank 1 is full";
  s.Commit(2, Cpus(1));
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {}, Spread()), -1);
}

TEST(SchedulerTest, HardNodeAffinityTakesOnlyItsRank) {
  Scheduler s({Cpus(1), Cpus(1), Cpus(2)});
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {}, Affinity(2, false)), 2);
  s.Commit(2, Cpus(2));
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {}, Affinity(2, false)), -1) << "full: waits, never elsewhere";
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {}, Affinity(7, false)), -1) << "no such rank: never placed";
}

TEST(SchedulerTest, SoftNodeAffinityPrefersItsRankThenFallsBack) {
  Scheduler s({Cpus(1), Cpus(1), Cpus(1)});
  EXPECT_EQ(s.Place("f", Cpus(1), 0, {}, Affinity(1, true)), 1) << "preferred over the submitter";
  s.Commit(1, Cpus(1));
  const int r = s.Place("f", Cpus(1), 0, {}, Affinity(1, true));
  EXPECT_TRUE(r == 0 || r == 2) << "rank 1 is full: elsewhere, got " << r;
  EXPECT_GE(s.Place("f", Cpus(1), 0, {}, Affinity(9, true)), 0) << "no such rank: elsewhere";
  EXPECT_EQ(s.Place("f", ResourceSet({{"GPU", 1}}), 0, {}, Affinity(0, true)), -1)
      << "nowhere fits";
}

TEST(SchedulerTest, SoftNodeAffinityIsNotPipelinedOntoABusyRank) {
  Scheduler s({Cpus(1), Cpus(1)});
  s.RecordRunTime("fast", 1'000);  // pipelining would allow many per slot
  s.Commit(1, Cpus(1));
  EXPECT_EQ(s.Place("fast", Cpus(1), 0, {}, Affinity(1, true)), 0) << "rank 0 can start it now";
  EXPECT_EQ(s.Place("fast", Cpus(1), 0, {}, Affinity(1, false)), 1) << "hard may queue there";
}

TEST(ObjectDirectoryTest, FreedWhenLastHolderGoesAndNotBefore) {
  ObjectDirectory d;
  ObjectId id(1);
  d.Create(id, /*holder=*/0, /*producer_pending=*/false).locations = {0, 2};
  d.AddHolder(id, 1);
  FreedList freed;
  d.RemoveHolder(id, 0, freed);
  EXPECT_TRUE(freed.empty());
  d.RemoveHolder(id, 0, freed);  // a second remove from the same rank is a no-op
  EXPECT_TRUE(freed.empty());
  d.RemoveHolder(id, 1, freed);
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].id, id);
  EXPECT_EQ(std::vector<int>(freed[0].locations.begin(), freed[0].locations.end()), (std::vector<int>{0, 2}));
  EXPECT_EQ(d.Find(id), nullptr);
}

// The rule Scheduler::Place had as a scan of every rank (before its load index): the
// submitter while under half loaded, else the least loaded rank that fits, ties to the
// first at or after the cursor. The index must choose exactly the same rank.
struct ScanScheduler {
  std::vector<ResourceSet> capacity, committed;
  int next = 0;
  double Load(int r) const {
    return FromUnits(committed[r].Get("CPU")) / std::max(FromUnits(capacity[r].Get("CPU")), 1.0);
  }
  int Place(const ResourceSet& demand, int submitter, int64_t depth) {
    auto fits = [&](int r) {
      for (const auto& [name, amount] : demand.Entries()) {
        const int64_t have = capacity[r].Get(name);
        if (amount > have || committed[r].Get(name) + amount > have * depth) return false;
      }
      return true;
    };
    const int n = static_cast<int>(capacity.size());
    if (Load(submitter) < 0.5 && fits(submitter)) return submitter;
    int best = -1;
    double best_load = 0;
    for (int k = 0; k < n; ++k) {
      const int r = (next + k) % n;
      if (fits(r) && (best < 0 || Load(r) < best_load)) {
        best = r;
        best_load = Load(r);
      }
    }
    if (best >= 0) next = (best + 1) % n;
    return best;
  }
};

// Uneven ranks (fractional, whole and large CPU counts, GPUs on a few, CPU-less ones),
// demands of every kind (zero-CPU, fractional, GPU, pinned with rank:N, impossible), some
// functions pipelined: thousands of decisions, each compared with the scan's.
void CompareWithScan(int n, int steps, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<ResourceSet> caps;
  const double cpus[] = {0, 0.5, 1, 2, 4, 16};
  for (int r = 0; r < n; ++r) {
    std::map<std::string, double> c{{"CPU", cpus[rng() % 6]}, {"rank:" + std::to_string(r), 1}};
    if (r % 5 == 0) c["GPU"] = 2;
    caps.emplace_back(c);
  }
  Scheduler s(caps);
  ScanScheduler scan{caps, std::vector<ResourceSet>(n)};
  s.RecordRunTime("short", 20'000);  // pipelined up to 25 deep
  std::vector<std::pair<int, ResourceSet>> running;
  for (int step = 0; step < steps; ++step) {
    if (!running.empty() && rng() % 2 == 0) {
      const size_t k = rng() % running.size();
      s.Release(running[k].first, running[k].second);
      scan.committed[running[k].first].Subtract(running[k].second);
      running[k] = running.back();
      running.pop_back();
      continue;
    }
    std::map<std::string, double> d{{"CPU", cpus[rng() % 5] * (rng() % 3 == 0 ? 0.5 : 1)}};
    if (rng() % 7 == 0) d["GPU"] = 1;
    if (rng() % 9 == 0)
      d["rank:" + std::to_string(rng() % (n + 2))] = 0.01;  // n, n+1: no such rank
    if (rng() % 50 == 0) d["TPU"] = 1;
    const ResourceSet demand(d);
    const std::string function = rng() % 3 == 0 ? "short" : "long";
    const int submitter = static_cast<int>(rng() % n);
    const int want = scan.Place(demand, submitter, s.PipelineDepth(function));
    const int got = s.Place(function, demand, submitter, {});
    ASSERT_EQ(got, want) << n << " ranks, step " << step << ", demand " << demand.ToString() << " from rank "
                         << submitter;
    if (got >= 0) {
      s.Commit(got, demand);
      scan.committed[got].Add(demand);
      running.emplace_back(got, demand);
    }
  }
}

TEST(SchedulerTest, LoadIndexChoosesWhatAScanOfEveryRankChose) {
  CompareWithScan(37, 20000, 7);
  // The index's edges: one rank (its leaf is the tree's root), two, a power of two and
  // one past it (a padded tree), and enough ranks for long runs of equal loads.
  CompareWithScan(1, 2000, 11);
  CompareWithScan(2, 2000, 12);
  CompareWithScan(64, 5000, 13);
  CompareWithScan(65, 5000, 14);
  CompareWithScan(500, 20000, 15);
}

TEST(ObjectDirectoryTest, PendingProducerAndTaskUsesKeepAlive) {
  ObjectDirectory d;
  ObjectId id(7);
  d.Create(id, 0, /*producer_pending=*/true);
  d.AddTaskUse(id);
  FreedList freed;
  d.RemoveHolder(id, 0, freed);
  d.ProducerDone(id, freed);
  EXPECT_TRUE(freed.empty()) << "a pending task still uses it";
  d.RemoveTaskUse(id, freed);
  EXPECT_EQ(freed.size(), 1u);
}

TEST(ObjectDirectoryTest, AnImplicitResultIsMadeOnItsFirstLookupOnly) {
  ObjectDirectory d;
  std::vector<ObjectId> claimed;
  bool implicit = true;  // the claimant: id 7, submitted by rank 2
  d.SetClaim([&](ObjectId id) {
    claimed.push_back(id);
    if (id != ObjectId(7) || !implicit) return -1;
    implicit = false;
    return 2;
  });
  d.AddImplicit();
  EXPECT_EQ(d.Size(), 1u) << "counted before it has an entry";
  EXPECT_EQ(d.Find(ObjectId(8)), nullptr) << "not a result of a live task";
  ObjectEntry* e = d.Find(ObjectId(7));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, ObjectEntry::State::kPending);
  EXPECT_TRUE(e->producer_pending);
  EXPECT_EQ(std::vector<int>(e->holders.begin(), e->holders.end()), std::vector<int>{2});
  EXPECT_EQ(d.Size(), 1u);
  EXPECT_EQ(d.Find(ObjectId(7)), e) << "made once";
  EXPECT_EQ(claimed, (std::vector<ObjectId>{ObjectId(8), ObjectId(7)}));
  FreedList freed;
  d.RemoveHolder(ObjectId(7), 2, freed);
  d.ProducerDone(ObjectId(7), freed);
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(d.Find(ObjectId(7)), nullptr) << "freed; the claim is not made again";
  EXPECT_EQ(d.Size(), 0u);
  d.AddImplicit();
  d.Claim(ObjectId(9), 1);  // the task ended before anyone looked
  EXPECT_NE(d.Find(ObjectId(9)), nullptr);
  EXPECT_EQ(d.Size(), 1u);
}

TEST(ObjectDirectoryTest, ContainersKeepNestedObjectsAliveAndFreeThemInCascade) {
  ObjectDirectory d;
  ObjectId inner(1), outer(2);
  d.Create(inner, 0, false);
  d.Create(outer, 0, false);
  d.SetContained(outer, {inner});
  FreedList freed;
  d.RemoveHolder(inner, 0, freed);
  EXPECT_TRUE(freed.empty()) << "outer's value holds a ref to inner";
  d.RemoveHolder(outer, 0, freed);
  ASSERT_EQ(freed.size(), 2u);
  EXPECT_EQ(d.Size(), 0u);
}

}  // namespace
}  // namespace prism::internal
