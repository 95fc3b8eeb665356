#pragma once
// The head (rank 0): GCS object table + scheduler, driven by messages from every rank's
// node manager (rank 0's own node calls in directly). One mutex serialises all of it;
// messages it sends go through `send`, which must not call back into the head (it queues
// to the transport, or hands rank 0's messages to its node, which never calls back while
// the head's lock is held).

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/adaptive_mutex.h"
#include "common/head_calls.h"
#include "head/kv_store.h"
#include "head/object_directory.h"
#include "head/task_table.h"
#include "prism/placement_group.h"
#include "prism/state.h"
#include "scheduler/scheduler.h"
#include "common/protocol.h"

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

class Head {
 public:
  using SendFn = std::function<void(int dest, Message&& msg)>;
  /// `node_of_rank` (one per rank, default: each rank its own node) drives placement
  /// group strategies.
  Head(std::vector<ResourceSet> capacities, SendFn send,
       std::vector<std::string> node_of_rank = {});

  void SetJobInfo(JobInfo info);

  /// Handles one message from `from`'s node manager, now. Thread-safe.
  void Handle(int from, Message&& msg);
  /// Like Handle, but never waits for the head's lock: the message is queued, and handled
  /// by this thread if the lock is free, else by the thread holding it before it lets go.
  /// Messages posted by one thread are handled in order, and before anything that thread
  /// asks the head afterwards. For rank 0's node and the transport's progress thread, so
  /// that a busy head never puts them to sleep (HeadCalls are answered at once instead).
  void Post(int from, Message&& msg);

  std::map<std::string, double> Available();

  // The state API (prism/state.h). Thread-safe.
  std::vector<state::NodeState> ListNodes();
  std::vector<state::ActorState> ListActors();
  std::vector<state::TaskState> ListTasks(const state::TaskFilter& filter);
  std::vector<state::PlacementGroupState> ListPlacementGroups();
  state::TaskSummary SummarizeTasks();
  std::vector<state::JobState> ListJobs();
  std::vector<state::WorkerState> ListWorkers();
  std::vector<state::ErrorState> ListErrors(size_t limit);

  // Placement groups (see prism/placement_group.h). Thread-safe.
  /// Returns the new group's id. Throws ResourceError if it could never be placed, Error on
  /// bad options.
  std::string CreatePlacementGroup(const PlacementGroupCreationOptions& options);
  /// False if no such group.
  bool RemovePlacementGroup(const std::string& id);
  PlacementGroupStatus PlacementGroupState(const std::string& id);
  /// Live groups, optionally only the one with this name or id.
  std::vector<PlacementGroup> PlacementGroups(const std::string& name = "",
                                              const std::string& id = "");
  /// Ranks holding each bundle of a created group (empty while pending). For tests.
  std::vector<int> BundleRanks(const std::string& id);
  size_t NumObjects();
  size_t NumTasks();

 private:
  struct TaskEntry {
    std::shared_ptr<TaskSpec> spec;
    int unresolved = 0;
    int rank = -1;       // where it was dispatched, -1 while waiting
    int bundle = -1;     // bundle of its placement group it runs in, -1: none
    bool blocked = false;
    TaskTimes times{};   // when it entered each phase, for the state API
  };
  struct ActorEntry {
    enum class State { kPending, kAlive, kRestarting, kDead };
    State state = State::kPending;
    std::shared_ptr<TaskSpec> creation;
    int rank = -1;
    int bundle = -1;
    std::string name;
    std::string cause;  // why it is dead
    int restarts = 0;
    std::vector<DispatchTask> waiting_calls;  // calls before the creation was placed
  };
  struct PgEntry {
    PlacementGroupCreationOptions options;
    std::vector<ResourceSet> bundles;
    bool created = false;
    std::vector<int> ranks;         // per bundle, once created
    std::vector<ResourceSet> free;  // per bundle: reserved minus what its tasks hold
  };

