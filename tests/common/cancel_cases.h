#pragma once
// Cancel, SetTimeout and completion callbacks, as cases shared by the in-process unit tests
// (tests/unit/cancel_test.cc, 1 and 3 ranks) and the MPI tests (tests/mpi/cancel_test.cc).
// Tasks signal through the internal KV, so the cases hold whether they run in this process
// or on another rank. Every wait is bounded. Include from one file per test binary.
#include <gtest/gtest.h>
#include <prism/api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <dirent.h>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cancel_cases {

using Clock = std::chrono::steady_clock;

inline void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
inline int World() { return prism::GetRuntimeContext().GetWorldSize(); }
inline std::string Unique(const std::string& what) {
  static std::atomic<int> n{0};
  return "cancel-test/" + what + "/" + std::to_string(++n);
}
/// Waits up to 20 s for a KV key; true if it appeared.
inline bool AwaitKey(const std::string& key) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    if (prism::kv::Exists(key)) return true;
    Sleep(2);
  }
  return false;
}

/// Runs until `key`/go is set (returns 1) or it is cancelled (records `key`/saw, returns
/// -1); marks `key`/ran as it starts. Gives up after 30 s (returns 0).
inline int Spin(std::string key) {
  prism::kv::Put(key + "/ran", "1");
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    if (prism::IsCancelled()) {
      prism::kv::Put(key + "/saw", "1");
      return -1;
    }
    if (prism::kv::Exists(key + "/go")) return 1;
    Sleep(2);
  }
  return 0;
}
/// Submits Spin(key) and waits for it; records `key`/interrupted if that Get throws
/// TaskCancelledError.
inline int GetChild(std::string key) {
  auto child = prism::Task(Spin).Remote(key);
  try {
    return *child.Get(60000);
  } catch (const prism::TaskCancelledError&) {
    prism::kv::Put(key + "/interrupted", "1");
    throw;
  }
}
inline int Twice(int x) { return 2 * x; }
inline int Throws(int x) { throw std::runtime_error("failing on purpose " + std::to_string(x)); }

class Gate {
 public:
  static Gate* Create() { return new Gate; }
  int Hold(std::string key) { return Spin(key); }
  int Echo(int x) { return x; }
};

PRISM_REMOTE(Spin, GetChild, Twice, Throws, Gate::Create, &Gate::Hold, &Gate::Echo);

/// Tasks pinned with CPU 1 on every rank: with one CPU per rank, nothing else can start.
inline std::vector<prism::ObjectRef<int>> FillEveryRank(const std::string& key) {
  std::vector<prism::ObjectRef<int>> blockers;
  for (int r = 0; r < World(); ++r) {
    blockers.push_back(prism::Task(Spin).SetResource("CPU", 1).SetResource("rank:" + std::to_string(r), 0.01).Remote(key));
  }
  for (int r = 0; r < World(); ++r) EXPECT_TRUE(AwaitKey(key + "/ran"));
  return blockers;
}

// ---- The cases (each needs one CPU per rank) -----------------------------------------------

inline void CancelQueuedTask() {
  const std::string block = Unique("block"), queued = Unique("queued");
  auto blockers = FillEveryRank(block);
  auto ref = prism::Task(Spin).Remote(queued);
  Sleep(50);
  prism::Cancel(ref);
  EXPECT_THROW(ref.Get(20000), prism::TaskCancelledError);
  prism::kv::Put(block + "/go", "1");
  for (auto& b : blockers) EXPECT_EQ(*b.Get(20000), 1);
  EXPECT_FALSE(prism::kv::Exists(queued + "/ran")) << "a cancelled queued task ran";
}

inline void CancelRunningTaskSetsItsFlag() {
  const std::string key = Unique("running");
  auto ref = prism::Task(Spin).Remote(key);
  ASSERT_TRUE(AwaitKey(key + "/ran"));
  prism::Cancel(ref);
  try {
    ref.Get(20000);
    ADD_FAILURE() << "Get of a cancelled task returned";
  } catch (const prism::TaskCancelledError& e) {
    EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
    EXPECT_EQ(e.TaskName(), "Spin");
  }
  EXPECT_TRUE(AwaitKey(key + "/saw")) << "the task never saw IsCancelled()";
  EXPECT_FALSE(prism::IsCancelled());  // the driver is no task
}

