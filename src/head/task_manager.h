#pragma once
// The head's tasks: every submitted task until it ends, through the protocol's steps
// (scheduler/scheduler.h lists them): submit, resolve arguments, place, dispatch, complete
// (with retries), release. Ready tasks that found no room wait in FIFO queues, one per
// scheduling class (function, demand, placement-group bundle). Actor calls never wait
// here: the actor manager says where they go. Pure logic: the head serialises calls.

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/protocol.h"
#include "head/object_manager.h"
#include "head/placement_group_manager.h"
#include "head/state_tables.h"
#include "head/task_table.h"
#include "scheduler/scheduler.h"

namespace prism::internal {

class ActorManager;

/// A task's scheduling class: its function, placement group and bundle, strategy and
/// demand. Tasks of one class wait in one FIFO queue. `SameClass` compares what
/// `ClassKey` spells (a test holds them to each other).
std::string ClassKey(const TaskOptions& o);
bool SameClass(const TaskOptions& a, const TaskOptions& b);

class TaskManager {
 public:
  using SendFn = std::function<void(int dest, Message&& msg)>;
  TaskManager(SendFn send, Scheduler& scheduler, ObjectManager& objects,
              PlacementGroupManager& groups, ActorManager& actors, StateTables& tables)
      : send_(std::move(send)), scheduler_(scheduler), objects_(objects), groups_(groups),
        actors_(actors), tables_(tables) {
    objects_.SetResultClaim([this](ObjectId id) { return ClaimResult(id); });
  }

  void OnSubmit(int from, std::shared_ptr<TaskSpec> spec);
  void OnTaskDone(int from, TaskDone&& done);
  void OnTaskBlocked(int from, const TaskBlocked& m);
  /// prism::Cancel or a timeout (see CancelTask): a task not yet sent to a rank fails now
  /// with TaskCancelled; one sent is told to its rank, and a plain task's result is
  /// TaskCancelled however it ends (no retry). Unknown (finished) tasks: no effect.
  void OnCancel(const CancelTask& m);
  /// A streaming generator yielded a value: it becomes an object of the consumer's, sent
  /// on in order; a retry's replay of values reported before is dropped.
  void OnGeneratorItem(int from, GeneratorItem&& item);
  /// The consumer took values (backpressure) or dropped its generator.
  void OnGeneratorConsumed(int from, const GeneratorConsumed& m);
  /// `rank` was lost (recovery mode): every task sent to it ends as its process had
  /// crashed (WorkerCrashedError: retried on a live rank within max_retries, Ray's rule
  /// for a lost worker); actor calls there fail as their actor died (the actor manager
  /// ended it first).
  void OnRankLost(int rank, const std::string& why);
  /// Recovery mode: keep the spec of each task whose value stays on a worker rank, so
  /// that the value can be rebuilt if that rank is lost (Rebuild).
  void KeepLineage(bool keep) { keep_lineage_ = keep; }
  /// Runs a finished task again (its next attempt) because the only copy of its value was
  /// on `lost_rank`; its results are pending again (ObjectManager::OnRankLost). Arguments
  /// freed since fail it with ObjectLostError.
  void Rebuild(const std::shared_ptr<const TaskSpec>& lineage, int lost_rank);
  /// Ends a task that has not completed with `error` (its result object fails with it).
  void Fail(TaskId id, const ErrorInfo& error);
  /// Places pending groups that fit, then dispatches queued tasks that fit, in order.
  void DrainQueues();

  bool IsKnown(TaskId id) const { return tasks_.count(id) > 0; }
  /// The task's display name ("" if unknown).
  std::string NameOf(TaskId id) const;
  /// True while the task is known and not yet sent to a rank.
  bool IsWaitingForRank(TaskId id) const;
  /// Placement group `group` is going: its running tasks hold their resources as plain
  /// tasks of their rank from now on. Returns the tasks that had not started (the caller
  /// fails them once the group's actors are dead). Actor creations are left out: their
  /// actors die with the group.
  std::vector<TaskId> DetachFromGroup(const std::string& group);

  /// Warnings for tasks waiting on resources that only an actor's end or a placement
  /// group's removal can free: queued at the head and fitting on no rank if every running
  /// task ended, or sent ahead to a rank (pipelined) whose actors and groups leave no room
  /// for them. One line per kind of task, the first time its oldest has waited `bound_ns`
  /// (from `now`), then each time that wait doubles. Tasks in a placement group are left
  /// out (their bundle's own tasks free it as they end). Walks the live tasks when any
  /// actor or group holds resources: for a once-a-second caller.
  std::vector<std::string> WaitingWarnings(int64_t now, int64_t bound_ns);

  /// The state-API view of the live tasks.
  std::vector<TaskRecord> LiveRecords();
  size_t Size() const { return tasks_.size(); }

