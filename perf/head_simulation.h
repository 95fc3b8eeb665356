#pragma once
// A head simulation: the real head (src/head, src/scheduler: the Head class every MPI job
// runs on rank 0) driven in one process by N simulated ranks, for measuring what the head
// costs as ranks grow (perf/head_simulation_benchmark.cc) and testing that what it decides
// is what a real run decides (tests/scale/head_simulation_test.cc).
//
// The head talks through its `send` function, as in the unit tests' fake transport
// (tests/unit/head_fixture.h). Everything runs on one thread, in rounds:
//   1. simulated ranks whose tasks are due (dispatched at least `task_delay_ns` ago) report
//      them: TaskDone encoded with the real wire codec into one batch per rank, as a rank's
//      transport batches what its threads send;
//   2. rank 0's side: each batch is decoded and posted to the head (Head::Post, the MPI
//      progress thread's path); whatever the head sends is encoded into a batch per
//      destination (the transport's Send runs under the head's lock in the real runtime);
//   3. the messages the head sent are handed to their ranks: a DispatchTask starts a
//      simulated task; the driver (rank 0) takes each ObjectReady of a task it submitted as
//      its result and drops its ref (RefUpdate), as a Get followed by the ref going out of
//      scope does; it keeps an actor creation's ref (the handle), so the actor lives on.
// Rank 0's node passes structs to the head without encoding, as in the real runtime.
// Heartbeats follow MpiTransport: every rank sends one to rank 0 when it sent nothing else
// for rank_timeout/6, rank 0 sends one to each such rank, and rank 0 checks every rank's
// silence every 100 ms.
//
// What it leaves out, so the figures are rank 0's CPU for decoding, the head and encoding:
// MPI itself (MPI_Isend/MPI_Improbe per batch, the network) and rank 0's node manager
// beyond the driver's submit, result and ref drop. `head_seconds` is the CPU time of
// steps 2 and the driver's calls into the head; the simulated ranks' own work (building and
// encoding their TaskDone) is not in it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "head/head.h"

namespace prism::sim {

struct SimulationOptions {
  int num_ranks = 100;
  double cpus_per_rank = 1;
  /// Ranks per simulated node (node ids for placement-group strategies); 1: a node per rank.
  int ranks_per_node = 1;
  /// How long a simulated task runs before its rank reports it (wall time); 0: at once.
  int64_t task_delay_ns = 0;
  /// The run time TaskDone reports (the scheduler's pipelining estimate); 0: task_delay_ns.
  uint64_t reported_exec_ns = 0;
  /// PRISM_RANK_TIMEOUT: heartbeats go out after rank_timeout_s/6 of silence.
  double rank_timeout_s = 30;
};

/// Control traffic counted at rank 0, in one direction.
struct Traffic {
  uint64_t messages = 0;
  uint64_t batches = 0;  // one MPI message each in the real transport
  uint64_t bytes = 0;
  uint64_t heartbeats = 0;
};

class HeadSimulation {
 public:
  explicit HeadSimulation(SimulationOptions options);

  internal::Head& head() { return *head_; }
  int num_ranks() const { return options_.num_ranks; }

  /// The driver (rank 0) submits `spec` (its id and submitter are filled in; its demand as
  /// given, empty for none); returns the id. The head may dispatch it at once.
  TaskId Submit(internal::TaskSpec spec);
  /// `count` tasks of `function` ({CPU: 1}), posted in one go (rank 0's time is read
  /// once around them, not per task).
  void SubmitMany(int count, const std::string& function);
  /// A task of `function` asking for `demand` (default {CPU: 1}).
  TaskId Submit(const std::string& function, internal::ResourceSet demand = {},
                internal::SchedulingStrategy strategy = {});

  /// Runs rounds until every submitted task has completed (its result reached the driver)
  /// or `timeout_s` passes. Returns true if all completed.
  bool RunUntilDone(double timeout_s);
  /// Runs rounds for `seconds` of wall time: what idle ranks cost (heartbeats).
  void RunFor(double seconds);
  /// Runs one round; true if anything happened.
  bool Round();

