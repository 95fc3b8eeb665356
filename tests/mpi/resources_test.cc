// Resources: infeasible requests, fractional amounts, pinning, cluster and available
// resources. The ctest registration starts every rank with --prism-num-cpus=2 and
// --prism-resources=slot:2.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "test_util.h"

using namespace prism_test;

namespace {

constexpr double kCpusPerRank = 2;  // --prism-num-cpus=2 in tests/mpi/CMakeLists.txt

int RsRank() { return prism::GetRuntimeContext().GetRank(); }
int RsSleepRank(int ms) {
  SleepMs(ms);
  return prism::GetRuntimeContext().GetRank();
}
PRISM_REMOTE(RsRank, RsSleepRank);

double Amount(const std::map<std::string, double>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0.0 : it->second;
}

// Polls AvailableResources until pred holds or `seconds` pass; returns the last snapshot.
template <typename Pred>
std::map<std::string, double> AvailableWhen(Pred pred, double seconds) {
  auto t0 = std::chrono::steady_clock::now();
  auto avail = prism::AvailableResources();
  while (!pred(avail) && SecondsSince(t0) < seconds) {
    SleepMs(10);
    avail = prism::AvailableResources();
  }
  return avail;
}

}  // namespace

TEST(Resources, InfeasibleRequestsThrowAtRemote) {
  EXPECT_THROW(prism::Task(RsRank).SetResource("GPU", 1).Remote(), prism::ResourceError);
  EXPECT_THROW(prism::Task(RsRank).SetResource("CPU", 1000).Remote(), prism::ResourceError);
  EXPECT_THROW(prism::Task(RsRank).SetResource("foo", 1).Remote(), prism::ResourceError);
  EXPECT_THROW(prism::Task(RsRank).SetResources({{"CPU", 1}, {"foo", 0.5}}).Remote(),
               prism::ResourceError);
  // More than one rank has, even though the cluster has that many in total.
  if (World() > 1) {
    EXPECT_THROW(prism::Task(RsRank).SetResource("CPU", kCpusPerRank + 1).Remote(),
                 prism::ResourceError);
  }
  // A rank that does not exist, or two ranks at once.
  EXPECT_THROW(On(World(), RsRank).Remote(), prism::ResourceError);
  if (World() > 1) {
    EXPECT_THROW(On(0, RsRank).SetResource(RankRes(1), 0.01).Remote(), prism::ResourceError);
  }
  try {
    prism::Task(RsRank).SetName("gpu-hungry").SetResource("GPU", 1).Remote();
  } catch (const prism::ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu-hungry"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
  // Negative and non-finite amounts.
  EXPECT_THROW(prism::Task(RsRank).SetResource("CPU", -1).Remote(), prism::ResourceError);
  EXPECT_THROW(prism::Task(RsRank).SetResource("CPU", std::nan("")).Remote(),
               prism::ResourceError);
  // The runtime still works after refusing.
  EXPECT_GE(*prism::Task(RsRank).Remote().Get(), 0);
  // Bad options right after good ones of the same function (which the node reuses while
  // they match) are still refused, and the good ones still work after.
  EXPECT_GE(*prism::Task(RsRank).SetResource("CPU", 0.5).Remote().Get(), 0);
  EXPECT_THROW(prism::Task(RsRank).SetResource("CPU", std::nan("")).Remote(), prism::ResourceError);
  EXPECT_THROW(prism::Task(RsRank).SetResource("CPU", 0.5).SetResource("foo", 1).Remote(),
               prism::ResourceError);
  EXPECT_THROW(prism::Task(RsRank).SetResource("CPU", 0.5).SetMaxRetries(0).SetSchedulingStrategy(
                   prism::NodeAffinitySchedulingStrategy{World() + 5, false}).Remote(),
               prism::ResourceError);
  EXPECT_GE(*prism::Task(RsRank).SetResource("CPU", 0.5).Remote().Get(), 0);
}

TEST(Resources, FractionalAmounts) {
  EXPECT_GE(*prism::Task(RsRank).SetResource("CPU", 0.5).Remote().Get(), 0);
  EXPECT_GE(*prism::Task(RsRank).SetResource("CPU", 0.25).Remote().Get(), 0);
  EXPECT_GE(*prism::Task(RsRank).SetResource("CPU", 0).Remote().Get(), 0);
  EXPECT_GE(*prism::Task(RsRank).SetResource("CPU", 2).Remote().Get(), 0);
  EXPECT_THROW(prism::Task(RsRank).SetResource("CPU", 1.5).Remote(), prism::ResourceError);
  EXPECT_THROW(prism::Task(RsRank).SetResource("CPU", 2.5).Remote(), prism::ResourceError);
  // Four half-CPU tasks fit at once on one 2-CPU rank.
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 4; ++i) {
    refs.push_back(On(0, RsSleepRank).SetResource("CPU", 0.5).Remote(300));
  }
  auto t0 = std::chrono::steady_clock::now();
  for (auto& v : prism::Get(refs, 20000)) EXPECT_EQ(*v, 0);
  EXPECT_LT(SecondsSince(t0), 1.0) << "0.5-CPU tasks did not share a 2-CPU rank";
}

