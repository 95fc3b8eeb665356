#pragma once
// prism::Timeline: the job's tasks and actor calls as a Chrome trace (the JSON format
// chrome://tracing and https://ui.perfetto.dev open), like Ray's ray.timeline().
//
// One "X" (complete) event per ended task, actor creation and actor call, from the state
// API's timestamps: it starts when the task started running (RUNNING) and ends when the
// head recorded it FINISHED or FAILED. ts and dur are microseconds since the job started.
// pid is the rank. Rows (tid) are laid out so that events on one row nest properly, as the
// trace format requires: plain tasks of a rank go to "tasks" rows, each placed on the
// first row where it either starts after the row's open events end or fits inside the
// innermost one (so a nested task that ran on its parent's rank, while the parent waited
// in Get, shows under its parent); each actor gets rows of its own, topped by one event
// spanning its life (creation to its last call) inside which its calls nest.

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "prism/state.h"

namespace prism::internal {

/// Rows of one kind (a rank's tasks, or one actor's) start at these tids.
inline constexpr int kTimelineTaskTid = 1;
inline constexpr int kTimelineActorTid = 1000;

/// The trace of `tasks` (ended ones; others are skipped), naming ranks after `workers`
/// and actors after `actors`. Times are relative to `origin_ns` (Unix ns). Pure function.
nlohmann::json TimelineTrace(const std::vector<state::TaskState>& tasks,
                             const std::vector<state::ActorState>& actors,
                             const std::vector<state::WorkerState>& workers, int64_t origin_ns);

}  // namespace prism::internal
