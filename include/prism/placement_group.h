#pragma once
// Placement groups (Ray's): reserve bundles of resources across the cluster, all or none,
// then run tasks inside them with Task(f).SetPlacementGroup(pg, bundle_index).
//
//   auto pg = prism::CreatePlacementGroup({"workers", {{{"CPU", 1}}, {{"CPU", 1}}},
//                                          prism::PlacementStrategy::STRICT_SPREAD});
//   if (!pg.Wait(10)) throw ...;
//   prism::Task(Work).SetPlacementGroup(pg, 0).Remote();
//   prism::RemovePlacementGroup(pg.GetID());
//
// Strategies place bundles over nodes (hosts, or simulated nodes with
// PRISM_RANKS_PER_NODE): PACK (as few nodes as possible), SPREAD (as many as possible),
// STRICT_PACK (all on one node, else wait), STRICT_SPREAD (each on a different node,
// else wait). A group that no empty cluster could hold fails at creation.

#include <string>
#include <unordered_map>
#include <vector>

namespace prism {

enum class PlacementStrategy { PACK = 0, SPREAD = 1, STRICT_PACK = 2, STRICT_SPREAD = 3 };

/// A group's state, as Ray names them; UNRECOGNIZED is an empty handle's. A group that lost
/// bundles with a rank (recovery mode) is RESCHEDULING in state::ListPlacementGroups until
/// they are placed again; GetState reads PENDING meanwhile (the head call's status has no
/// RESCHEDULING yet), and Wait waits for it to be CREATED again.
enum class PlacementGroupState { PENDING = 0, CREATED = 1, REMOVED = 2, RESCHEDULING = 3, UNRECOGNIZED = -1 };

struct PlacementGroupCreationOptions {
  std::string name;  // optional; lets GetPlacementGroup(name) find it
  std::vector<std::unordered_map<std::string, double>> bundles;
  PlacementStrategy strategy = PlacementStrategy::PACK;
  /// Every bundle on a rank of its own (a Prism extension: one worker per MPI process,
  /// as a library whose workers join one communicator needs), on top of `strategy`.
  bool one_bundle_per_rank = false;
};

/// Handle to a placement group. Cheap copyable value; thread-safe.
class PlacementGroup {
 public:
  PlacementGroup() = default;
  PlacementGroup(std::string id, PlacementGroupCreationOptions options)
      : id_(std::move(id)), options_(std::move(options)) {}

  /// Empty for a default-constructed handle (e.g. GetPlacementGroup of an unknown name).
  const std::string& GetID() const { return id_; }
  const std::string& GetName() const { return options_.name; }
  const std::vector<std::unordered_map<std::string, double>>& GetBundles() const {
    return options_.bundles;
  }
  PlacementStrategy GetStrategy() const { return options_.strategy; }
  bool OneBundlePerRank() const { return options_.one_bundle_per_rank; }
  bool Empty() const { return id_.empty(); }
  /// The group's state now (one round trip to the head): PENDING until its bundles are
  /// reserved, CREATED, then REMOVED. UNRECOGNIZED for an empty handle.
  PlacementGroupState GetState() const;
  /// Blocks until every bundle is reserved (true) or timeout_seconds pass (false). Returns
  /// false at once if the group was removed.
  bool Wait(int timeout_seconds) const;

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    int strategy = static_cast<int>(options_.strategy);
    ar & id_ & options_.name & options_.bundles & strategy & options_.one_bundle_per_rank;
    options_.strategy = static_cast<PlacementStrategy>(strategy);
  }

 private:
  std::string id_;
  PlacementGroupCreationOptions options_;
};

// These calls work on the driver and inside any task or actor on any rank (each is one
// round trip to the head).

/// Reserves the bundles (asynchronously: use Wait). Throws ResourceError if the group could
/// never be placed (a bundle larger than any rank, STRICT_SPREAD over more bundles than
/// nodes, ...), Error on an empty bundle list or a duplicate name.
PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options);
/// Frees the group's resources and kills its actors; its queued tasks fail, running ones
/// finish. Removing a removed group again is a no-op (as in Ray); an id that never named a
/// group throws Error.
void RemovePlacementGroup(const std::string& placement_group_id);
/// The live group with this name, or an empty handle (a removed group's name is free).
PlacementGroup GetPlacementGroup(const std::string& name);
/// The group with this id, live or removed (as in Ray: GetState then reads REMOVED; the
/// last 10,000 removed groups are known), or an empty handle.
PlacementGroup GetPlacementGroupById(const std::string& id);
/// Every group not yet removed.
std::vector<PlacementGroup> GetAllPlacementGroups();

}  // namespace prism