inline void CancelInterruptsABlockedGet() {
  const std::string key = Unique("blocked");
  auto outer = prism::Task(GetChild).Remote(key);
  ASSERT_TRUE(AwaitKey(key + "/ran"));  // the child runs, the parent waits in Get
  prism::Cancel(outer, /*force=*/false, /*recursive=*/false);
  EXPECT_THROW(outer.Get(20000), prism::TaskCancelledError);
  EXPECT_TRUE(AwaitKey(key + "/interrupted")) << "the parent's blocked Get was not woken";
  // Not recursive: the child was left alone and finishes when told.
  prism::kv::Put(key + "/go", "1");
  Sleep(20);
  EXPECT_FALSE(prism::kv::Exists(key + "/saw"));
}

inline void CancelIsRecursive() {
  const std::string key = Unique("recursive");
  auto outer = prism::Task(GetChild).Remote(key);
  ASSERT_TRUE(AwaitKey(key + "/ran"));
  prism::Cancel(outer);
  EXPECT_THROW(outer.Get(20000), prism::TaskCancelledError);
  EXPECT_TRUE(AwaitKey(key + "/saw")) << "the child of a cancelled task was not cancelled";
}

inline void CancelOfAFinishedTaskHasNoEffect() {
  auto ref = prism::Task(Twice).Remote(21);
  EXPECT_EQ(*ref.Get(20000), 42);
  prism::Cancel(ref);
  prism::Cancel(ref);
  EXPECT_EQ(*ref.Get(20000), 42);
  auto put = prism::Put(7);
  prism::Cancel(put);
  EXPECT_EQ(*put.Get(1000), 7);
}

inline void CancelTwiceAndBadCalls() {
  const std::string key = Unique("twice");
  auto ref = prism::Task(Spin).Remote(key);
  ASSERT_TRUE(AwaitKey(key + "/ran"));
  prism::Cancel(ref);
  prism::Cancel(ref);
  EXPECT_THROW(ref.Get(20000), prism::TaskCancelledError);
  prism::Cancel(ref);  // finished (cancelled): no effect
  EXPECT_THROW(ref.Get(1000), prism::TaskCancelledError);

  prism::ObjectRef<int> nil;
  try {
    prism::Cancel(nil);
    ADD_FAILURE() << "Cancel of an empty ref did not throw";
  } catch (const prism::Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty ObjectRef"), std::string::npos) << e.what();
  }
  auto done = prism::Task(Twice).Remote(1);
  EXPECT_THROW(prism::Cancel(done, /*force=*/true), prism::Error);
  EXPECT_EQ(*done.Get(20000), 2);
}

inline void TimeoutFiresAndDoesNot() {
  const std::string key = Unique("timeout");
  auto slow = prism::Task(Spin).SetTimeout(200).Remote(key);
  auto t0 = Clock::now();
  try {
    slow.Get(20000);
    ADD_FAILURE() << "a task past its timeout returned";
  } catch (const prism::TaskCancelledError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("200 ms"), std::string::npos) << e.what();
  }
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(150));
  EXPECT_TRUE(AwaitKey(key + "/saw"));
  auto quick = prism::Task(Twice).SetTimeout(20000).Remote(4);
  EXPECT_EQ(*quick.Get(20000), 8);
  Sleep(10);
  EXPECT_EQ(*quick.Get(1000), 8);
  EXPECT_THROW(prism::Task(Twice).SetTimeout(-1), prism::Error);
}

inline void ActorCallsQueuedAreCancelledRunningAreNot() {
  auto gate = prism::Actor(Gate::Create).Remote();
  const std::string key = Unique("actor");
  auto running = gate.Task(&Gate::Hold).Remote(key);
  ASSERT_TRUE(AwaitKey(key + "/ran"));
  auto queued = gate.Task(&Gate::Echo).Remote(5);
  Sleep(20);
  prism::Cancel(queued);
  EXPECT_THROW(queued.Get(20000), prism::TaskCancelledError);
  // A running call is not interrupted (Ray's sync actors): IsCancelled turns true inside
  // it, and its result is the cancellation however it ends.
  prism::Cancel(running);
  EXPECT_TRUE(AwaitKey(key + "/saw"));
  EXPECT_THROW(running.Get(20000), prism::TaskCancelledError);
  EXPECT_EQ(*gate.Task(&Gate::Echo).Remote(6).Get(20000), 6);
}

inline int CountThreads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

/// Counts callbacks; Wait gives up after 60 s.
struct Counter {
  std::mutex mu;
  std::condition_variable cv;
  int n = 0;
  void Add() {
    std::lock_guard<std::mutex> lock(mu);
    ++n;
    cv.notify_all();
  }
  bool Wait(int want) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return n >= want; });
  }
};