  /// Makes room for `tasks` dispatches in the simulation's own records, so that a
  /// memory reading around submits sees the head's growth only.
  void Reserve(size_t tasks);
  /// While held, simulated ranks keep the tasks dispatched to them (nothing completes)
  /// until Finish names one; Hold(false) lets every held task run.
  void Hold(bool hold);
  /// A held task ends now (its rank reports it in the next round).
  void Finish(TaskId id);
  /// Runs rounds until task `id`'s result reached the driver, up to `timeout_s`.
  bool RunUntilCompleted(TaskId id, double timeout_s);

  // ---- What happened ----
  /// Rank of each dispatched task (its first dispatch), in dispatch order.
  const std::vector<std::pair<TaskId, int>>& dispatches() const { return dispatches_; }
  uint64_t submitted() const { return submitted_; }
  uint64_t completed() const { return completed_; }
  uint64_t failed() const { return failed_; }
  /// Tasks dispatched and not yet reported, over all simulated ranks.
  size_t running() const { return due_.size() + held_.size(); }
  /// Rank 0's side's CPU time (decode, head, encode: this thread's CPU clock around
  /// those steps, so time the machine gave to other processes is not in it), seconds.
  double head_seconds() const { return head_ns_ * 1e-9; }
  const Traffic& to_head() const { return to_head_; }
  const Traffic& from_head() const { return from_head_; }
  void ResetCounters();

 private:
  using Clock = std::chrono::steady_clock;
  /// The options of a task of `function`: a recent copy while equal, as a node shares them.
  std::shared_ptr<const internal::TaskOptions> OptionsOf(const std::string& function, internal::ResourceSet demand,
                                                         internal::SchedulingStrategy strategy);
  struct Due {
    int64_t at_ns;
    int rank;
    TaskId id;
    int attempt;
    bool operator>(const Due& o) const { return at_ns > o.at_ns; }
  };
  int64_t NowNs() const;
  static int64_t ThreadCpuNs();
  /// Hands what the head sent to its ranks (and the driver); HandleSent repeats it until
  /// the driver has dropped every result it got.
  void HandOn();
  /// Rank 0's side of one round: incoming batches to the head, then the head's sends out.
  void Deliver(int from, internal::Message&& m);
  void HandleSent();
  void Heartbeats(int64_t now);

  SimulationOptions options_;
  Clock::time_point start_;
  std::unique_ptr<internal::Head> head_;
  std::vector<std::pair<int, internal::Message>> sent_;  // by the head, not yet handed on
  std::vector<ObjectId> drops_;                          // results the driver got, to drop
  std::vector<internal::Buffer> out_batches_;            // rank 0 -> rank r, this round
  std::vector<internal::Buffer> in_batches_;             // rank r -> rank 0, this round
  std::vector<int> in_ranks_;                            // ranks with a batch this round
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due_;
  std::map<TaskId, Due> held_;  // dispatched while held
  std::set<TaskId> completed_ids_;
  std::set<TaskId> actors_;  // creations submitted: their handles stay with the driver
  std::vector<std::pair<TaskId, int>> dispatches_;
  std::vector<int64_t> rank_last_sent_;  // each rank's last send to rank 0
  std::vector<int64_t> head_last_sent_;  // rank 0's last send to each rank
  std::vector<int64_t> head_last_heard_;
  int64_t last_liveness_check_ = 0;
  uint64_t next_id_ = 1;
  internal::RecentOptions recent_options_;  // OptionsOf's
  uint64_t submitted_ = 0, completed_ = 0, failed_ = 0;
  int64_t head_ns_ = 0;
  Traffic to_head_, from_head_;
  bool hold_ = false;
  bool track_completed_ = false;  // completed_ids_ kept once Hold was used
};

/// Each simulated rank's capacity as Init builds it (CPU, memory, object_store_memory,
/// rank:N), for `options`.
std::vector<internal::ResourceSet> SimulatedCapacities(const SimulationOptions& options);

}  // namespace prism::sim
