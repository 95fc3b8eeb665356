// Threads a rank cannot have (issue 14 items 4 and 5), in the in-process cluster: a thread
// the system refuses to start fails only the task or actor it was for (injected with
// FailThreadStartsForTest), and past kMaxBlockedTasks blocked tasks (lowered here) the next
// task to block fails with an error naming its depth instead of starting yet another thread.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "node_manager/executor.h"
#include "prism/api.h"
#include "prism/platform/in_process.h"

namespace {

int TlTwice(int x) { return 2 * x; }

class TlCounter {
 public:
  static TlCounter* Create(int start) { return new TlCounter{start}; }
  int Add(int x) { return value += x; }
  int value;
};

int TlGate(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return 1;
}
// The gate travels inside a vector, so that it is not an argument to wait for before the
// task starts: the task starts and then blocks in Get.
int TlWaitForGate(std::vector<prism::ObjectRef<int>> gate) { return *gate[0].Get(30000); }
// Starts `n` children that all block in Get while the gate (on the other CPU) sleeps.
int TlFan(int n) {
  auto gate = prism::Task(TlGate).Remote(1500);
  std::vector<prism::ObjectRef<int>> kids;
  for (int i = 0; i < n; ++i) {
    kids.push_back(prism::Task(TlWaitForGate).Remote(std::vector<prism::ObjectRef<int>>{gate}));
  }
  int sum = 0;
  for (auto& k : kids) sum += *k.Get(30000);
  return sum;
}

PRISM_REMOTE(TlTwice, TlCounter::Create, &TlCounter::Add, TlGate, TlWaitForGate, TlFan);

TEST(ThreadLimits, AnActorWhoseThreadCannotStartFailsAloneWithAClearError) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  auto before = prism::Actor(TlCounter::Create).Remote(10);
  EXPECT_EQ(*before.Task(&TlCounter::Add).Remote(1).Get(10000), 11);