inline void TenThousandCallbacks() {
  // 1000 tasks wait at the head for the gate's result, 9000 objects are Put: 10k callbacks
  // registered at once, 1000 of them pending, and no thread per callback.
  const std::string key = Unique("gate");
  auto gate = prism::Task(Spin).Remote(key);
  ASSERT_TRUE(AwaitKey(key + "/ran"));
  const int threads_before = CountThreads();
  auto counter = std::make_shared<Counter>();
  auto sum = std::make_shared<std::atomic<long>>(0);
  constexpr int kPuts = 9000, kTasks = 1000;
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < kTasks; ++i) refs.push_back(prism::Task(Twice).Remote(gate));
  for (int i = 0; i < kPuts; ++i) refs.push_back(prism::Put(i));
  for (auto& ref : refs) {
    ref.OnReady([ref, counter, sum] {
      *sum += *ref.Get(0);
      counter->Add();
    });
  }
  ASSERT_TRUE(counter->Wait(kPuts)) << counter->n << " callbacks ran";
  EXPECT_EQ(counter->n, kPuts) << "a callback ran before its task";
  EXPECT_LE(CountThreads(), threads_before + 4) << "callbacks must not cost a thread each";
  prism::kv::Put(key + "/go", "1");
  ASSERT_TRUE(counter->Wait(kPuts + kTasks)) << counter->n << " callbacks ran";
  long want = 2L * kTasks;
  for (int i = 0; i < kPuts; ++i) want += i;
  EXPECT_EQ(sum->load(), want);
  Sleep(20);
  EXPECT_EQ(counter->n, kPuts + kTasks) << "a callback ran twice";
}

inline void CallbacksAndFuturesSeeFailures() {
  auto failed = prism::Task(Throws).Remote(3);
  auto counter = std::make_shared<Counter>();
  auto saw_error = std::make_shared<std::atomic<bool>>(false);
  failed.OnReady([failed, counter, saw_error] {
    try {
      failed.Get(0);
    } catch (const prism::TaskError& e) {
      *saw_error = std::string(e.what()).find("failing on purpose 3") != std::string::npos;
    }
    counter->Add();
  });
  ASSERT_TRUE(counter->Wait(1));
  EXPECT_TRUE(saw_error->load());
  auto future = prism::Task(Throws).Remote(4).Future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_THROW(future.get(), prism::TaskError);
  auto good = prism::Task(Twice).Remote(5).Future();
  ASSERT_EQ(good.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(*good.get(), 10);
  // A callback keeps its object alive: the only ref is the one inside the pending callback.
  const std::string key = Unique("alive");
  std::future<std::shared_ptr<int>> spun;
  {
    auto ref = prism::Task(Spin).Remote(key);
    spun = ref.Future();
  }
  prism::kv::Put(key + "/go", "1");
  ASSERT_EQ(spun.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(*spun.get(), 1);
  prism::ObjectRef<int> nil;
  EXPECT_THROW(nil.OnReady([] {}), prism::Error);
}

inline void PlacementGroupWaitIsWokenByThePush() {
  // The first group takes every CPU; the second waits until the first goes.
  std::vector<std::unordered_map<std::string, double>> all;
  for (int r = 0; r < World(); ++r) all.push_back({{"CPU", 1}});
  auto first = prism::CreatePlacementGroup({Unique("pg-a"), all, prism::PlacementStrategy::SPREAD});
  ASSERT_TRUE(first.Wait(20));
  auto second = prism::CreatePlacementGroup({Unique("pg-b"), {{{"CPU", 1}}}, prism::PlacementStrategy::PACK});
  auto t0 = Clock::now();
  EXPECT_FALSE(second.Wait(1));  // the timeout path
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(900));
  std::thread remover([&] {
    Sleep(200);
    prism::RemovePlacementGroup(first.GetID());
  });
  t0 = Clock::now();
  EXPECT_TRUE(second.Wait(30));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  remover.join();
  // Removed while waited for: Wait returns false before its timeout.
  auto third = prism::CreatePlacementGroup({Unique("pg-c"), all, prism::PlacementStrategy::SPREAD});
  std::thread remover2([&] {
    Sleep(200);
    prism::RemovePlacementGroup(third.GetID());
  });
  t0 = Clock::now();
  EXPECT_FALSE(third.Wait(30));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  remover2.join();
  prism::RemovePlacementGroup(second.GetID());
}

}  // namespace cancel_cases
