#pragma once
// The head's record-keeping for the state API and the internal KV: the job's description,
// the KV store, ended tasks (TaskTable), recent errors and per-rank counters. The managers
// write here as things happen; the list calls read it together with their own live state.
// Pure logic: the head serialises calls.

#include <deque>
#include <string>
#include <vector>

#include "head/kv_store.h"
#include "head/task_table.h"
#include "prism/state.h"
#include "scheduler/scheduler.h"

namespace prism::internal {

/// What the state API reports about the job and its ranks (set once at Init).
struct JobInfo {
  std::string job_id;
  std::string entrypoint;
  std::string launcher;
  int64_t start_time_ns = 0;
  std::vector<std::string> hosts;  // per rank
  std::vector<int> pids;           // per rank
  size_t task_table_size = 10000;  // ended tasks kept for ListTasks
};

class StateTables {
 public:
  StateTables(int num_ranks, const std::vector<std::string>& node_of_rank)
      : node_of_rank_(node_of_rank), finished_per_rank_(num_ranks, 0) {}

  void SetJobInfo(JobInfo info);
  KvStore& kv() { return kv_; }
  TaskTable& tasks() { return task_table_; }

  /// Keeps the most recent kMaxErrors errors for ListErrors.
  static constexpr size_t kMaxErrors = 1000;
  void RecordError(const char* type, const std::string& message, ObjectId id, int rank);
  /// An ended task (its rank finished one more, a failure is an error too).
  void TaskEnded(TaskRecord&& record, int from);

  std::vector<state::NodeState> ListNodes(const Scheduler& scheduler) const;
  std::vector<state::JobState> ListJobs(int num_ranks) const;
  std::vector<state::WorkerState> ListWorkers(const std::vector<int>& actors_per_rank) const;
  std::vector<state::ErrorState> ListErrors(size_t limit) const;

 private:
  const std::vector<std::string>& node_of_rank_;
  JobInfo job_;
  KvStore kv_;
  TaskTable task_table_{10000};
  std::deque<state::ErrorState> errors_;  // the most recent kMaxErrors
  std::vector<uint64_t> finished_per_rank_;
};

}  // namespace prism::internal
