// Get with a timeout, and Wait.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "test_util.h"

using namespace prism_test;

namespace {

int WtSleep(int ms) {
  SleepMs(ms);
  return ms;
}
void WtSleepVoid(int ms) { SleepMs(ms); }
int WtFail(int x) { throw std::logic_error("failing on purpose " + std::to_string(x)); }

PRISM_REMOTE(WtSleep, WtSleepVoid, WtFail);

using Clock = std::chrono::steady_clock;

// A sleeping task that holds almost no CPU, so that sleepers never delay other tasks.
prism::ObjectRef<int> Sleeper(int ms, int rank) {
  return On(rank, WtSleep).SetResource("CPU", 0.1).Remote(ms);
}

}  // namespace

TEST(GetTimeout, ThrowsTimeoutErrorThenSucceeds) {
  auto ref = Sleeper(1200, World() - 1);
  auto t0 = Clock::now();
  EXPECT_THROW(prism::Get(ref, 150), prism::TimeoutError);
  double waited = SecondsSince(t0);
  EXPECT_GE(waited, 0.14);
  EXPECT_LT(waited, 1.0) << "Get(ref, 150) returned late";
  EXPECT_THROW(ref.Get(0), prism::TimeoutError);
  // TimeoutError is a prism::Error.
  EXPECT_THROW(prism::Get(ref, 10), prism::Error);
  // The object is still fine afterwards.
  EXPECT_EQ(*prism::Get(ref, 20000), 1200);
  EXPECT_EQ(*ref.Get(0), 1200) << "a ready object must not time out with timeout 0";
}

TEST(GetTimeout, VoidAndVector) {
  auto v = On(0, WtSleepVoid).SetResource("CPU", 0.1).Remote(800);
  EXPECT_THROW(prism::Get(v, 100), prism::TimeoutError);
  std::vector<prism::ObjectRef<int>> refs{prism::Put(1), Sleeper(800, World() - 1)};
  auto t0 = Clock::now();
  EXPECT_THROW(prism::Get(refs, 100), prism::TimeoutError);
  EXPECT_LT(SecondsSince(t0), 0.7);
  auto values = prism::Get(refs, 20000);
  EXPECT_EQ(*values[0], 1);
  EXPECT_EQ(*values[1], 800);
  EXPECT_NO_THROW(prism::Get(v, 20000));
}

TEST(Wait, ReadyInInputOrderLimitedToNumObjects) {
  const int last = World() - 1;
  std::vector<prism::ObjectRef<int>> refs{Sleeper(1000, last), prism::Put(1), Sleeper(1000, 0),
                                          prism::Put(2), prism::Put(3)};
  auto t0 = Clock::now();
  auto r = prism::Wait(refs, 2, -1);
  EXPECT_LT(SecondsSince(t0), 0.8) << "Wait for 2 waited for a sleeper";
  ASSERT_EQ(r.ready.size(), 2u);
  ASSERT_EQ(r.unready.size(), 3u);
  EXPECT_EQ(r.ready[0], refs[1]);
  EXPECT_EQ(r.ready[1], refs[3]);
  // "unready" is everything else, in input order (refs[4] is ready but beyond num_objects).
  EXPECT_EQ(r.unready[0], refs[0]);
  EXPECT_EQ(r.unready[1], refs[2]);
  EXPECT_EQ(r.unready[2], refs[4]);

  // num_objects = 0 returns at once with nothing ready.
  auto none = prism::Wait(refs, 0, -1);
  EXPECT_TRUE(none.ready.empty());
  EXPECT_EQ(none.unready.size(), refs.size());

  // Timeout: returns what is ready so far.
  t0 = Clock::now();
  auto partial = prism::Wait(refs, 5, 250);
  double waited = SecondsSince(t0);
  EXPECT_GE(waited, 0.24);
  EXPECT_LT(waited, 0.9);
  ASSERT_EQ(partial.ready.size(), 3u);
  EXPECT_EQ(partial.ready[0], refs[1]);
  EXPECT_EQ(partial.ready[1], refs[3]);
  EXPECT_EQ(partial.ready[2], refs[4]);
  ASSERT_EQ(partial.unready.size(), 2u);
  EXPECT_EQ(partial.unready[0], refs[0]);
  EXPECT_EQ(partial.unready[1], refs[2]);

  // Timeout 0 polls.
  auto poll = prism::Wait(refs, 5, 0);
  EXPECT_EQ(poll.ready.size(), 3u);

  // Without a timeout: everything, in input order.
  auto all = prism::Wait(refs, 5, -1);
  ASSERT_EQ(all.ready.size(), 5u);
  EXPECT_TRUE(all.unready.empty());
  for (size_t i = 0; i < refs.size(); ++i) EXPECT_EQ(all.ready[i], refs[i]);
  EXPECT_EQ(*refs[0].Get(0), 1000);
}

TEST(Wait, ReturnsAsSoonAsEnoughAreReady) {
  std::vector<prism::ObjectRef<int>> refs;
  refs.push_back(Sleeper(1500, 0));
  refs.push_back(Sleeper(200, World() - 1));
  auto t0 = Clock::now();
  auto r = prism::Wait(refs, 1, 10000);
  double waited = SecondsSince(t0);
  EXPECT_GE(waited, 0.15);
  EXPECT_LT(waited, 1.2) << "Wait(1) did not return when the short task finished";
  ASSERT_EQ(r.ready.size(), 1u);
  EXPECT_EQ(r.ready[0], refs[1]);
  ASSERT_EQ(r.unready.size(), 1u);
  EXPECT_EQ(r.unready[0], refs[0]);
  EXPECT_EQ(*prism::Get(refs[0], 20000), 1500);
}

TEST(Wait, FailedTaskCountsAsReady) {
  std::vector<prism::ObjectRef<int>> refs{Sleeper(800, 0),
                                          On(World() - 1, WtFail).Remote(1)};
  auto r = prism::Wait(refs, 1, 10000);
  ASSERT_EQ(r.ready.size(), 1u);
  EXPECT_EQ(r.ready[0], refs[1]);
  EXPECT_THROW(r.ready[0].Get(), prism::TaskError);
  prism::Get(refs[0], 20000);
}

TEST(Wait, VoidRefs) {
  std::vector<prism::ObjectRef<void>> refs{
      On(0, WtSleepVoid).SetResource("CPU", 0.1).Remote(50),
      On(World() - 1, WtSleepVoid).SetResource("CPU", 0.1).Remote(50)};
  auto r = prism::Wait(refs, 2, 10000);
  EXPECT_EQ(r.ready.size(), 2u);
  EXPECT_TRUE(r.unready.empty());
}

TEST(Wait, BadArguments) {
  std::vector<prism::ObjectRef<int>> refs{prism::Put(1), prism::Put(2)};
  EXPECT_THROW(prism::Wait(refs, 3, 100), prism::Error);
  EXPECT_THROW(prism::Wait(refs, -1, 100), prism::Error);
  std::vector<prism::ObjectRef<int>> dup{refs[0], refs[1], refs[0]};
  EXPECT_THROW(prism::Wait(dup, 1, 100), prism::Error);
  std::vector<prism::ObjectRef<int>> with_nil{refs[0], prism::ObjectRef<int>()};
  EXPECT_THROW(prism::Wait(with_nil, 1, 100), prism::Error);
  // Empty input, zero objects: fine.
  auto empty = prism::Wait(std::vector<prism::ObjectRef<int>>{}, 0, 100);
  EXPECT_TRUE(empty.ready.empty());
  EXPECT_TRUE(empty.unready.empty());
}