  prism::internal::FailThreadStartsForTest(1);
  auto refused = prism::Actor(TlCounter::Create).Remote(0);  // no throw: the call fails
  try {
    refused.Task(&TlCounter::Add).Remote(1).Get(10000);
    FAIL() << "a call on an actor without a thread returned";
  } catch (const prism::ActorError& e) {
    std::printf("[ error ] %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find("could not start a thread for actor"), std::string::npos)
        << e.what();
  }
  prism::internal::FailThreadStartsForTest(0);

  // Only that actor: the one before and a new one work.
  EXPECT_EQ(*before.Task(&TlCounter::Add).Remote(1).Get(10000), 12);
  auto after = prism::Actor(TlCounter::Create).Remote(20);
  EXPECT_EQ(*after.Task(&TlCounter::Add).Remote(1).Get(10000), 21);
  EXPECT_EQ(*prism::Task(TlTwice).Remote(4).Get(10000), 8);
}

TEST(ThreadLimits, ATaskWhoseThreadCannotStartFailsAloneWithAClearError) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  // A fresh rank has no executor thread yet: the first task needs one.
  prism::internal::FailThreadStartsForTest(1);
  try {
    prism::Task(TlTwice).Remote(1).Get(10000);
    FAIL() << "a task without a thread returned";
  } catch (const prism::TaskError& e) {
    std::printf("[ error ] %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find("could not start a thread for a task"), std::string::npos)
        << e.what();
  }
  prism::internal::FailThreadStartsForTest(0);
  EXPECT_EQ(*prism::Task(TlTwice).Remote(2).Get(10000), 4);
}

TEST(ThreadLimits, PastTheBlockedTaskLimitTheNextBlockFailsNamingItsDepth) {
  prism::internal::SetMaxBlockedTasksForTest(8);
  {
    prism::platform::InProcessCluster cluster({.num_ranks = 1, .num_cpus = 2});
    try {
      prism::Task(TlFan).Remote(20).Get(30000);
      FAIL() << "20 blocked tasks fitted under a limit of 8";
    } catch (const prism::TaskError& e) {
      const std::string what = e.what();
      std::printf("[ error ] %s\n", what.c_str());
      EXPECT_NE(what.find("nesting depth 2"), std::string::npos) << what;
      EXPECT_NE(what.find("kMaxBlockedTasks"), std::string::npos) << what;
    }
    // Under the limit the same shape works, on the same rank.
    EXPECT_EQ(*prism::Task(TlFan).Remote(4).Get(30000), 4);
  }
  prism::internal::SetMaxBlockedTasksForTest(0);
}

prism::internal::DispatchTask TlOneCpuTask(
    uint64_t id, const std::shared_ptr<const prism::internal::TaskOptions>& options) {
  auto spec = std::make_shared<prism::internal::TaskSpec>();
  spec->id = prism::ObjectId(id);
  spec->options = options;
  return {std::move(spec), {}};
}

TEST(ThreadLimits, ABurstOfOneCpuTasksOnOneCpuStartsOneThread) {
  // The head pipelines several tasks to a rank at once. A thread started for the first is
  // still starting when the next ones arrive: it will take them, so none starts another.
  using namespace prism::internal;
  std::atomic<int> ran{0};
  Executor executor(ResourceSet({{"CPU", 1.0}}), [&](DispatchTask&) { ran.fetch_add(1); });
  auto options = std::make_shared<TaskOptions>();
  options->demand = ResourceSet({{"CPU", 1.0}});
  constexpr int kTasks = 64;
  for (int i = 1; i <= kTasks; ++i) executor.Submit(TlOneCpuTask(i, options));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ran.load() < kTasks && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(ran.load(), kTasks);
  EXPECT_EQ(executor.NumThreads(), 1u);
  EXPECT_TRUE(executor.Stop());  // the one thread is idle: joined, not left behind
}

TEST(ThreadLimits, StopWaitsUntilItsDeadlineForARunningTaskToReturn) {
  // At Shutdown a task about to return is waited for (its thread would otherwise still be
  // serializing its result while the process exits); one that outlives the deadline is
  // left running, and Stop says so.
  using namespace prism::internal;
  auto options = std::make_shared<TaskOptions>();
  options->demand = ResourceSet({{"CPU", 1.0}});
  std::atomic<bool> started{false};
  std::atomic<bool> returned{false};
  auto sleeper = [&](int ms) {
    return [&, ms](DispatchTask&) {
      started = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      returned = true;
    };
  };
  auto wait_started = [&] {
    for (int i = 0; i < 10000 && !started.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(started.load());
  };
  {
    Executor executor(ResourceSet({{"CPU", 1.0}}), sleeper(200));
    executor.Submit(TlOneCpuTask(1, options));
    wait_started();
    EXPECT_TRUE(executor.Stop(std::chrono::steady_clock::now() + std::chrono::seconds(20)));
    EXPECT_TRUE(returned.load());
  }
  started = false;
  returned = false;
  auto executor = std::make_unique<Executor>(ResourceSet({{"CPU", 1.0}}), sleeper(1500));
  executor->Submit(TlOneCpuTask(2, options));
  wait_started();
  EXPECT_FALSE(executor->Stop(std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  EXPECT_FALSE(returned.load());
  while (!returned.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  (void)executor.release();  // as TaskRunner does: its detached thread may still use it
}

TEST(ThreadLimits, AWaiterRunsATaskNoPoolThreadTookYetOnItsOwnThread) {
  // The driver waiting for a task still queued in its rank's executor runs it itself
  // (issue 43: no hand-off to a thread that may share its core), as a pool thread would:
  // with a cancel flag of its own, and the task's CPU given back after.
  using namespace prism::internal;
  auto options = std::make_shared<TaskOptions>();
  options->demand = ResourceSet({{"CPU", 1.0}});
  std::atomic<int> ran{0};
  std::thread::id ran_on;
  const std::atomic<bool>* flag_inside = nullptr;
  Executor executor(ResourceSet({{"CPU", 1.0}}), [&](DispatchTask&) {
    ran_on = std::this_thread::get_id();
    flag_inside = Executor::CurrentCancelFlag();
    ran.fetch_add(1);
  });
  HoldNewPoolThreadsForTest(true);  // the thread started for it cannot take it first
  executor.Submit(TlOneCpuTask(7, options));
  EXPECT_FALSE(executor.RunHere(prism::ObjectId(8)));  // no such task here
  EXPECT_TRUE(executor.RunHere(prism::ObjectId(7)));
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_NE(flag_inside, nullptr);
  EXPECT_EQ(Executor::CurrentCancelFlag(), nullptr);  // this thread's own again
  EXPECT_FALSE(executor.RunHere(prism::ObjectId(7)));  // it ran: nothing to take
  auto streaming = std::make_shared<TaskOptions>(*options);
  streaming->streaming = true;  // a generator may wait for its consumer: never run here
  executor.Submit(TlOneCpuTask(8, streaming));
  EXPECT_FALSE(executor.RunHere(prism::ObjectId(8)));
  HoldNewPoolThreadsForTest(false);
  for (int i = 0; i < 30000 && ran.load() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(ran.load(), 2);  // the pool ran it
  executor.Submit(TlOneCpuTask(9, options));  // the CPU came back: the pool runs it
  for (int i = 0; i < 30000 && ran.load() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(ran.load(), 3);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(executor.Stop(std::chrono::steady_clock::now() + std::chrono::seconds(20)));
}

}  // namespace
