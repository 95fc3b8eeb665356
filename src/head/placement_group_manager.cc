#include "head/placement_group_manager.h"

#include <algorithm>
#include <cstdio>

#include "common/log.h"
#include "prism/errors.h"
#include "scheduler/bundle_placement.h"

namespace prism::internal {

const char* StrategyName(PlacementStrategy s) {
  static const char* const kNames[] = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"};
  return kNames[static_cast<int>(s)];
}

std::vector<ResourceSet> PlacementGroupManager::CheckBundles(const PlacementGroupCreationOptions& options) {
  if (options.bundles.empty()) {
    throw Error("prism: CreatePlacementGroup: no bundles given");
  }
  std::vector<ResourceSet> bundles;
  for (size_t i = 0; i < options.bundles.size(); ++i) {
    std::map<std::string, double> amounts(options.bundles[i].begin(), options.bundles[i].end());
    bool any = false;
    for (const auto& [name, amount] : amounts) {
      if (!(amount >= 0) || !(amount <= kMaxResourceAmount)) {
        throw Error("prism: CreatePlacementGroup: bundle " + std::to_string(i) + " asks for " +
                    name + " = " + std::to_string(amount) + "; amounts must be >= 0 and at most " +
                    std::to_string(kMaxResourceAmount));
      }
      any |= amount > 0;
    }
    if (!any) {
      throw Error("prism: CreatePlacementGroup: bundle " + std::to_string(i) +
                  " is empty; every bundle must reserve something");
    }
    bundles.emplace_back(amounts);
  }
  return bundles;
}

std::string PlacementGroupManager::Create(const PlacementGroupCreationOptions& options,
                                          std::vector<ResourceSet> bundles) {
  if (!options.name.empty()) {
    for (const auto& [id, g] : groups_) {
      if (g.options.name == options.name) {
        throw Error("prism: a placement group named \"" + options.name + "\" already exists (" + id + ")");
      }
    }
  }
  std::vector<ResourceSet> capacities;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) capacities.push_back(scheduler_.Capacity(r));
  if (PlaceBundles(bundles, options.strategy, capacities, node_of_rank_, options.one_bundle_per_rank).empty()) {
    std::string listed;
    for (const auto& b : bundles) listed += " " + b.ToString();
    const std::string why = "placement group" +
                            (options.name.empty() ? std::string() : " \"" + options.name + "\"") +
                            " can never be placed: bundles" + listed + " with strategy " +
                            StrategyName(options.strategy) +
                            (options.one_bundle_per_rank ? ", one bundle per rank," : "") +
                            " do not fit even an idle cluster: " +
                            ExplainUnplaceable(bundles, options.strategy, capacities, node_of_rank_,
                                               options.one_bundle_per_rank);
    if (!wait_infeasible_) throw ResourceError("prism: " + why);
    PRISM_LOG_WARN(why << "; it stays pending, as in Ray (Config::wait_infeasible): an MPI job's ranks "
                          "are fixed, so it will not be created unless removed or the job ends");
  }
  char id[32];
  std::snprintf(id, sizeof id, "pg-%06llx", static_cast<unsigned long long>(++next_id_));
  Group& g = groups_[id];
  g.options = options;
  g.bundles = std::move(bundles);
  pending_.push_back(id);
  PlacePending();
  return id;
}

void PlacementGroupManager::PlacePending() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Group& g = groups_.at(*it);
    std::vector<ResourceSet> free;
    for (int r = 0; r < scheduler_.NumRanks(); ++r) free.push_back(scheduler_.Free(r));
    auto ranks = PlaceBundles(g.bundles, g.options.strategy, free, node_of_rank_, g.options.one_bundle_per_rank);
    if (ranks.empty()) {
      ++it;
      continue;
    }
    for (size_t b = 0; b < ranks.size(); ++b) scheduler_.Commit(ranks[b], g.bundles[b]);
    g.ranks = std::move(ranks);
    g.free = g.bundles;
    g.created = true;
    PRISM_LOG_INFO("placement group " << *it << " created");
    NotifyWatchers(*it, PlacementGroupStatus::kCreated);
    it = pending_.erase(it);
  }
}

void PlacementGroupManager::Remove(const std::string& id) {
  auto g = groups_.find(id);
  if (g == groups_.end()) return;
  // The whole reservation goes back at once; what its actors held inside it goes with it.
  if (g->second.created) {
    for (size_t b = 0; b < g->second.ranks.size(); ++b) {
      scheduler_.Release(g->second.ranks[b], g->second.bundles[b]);
    }
  }
  pending_.erase(std::remove(pending_.begin(), pending_.end(), id), pending_.end());
  removed_.emplace(id, std::move(g->second.options));
  removed_order_.push_back(id);
  if (removed_order_.size() > kMaxRemembered) {
    removed_.erase(removed_order_.front());
    removed_order_.pop_front();
  }
  groups_.erase(g);
  NotifyWatchers(id, PlacementGroupStatus::kUnknown);
}

