// Actors across ranks: order, state, errors, names, kill/restart, ExitActor, concurrency,
// and the end of an actor when its last handle goes.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>

#include "test_util.h"

namespace {

class Counter {
 public:
  explicit Counter(int start, std::string marker) : value_(start), marker_(std::move(marker)) {}
  ~Counter() {
    if (!marker_.empty()) std::ofstream(marker_) << "destroyed";
  }
  static Counter* Create(int start) { return new Counter(start, ""); }
  static Counter* CreateWithMarker(int start, std::string marker) {
    return new Counter(start, std::move(marker));
  }
  static Counter* Broken(int) { throw std::invalid_argument("no counters today"); }
  int Add(int x) {
    value_ += x;
    return value_;
  }
  int Get() const { return value_; }
  int Rank() const { return prism::GetRuntimeContext().GetRank(); }
  int Fail(int) { throw std::runtime_error("method failed"); }
  bool Restarted() const { return prism::WasCurrentActorRestarted(); }
  int Quit() { prism::ExitActor(); }
  // For SetMaxConcurrency: Wait returns true only if Signal ran meanwhile (needs 2 threads).
  bool WaitForSignal(int timeout_ms) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!signalled_.load() && std::chrono::steady_clock::now() < until) prism_test::SleepMs(1);
    return signalled_.load();
  }
  void Signal() { signalled_ = true; }

 private:
  int value_;
  std::string marker_;
  std::atomic<bool> signalled_{false};
};

int Slow(int v) {
  prism_test::SleepMs(200);
  return v;
}
int AddThroughHandle(prism::ActorHandle<Counter> c, int x) {
  return *c.Task(&Counter::Add).Remote(x).Get();
}
PRISM_REMOTE(Counter::Create, Counter::CreateWithMarker, Counter::Broken, &Counter::Add,
             &Counter::Get, &Counter::Rank, &Counter::Fail, &Counter::Restarted, &Counter::Quit,
             &Counter::WaitForSignal, &Counter::Signal, Slow, AddThroughHandle);

TEST(Actor, CallsFromOneCallerRunInOrderAndKeepState) {
  auto c = prism::Actor(Counter::Create).Remote(10);
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 1; i <= 50; ++i) refs.push_back(c.Task(&Counter::Add).Remote(1));
  auto values = prism::Get(refs);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(*values[i], 11 + i);
  EXPECT_EQ(*c.Task(&Counter::Get).Remote().Get(), 60);
}

TEST(Actor, LivesOnOneRankAndPinsWithResources) {
  int last = prism_test::World() - 1;
  auto c = prism::Actor(Counter::Create).SetResource(prism_test::RankRes(last), 0.01).Remote(0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*c.Task(&Counter::Rank).Remote().Get(), last);
}

TEST(Actor, HandlesArePassedToTasks) {
  auto c = prism::Actor(Counter::Create).Remote(0);
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 4; ++i) refs.push_back(prism::Task(AddThroughHandle).Remote(c, 5));
  prism::Get(refs);
  EXPECT_EQ(*c.Task(&Counter::Get).Remote().Get(), 20);
}

TEST(Actor, ArgumentsThatAreNotReadyYetAreAwaitedInOrder) {
  auto c = prism::Actor(Counter::Create).Remote(0);
  auto slow = prism::Task(Slow).Remote(7);
  auto first = c.Task(&Counter::Add).Remote(slow);
  auto second = c.Task(&Counter::Add).Remote(1);
  EXPECT_EQ(*first.Get(), 7);
  EXPECT_EQ(*second.Get(), 8) << "the second call must run after the first";
}

