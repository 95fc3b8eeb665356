#include "head/state_tables.h"

#include <unistd.h>

namespace prism::internal {

void StateTables::SetJobInfo(JobInfo info) {
  task_table_ = TaskTable(info.task_table_size);
  job_ = std::move(info);
}

void StateTables::RecordError(const char* type, const std::string& message, ObjectId id, int rank) {
  if (errors_.size() == kMaxErrors) errors_.pop_front();
  errors_.push_back({WallNowNs(), type, message, id.Hex(), rank});
}

void StateTables::TaskEnded(TaskRecord&& record, int from) {
  if (from >= 0) ++finished_per_rank_[from];
  if (record.error) RecordError("TASK_FAILED", record.error->Render(), record.id, record.rank);
  task_table_.Ended(std::move(record));
}

std::vector<state::NodeState> StateTables::ListNodes(const Scheduler& scheduler) const {
  std::vector<state::NodeState> out;
  for (int r = 0; r < scheduler.NumRanks(); ++r) {
    state::NodeState n;
    n.rank = r;
    n.node_id = node_of_rank_[r];
    n.host = r < static_cast<int>(job_.hosts.size()) ? job_.hosts[r] : node_of_rank_[r];
    n.state = scheduler.IsLost(r) ? "DEAD" : "ALIVE";
    n.is_head = r == 0;
    n.resources_total = scheduler.Capacity(r).ToMap();
    n.resources_available = scheduler.Free(r).ToMap();
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<state::JobState> StateTables::ListJobs(int num_ranks) const {
  state::JobState j;
  j.job_id = job_.job_id;
  j.status = "RUNNING";
  j.entrypoint = job_.entrypoint;
  j.launcher = job_.launcher;
  j.start_time_ns = job_.start_time_ns;
  j.num_ranks = num_ranks;
  j.driver_pid = job_.pids.empty() ? static_cast<int>(getpid()) : job_.pids[0];
  j.driver_host = job_.hosts.empty() ? node_of_rank_[0] : job_.hosts[0];
  return {j};
}

std::vector<state::WorkerState> StateTables::ListWorkers(const std::vector<int>& actors_per_rank) const {
  std::vector<state::WorkerState> out;
  for (int r = 0; r < static_cast<int>(actors_per_rank.size()); ++r) {
    state::WorkerState w;
    w.rank = r;
    w.pid = r < static_cast<int>(job_.pids.size()) ? job_.pids[r] : 0;
    w.host = r < static_cast<int>(job_.hosts.size()) ? job_.hosts[r] : node_of_rank_[r];
    w.node_id = node_of_rank_[r];
    w.worker_type = r == 0 ? "DRIVER" : "WORKER";
    w.num_tasks_finished = finished_per_rank_[r];
    w.num_actors = actors_per_rank[r];
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<state::ErrorState> StateTables::ListErrors(size_t limit) const {
  size_t first = errors_.size() > limit ? errors_.size() - limit : 0;
  return {errors_.begin() + static_cast<std::ptrdiff_t>(first), errors_.end()};
}

}  // namespace prism::internal