TEST(Resources, PinningWithRankResource) {
  for (int round = 0; round < 2; ++round) {
    std::vector<prism::ObjectRef<int>> refs;
    for (int r = World() - 1; r >= 0; --r) refs.push_back(On(r, RsRank).Remote());
    for (int i = 0; i < World(); ++i) EXPECT_EQ(*refs[i].Get(), World() - 1 - i);
  }
  // Pinned with a whole rank:N unit, and with no CPU.
  EXPECT_EQ(*prism::Task(RsRank).SetResource(RankRes(World() - 1), 1).Remote().Get(),
            World() - 1);
  EXPECT_EQ(*On(World() - 1, RsRank).SetResource("CPU", 0).Remote().Get(), World() - 1);
}

TEST(Resources, ClusterResources) {
  auto total = prism::ClusterResources();
  EXPECT_DOUBLE_EQ(Amount(total, "CPU"), kCpusPerRank * World());
  for (int r = 0; r < World(); ++r) EXPECT_DOUBLE_EQ(Amount(total, RankRes(r)), 1.0) << r;
  EXPECT_EQ(total.count(RankRes(World())), 0u);
  EXPECT_EQ(total.count("GPU"), 0u);
  EXPECT_GT(Amount(total, "memory"), 0);
  EXPECT_DOUBLE_EQ(Amount(total, "slot"), 2.0 * World());
}

TEST(Resources, CustomResourceLimitsConcurrency) {
  // slot:2 per rank: three tasks that each need both slots of rank 0 run one at a time,
  // even though they ask for no CPU.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 3; ++i) {
    refs.push_back(On(0, RsSleepRank).SetResources({{"slot", 2}, {"CPU", 0}}).Remote(200));
  }
  for (auto& v : prism::Get(refs, 20000)) EXPECT_EQ(*v, 0);
  EXPECT_GE(SecondsSince(t0), 0.58) << "tasks ran together beyond the slot limit";
  // Half a slot each: four fit on one rank at once.
  t0 = std::chrono::steady_clock::now();
  refs.clear();
  for (int i = 0; i < 4; ++i) {
    refs.push_back(
        On(World() - 1, RsSleepRank).SetResources({{"slot", 0.5}, {"CPU", 0}}).Remote(300));
  }
  for (auto& v : prism::Get(refs, 20000)) EXPECT_EQ(*v, World() - 1);
  EXPECT_LT(SecondsSince(t0), 0.9);
  EXPECT_THROW(prism::Task(RsRank).SetResource("slot", 3).Remote(), prism::ResourceError);
}

TEST(Resources, AvailableOnDriver) {
  auto total = prism::ClusterResources();
  const double cpus = Amount(total, "CPU");
  const std::string last = RankRes(World() - 1);
  // Idle: everything is available (wait out tasks of earlier tests).
  auto idle = AvailableWhen([&](auto& a) { return Amount(a, "CPU") == cpus; }, 5);
  EXPECT_DOUBLE_EQ(Amount(idle, "CPU"), cpus);
  EXPECT_DOUBLE_EQ(Amount(idle, last), 1.0);
  // A running task holds its resources.
  auto ref = On(World() - 1, RsSleepRank).SetResource("CPU", 1).Remote(1500);
  auto busy = AvailableWhen([&](auto& a) { return Amount(a, "CPU") == cpus - 1; }, 1.2);
  EXPECT_DOUBLE_EQ(Amount(busy, "CPU"), cpus - 1);
  EXPECT_NEAR(Amount(busy, last), 0.99, 1e-6);
  EXPECT_EQ(*prism::Get(ref, 20000), World() - 1);
  // And gives them back.
  auto after = AvailableWhen([&](auto& a) { return Amount(a, "CPU") == cpus; }, 5);
  EXPECT_DOUBLE_EQ(Amount(after, "CPU"), cpus);
  EXPECT_DOUBLE_EQ(Amount(after, last), 1.0);
}