  /// Holds the head's lock; handles posted messages after taking it and before letting go.
  class Locked {
   public:
    explicit Locked(Head& head) : head_(head) {
      head_.mu_.lock();
      head_.DrainPosted();
    }
    ~Locked() { head_.UnlockAndDrain(); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    Head& head_;
  };
  /// Handles every posted message. Lock held.
  void DrainPosted();
  /// Drains, unlocks, and drains again if something was posted meanwhile and the lock is
  /// still free (else its new holder will).
  void UnlockAndDrain();
  void HandleLocked(int from, Message&& msg);
  void OnSubmit(int from, TaskSpec&& spec);
  void OnTaskDone(int from, TaskDone&& done);
  void OnTaskBlocked(int from, const TaskBlocked& m);
  void OnPut(int from, PutObject&& put);
  void OnRefUpdate(int from, const RefUpdate& m);
  void OnSubscribe(int from, const Subscribe& m);
  /// Runs a control-plane call (defined in head_calls.cc) and answers it. Takes the lock
  /// itself, per call.
  void OnHeadCall(int from, HeadCall&& call);
  /// The state-API view of the live tasks. Lock held.
  std::vector<TaskRecord> LiveTaskRecords();
  void RecordError(const char* type, const std::string& message, ObjectId id, int rank);

  void Enqueue(TaskId id);
  /// What a dispatched task or call learns of a by-reference argument.
  static ArgLocation ArgLocationOf(ObjectId id, const ObjectEntry* e);
  bool TryDispatch(TaskEntry& task);
  void DrainQueues();
  /// Marks the task's return object ready/failed and finishes the task's bookkeeping.
  void Complete(TaskId id, TaskDone&& done, int from);
  void FailTask(TaskId id, const ErrorInfo& error);
  /// Moves an ended task's record into the task table.
  void RecordEnded(const TaskEntry& task, const TaskDone& done,
                   const std::shared_ptr<ErrorInfo>& failure, int from);
  void NotifyReady(ObjectId id, ObjectEntry& e);
  /// Tells `reader` where to pull a large object from, or queues it until a copy is free.
  void AssignPull(ObjectId id, ObjectEntry& e, int reader);
  /// A pull ended (AddLocation): a new copy, maybe, and room for a waiting reader.
  void OnPullDone(int from, const AddLocation& m);
  static constexpr size_t kMaxPullsPerCopy = 2;
  ObjectReady ReadyMessage(ObjectId id, const ObjectEntry& e) const;
  void SendFrees(std::vector<FreedObject>& freed);
  // Actors.
  void RouteActorCall(TaskEntry& task);
  void OnKillRequest(const KillActorRequest& m);
  /// Marks the actor dead, frees what it held, fails calls still waiting at the head.
  void ActorDead(ObjectId actor, const std::string& cause);
  int PickActorRank(const ResourceSet& demand);
  /// Reserves pending placement groups that fit now, oldest first.
  void PlacePendingGroups();
  /// Dispatch of a task that asked for a placement group. kFailed: the group is gone, and
  /// so is the task (its entry was erased).
  enum class GroupDispatch { kWait, kSent, kFailed };
  GroupDispatch TryDispatchInGroup(TaskEntry& task, DispatchTask& out);
  /// Gives back (release) or takes again what a task holds, in its bundle or on its rank.
  void AdjustHeld(TaskEntry& task, const ResourceSet& amount, bool release);
  static std::string ClassKey(const TaskSpec& spec);

  AdaptiveMutex mu_;
  // Posted messages (see Post), guarded by posted_mu_ alone.
  AdaptiveMutex posted_mu_;
  std::vector<std::pair<int, Message>> posted_;
  std::vector<std::pair<int, Message>> draining_;  // reused; lock (mu_) held
  std::atomic<bool> has_posted_{false};
  SendFn send_;
  ObjectDirectory objects_;
  Scheduler scheduler_;
  std::unordered_map<TaskId, TaskEntry> tasks_;
  // Ready tasks that found no room, FIFO per scheduling class (function + demand).
  std::map<std::string, std::deque<TaskId>> queues_;
  size_t queued_ = 0;
  std::vector<std::string> node_of_rank_;
  std::map<std::string, PgEntry> groups_;  // by id
  std::unordered_map<ObjectId, ActorEntry> actors_;
  std::map<std::string, ObjectId> actor_names_;
  std::vector<int> actors_per_rank_;
  std::vector<std::string> pending_groups_;  // ids, oldest first
  uint64_t next_group_ = 0;
  // GCS tables for the state API and the KV.
  JobInfo job_;
  KvStore kv_;
  TaskTable task_table_{10000};
  std::deque<state::ErrorState> errors_;  // the most recent kMaxErrors
  std::vector<uint64_t> finished_per_rank_;
};

}  // namespace prism::internal
