#include "head/task_table.h"

#include <algorithm>
#include <chrono>

namespace prism::internal {

const char* TaskPhaseName(TaskPhase phase) {
  static const char* const kNames[] = {"PENDING_ARGS_AVAIL", "PENDING_NODE_ASSIGNMENT",
                                       "SUBMITTED_TO_WORKER", "RUNNING", "RUNNING_IN_RAY_GET",
                                       "FINISHED", "FAILED"};
  static_assert(std::size(kNames) == kNumTaskPhases);
  return kNames[static_cast<size_t>(phase)];
}

const char* TaskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kActorCreation: return "ACTOR_CREATION_TASK";
    case TaskKind::kActorCall: return "ACTOR_TASK";
    default: return "NORMAL_TASK";
  }
}

int64_t WallNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

state::TaskState ToTaskState(const TaskRecord& r) {
  state::TaskState s;
  s.task_id = r.id.Hex();
  s.func_name = r.function ? *r.function : "";
  s.name = r.name.empty() ? s.func_name : r.name;
  s.type = TaskKindName(r.kind);
  s.state = TaskPhaseName(r.phase);
  s.rank = r.rank;
  s.attempt = r.attempt;
  if (!r.actor.IsNil()) s.actor_id = r.actor.Hex();
  s.placement_group_id = r.placement_group;
  if (r.error) {
    s.error_type = r.error->type;
    s.error_message = r.error->message;
  }
  for (size_t p = 0; p < kNumTaskPhases; ++p) {
    if (r.times[p] != 0) s.events.push_back({TaskPhaseName(static_cast<TaskPhase>(p)), r.times[p]});
  }
  std::stable_sort(s.events.begin(), s.events.end(),
                   [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
  return s;
}

void TaskTable::Ended(TaskRecord&& record) {
  static const std::string kUnknown;
  auto& slot = Slot(record.function ? *record.function : kUnknown);
  record.function = &slot.first;
  slot.second.kind = record.kind;
  ++(record.phase == TaskPhase::kFailed ? slot.second.failed : slot.second.finished);
  if (capacity_ == 0) return;
  if (ended_.size() < capacity_) {
    ended_.push_back(std::move(record));
  } else {
    ended_[next_] = std::move(record);
    next_ = (next_ + 1) % capacity_;
  }
}

namespace {
bool Matches(const state::TaskFilter& f, const TaskRecord& r) {
  static const std::string kNone;
  const std::string& function = r.function ? *r.function : kNone;
  if (!f.state.empty() && f.state != TaskPhaseName(r.phase)) return false;
  if (!f.name.empty() && f.name != (r.name.empty() ? function : r.name)) return false;
  if (!f.func_name.empty() && f.func_name != function) return false;
  if (!f.type.empty() && f.type != TaskKindName(r.kind)) return false;
  if (!f.actor_id.empty() && (r.actor.IsNil() || f.actor_id != r.actor.Hex())) return false;
  if (f.rank >= 0 && f.rank != r.rank) return false;
  return true;
}
int64_t Submitted(const TaskRecord& r) {
  for (int64_t t : r.times) {
    if (t != 0) return t;
  }
  return 0;
}
}  // namespace

std::vector<state::TaskState> TaskTable::List(const state::TaskFilter& filter,
                                              const std::vector<TaskRecord>& live) const {
  std::vector<const TaskRecord*> hits;
  ForEachEnded([&](const TaskRecord& r) {
    if (Matches(filter, r)) hits.push_back(&r);
  });
  for (const auto& r : live) {
    if (Matches(filter, r)) hits.push_back(&r);
  }
  std::stable_sort(hits.begin(), hits.end(), [](const TaskRecord* a, const TaskRecord* b) {
    return Submitted(*a) < Submitted(*b);
  });
  size_t first = hits.size() > filter.limit ? hits.size() - filter.limit : 0;
  std::vector<state::TaskState> out;
  out.reserve(hits.size() - first);
  for (size_t i = first; i < hits.size(); ++i) out.push_back(ToTaskState(*hits[i]));
  return out;
}

state::TaskSummary TaskTable::Summarize(const std::vector<TaskRecord>& live) const {
  state::TaskSummary s;
  auto entry = [&](const std::string& function, TaskKind kind) -> state::TaskSummaryEntry& {
    auto& e = s.summary[function];
    e.func_or_class_name = function;
    e.type = TaskKindName(kind);
    return e;
  };
  auto total = [&](TaskKind kind) -> uint64_t& {
    return kind == TaskKind::kActorCall       ? s.total_actor_tasks
           : kind == TaskKind::kActorCreation ? s.total_actor_scheduled
                                              : s.total_tasks;
  };
  for (const auto& [function, c] : counts_) {
    if (c.finished + c.failed == 0) continue;  // interned for live tasks only
    auto& e = entry(function, c.kind);
    if (c.finished) e.state_counts["FINISHED"] += c.finished;
    if (c.failed) e.state_counts["FAILED"] += c.failed;
    total(c.kind) += c.finished + c.failed;
  }
  for (const auto& r : live) {
    ++entry(r.function ? *r.function : "", r.kind).state_counts[TaskPhaseName(r.phase)];
    ++total(r.kind);
  }
  return s;
}

}  // namespace prism::internal