TEST(Actor, MethodThatThrowsFailsOnlyThatCall) {
  auto c = prism::Actor(Counter::Create).Remote(1);
  try {
    c.Task(&Counter::Fail).Remote(0).Get();
    ADD_FAILURE() << "expected TaskError";
  } catch (const prism::TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("method failed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(*c.Task(&Counter::Add).Remote(1).Get(), 2);
}

TEST(Actor, FactoryThatThrowsMakesEveryCallFailWithTheCause) {
  auto c = prism::Actor(Counter::Broken).Remote(0);
  for (int i = 0; i < 2; ++i) {
    try {
      c.Task(&Counter::Get).Remote().Get(10000);
      ADD_FAILURE() << "expected ActorError";
    } catch (const prism::ActorError& e) {
      EXPECT_NE(std::string(e.what()).find("no counters today"), std::string::npos) << e.what();
    }
  }
}

TEST(Actor, NamedActorsAreFoundByNameAndType) {
  auto c = prism::Actor(Counter::Create).SetName("shared-counter").Remote(100);
  auto found = prism::GetActor<Counter>("shared-counter");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found->Task(&Counter::Add).Remote(1).Get(), 101);
  EXPECT_FALSE(prism::GetActor<Counter>("nobody").has_value());
  c.Kill();
  prism_test::SleepMs(100);
  EXPECT_FALSE(prism::GetActor<Counter>("shared-counter").has_value()) << "dead actors lose their name";
}

TEST(Actor, KilledActorRejectsCalls) {
  auto c = prism::Actor(Counter::Create).Remote(0);
  EXPECT_EQ(*c.Task(&Counter::Add).Remote(1).Get(), 1);
  c.Kill();
  EXPECT_THROW(c.Task(&Counter::Add).Remote(1).Get(10000), prism::ActorError);
}

TEST(Actor, KillWithRestartRecreatesFromTheFactory) {
  auto c = prism::Actor(Counter::Create).SetMaxRestarts(1).Remote(5);
  EXPECT_EQ(*c.Task(&Counter::Add).Remote(1).Get(), 6);
  EXPECT_FALSE(*c.Task(&Counter::Restarted).Remote().Get());
  c.Kill(/*no_restart=*/false);
  EXPECT_EQ(*c.Task(&Counter::Add).Remote(1).Get(10000), 6) << "fresh state from Create(5)";
  EXPECT_TRUE(*c.Task(&Counter::Restarted).Remote().Get(10000));
  c.Kill(false);  // restarts used up: dead now
  EXPECT_THROW(c.Task(&Counter::Get).Remote().Get(10000), prism::ActorError);
}

TEST(Actor, ExitActorEndsTheActor) {
  auto c = prism::Actor(Counter::Create).Remote(0);
  EXPECT_THROW(c.Task(&Counter::Quit).Remote().Get(10000), prism::ActorError);
  EXPECT_THROW(c.Task(&Counter::Get).Remote().Get(10000), prism::ActorError);
}

TEST(Actor, MaxConcurrencyRunsCallsAtOnce) {
  auto c = prism::Actor(Counter::Create).SetMaxConcurrency(2).Remote(0);
  auto waiting = c.Task(&Counter::WaitForSignal).Remote(5000);
  c.Task(&Counter::Signal).Remote().Get(10000);
  EXPECT_TRUE(*waiting.Get(10000)) << "Signal could only run while WaitForSignal was running";
}

TEST(Actor, TheLastHandleGoingEndsTheActor) {
  prism_test::TempDir dir;
  std::string marker = dir.path() + "/destroyed";
  {
    auto c = prism::Actor(Counter::CreateWithMarker).Remote(0, marker);
    EXPECT_EQ(*c.Task(&Counter::Add).Remote(1).Get(), 1);
  }
  auto t0 = std::chrono::steady_clock::now();
  while (!std::filesystem::exists(marker) && prism_test::SecondsSince(t0) < 10) prism_test::SleepMs(10);
  EXPECT_TRUE(std::filesystem::exists(marker)) << "the instance was not destroyed";
}

}  // namespace

namespace {

class Doubler {
 public:
  static Doubler* Create() { return new Doubler(); }
  int Double(int x) {
    if (x < 0) throw std::domain_error("negative");
    prism_test::SleepMs(x % 3);  // finish out of order
    return 2 * x;
  }
};
PRISM_REMOTE(Doubler::Create, &Doubler::Double);

std::vector<prism::ActorHandle<Doubler>> Doublers(int n) {
  std::vector<prism::ActorHandle<Doubler>> actors;
  for (int i = 0; i < n; ++i) actors.push_back(prism::Actor(Doubler::Create).Remote());
  return actors;
}
auto CallDouble = [](prism::ActorHandle<Doubler>& d, int x) { return d.Task(&Doubler::Double).Remote(x); };

TEST(ActorPool, MapKeepsInputOrder) {
  prism::ActorPool<Doubler> pool(Doublers(3));
  std::vector<int> in;
  for (int i = 0; i < 30; ++i) in.push_back(i);
  auto out = pool.Map(CallDouble, in);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], 2 * in[i]);
}

TEST(ActorPool, MapUnorderedReturnsEveryResult) {
  prism::ActorPool<Doubler> pool(Doublers(2));
  auto out = pool.MapUnordered(CallDouble, std::vector<int>{1, 2, 3, 4, 5, 6});
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<int>{2, 4, 6, 8, 10, 12}));
}

TEST(ActorPool, SubmitGetNextAndErrors) {
  prism::ActorPool<Doubler> pool(Doublers(1));
  EXPECT_FALSE(pool.HasNext());
  EXPECT_THROW(pool.GetNext<int>(), prism::Error);
  pool.Submit(CallDouble, 5);
  pool.Submit(CallDouble, -1);  // queued: the only actor is busy
  pool.Submit(CallDouble, 7);
  EXPECT_TRUE(pool.HasNext());
  EXPECT_EQ(pool.GetNext<int>(10000), 10);
  EXPECT_THROW(pool.GetNext<int>(10000), prism::TaskError);
  EXPECT_EQ(pool.GetNextUnordered<int>(10000), 14);
  EXPECT_FALSE(pool.HasNext());
  EXPECT_THROW(prism::ActorPool<Doubler>({}), prism::Error);
}

}  // namespace
