#pragma once
// A worker group: N workers reserved together with a real placement group (PACK, SPREAD,
// STRICT_PACK, STRICT_SPREAD), each on a known rank, running a registered loop, with
// everything they report pushed to the driver as events (no polling). prism::train runs one
// per training run; a tuner runs one per trial, several at once in one job.
//
//   // on every rank (same binary): the loop, registered by name
//   std::string Loop(std::string config) {
//     const auto& me = platform::CurrentWorker();
//     for (int step = 0; step < 10 && !me.StopRequested(); ++step) me.Report("step " + ...);
//     return "done";
//   }
//   PRISM_REMOTE(Loop);
//
//   // on the driver
//   platform::WorkerGroup group({.num_workers = 2, .strategy = PlacementStrategy::SPREAD});
//   group.Start(platform::RegisteredName(Loop), config);
//   while (group.Running()) {
//     auto e = group.Next(10000);               // a report, or a worker that ended
//     if (e && e->kind == platform::WorkerEvent::kFailed) group.Abort(30000);
//   }
//
// A group keeps its reservation until it is destroyed, so a restart (Start again after
// every worker ended) runs on the same ranks.
//
// A worker may hand ObjectRefs back in its result or reports (platform::ToBytes of a value
// holding them, as prism::data's all-to-all members return their output blocks): the group
// holds each worker's task result, which the runtime counts as containing every ref the
// worker serialized, until the next Start or the group's end. Read them back (FromBytes)
// before either; the ObjectRefs read keep the objects alive from then on.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/placement_group.h"

namespace prism::platform {

/// Where a worker runs.
struct WorkerInfo {
  int index = 0;             // 0..num_workers-1
  int rank = -1;             // its MPI rank
  std::string node_id;
  int local_rank = 0;        // among the group's workers on its node
  int local_world_size = 1;  // the group's workers on its node
  int node_rank = 0;         // its node among the group's nodes, in order of first worker
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& index& rank& node_id& local_rank& local_world_size& node_rank;
  }
};

struct WorkerGroupOptions {
  int num_workers = 1;
  std::map<std::string, double> resources_per_worker;  // empty: {CPU: 1}
  PlacementStrategy strategy = PlacementStrategy::PACK;
  /// Every worker in a process (rank) of its own: for workers that join one MPI
  /// communicator, like prism::train's.
  bool one_worker_per_rank = false;
  /// Empty, or one world rank per worker: worker i runs on ranks[i] (its bundle holds a
  /// sliver of "rank:<ranks[i]>"), as prism::rl pins its learners to ranks 1..n.
  std::vector<int> ranks;
  std::string name = "workers";  // in messages
  int reserve_timeout_s = 60;    // how long the reservation may wait for resources
  /// SIGUSR1/SIGTERM on the driver's rank become kPreempted events (see prism/preemption.h).
  bool preemption_events = false;
};

/// What the driver hears from its workers, in the order each worker sent it.
struct WorkerEvent {
  enum Kind { kReport, kFinished, kFailed, kPreempted };
  Kind kind = kReport;
  int worker = -1;   // index; -1 for kPreempted
  int attempt = 0;   // which Start it belongs to (0, 1, ...)
  std::string bytes;  // kReport: what was reported; kFinished: the loop's result;
                      // kFailed: the error, as "<type>: <message>" (for people)
  std::string error_type;  // kFailed: the exception's type (platform::ExceptionType), to
                           // decide by, e.g. a library's own error type
  std::string message;     // kFailed: its message (platform::ExceptionMessage)
  int signal = 0;     // kPreempted: SIGUSR1 or SIGTERM
};

class WorkerGroup {
 public:
  /// Reserves the workers (all or none) and waits up to reserve_timeout_s for them.
  /// Throws ResourceError if the cluster could never hold them, Error if they are not free
  /// within the timeout (naming what holds the resources) or for bad options.
  explicit WorkerGroup(WorkerGroupOptions options);
  /// Aborts workers still running (waiting up to 30 s for them) and gives the reservation back.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  const std::vector<WorkerInfo>& workers() const;
  const std::string& id() const;  // unique in the job
  /// The current attempt: 0 after the first Start, 1 after the second, ...
  int attempt() const;

  /// Starts a new attempt: the function registered as `loop` (std::string(std::string))
  /// on every worker, given `config`. Throws Error if workers of the last attempt still
  /// run (wait for their events, or Abort) or if `loop` is not registered.
  void Start(const std::string& loop, const std::string& config);
  /// True while some worker of the current attempt has not ended (no kFinished/kFailed yet).
  bool Running() const;
  /// The next event of the current attempt (older attempts' are dropped), waiting up to
  /// `timeout_ms`; nullopt on timeout. Not thread-safe: one reader per group.
  std::optional<WorkerEvent> Next(int64_t timeout_ms);
  /// Asks every worker to stop at its next StopRequested() check. Does not wait.
  void RequestStop();
  /// Runs every worker's abort hooks (which break it out of a collective, say), then reads
  /// events until every worker ended or `timeout_ms` passed. Events read meanwhile (reports,
  /// the workers' ends) are kept for Next. Returns whether every worker ended.
  bool Abort(int64_t timeout_ms);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A worker's view of its group, on the worker's thread (CurrentWorker()).
class WorkerContext {
 public:
  const WorkerInfo& info() const { return info_; }
  const std::vector<WorkerInfo>& group() const { return group_; }
  const std::string& group_id() const { return group_id_; }
  int attempt() const { return attempt_; }
  /// Sends `bytes` to the driver: a kReport event, after this worker's earlier ones.
  void Report(const std::string& bytes) const;
  /// True once the driver called RequestStop.
  bool StopRequested() const;
  /// `hook` runs (on another thread) when the driver aborts the group, or at once if it
  /// already did; until this worker's loop ends. It must be quick and must not throw.
  void OnAbort(std::function<void()> hook) const;

  // Set up by the group's worker task.
  WorkerContext(std::string group_id, std::string channel, int attempt, WorkerInfo info,
                std::vector<WorkerInfo> group)
      : group_id_(std::move(group_id)), channel_(std::move(channel)), attempt_(attempt),
        info_(std::move(info)), group_(std::move(group)) {}

 private:
  std::string group_id_, channel_;
  int attempt_;
  WorkerInfo info_;
  std::vector<WorkerInfo> group_;
};

/// The worker whose loop runs on this thread. Throws Error outside a WorkerGroup's loop.
const WorkerContext& CurrentWorker();

}  // namespace prism::platform