 private:
  /// When a live task entered each of the phases it can be in on the head (kPendingArgs
  /// to kBlocked, indexed by TaskPhase); the rest are known once it ends.
  using LiveTimes = std::array<int64_t, static_cast<size_t>(TaskPhase::kBlocked) + 1>;
  static TaskTimes AllTimes(const LiveTimes& live) {
    TaskTimes all{};
    std::copy(live.begin(), live.end(), all.begin());
    return all;
  }
  struct Task {
    std::shared_ptr<TaskSpec> spec;
    int unresolved = 0;
    int rank = -1;       // where it was dispatched, -1 while waiting
    int bundle = -1;     // bundle of its placement group it runs in, -1: none
    bool blocked = false;
    bool cancelled = false;  // cancelled while on its rank: its error is in cancel_errors_
    bool implicit_result = false;  // its one result has no object entry yet (ClaimResult)
    LiveTimes times{};       // when it entered each phase, for the state API

    Holding holding() const { return {rank, spec->options->placement_group, bundle}; }
  };

  /// A streaming generator task's stream, as the head sees it.
  struct Generator {
    uint64_t reported = 0;         // values sent to the consumer: the stream so far
    uint64_t attempt_yielded = 0;  // values the current attempt yielded (replays included)
    uint64_t consumed = 0;         // values the consumer took (with backpressure)
    uint64_t acked = 0;            // the count the current attempt's producer last heard
    bool dropped = false;          // the consumer's generator is gone
  };

  /// Tells the producer on `rank` how many values were taken, if it may be waiting for
  /// that (it yielded its limit beyond what it heard) and there is news.
  void AckIfWaiting(TaskId id, const TaskSpec& spec, Generator& g, int rank);
  void RouteActorCall(Task& task);
  /// Counts the task's pending by-reference arguments (it waits for them as their
  /// dependent); fails it and returns false if one is gone or failed.
  bool WaitForArgs(Task& task);
  /// Sends the calls that waited for `actor`'s creation to be placed on `rank`.
  void SendWaitingCalls(ObjectId actor, int rank, int bundle, int64_t now);
  /// Places actors restarting after their rank was lost (ActorManager::RestartsToPlace),
  /// or ends those no live rank can host.
  void PlaceRestarts();
  bool placing_restarts_ = false;
  /// Why no live rank can ever run a task or actor with these options (pinned to a lost
  /// rank, or resources only lost ranks had), or "" if one may.
  std::string NeverPlaceable(const TaskOptions& options) const;
  /// `now`: WallNowNs() if the caller just read it (0: read it here).
  void Enqueue(TaskId id, int64_t now = 0);
  /// Places and sends the task; false if it must wait for room.
  bool TryDispatch(Task& task, int64_t now = 0);
  /// Records the task's result (or failure) and finishes its bookkeeping.
  void Complete(TaskId id, TaskDone&& done, int from);
  /// Moves an ended task's record into the state tables.
  void RecordEnded(const Task& task, const TaskDone& done, const std::shared_ptr<ErrorInfo>& failure,
                   int from);
  /// The queue of `spec`'s scheduling class. Tasks come in runs of one class: the last
  /// class's queue is found by comparing options (their pointer, else their fields),
  /// without building its key.
  std::deque<TaskId>& QueueOf(const TaskSpec& spec);
  void Cancel(TaskId id, bool recursive, const ErrorInfo& error);
  /// The object directory looked up `id` and found no entry: if it is a live task's
  /// implicit result, the task gives it up (its submitter holds it), else -1.
  int ClaimResult(ObjectId id);

  SendFn send_;
  Scheduler& scheduler_;
  ObjectManager& objects_;
  PlacementGroupManager& groups_;
  ActorManager& actors_;
  StateTables& tables_;
  std::unordered_map<TaskId, Task> tasks_;
  std::unordered_map<TaskId, Generator> generators_;  // live streaming generator tasks
  std::unordered_map<TaskId, ErrorInfo> cancel_errors_;  // tasks cancelled on their rank
  // Ready tasks that found no room, FIFO per scheduling class (function + demand).
  std::map<std::string, std::deque<TaskId>> queues_;  // never erased: QueueOf keeps a pointer
  size_t queued_ = 0;
  // Per kind of task waiting for good (WaitingWarnings): the wait at which it warns next.
  std::map<std::string, int64_t> next_warning_;
  std::shared_ptr<const TaskOptions> last_class_;  // QueueOf's last class, whose queue is last_queue_
  std::deque<TaskId>* last_queue_ = nullptr;
  bool keep_lineage_ = false;
  bool ranks_lost_ = false;  // a rank was lost: OnSubmit checks NeverPlaceable
};

}  // namespace prism::internal
