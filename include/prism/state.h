#pragma once
// The state API, like `ray list ...` and `ray summary tasks`: what the head (rank 0) knows
// about the job right now. Callable from the driver and from any task or actor on any rank;
// each call is one round trip to the head.
//
//   for (const auto& a : prism::state::ListActors()) std::cout << a.name << " " << a.state;
//   prism::state::TaskFilter failed;
//   failed.state = "FAILED";
//   auto tasks = prism::state::ListTasks(failed);
//   auto summary = prism::state::SummarizeTasks();   // counts by function and state
//
// Task states (Ray's names): PENDING_ARGS_AVAIL (waiting for argument objects),
// PENDING_NODE_ASSIGNMENT (ready, waiting for resources), SUBMITTED_TO_WORKER (sent to its
// rank: queued there or running), RUNNING_IN_RAY_GET (running, blocked in Get/Wait),
// FINISHED, FAILED. Finished and failed tasks are kept in a bounded table (the most recent
// task_table_size, default 10000, see config.h); SummarizeTasks counts every task ever
// submitted, whatever the table dropped.
//
// Times are nanoseconds since the Unix epoch, from rank 0's clock.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace prism::state {

/// One rank: Prism's unit of scheduling (Ray's node/raylet). `node_id` names the host (or
/// the simulated node with PRISM_RANKS_PER_NODE) it shares with other ranks.
struct NodeState {
  int rank = 0;
  std::string node_id;
  std::string host;
  std::string state;  // "ALIVE", or "DEAD": lost (only in recovery mode; else a lost rank ends the job)
  bool is_head = false;
  std::map<std::string, double> resources_total;
  std::map<std::string, double> resources_available;
  /// Calls v(name, field) for every field, in this order (serialization, Python, JSON).
  template <class V>
  void Fields(V&& v) {
    v("rank", rank);
    v("node_id", node_id);
    v("host", host);
    v("state", state);
    v("is_head", is_head);
    v("resources_total", resources_total);
    v("resources_available", resources_available);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

struct ActorState {
  std::string actor_id;  // 16 hex digits
  std::string class_name;
  std::string name;   // SetName, else empty
  std::string state;  // PENDING_CREATION, ALIVE, RESTARTING, DEAD
  int rank = -1;      // where it lives (or lived); -1 before placement
  int num_restarts = 0;
  int max_restarts = 0;
  std::string death_cause;
  std::string placement_group_id;
  template <class V>
  void Fields(V&& v) {
    v("actor_id", actor_id);
    v("class_name", class_name);
    v("name", name);
    v("state", state);
    v("rank", rank);
    v("num_restarts", num_restarts);
    v("max_restarts", max_restarts);
    v("death_cause", death_cause);
    v("placement_group_id", placement_group_id);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

/// A state a task entered, and when.
struct TaskEvent {
  std::string state;
  int64_t time_ns = 0;
  template <class V>
  void Fields(V&& v) {
    v("state", state);
    v("time_ns", time_ns);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

struct TaskState {
  std::string task_id;  // 16 hex digits: the id of the object it returns
  std::string name;     // SetName, else the function
  std::string func_name;
  std::string type;   // NORMAL_TASK, ACTOR_CREATION_TASK, ACTOR_TASK
  std::string state;  // see the top of this file
  int rank = -1;      // where it ran (or runs); -1 before dispatch
  int attempt = 0;    // retries so far
  std::string actor_id;            // actor tasks and creations
  std::string placement_group_id;  // if it asked for one
  std::string error_type;          // FAILED: the exception type, e.g. "std::runtime_error"
  std::string error_message;
  std::vector<TaskEvent> events;  // every state change, oldest first
  template <class V>
  void Fields(V&& v) {
    v("task_id", task_id);
    v("name", name);
    v("func_name", func_name);
    v("type", type);
    v("state", state);
    v("rank", rank);
    v("attempt", attempt);
    v("actor_id", actor_id);
    v("placement_group_id", placement_group_id);
    v("error_type", error_type);
    v("error_message", error_message);
    v("events", events);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

/// Which tasks ListTasks returns: every non-empty field must match. The `limit` most
/// recently submitted matches come back, oldest first (Ray's default limit, 100).
struct TaskFilter {
  std::string state;
  std::string name;
  std::string func_name;
  std::string type;
  std::string actor_id;
  int rank = -1;
  size_t limit = 100;
  template <class V>
  void Fields(V&& v) {
    v("state", state);
    v("name", name);
    v("func_name", func_name);
    v("type", type);
    v("actor_id", actor_id);
    v("rank", rank);
    v("limit", limit);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

struct PlacementGroupState {
  std::string placement_group_id;
  std::string name;
  std::string strategy;  // PACK, SPREAD, STRICT_PACK, STRICT_SPREAD
  std::string state;     // PENDING, CREATED, RESCHEDULING (a lost rank took bundles)
  std::vector<std::map<std::string, double>> bundles;
  std::vector<int> bundle_ranks;  // where each bundle is reserved; empty while PENDING, -1 for
                                  // a bundle RESCHEDULING has not placed again yet
  template <class V>
  void Fields(V&& v) {
    v("placement_group_id", placement_group_id);
    v("name", name);
    v("strategy", strategy);
    v("state", state);
    v("bundles", bundles);
    v("bundle_ranks", bundle_ranks);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

/// Task counts of one function (or actor class, for its methods and creation).
struct TaskSummaryEntry {
  std::string func_or_class_name;
  std::string type;  // NORMAL_TASK, ACTOR_CREATION_TASK, ACTOR_TASK
  std::map<std::string, uint64_t> state_counts;  // state -> tasks now in it
  template <class V>
  void Fields(V&& v) {
    v("func_or_class_name", func_or_class_name);
    v("type", type);
    v("state_counts", state_counts);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

struct TaskSummary {
  std::map<std::string, TaskSummaryEntry> summary;  // by func_or_class_name
  uint64_t total_tasks = 0;         // NORMAL_TASK
  uint64_t total_actor_tasks = 0;   // ACTOR_TASK
  uint64_t total_actor_scheduled = 0;  // ACTOR_CREATION_TASK
  template <class V>
  void Fields(V&& v) {
    v("summary", summary);
    v("total_tasks", total_tasks);
    v("total_actor_tasks", total_actor_tasks);
    v("total_actor_scheduled", total_actor_scheduled);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

/// The job: one per Prism run (one MPI job).
struct JobState {
  std::string job_id;
  std::string status;  // RUNNING (the state API only answers while the job runs)
  std::string entrypoint;  // the driver's command line
  std::string launcher;    // srun, mpirun or none
  int64_t start_time_ns = 0;
  int num_ranks = 0;
  int driver_pid = 0;
  std::string driver_host;
  template <class V>
  void Fields(V&& v) {
    v("job_id", job_id);
    v("status", status);
    v("entrypoint", entrypoint);
    v("launcher", launcher);
    v("start_time_ns", start_time_ns);
    v("num_ranks", num_ranks);
    v("driver_pid", driver_pid);
    v("driver_host", driver_host);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

/// One worker process: a rank. Rank 0 is the DRIVER (it also runs tasks).
struct WorkerState {
  int rank = 0;
  int pid = 0;
  std::string host;
  std::string node_id;
  std::string worker_type;  // DRIVER or WORKER
  bool is_alive = true;
  uint64_t num_tasks_finished = 0;  // tasks and actor calls it completed (any outcome)
  int num_actors = 0;               // live actors it hosts
  template <class V>
  void Fields(V&& v) {
    v("rank", rank);
    v("pid", pid);
    v("host", host);
    v("node_id", node_id);
    v("worker_type", worker_type);
    v("is_alive", is_alive);
    v("num_tasks_finished", num_tasks_finished);
    v("num_actors", num_actors);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

/// Something that went wrong in the job (bounded: the most recent 1000).
struct ErrorState {
  int64_t time_ns = 0;
  std::string type;  // TASK_FAILED, ACTOR_DIED
  std::string message;
  std::string id;  // the task or actor
  int rank = -1;
  template <class V>
  void Fields(V&& v) {
    v("time_ns", time_ns);
    v("type", type);
    v("message", message);
    v("id", id);
    v("rank", rank);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

/// One rank's object store (Ray's `ray memory --stats-only` and its object store and
/// spill metrics, per rank: in Prism each rank has its own store). Bytes are of
/// serialized values; capacity is the rank's object_store_memory
/// (--prism-object-store-memory), which ClusterResources()["object_store_memory"] sums.
struct ObjectStoreState {
  int rank = 0;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;       // in memory now (values made here and copies fetched)
  uint64_t peak_used_bytes = 0;  // the most in memory at once since the rank started
  uint64_t num_objects = 0;      // in memory or spilled
  uint64_t spilled_bytes = 0;    // on disk now
  uint64_t num_spilled = 0;
  uint64_t spilled_bytes_total = 0;  // ever written to disk to make room (Ray's spilled_bytes_total)
  uint64_t num_spilled_total = 0;
  uint64_t restored_bytes_total = 0;  // ever read back from disk
  uint64_t num_restored_total = 0;
  template <class V>
  void Fields(V&& v) {
    v("rank", rank);
    v("capacity_bytes", capacity_bytes);
    v("used_bytes", used_bytes);
    v("peak_used_bytes", peak_used_bytes);
    v("num_objects", num_objects);
    v("spilled_bytes", spilled_bytes);
    v("num_spilled", num_spilled);
    v("spilled_bytes_total", spilled_bytes_total);
    v("num_spilled_total", num_spilled_total);
    v("restored_bytes_total", restored_bytes_total);
    v("num_restored_total", num_restored_total);
  }
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    Fields([&ar](const char*, auto& field) { ar & field; });
  }
};

std::vector<NodeState> ListNodes();
/// Every actor of the job, dead ones included.
std::vector<ActorState> ListActors();
std::vector<TaskState> ListTasks(const TaskFilter& filter = {});
/// Live placement groups (removed ones are gone).
std::vector<PlacementGroupState> ListPlacementGroups();
TaskSummary SummarizeTasks();
std::vector<JobState> ListJobs();
std::vector<WorkerState> ListWorkers();
/// The most recent `limit` errors, oldest first.
std::vector<ErrorState> ListErrors(size_t limit = 100);
/// The object store of the rank the caller runs on, read now (no message). Throws
/// RuntimeError before Init. Thread-safe.
ObjectStoreState GetLocalObjectStore();
/// Every rank's object store, by rank: the caller's own read in place, each other rank's
/// by a task pinned to it that asks for no CPU (so it runs even while the rank's CPUs are
/// busy). Throws TimeoutError if a rank does not answer within `timeout_ms`. Callable from
/// the driver and from tasks.
std::vector<ObjectStoreState> ListObjectStores(int64_t timeout_ms = 60000);

}  // namespace prism::state

namespace prism {

/// The job's tasks and actor calls as a Chrome trace (Ray's ray.timeline()): JSON that
/// chrome://tracing and https://ui.perfetto.dev open. One slice per ended task, actor
/// creation and actor call, from when it started running to when it ended (the state
/// API's RUNNING and FINISHED/FAILED times, rank 0's clock), in microseconds since the job
/// started; one process per rank; a rank's tasks on "tasks" rows where a task that ran
/// inside another's span on that rank nests under it; each actor on rows of its own under
/// a slice spanning its life. Covers the ended tasks rank 0 still keeps
/// (task_table_size, default the most recent 10000). Writes the JSON to `path` unless it
/// is empty, and returns it. Throws prism::Error when the file cannot be written. Callable
/// from the driver and from tasks; one round trip to the head per table.
std::string Timeline(const std::string& path = "");

}  // namespace prism
