#pragma once
// The head's placement groups: reservations of bundles of resources on ranks, created all
// or none (scheduler/bundle_placement.h picks the ranks), pending until they fit. Tasks and
// actors run inside a bundle and are accounted against what it has left; a Holding says
// where something holds resources (a bundle, or its rank directly), so whoever releases
// them need not know which. Pure logic: the head serialises calls.
//
// A lost rank (recovery mode) takes its bundles with it: their groups are RESCHEDULING (as
// in Ray) until those bundles are placed again where they fit beside the bundles that
// remain, ahead of groups never created; tasks asking for them wait meanwhile, and the
// other bundles go on serving theirs. A holding in a bundle that was lost is void.

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/head_calls.h"
#include "common/protocol.h"
#include "common/task_spec.h"
#include "prism/placement_group.h"
#include "prism/state.h"
#include "scheduler/scheduler.h"

namespace prism::internal {

/// Where a task or actor holds its resources: in bundle `bundle` of placement group
/// `group`, or (bundle < 0) on rank `rank` itself. rank < 0: holds nothing.
struct Holding {
  int rank = -1;
  std::string group;
  int bundle = -1;
};

/// Resources something holds for as long as it lives (an actor, a placement group's
/// bundle), for the warning about tasks that wait on them.
struct LastingHold {
  int rank = -1;
  std::string by;  // "actor Counter", "placement group pg-1 bundle 0"
  ResourceSet amount;
};

class PlacementGroupManager {
 public:
  PlacementGroupManager(Scheduler& scheduler, const std::vector<std::string>& node_of_rank)
      : scheduler_(scheduler), node_of_rank_(node_of_rank) {}

  using SendFn = std::function<void(int dest, Message&& msg)>;
  /// Where PlacementGroupChanged pushes go (the head's send).
  void SetSend(SendFn send) { send_ = std::move(send); }
  /// A group no idle cluster could hold: pending for good with a warning (true, Ray's rule)
  /// or a ResourceError at Create (false, the default).
  void SetWaitInfeasible(bool wait) { wait_infeasible_ = wait; }
  /// The group's status now; if it is pending, `rank` is sent PlacementGroupChanged once it
  /// is created or removed (PlacementGroup::Wait waits for that push instead of polling).
  PlacementGroupStatus Watch(const std::string& id, int rank);

  /// Throws Error on bad options (no bundles, an empty bundle, a negative amount).
  static std::vector<ResourceSet> CheckBundles(const PlacementGroupCreationOptions& options);
  /// Records a new group and places it if it fits now; returns its id. Throws Error for a
  /// taken name, ResourceError if it could never be placed.
  std::string Create(const PlacementGroupCreationOptions& options, std::vector<ResourceSet> bundles);
  bool Exists(const std::string& id) const { return groups_.count(id) > 0; }
  /// Whether the group was removed (the last kMaxRemembered removed groups are known).
  bool WasRemoved(const std::string& id) const { return removed_.count(id) > 0; }
  /// Gives the whole reservation back and forgets the group but for its id and options (its
  /// tasks and actors are the caller's to settle first).
  void Remove(const std::string& id);
  /// kPending also while the group is RESCHEDULING (Wait waits until it is created again).
  PlacementGroupStatus Status(const std::string& id) const;
  /// Live groups, optionally only the one with this name or id; by id also a removed one
  /// (Ray's GetPlacementGroupById, whose state then reads REMOVED).
  std::vector<PlacementGroup> Find(const std::string& name, const std::string& id) const;
  /// How many removed groups Find by id still knows (the oldest are forgotten first).
  static constexpr size_t kMaxRemembered = 10000;
  /// Ranks holding each bundle of a created group (empty while pending, rescheduling or
  /// unknown).
  std::vector<int> BundleRanks(const std::string& id) const;
  std::vector<state::PlacementGroupState> List() const;
  /// What created groups' bundles reserve on their ranks.
  std::vector<LastingHold> Reservations() const;
  /// Reserves pending groups that fit now, oldest first (rescheduling ones first of all):
  /// of a rescheduling group only its lost bundles, beside the others as its strategy says.
  void PlacePending();
  /// `rank` was lost (Scheduler::RemoveRank done): the bundles there are unplaced (their
  /// tasks and actors went with it), their groups RESCHEDULING, and PlacePending places
  /// them again if they fit. Returns a warning per group that can never be whole again on
  /// the live ranks (it stays RESCHEDULING, as in Ray), and per pending group that no
  /// longer fits them; each is logged too.
  std::vector<std::string> OnRankLost(int rank);

  /// Why a task cannot run in the group it asked for ("" if it can).
  std::string CheckTask(const TaskSpec& spec) const;
  /// Takes room for a task in a bundle of its group.
  struct Reservation {
    enum Result { kWait, kGone, kReserved } result = kWait;
    int bundle = -1;
    int rank = -1;
  };
  Reservation Reserve(const TaskSpec& spec);

  /// Gives back (Release) or takes again (Take) `amount` where `h` holds it.
  void Release(const Holding& h, const ResourceSet& amount) { Adjust(h, amount, true); }
  void Take(const Holding& h, const ResourceSet& amount) { Adjust(h, amount, false); }

 private:
  struct Group {
    PlacementGroupCreationOptions options;
    std::vector<ResourceSet> bundles;
    bool created = false;       // placed whole once
    bool rescheduling = false;  // created, and a lost rank took some of its bundles
    std::vector<int> ranks;         // per bundle; -1 while not placed
    std::vector<ResourceSet> free;  // per bundle: reserved minus what its tasks hold
  };
  void Adjust(const Holding& h, const ResourceSet& amount, bool release);
  /// Every rank's free resources, or capacities; a lost rank offers nothing.
  std::vector<ResourceSet> LiveFree() const;
  std::vector<ResourceSet> LiveCapacities() const;
  /// Why a rescheduling group's lost bundles could never be placed on the live ranks, even
  /// idle ("" if they could).
  std::string WhyNeverWhole(const Group& g) const;
  /// Pushes the group's new status to the ranks watching it, and forgets them.
  void NotifyWatchers(const std::string& id, PlacementGroupStatus status);

  Scheduler& scheduler_;
  const std::vector<std::string>& node_of_rank_;
  std::map<std::string, Group> groups_;      // by id
  std::vector<std::string> pending_;         // ids, oldest first
  uint64_t next_id_ = 0;
  SendFn send_;
  bool wait_infeasible_ = false;
  std::map<std::string, std::vector<int>> watchers_;  // pending group -> ranks (once each)
  std::map<std::string, PlacementGroupCreationOptions> removed_;  // by id
  std::deque<std::string> removed_order_;                          // oldest first
};

/// "PACK", "SPREAD", "STRICT_PACK" or "STRICT_SPREAD".
const char* StrategyName(PlacementStrategy s);

}  // namespace prism::internal
