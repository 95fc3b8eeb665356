#pragma once
// The submissions the scale tests run both on the head simulation and on a real runtime (an
// in-process cluster, an MPI job): nine one-CPU tasks on four one-CPU ranks. Four fill the
// ranks, five queue (two default, one SPREAD, one pinned hard to rank 2, one soft to rank
// 1); then the tasks end one at a time in kFinishOrder, and the queued ones take the
// ranks they free. Each waits for a gate the test opens and then runs 2 ms, long next to
// Scheduler::kPipelineWindowNs, so the scheduler never pipelines them.
#include <array>
#include <string>
#include <vector>

#include "head_simulation.h"
#include "prism/internal/core_api.h"

namespace prism_scale {

using prism::internal::SchedulingStrategy;

inline constexpr int kRanks = 4;
inline constexpr int kTasks = 9;
inline constexpr std::array<int, kTasks> kFinishOrder = {2, 0, 4, 1, 6, 3, 5, 8, 7};
/// Where each task must run (scheduler/scheduler.h's rules): the first four fill ranks
/// 0..3; a freed rank goes to the first queue (by scheduling class) whose task fits it.
inline const std::vector<int> kExpectedRanks = {0, 1, 2, 3, 2, 0, 2, 2, 1};

inline SchedulingStrategy StrategyOf(int i) {
  using Kind = SchedulingStrategy::Kind;
  SchedulingStrategy s;
  if (i == 6) s.kind = Kind::kSpread;
  if (i == 7) s = {Kind::kNodeAffinity, 2, false};
  if (i == 8) s = {Kind::kNodeAffinity, 1, true};
  return s;
}

/// The scenario on the head simulation, the tasks named `function`: the rank each task was
/// dispatched to, in submission order; empty if a task did not complete when its gate opened.
inline std::vector<int> SimulatedRun(const std::string& function) {
  prism::sim::SimulationOptions o;
  o.num_ranks = kRanks;
  o.reported_exec_ns = 2'000'000;
  prism::sim::HeadSimulation sim(o);
  sim.Hold(true);
  std::vector<prism::TaskId> ids;
  for (int i = 0; i < kTasks; ++i) ids.push_back(sim.Submit(function, {}, StrategyOf(i)));
  for (int i : kFinishOrder) {
    sim.Finish(ids[static_cast<size_t>(i)]);
    if (!sim.RunUntilCompleted(ids[static_cast<size_t>(i)], 10)) return {};
  }
  std::vector<int> ranks(kTasks, -1);
  for (const auto& [id, rank] : sim.dispatches()) {
    for (int i = 0; i < kTasks; ++i) {
      if (ids[static_cast<size_t>(i)] == id) ranks[static_cast<size_t>(i)] = rank;
    }
  }
  return ranks;
}

}  // namespace prism_scale
