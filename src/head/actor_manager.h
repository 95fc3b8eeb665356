#pragma once
// The head's actors: where each lives, its state (pending, alive, restarting, dead) and
// why it died, names, restarts, and the calls that arrived before its creation was placed.
// An actor holds its creation's resources (on its rank or in its placement-group bundle)
// for as long as it lives. Pure logic: the head serialises calls.
//
// Life of an actor: the task manager submits its creation (OnCreationSubmitted) and places
// it (PickRank, then OnCreationPlaced, which releases the waiting calls); the creation's
// completion makes it alive or dead (OnCreationDone). It dies on Kill, on ExitActor or a
// throwing factory (ActorDied), when its last handle is freed, or with its placement group.

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/protocol.h"
#include "head/object_manager.h"
#include "head/placement_group_manager.h"
#include "head/state_tables.h"
#include "prism/state.h"
#include "scheduler/scheduler.h"

namespace prism::internal {

class TaskManager;

class ActorManager {
 public:
  using SendFn = std::function<void(int dest, Message&& msg)>;
  ActorManager(SendFn send, Scheduler& scheduler, ObjectManager& objects,
               PlacementGroupManager& groups, TaskManager& tasks, StateTables& tables)
      : send_(std::move(send)), scheduler_(scheduler), objects_(objects), groups_(groups),
        tasks_(tasks), tables_(tables), per_rank_(scheduler.NumRanks(), 0) {
    for (int r = 0; r < scheduler.NumRanks(); ++r) by_count_.emplace_hint(by_count_.end(), 0, r);
  }

  /// A creation was submitted. False if its name is taken: the actor is dead at once and
  /// the caller fails the creation with the returned error.
  bool OnCreationSubmitted(const std::shared_ptr<TaskSpec>& creation, ErrorInfo* error);
  /// Spreads actors: the rank with the fewest among those with room for `demand` (ties:
  /// the lowest rank), or -1. Node affinity: that rank if it has room; hard waits for it
  /// (-1), soft falls back. Walks the ranks by actor count from the fewest and stops at
  /// the first with room, after checking that some rank has the CPUs (a scan of every rank
  /// with a copy of its resources took 0.5 ms at 10,000 ranks, 7.9 ms at 100,000:
  /// perf/head_simulation_benchmark.cc).
  int PickRank(const ResourceSet& demand, const SchedulingStrategy& strategy = {}) const;
  /// The creation is on its way to `rank`: the calls that waited follow it, in order.
  /// Returns them for the task manager to send.
  std::vector<DispatchTask> OnCreationPlaced(ObjectId actor, int rank, int bundle);
  /// The creation ended. Returns whether the task manager should give back what the
  /// creation held (false while the actor lives and keeps it).
  bool OnCreationDone(ObjectId actor, const TaskDone& done, const TaskSpec& creation);
  /// A restarted actor's creation ended (its first one completed long ago): alive again,
  /// or dead if its constructor failed this time.
  void OnRestartDone(ObjectId actor, const TaskDone& done);

  /// Where a call goes: failed (the actor is dead: `cause`), waiting for the creation to
  /// be placed, or to `rank`.
  struct Route {
    enum Result { kFailed, kWaiting, kSend } result = kFailed;
    int rank = -1;
    std::string cause;
  };
  Route RouteCall(ObjectId actor) const;
  /// Parks a call until the creation is placed (RouteCall said kWaiting).
  void AddWaitingCall(ObjectId actor, DispatchTask&& call);
  /// A call that failed with ActorError after `attempts` sends: true if it should be sent
  /// again (the actor lives on after a restart and its max_task_retries allow it).
  bool RetryCall(ObjectId actor, int attempts) const;

  void OnKillRequest(const KillActorRequest& m);
  /// A call ended the live actor's process (ActorDied with `crashed`): restarted if its
  /// max_restarts allow (its failed calls are then sent again, max_task_retries), else dead.
  void OnCrashed(ObjectId actor, const std::string& cause);
  /// Marks the actor dead, frees what it held, fails calls still waiting at the head.
  void ActorDead(ObjectId actor, const std::string& cause);
  /// `rank` was lost (recovery mode). An actor there whose max_restarts allow it restarts
  /// on a live rank (RestartsToPlace; its constructor runs again and, with
  /// max_task_retries, its calls in flight follow it); the others die with an ActorError
  /// naming the rank, as do actors in a placement-group bundle there.
  void OnRankLost(int rank, const std::string& why);
  /// Creations of actors restarting after their rank was lost that wait for a live rank
  /// with room (placed by the task manager: PickRank, then OnCreationPlaced).
  std::vector<std::shared_ptr<TaskSpec>> RestartsToPlace();
  bool HasRestartsToPlace() const { return !to_place_.empty(); }
  /// The actor's last handle went (its id is the object the handles refer to).
  void OnHandleFreed(ObjectId id);
  /// Live actors created in placement group `group`.
  std::vector<ObjectId> InGroup(const std::string& group) const;

  /// A live named actor's id and class name in `ray_namespace` (id 0 if none).
  std::pair<uint64_t, std::string> Lookup(const std::string& ray_namespace, const std::string& name) const;
  std::vector<state::ActorState> List() const;
  /// What live actors hold on their ranks outside placement groups (in a bundle, the
  /// bundle's reservation holds it).
  std::vector<LastingHold> Holds() const;
  /// Live actors on each rank.
  const std::vector<int>& PerRank() const { return per_rank_; }

 private:
  struct Actor {
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

  SendFn send_;
  Scheduler& scheduler_;
  ObjectManager& objects_;
  PlacementGroupManager& groups_;
  TaskManager& tasks_;
  StateTables& tables_;
  std::unordered_map<ObjectId, Actor> actors_;
  std::map<std::pair<std::string, std::string>, ObjectId> names_;  // (namespace, name)
  std::vector<int> per_rank_;
  std::set<std::pair<int, int>> by_count_;  // (per_rank_[r], r), every rank
  std::vector<ObjectId> to_place_;  // restarting after a lost rank, not placed yet
  /// Adds `delta` to the rank's live actors, in per_rank_ and by_count_.
  void Count(int rank, int delta);
  /// True if the placed actor's max_restarts allow one more restart.
  static bool MayRestart(const Actor& actor);
  /// Ends the actor's incarnation on its rank (its queued calls fail with `cause`) and
  /// runs its creation there again.
  void Restart(ObjectId id, Actor& actor, const std::string& cause);
};

}  // namespace prism::internal
