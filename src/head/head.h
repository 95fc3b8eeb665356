#pragma once
// The head (rank 0): a message router over the managers that hold the job's state:
//
//   TaskManager            tasks from submit to completion, queues, retries
//   ObjectManager          objects: readiness, subscribers, broadcast tree, reference counts
//   ActorManager           actors: placement, calls waiting for it, death, restarts, names
//   PlacementGroupManager  bundle reservations and what is left in each
//   StateTables            job info, KV, ended tasks, errors (the state API's records)
//   ChannelRouter          which rank reads each channel (platform::Channel)
//   CommunicatorTags       the creation tag of each communicator being made (platform::Communicator)
//
// Every rank's node manager sends it messages (rank 0's own node calls in directly). One
// mutex serialises all of it; the managers are pure logic under it. Messages they send go
// through `send`, which must not call back into the head (it queues to the transport, or
// hands rank 0's messages to its node, which never calls back while the head's lock is
// held).

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/adaptive_mutex.h"
#include "common/head_calls.h"
#include "common/protocol.h"
#include "head/actor_manager.h"
#include "head/channel_router.h"
#include "head/communicator_tags.h"
#include "head/memory_return.h"
#include "head/object_manager.h"
#include "head/placement_group_manager.h"
#include "head/state_tables.h"
#include "head/task_manager.h"
#include "prism/placement_group.h"
#include "prism/state.h"
#include "scheduler/scheduler.h"

namespace prism::internal {

class Head {
 public:
  using SendFn = std::function<void(int dest, Message&& msg)>;
  /// `node_of_rank` (one per rank, default: each rank its own node) drives placement
  /// group strategies.
  Head(std::vector<ResourceSet> capacities, SendFn send,
       std::vector<std::string> node_of_rank = {});

  void SetJobInfo(JobInfo info);
  /// Config::wait_infeasible: a placement group no idle cluster could hold stays pending
  /// with a warning (Ray's rule) instead of being a ResourceError. Call before any request.
  void SetWaitInfeasible(bool wait) { groups_.SetWaitInfeasible(wait); }

  /// Handles one message from `from`'s node manager, now. Thread-safe.
  void Handle(int from, Message&& msg);
  /// Like Handle, but never waits for the head's lock: the message is queued, and handled
  /// by this thread if the lock is free, else by the thread holding it before it lets go.
  /// Messages posted by one thread are handled in order, and before anything that thread
  /// asks the head afterwards. For rank 0's node and the transport's progress thread, so
  /// that a busy head never puts them to sleep (HeadCalls are answered at once instead).
  void Post(int from, Message&& msg);

  /// Recovery mode: worker rank `rank` was lost. Nothing is placed there again, its
  /// actors die and its tasks end as crashed (retried elsewhere within max_retries); the
  /// state API shows it DEAD. Thread-safe.
  void OnRankLost(int rank, const std::string& why);
  /// Recovery mode is on: keep the lineage of values on worker ranks (rebuilt if their
  /// rank is lost); a reader whose pull failed waits up to `park_s` for its source to be
  /// declared lost. Call before any request.
  void SetRecovery(double park_s);
  /// Once in a while (the transport's tick): answers readers parked too long. Cheap when
  /// none is parked. Thread-safe.
  void Tick();

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
  /// Fails its queued tasks, kills its actors. True also (and nothing done) for a group
  /// already removed; false if no such group was ever made.
  bool RemovePlacementGroup(const std::string& id);
  PlacementGroupStatus PlacementGroupState(const std::string& id);
  /// Live groups, optionally only the one with this name or id.
  std::vector<PlacementGroup> PlacementGroups(const std::string& name = "",
                                              const std::string& id = "");
  /// Ranks holding each bundle of a created group (empty while pending).
  std::vector<int> BundleRanks(const std::string& id);
  /// TaskManager::WaitingWarnings, now. Thread-safe.
  std::vector<std::string> WaitingWarnings(int64_t bound_ns);
  size_t NumObjects();
  size_t NumTasks();

 private:
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
  /// Runs a control-plane call (defined in head_calls.cc) and answers it. Takes the lock
  /// itself, per call.
  void OnHeadCall(int from, HeadCall&& call);

  AdaptiveMutex mu_;
  // Posted messages (see Post), guarded by posted_mu_ alone.
  AdaptiveMutex posted_mu_;
  std::vector<std::pair<int, Message>> posted_;
  std::vector<std::pair<int, Message>> draining_;  // reused; lock (mu_) held
  std::atomic<bool> has_posted_{false};
  std::atomic<size_t> parked_{0};  // readers parked on a failed pull (ObjectManager)
  DrainWatch drain_watch_;  // lock (mu_) held
  SendFn send_;
  std::vector<std::string> node_of_rank_;
  Scheduler scheduler_;
  // The managers, in the order they are built (each may refer to those built before it;
  // the task and actor managers refer to each other).
  StateTables tables_;
  ObjectManager objects_;
  PlacementGroupManager groups_;
  TaskManager tasks_;
  ActorManager actors_;
  ChannelRouter channels_;
  CommunicatorTags communicator_tags_;
};

}  // namespace prism::internal