PlacementGroupStatus PlacementGroupManager::Watch(const std::string& id, int rank) {
  PlacementGroupStatus status = Status(id);
  if (status == PlacementGroupStatus::kPending) {
    auto& ranks = watchers_[id];
    if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) ranks.push_back(rank);
  }
  return status;
}

void PlacementGroupManager::NotifyWatchers(const std::string& id, PlacementGroupStatus status) {
  auto w = watchers_.find(id);
  if (w == watchers_.end()) return;
  std::vector<int> ranks = std::move(w->second);
  watchers_.erase(w);
  for (int rank : ranks) {
    if (send_) send_(rank, PlacementGroupChanged{id, static_cast<uint8_t>(status)});
  }
}

PlacementGroupStatus PlacementGroupManager::Status(const std::string& id) const {
  auto g = groups_.find(id);
  if (g == groups_.end()) return PlacementGroupStatus::kUnknown;
  return g->second.created ? PlacementGroupStatus::kCreated : PlacementGroupStatus::kPending;
}

std::vector<PlacementGroup> PlacementGroupManager::Find(const std::string& name, const std::string& id) const {
  std::vector<PlacementGroup> out;
  for (const auto& [gid, g] : groups_) {
    if (!name.empty() && g.options.name != name) continue;
    if (!id.empty() && gid != id) continue;
    out.emplace_back(gid, g.options);
  }
  if (name.empty() && !id.empty()) {
    if (auto r = removed_.find(id); r != removed_.end()) out.emplace_back(id, r->second);
  }
  return out;
}

std::vector<int> PlacementGroupManager::BundleRanks(const std::string& id) const {
  auto g = groups_.find(id);
  return g == groups_.end() ? std::vector<int>{} : g->second.ranks;
}

std::vector<state::PlacementGroupState> PlacementGroupManager::List() const {
  std::vector<state::PlacementGroupState> out;
  for (const auto& [id, g] : groups_) {
    state::PlacementGroupState s;
    s.placement_group_id = id;
    s.name = g.options.name;
    s.strategy = StrategyName(g.options.strategy);
    s.state = g.created ? "CREATED" : "PENDING";
    for (const auto& b : g.bundles) s.bundles.push_back(b.ToMap());
    s.bundle_ranks = g.ranks;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<LastingHold> PlacementGroupManager::Reservations() const {
  std::vector<LastingHold> out;
  for (const auto& [id, g] : groups_) {
    if (!g.created) continue;
    const std::string group = "placement group " + (g.options.name.empty() ? id : g.options.name);
    for (size_t b = 0; b < g.bundles.size(); ++b) {
      out.push_back({g.ranks[b], group + " bundle " + std::to_string(b), g.bundles[b]});
    }
  }
  return out;
}

std::string PlacementGroupManager::CheckTask(const TaskSpec& spec) const {
  auto g = groups_.find(spec.options->placement_group);
  if (g == groups_.end()) {
    return "placement group " + spec.options->placement_group + " does not exist (removed?)";
  }
  const int b = spec.options->bundle_index;
  const auto& bundles = g->second.bundles;
  if (b >= static_cast<int>(bundles.size()) || b < -1) {
    return "bundle index " + std::to_string(b) + " out of range: placement group " +
           spec.options->placement_group + " has " + std::to_string(bundles.size()) + " bundles";
  }
  if (std::none_of(bundles.begin(), bundles.end(), [&](const ResourceSet& bs) {
        return (b < 0 || &bs == &bundles[b]) && spec.options->demand.FitsIn(bs);
      })) {
    return "task asks for " + spec.options->demand.ToString() + ", more than its placement group bundle holds";
  }
  return "";
}

PlacementGroupManager::Reservation PlacementGroupManager::Reserve(const TaskSpec& spec) {
  Reservation r;
  auto g = groups_.find(spec.options->placement_group);
  if (g == groups_.end()) {
    r.result = Reservation::kGone;
    return r;
  }
  Group& pg = g->second;
  if (!pg.created) return r;
  int chosen = -1;
  for (int b = 0; b < static_cast<int>(pg.bundles.size()); ++b) {
    if (spec.options->bundle_index >= 0 && b != spec.options->bundle_index) continue;
    if (!spec.options->demand.FitsIn(pg.free[b])) continue;
    if (chosen < 0 || pg.ranks[b] == spec.submitter) chosen = b;
  }
  if (chosen < 0) return r;
  pg.free[chosen].Subtract(spec.options->demand);
  r.result = Reservation::kReserved;
  r.bundle = chosen;
  r.rank = pg.ranks[chosen];
  return r;
}

void PlacementGroupManager::Adjust(const Holding& h, const ResourceSet& amount, bool release) {
  if (amount.Empty() || h.rank < 0) return;
  if (h.bundle >= 0) {  // accounted inside its placement group bundle
    auto g = groups_.find(h.group);
    if (g == groups_.end()) return;
    ResourceSet& free = g->second.free[h.bundle];
    release ? free.Add(amount) : free.Subtract(amount);
  } else {
    release ? scheduler_.Release(h.rank, amount) : scheduler_.Commit(h.rank, amount);
  }
}

}  // namespace prism::internal
