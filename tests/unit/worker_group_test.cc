// WorkerGroup against the in-process cluster: placement, reports as events, failures,
// stop, abort, restart, several groups at once.
#include "prism/platform/worker_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>

#include "prism/api.h"
#include "prism/platform/in_process.h"
#include "prism/platform/invoke.h"

namespace {

using prism::platform::CurrentWorker;
using prism::platform::WorkerEvent;
using prism::platform::WorkerGroup;

// Reports "<index>:<i>" `config` times, returns its rank.
std::string WgCount(std::string config) {
  const auto& me = CurrentWorker();
  for (int i = 0; i < std::stoi(config); ++i) me.Report(std::to_string(me.info().index) + ":" + std::to_string(i));
  return std::to_string(prism::GetRuntimeContext().GetRank());
}
// Worker 0 fails at once; the others wait until stopped or aborted (at most 20 s).
std::string WgFailOne(std::string) {
  const auto& me = CurrentWorker();
  if (me.info().index == 0 && me.attempt() == 0) throw std::runtime_error("worker 0 gave up");
  std::atomic<bool> aborted{false};
  me.OnAbort([&] { aborted = true; });
  for (int i = 0; i < 2000 && !aborted && !me.StopRequested(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return aborted ? "aborted" : "done";
}
// Waits for RequestStop (at most 20 s).
std::string WgUntilStopped(std::string) {
  for (int i = 0; i < 2000 && !CurrentWorker().StopRequested(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return CurrentWorker().StopRequested() ? "stopped" : "never stopped";
}
// Puts `config` values (its index * 100 + i) and returns their refs as bytes.
std::string WgPutValues(std::string config) {
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < std::stoi(config); ++i) refs.push_back(prism::Put(CurrentWorker().info().index * 100 + i));
  return prism::platform::ToBytes(refs);
}
PRISM_REMOTE(WgCount, WgFailOne, WgUntilStopped, WgPutValues);

/// Reads events until no worker runs (at most 30 s).
std::vector<WorkerEvent> Drain(WorkerGroup& g) {
  std::vector<WorkerEvent> out;
  while (g.Running()) {
    auto e = g.Next(30000);
    if (!e) {
      ADD_FAILURE() << "no event within 30 s";
      break;
    }
    out.push_back(*e);
  }
  return out;
}

TEST(WorkerGroup, SpreadsWorkersAndStreamsTheirReportsInOrder) {
  prism::platform::InProcessCluster cluster({.num_ranks = 4, .num_cpus = 1, .ranks_per_node = 2});
  WorkerGroup group({.num_workers = 3, .strategy = prism::PlacementStrategy::SPREAD, .name = "count"});
  std::set<int> ranks;
  for (const auto& w : group.workers()) ranks.insert(w.rank);
  EXPECT_EQ(ranks.size(), 3u) << "one CPU per rank: three distinct ranks";
  int local_sum = 0;
  for (const auto& w : group.workers()) local_sum += w.local_world_size;
  EXPECT_EQ(local_sum, 5) << "SPREAD over 2 nodes: 2 workers on one node, 1 on the other";
  group.Start(prism::platform::RegisteredName(WgCount), "4");
  std::map<int, std::vector<std::string>> reports;
  std::map<int, std::string> results;
  for (const auto& e : Drain(group)) {
    if (e.kind == WorkerEvent::kReport) reports[e.worker].push_back(e.bytes);
    if (e.kind == WorkerEvent::kFinished) results[e.worker] = e.bytes;
    EXPECT_NE(e.kind, WorkerEvent::kFailed) << e.bytes;
  }
  for (const auto& w : group.workers()) {
    const std::string p = std::to_string(w.index) + ":";
    EXPECT_EQ(reports[w.index], (std::vector<std::string>{p + "0", p + "1", p + "2", p + "3"}));
    EXPECT_EQ(results[w.index], std::to_string(w.rank)) << "worker " << w.index << " ran on its rank";
  }
}

TEST(WorkerGroup, AFailureIsAnEventAbortEndsTheOthersAndARestartReusesTheRanks) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3, .num_cpus = 1});
  WorkerGroup group({.num_workers = 3, .name = "fail"});
  const auto before = group.workers();
  group.Start(prism::platform::RegisteredName(WgFailOne), "");
  auto first = group.Next(30000);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->kind, WorkerEvent::kFailed);
  EXPECT_EQ(first->worker, 0);
  EXPECT_EQ(first->bytes, "std::runtime_error: worker 0 gave up");
  EXPECT_EQ(first->error_type, "std::runtime_error") << "the type to decide by, apart from the message";
  EXPECT_EQ(first->message, "worker 0 gave up");
  EXPECT_THROW(group.Start(prism::platform::RegisteredName(WgCount), "1"), prism::Error) << "others still run";
  EXPECT_TRUE(group.Abort(30000));
  for (const auto& e : Drain(group)) EXPECT_EQ(e.kind, WorkerEvent::kFinished);
  int aborted = 0;
  while (auto e = group.Next(0)) aborted += e->kind == WorkerEvent::kFinished && e->bytes == "aborted";
  EXPECT_EQ(aborted, 2) << "Abort ran the two survivors' hooks; their ends are kept for Next";
  group.Start(prism::platform::RegisteredName(WgFailOne), "");  // attempt 1: nobody fails
  EXPECT_EQ(group.attempt(), 1);
  group.RequestStop();
  for (const auto& e : Drain(group)) {
    EXPECT_EQ(e.attempt, 1);
    EXPECT_EQ(e.kind, WorkerEvent::kFinished) << e.bytes;
  }
  EXPECT_EQ(group.workers()[0].rank, before[0].rank) << "same reservation";
}

