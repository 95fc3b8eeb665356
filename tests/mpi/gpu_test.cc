// GPU ids over real ranks. Registered twice (tests/mpi/CMakeLists.txt): with two declared
// GPUs that CUDA_VISIBLE_DEVICES names "2,5" on every rank, and with none declared; each
// test skips in the registration it is not for.
#include <gtest/gtest.h>
#include <prism/api.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

std::atomic<int> g_started{0};

/// Waits (up to 20 s) until `n` tasks of this rank have started, so they run at once.
std::vector<std::string> GpuIdsOfConcurrent(int n) {
  ++g_started;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (g_started.load() < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  return prism::GetGpuIds();
}
void ResetStarted() { g_started = 0; }
std::vector<std::string> GpuIds() { return prism::GetGpuIds(); }
std::vector<int> GpuIndices() { return prism::GetGpuDeviceIndices(); }

class GpuActor {
 public:
  static GpuActor* Create() { return new GpuActor; }
  std::vector<std::string> Ids() { return prism::GetGpuIds(); }
  int Rank() { return prism::GetRuntimeContext().GetRank(); }
};
PRISM_REMOTE(GpuIdsOfConcurrent, ResetStarted, GpuIds, GpuIndices, GpuActor::Create,
             &GpuActor::Ids, &GpuActor::Rank);

bool GpusDeclared() { return prism::ClusterResources()["GPU"] > 0; }
std::string LastRank() { return "rank:" + std::to_string(prism::GetRuntimeContext().GetWorldSize() - 1); }

TEST(GpuIds, TwoConcurrentOneGpuTasksOnOneRankGetDistinctVisibleIds) {
  if (!GpusDeclared()) GTEST_SKIP() << "registered without GPUs";
  prism::Task(ResetStarted).SetResource(LastRank(), 0.01).Remote().Get();
  auto a = prism::Task(GpuIdsOfConcurrent).SetResource("GPU", 1).SetResource(LastRank(), 0.01).Remote(2);
  auto b = prism::Task(GpuIdsOfConcurrent).SetResource("GPU", 1).SetResource(LastRank(), 0.01).Remote(2);
  auto ia = *a.Get(30000), ib = *b.Get(30000);
  ASSERT_EQ(ia.size(), 1u);
  ASSERT_EQ(ib.size(), 1u);
  EXPECT_EQ((std::set<std::string>{ia[0], ib[0]}), (std::set<std::string>{"2", "5"}));
}

TEST(GpuIds, IndicesArePositionsInTheVisibleList) {
  if (!GpusDeclared()) GTEST_SKIP() << "registered without GPUs";
  auto ids = *prism::Task(GpuIds).SetResource("GPU", 2).Remote().Get(30000);
  auto idx = *prism::Task(GpuIndices).SetResource("GPU", 2).Remote().Get(30000);
  EXPECT_EQ((std::set<std::string>(ids.begin(), ids.end())), (std::set<std::string>{"2", "5"}));
  EXPECT_EQ(idx, (std::vector<int>{0, 1}));
}

TEST(GpuIds, AnActorKeepsItsGpuAndTheDriverHasNone) {
  if (!GpusDeclared()) GTEST_SKIP() << "registered without GPUs";
  EXPECT_TRUE(prism::GetGpuIds().empty());
  auto actor = prism::Actor(GpuActor::Create).SetResource("GPU", 1).Remote();
  auto first = *actor.Task(&GpuActor::Ids).Remote().Get(30000);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0] == "2" || first[0] == "5") << first[0];
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*actor.Task(&GpuActor::Ids).Remote().Get(30000), first);
  EXPECT_TRUE(prism::Task(GpuIds).Remote().Get(30000)->empty()) << "a task without GPUs";
  actor.Kill();
}

TEST(GpuIds, MoreGpusThanAnyRankHasIsAResourceError) {
  if (!GpusDeclared()) GTEST_SKIP() << "registered without GPUs";
  EXPECT_THROW(prism::Task(GpuIds).SetResource("GPU", 3).Remote(), prism::ResourceError);
}

TEST(GpuIds, NoneDeclared) {
  if (GpusDeclared()) GTEST_SKIP() << "registered with GPUs";
  EXPECT_TRUE(prism::GetGpuIds().empty());
  EXPECT_TRUE(prism::Task(GpuIds).Remote().Get(30000)->empty());
  try {
    prism::Task(GpuIds).SetResource("GPU", 1).Remote();
    ADD_FAILURE() << "a GPU task was accepted with no GPU in the cluster";
  } catch (const prism::ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prism::Actor(GpuActor::Create).SetResource("GPU", 0.5).Remote(), prism::ResourceError);
}

}  // namespace
