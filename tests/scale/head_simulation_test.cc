// The head simulation (perf/head_simulation.h) under test: for the same submissions, the
// simulated ranks must see the head decide exactly what a real run decides. The real run is
// an in-process cluster (the same Head and Node classes as an MPI job, each rank with its
// own executor threads); its tasks block on a gate the test opens, one task at a time, so
// that every decision is made in the same state in both runs.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

#include "gated_scenario.h"
#include "head_simulation.h"
#include "prism/api.h"
#include "prism/platform/in_process.h"

namespace {

std::array<std::atomic<bool>, 16> g_open{};

/// Waits for its gate, then runs 2 ms (so the scheduler never pipelines it: it is long
/// next to Scheduler::kPipelineWindowNs), and says where it ran.
int ScaleGated(int i) {
  while (!g_open[static_cast<size_t>(i)].load())
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return prism::GetRuntimeContext().GetRank();
}
PRISM_REMOTE(ScaleGated);

using prism::internal::SchedulingStrategy;
using Kind = SchedulingStrategy::Kind;
using prism_scale::kExpectedRanks;
using prism_scale::kFinishOrder;
using prism_scale::kTasks;
using prism_scale::StrategyOf;

std::vector<int> RealRun() {
  for (auto& g : g_open) g.store(false);
  prism::platform::InProcessCluster cluster({.num_ranks = prism_scale::kRanks, .num_cpus = 1});
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < kTasks; ++i) {
    const SchedulingStrategy s = StrategyOf(i);
    auto task = prism::Task(ScaleGated);
    if (s.kind == Kind::kSpread) task.SetSchedulingStrategy(prism::SpreadSchedulingStrategy{});
    if (s.kind == Kind::kNodeAffinity)
      task.SetSchedulingStrategy(prism::NodeAffinitySchedulingStrategy{s.rank, s.soft});
    refs.push_back(task.Remote(i));
  }
  std::vector<int> ranks(kTasks, -1);
  for (int i : kFinishOrder) {
    g_open[static_cast<size_t>(i)].store(true);
    ranks[static_cast<size_t>(i)] = *refs[static_cast<size_t>(i)].Get(10000);
  }
  return ranks;
}


TEST(HeadSimulation, PlacesTasksAsARealRunDoes) {
  const std::vector<int> simulated = prism_scale::SimulatedRun("ScaleGated");
  ASSERT_FALSE(simulated.empty()) << "a simulated task did not complete when its gate opened";
  const std::vector<int> real = RealRun();
  EXPECT_EQ(simulated, real);
  EXPECT_EQ(real, kExpectedRanks);
}

TEST(HeadSimulation, RunsEveryTaskOnceAndCountsItsTraffic) {
  prism::sim::SimulationOptions o;
  o.num_ranks = 64;
  o.reported_exec_ns = 1000;
  prism::sim::HeadSimulation sim(o);
  for (int i = 0; i < 5000; ++i) sim.Submit("NoOp");
  ASSERT_TRUE(sim.RunUntilDone(30));
  EXPECT_EQ(sim.completed(), 5000u);
  EXPECT_EQ(sim.failed(), 0u);
  EXPECT_EQ(sim.dispatches().size(), 5000u) << "no task dispatched twice";
  std::vector<int> per_rank(64, 0);
  for (const auto& d : sim.dispatches()) ++per_rank[static_cast<size_t>(d.second)];
  EXPECT_EQ(std::count(per_rank.begin(), per_rank.end(), 0), 0) << "every rank got work";
  // Every task sent to a rank other than 0 came back as one TaskDone over the wire.
  const uint64_t remote = 5000u - static_cast<uint64_t>(per_rank[0]);
  EXPECT_EQ(sim.to_head().messages, remote);
  EXPECT_GE(sim.from_head().messages, remote);
  EXPECT_GT(sim.head_seconds(), 0);
  EXPECT_EQ(sim.head().NumTasks(), 0u);
  EXPECT_EQ(sim.head().NumObjects(), 0u) << "the driver dropped every result";
}

TEST(HeadSimulation, IdleRanksHeartbeatAtTheTransportsPace) {
  prism::sim::SimulationOptions o;
  o.num_ranks = 50;
  o.rank_timeout_s = 0.6;  // heartbeats after 0.1 s of silence, checked every 100 ms
  prism::sim::HeadSimulation sim(o);
  sim.RunFor(1.0);
  // Each of the 49 workers beats every 0.2 s (the first check after 0.1 s of silence), each
  // way: about 5 per rank in a second; never more than one per 100 ms check.
  EXPECT_GE(sim.to_head().heartbeats, 49u * 3);
  EXPECT_LE(sim.to_head().heartbeats, 49u * 10);
  EXPECT_GE(sim.from_head().heartbeats, 49u * 3);
  EXPECT_LE(sim.from_head().heartbeats, 49u * 10);
}

}  // namespace
