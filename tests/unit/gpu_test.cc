// Which GPUs tasks and actors hold: the pool's rules (GpuPool, no runtime), then
// GetGpuIds / GetGpuDeviceIndices through an in-process cluster with declared GPUs.
#include "node_manager/gpu_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "common/resources.h"
#include "prism/api.h"
#include "prism/platform/in_process.h"

namespace {

using prism::internal::GpuDevices;
using prism::internal::GpuPool;
using prism::internal::kResourceUnit;
using namespace std::chrono_literals;

GpuDevices TwoGpus() { return GpuDevices{{"2", "5"}, {0, 1}}; }

TEST(GpuPool, WholeGpusAreDistinctAndComeBackOnRelease) {
  GpuPool pool(TwoGpus());
  auto a = pool.Acquire(kResourceUnit, 0ms);
  auto b = pool.Acquire(kResourceUnit, 0ms);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->slots, b->slots);
  EXPECT_FALSE(pool.Acquire(kResourceUnit, 10ms));  // both held
  pool.Release(*a);
  auto c = pool.Acquire(kResourceUnit, 0ms);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->slots, a->slots);
}

TEST(GpuPool, TwoGpusAtOnceTakeTwoFreeDevices) {
  GpuPool pool(TwoGpus());
  auto both = pool.Acquire(2 * kResourceUnit, 0ms);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->slots, (std::vector<size_t>{0, 1}));
  pool.Release(*both);
  auto half = pool.Acquire(kResourceUnit / 2, 0ms);
  ASSERT_TRUE(half);
  EXPECT_FALSE(pool.Acquire(2 * kResourceUnit, 10ms)) << "a device is partly held";
}

TEST(GpuPool, FractionsShareOneDeviceAndLeaveTheOtherWhole) {
  GpuPool pool(TwoGpus());
  auto a = pool.Acquire(kResourceUnit / 2, 0ms);
  auto b = pool.Acquire(kResourceUnit / 2, 0ms);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->slots, b->slots);  // packed onto the fuller device
  auto whole = pool.Acquire(kResourceUnit, 0ms);
  ASSERT_TRUE(whole);
  EXPECT_NE(whole->slots, a->slots);
  EXPECT_EQ(pool.DescribeFree(), "GPU 2: 0 free, GPU 5: 0 free");
}

TEST(GpuPool, AWaitingRequestGetsTheDeviceWhenItIsReleased) {
  GpuPool pool(TwoGpus());
  auto held = pool.Acquire(2 * kResourceUnit, 0ms);
  ASSERT_TRUE(held);
  std::thread releaser([&] {
    std::this_thread::sleep_for(20ms);
    pool.Release(*held);
  });
  auto got = pool.Acquire(kResourceUnit, 10s);
  releaser.join();
  EXPECT_TRUE(got);
}

TEST(GpuPool, NoDevicesGrantsNothingButZero) {
  GpuPool pool(GpuDevices{});
  EXPECT_FALSE(pool.Acquire(kResourceUnit, 0ms));
  auto none = pool.Acquire(0, 0ms);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->Empty());
  EXPECT_EQ(pool.DescribeFree(), "no GPUs");
}

// ---- Through the runtime ---------------------------------------------------------------

std::atomic<int> g_started{0};

/// Waits (up to 10 s) until `n` tasks have started, so that they provably run at once.
std::vector<std::string> GpuIdsWhileOthersRun(int n) {
  ++g_started;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (g_started.load() < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  return prism::GetGpuIds();
}
std::vector<std::string> GpuIdsNow() { return prism::GetGpuIds(); }
std::vector<int> GpuIndicesNow() { return prism::GetGpuDeviceIndices(); }

class GpuHolder {
 public:
  static GpuHolder* Create() { return new GpuHolder; }
  std::vector<std::string> Ids() { return prism::GetGpuIds(); }
  std::vector<int> Indices() { return prism::GetGpuDeviceIndices(); }
};
PRISM_REMOTE(GpuIdsWhileOthersRun, GpuIdsNow, GpuIndicesNow, GpuHolder::Create, &GpuHolder::Ids,
             &GpuHolder::Indices);

TEST(GpuIds, TwoConcurrentOneGpuTasksGetDistinctDevices) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1, .num_cpus = 2, .gpu_ids = {"2", "5"}});
  g_started = 0;
  auto a = prism::Task(GpuIdsWhileOthersRun).SetResource("GPU", 1).Remote(2);
  auto b = prism::Task(GpuIdsWhileOthersRun).SetResource("GPU", 1).Remote(2);
  auto ia = *a.Get(), ib = *b.Get();
  ASSERT_EQ(g_started.load(), 2);
  ASSERT_EQ(ia.size(), 1u);
  ASSERT_EQ(ib.size(), 1u);
  EXPECT_EQ((std::set<std::string>{ia[0], ib[0]}), (std::set<std::string>{"2", "5"}));
  // The CUDA index is the id's place in the rank's visible list.
  auto idx = *prism::Task(GpuIndicesNow).SetResource("GPU", 2).Remote().Get();
  EXPECT_EQ(idx, (std::vector<int>{0, 1}));
}

TEST(GpuIds, EmptyOnTheDriverAndForTasksThatAskedForNone) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2, .num_cpus = 2, .gpu_ids = {"2", "5"}});
  EXPECT_TRUE(prism::GetGpuIds().empty());
  EXPECT_TRUE(prism::GetGpuDeviceIndices().empty());
  EXPECT_TRUE(prism::Task(GpuIdsNow).Remote().Get()->empty());
}

TEST(GpuIds, FractionsShareADeviceAndAnActorKeepsItsGpuForEveryCall) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1, .num_cpus = 4, .gpu_ids = {"2", "5"}});
  auto actor = prism::Actor(GpuHolder::Create).SetResource("GPU", 1).Remote();
  auto first = *actor.Task(&GpuHolder::Ids).Remote().Get();
  ASSERT_EQ(first.size(), 1u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*actor.Task(&GpuHolder::Ids).Remote().Get(), first);
  // The other device is what is left for tasks.
  auto other = *prism::Task(GpuIdsNow).SetResource("GPU", 1).Remote().Get();
  ASSERT_EQ(other.size(), 1u);
  EXPECT_NE(other, first);
  auto half = *prism::Task(GpuIdsNow).SetResource("GPU", 0.5).Remote().Get();
  EXPECT_EQ(half, other);
  // Once the actor is gone, its device is free for a 2-GPU task.
  actor.Kill();
  auto both = prism::Task(GpuIdsNow).SetResource("GPU", 2).Remote();
  EXPECT_EQ(both.Get(30000)->size(), 2u);
}

TEST(GpuIds, WithNoGpuDeclaredAGpuTaskIsAResourceErrorAndIdsAreEmpty) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2, .num_cpus = 2});
  EXPECT_TRUE(prism::Task(GpuIdsNow).Remote().Get()->empty());
  try {
    prism::Task(GpuIdsNow).SetResource("GPU", 1).Remote();
    ADD_FAILURE() << "a GPU task with no GPU anywhere was accepted";
  } catch (const prism::ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prism::Actor(GpuHolder::Create).SetResource("GPU", 1).Remote(), prism::ResourceError);
}

TEST(GpuIds, OutsideARuntimeIsARuntimeError) {
  EXPECT_THROW(prism::GetGpuIds(), prism::RuntimeError);
}

}  // namespace
