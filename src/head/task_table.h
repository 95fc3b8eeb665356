#pragma once
// The head's task table behind prism::state::ListTasks and SummarizeTasks.
//
// Live tasks stay in the head's own task map (they carry their timestamps there); when a
// task ends, a compact record of it comes here. Records of ended tasks are kept in a ring
// of `capacity` (the most recent ones): a million tasks never grow rank 0 past it. Counts
// of ended tasks per function are exact and never dropped. Pure logic: no locks, no I/O.

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "prism/internal/ids.h"
#include "prism/state.h"
#include "common/protocol.h"

namespace prism::internal {

/// The states of prism/state.h, in the order a task moves through them.
enum class TaskPhase : uint8_t {
  kPendingArgs,  // PENDING_ARGS_AVAIL
  kPendingNode,  // PENDING_NODE_ASSIGNMENT
  kSubmitted,    // SUBMITTED_TO_WORKER
  kRunning,      // RUNNING (known once it ended: its run time is reported with the result)
  kBlocked,      // RUNNING_IN_RAY_GET
  kFinished,     // FINISHED
  kFailed,       // FAILED
};
inline constexpr size_t kNumTaskPhases = 7;
const char* TaskPhaseName(TaskPhase phase);
const char* TaskKindName(TaskKind kind);

/// Nanoseconds since the Unix epoch.
int64_t WallNowNs();

/// When a task entered each phase (0: never).
using TaskTimes = std::array<int64_t, kNumTaskPhases>;

/// What ListTasks shows of one task, live or ended. Made for every task on the head's hot
/// path, so it allocates nothing in the common case: the function name is interned by the
/// table and `name` stays empty unless SetName gave another one.
struct TaskRecord {
  TaskId id;
  TaskKind kind = TaskKind::kTask;
  TaskPhase phase = TaskPhase::kPendingArgs;
  ObjectId actor;
  const std::string* function = nullptr;  // interned by TaskTable::Intern
  std::string name;                       // empty: same as the function
  std::string placement_group;
  int rank = -1;
  int attempt = 0;
  TaskTimes times{};
  std::shared_ptr<const ErrorInfo> error;  // kFailed
};

state::TaskState ToTaskState(const TaskRecord& r);

class TaskTable {
 public:
  explicit TaskTable(size_t capacity) : capacity_(capacity) {}
  TaskTable(TaskTable&&) = default;
  TaskTable& operator=(TaskTable&&) = default;

  /// The table's copy of a function name (stable for the table's life) for
  /// TaskRecord::function.
  const std::string* Intern(const std::string& function) { return &Slot(function).first; }

  /// Records an ended task (phase kFinished or kFailed; function interned here), dropping
  /// the oldest record when the ring is full.
  void Ended(TaskRecord&& record);

  /// Tasks matching `filter` among the ended ones and `live` (records of tasks still
  /// running or waiting), the `filter.limit` most recently submitted, oldest first.
  std::vector<state::TaskState> List(const state::TaskFilter& filter,
                                     const std::vector<TaskRecord>& live) const;
  /// Counts by function and state: exact for ended tasks, plus `live`.
  state::TaskSummary Summarize(const std::vector<TaskRecord>& live) const;

  size_t NumRecords() const { return ended_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  struct Counts {
    TaskKind kind = TaskKind::kTask;
    uint64_t finished = 0;
    uint64_t failed = 0;
  };
  std::pair<const std::string, Counts>& Slot(const std::string& function) {
    // Tasks end in runs of one function: compare with the last one before hashing.
    if (last_slot_ == nullptr || last_slot_->first != function) {
      last_slot_ = &*counts_.try_emplace(function).first;  // nodes never move
    }
    return *last_slot_;
  }
  /// Ended records, oldest first.
  template <typename F>
  void ForEachEnded(F&& f) const {
    for (size_t i = 0; i < ended_.size(); ++i) f(ended_[(next_ + i) % ended_.size()]);
  }

  size_t capacity_;
  // A ring: grows to capacity_, then next_ is the oldest record, overwritten next.
  std::vector<TaskRecord> ended_;
  size_t next_ = 0;
  std::unordered_map<std::string, Counts> counts_;  // by function; nodes never move
  std::pair<const std::string, Counts>* last_slot_ = nullptr;  // Slot's last
};

}  // namespace prism::internal