TEST(WorkerGroup, OneWorkerPerRankEvenWhenARankHasRoomForMore) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3, .num_cpus = 4});
  WorkerGroup group({.num_workers = 3, .one_worker_per_rank = true});
  std::set<int> ranks;
  for (const auto& w : group.workers()) ranks.insert(w.rank);
  EXPECT_EQ(ranks.size(), 3u);
  EXPECT_THROW(WorkerGroup({.num_workers = 4, .one_worker_per_rank = true}), prism::ResourceError);
}

TEST(WorkerGroup, RequestStopReachesEveryWorker) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2});
  WorkerGroup group({.num_workers = 2});
  group.Start(prism::platform::RegisteredName(WgUntilStopped), "");
  group.RequestStop();
  for (const auto& e : Drain(group)) EXPECT_EQ(e.bytes, "stopped");
}

TEST(WorkerGroup, SeveralGroupsRunAtOnce) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2, .num_cpus = 2});
  WorkerGroup a({.num_workers = 2, .name = "a"});
  WorkerGroup b({.num_workers = 2, .name = "b"});
  EXPECT_NE(a.id(), b.id());
  a.Start(prism::platform::RegisteredName(WgCount), "3");
  b.Start(prism::platform::RegisteredName(WgCount), "5");
  int reports_a = 0, reports_b = 0;
  for (const auto& e : Drain(a)) reports_a += e.kind == WorkerEvent::kReport;
  for (const auto& e : Drain(b)) reports_b += e.kind == WorkerEvent::kReport;
  EXPECT_EQ(reports_a, 6);
  EXPECT_EQ(reports_b, 10);
}

TEST(WorkerGroup, AWorkerHandsBackObjectRefsThatOutliveTheGroup) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3, .num_cpus = 1});
  std::vector<std::vector<prism::ObjectRef<int>>> got(3);
  {
    WorkerGroup group({.num_workers = 3, .strategy = prism::PlacementStrategy::SPREAD, .name = "refs"});
    group.Start(prism::platform::RegisteredName(WgPutValues), "4");
    const std::vector<WorkerEvent> ends = Drain(group);
    // The workers' own refs are gone by now: only the group's hold on their results keeps
    // the objects until the reads below.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (const auto& e : ends) {
      ASSERT_EQ(e.kind, WorkerEvent::kFinished) << e.bytes;
      got[static_cast<size_t>(e.worker)] = prism::platform::FromBytes<std::vector<prism::ObjectRef<int>>>(e.bytes);
    }
  }
  for (int w = 0; w < 3; ++w) {
    ASSERT_EQ(got[static_cast<size_t>(w)].size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(*prism::Get(got[static_cast<size_t>(w)][static_cast<size_t>(i)], 10000), w * 100 + i);
  }
}

TEST(Platform, AnExceptionsTypeAndMessageAreTheirOwn) {
  auto caught = [](auto&& thrower) -> std::exception_ptr {
    try {
      thrower();
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  };
  auto out_of_range = caught([] { throw std::out_of_range("index 7: with a colon"); });
  EXPECT_EQ(prism::platform::ExceptionType(out_of_range), "std::out_of_range");
  EXPECT_EQ(prism::platform::ExceptionMessage(out_of_range), "index 7: with a colon");
  EXPECT_EQ(prism::platform::DescribeException(out_of_range), "std::out_of_range: index 7: with a colon");
  EXPECT_EQ(prism::platform::TypeName(typeid(prism::TimeoutError)), "prism::TimeoutError");
  // A failed task's error gives what the task threw.
  auto task = caught([] { throw prism::TaskError("my::Error", "it broke", "Fn", 2, "prism: task failed"); });
  EXPECT_EQ(prism::platform::ExceptionType(task), "my::Error");
  EXPECT_EQ(prism::platform::ExceptionMessage(task), "it broke");
  auto other = caught([] { throw 42; });
  EXPECT_EQ(prism::platform::ExceptionType(other), "unknown exception");
  EXPECT_EQ(prism::platform::DescribeException(other), "unknown exception: a non-std::exception was thrown");
}

TEST(WorkerGroup, BadInputIsAClearError) {
  prism::platform::InProcessCluster cluster({.num_ranks = 2, .num_cpus = 1});
  EXPECT_THROW(WorkerGroup({.num_workers = 0}), prism::Error);
  EXPECT_THROW(WorkerGroup({.num_workers = 3, .strategy = prism::PlacementStrategy::STRICT_SPREAD}),
               prism::ResourceError) << "three workers on two ranks, one per rank: never";
  WorkerGroup all({.num_workers = 2});
  try {
    WorkerGroup({.num_workers = 1, .name = "late", .reserve_timeout_s = 1});
    FAIL() << "every CPU is reserved";
  } catch (const prism::Error& e) {
    EXPECT_NE(std::string(e.what()).find("could not reserve 1 workers"), std::string::npos) << e.what();
  }
  EXPECT_THROW(all.Start("NoSuchLoop", ""), prism::Error);
  EXPECT_THROW(CurrentWorker(), prism::Error);
}

}  // namespace
