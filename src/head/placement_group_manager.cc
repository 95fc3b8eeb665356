#include "head/placement_group_manager.h"

#include <algorithm>
#include <cstdio>
#include <set>

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
  const std::vector<ResourceSet> capacities = LiveCapacities();
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
  g.ranks.assign(g.bundles.size(), -1);
  g.free.assign(g.bundles.size(), ResourceSet());
  pending_.push_back(id);
  PlacePending();
  return id;
}

std::vector<ResourceSet> PlacementGroupManager::LiveFree() const {
  std::vector<ResourceSet> out;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) out.push_back(scheduler_.IsLost(r) ? ResourceSet() : scheduler_.Free(r));
  return out;
}

std::vector<ResourceSet> PlacementGroupManager::LiveCapacities() const {
  std::vector<ResourceSet> out;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) {
    out.push_back(scheduler_.IsLost(r) ? ResourceSet() : scheduler_.Capacity(r));
  }
  return out;
}

void PlacementGroupManager::PlacePending() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Group& g = groups_.at(*it);
    // The bundles to place (all of a new group; a rescheduling one's lost bundles) and the
    // ranks of those that stay.
    std::vector<size_t> unplaced;
    std::vector<ResourceSet> wanted;
    std::vector<int> placed;
    for (size_t b = 0; b < g.bundles.size(); ++b) {
      if (g.ranks[b] >= 0) {
        placed.push_back(g.ranks[b]);
      } else {
        unplaced.push_back(b);
        wanted.push_back(g.bundles[b]);
      }
    }
    auto ranks = PlaceBundles(wanted, g.options.strategy, LiveFree(), node_of_rank_, g.options.one_bundle_per_rank,
                              placed);
    if (ranks.empty()) {
      ++it;
      continue;
    }
    std::string where;
    for (size_t i = 0; i < ranks.size(); ++i) {
      const size_t b = unplaced[i];
      scheduler_.Commit(ranks[i], g.bundles[b]);
      g.ranks[b] = ranks[i];
      g.free[b] = g.bundles[b];
      where += (where.empty() ? "" : ", ") + std::to_string(b) + " on rank " + std::to_string(ranks[i]);
    }
    if (g.rescheduling) {
      PRISM_LOG_WARN("placement group " << *it << " is CREATED again: bundle" << (ranks.size() == 1 ? " " : "s ")
                                        << where);
    } else {
      PRISM_LOG_INFO("placement group " << *it << " created");
    }
    g.created = true;
    g.rescheduling = false;
    NotifyWatchers(*it, PlacementGroupStatus::kCreated);
    it = pending_.erase(it);
  }
}

std::vector<std::string> PlacementGroupManager::OnRankLost(int rank) {
  std::vector<std::string> hit;         // groups with a bundle there
  std::vector<std::string> rescheduled;  // of them, those created until now
  for (auto& [id, g] : groups_) {
    if (!g.created) continue;
    std::string lost;
    int num_lost = 0;
    for (size_t b = 0; b < g.ranks.size(); ++b) {
      if (g.ranks[b] != rank) continue;
      // Its capacity went with the rank (Scheduler::RemoveRank): nothing to give back; what
      // its tasks held there is void (Adjust).
      g.ranks[b] = -1;
      g.free[b] = ResourceSet();
      lost += (lost.empty() ? "" : ", ") + std::to_string(b);
      ++num_lost;
    }
    if (lost.empty()) continue;
    hit.push_back(id);
    if (!g.rescheduling) rescheduled.push_back(id);  // else already in pending_
    g.rescheduling = true;
    PRISM_LOG_WARN("placement group " << id << " is RESCHEDULING: its bundle" << (num_lost == 1 ? " " : "s ")
                                      << lost << (num_lost == 1 ? " was" : " were") << " on rank " << rank
                                      << ", which was lost");
  }
  // Ray reschedules a group ahead of those never created.
  pending_.insert(pending_.begin(), rescheduled.begin(), rescheduled.end());
  PlacePending();

  std::vector<std::string> warnings;
  const std::vector<ResourceSet> capacities = LiveCapacities();
  for (const std::string& id : pending_) {
    const Group& g = groups_.at(id);
    std::string why;
    if (g.rescheduling) {
      if (std::find(hit.begin(), hit.end(), id) == hit.end()) continue;  // said at its own loss
      why = WhyNeverWhole(g);
      if (why.empty()) continue;
      why = "placement group " + id + " stays RESCHEDULING: " + why +
            ". As in Ray it waits, but an MPI job's ranks are fixed: unless it is removed, tasks asking for "
            "those bundles wait for ever";
    } else {
      if (!PlaceBundles(g.bundles, g.options.strategy, capacities, node_of_rank_, g.options.one_bundle_per_rank)
               .empty()) {
        continue;
      }
      why = "placement group " + id + " stays pending: after rank " + std::to_string(rank) +
            " was lost, the live ranks cannot hold it even idle: " +
            ExplainUnplaceable(g.bundles, g.options.strategy, capacities, node_of_rank_,
                               g.options.one_bundle_per_rank);
    }
    PRISM_LOG_WARN(why);
    warnings.push_back(std::move(why));
  }
  return warnings;
}

std::string PlacementGroupManager::WhyNeverWhole(const Group& g) const {
  // The live ranks idle but for the bundles that stay, which the group holds for its life.
  std::vector<ResourceSet> capacities = LiveCapacities();
  std::vector<ResourceSet> wanted;
  std::vector<size_t> unplaced;
  std::vector<int> placed;
  for (size_t b = 0; b < g.bundles.size(); ++b) {
    if (g.ranks[b] >= 0) {
      placed.push_back(g.ranks[b]);
      ResourceSet& c = capacities[static_cast<size_t>(g.ranks[b])];
      for (const auto& [name, units] : g.bundles[b].Entries()) c.Set(name, std::max<int64_t>(0, c.Get(name) - units));
    } else {
      unplaced.push_back(b);
      wanted.push_back(g.bundles[b]);
    }
  }
  if (!PlaceBundles(wanted, g.options.strategy, capacities, node_of_rank_, g.options.one_bundle_per_rank, placed)
           .empty()) {
    return "";
  }
  if (placed.empty()) {  // all its bundles were there: as for a new group
    return ExplainUnplaceable(wanted, g.options.strategy, capacities, node_of_rank_, g.options.one_bundle_per_rank);
  }
  std::string lost;
  for (size_t b : unplaced) lost += (lost.empty() ? "" : ", ") + std::to_string(b) + " " + g.bundles[b].ToString();
  const std::string bundles = std::string(unplaced.size() == 1 ? "bundle " : "bundles ") + lost;
  std::set<std::string> used;  // hosts of the bundles that stay
  for (int r : placed) used.insert(node_of_rank_[static_cast<size_t>(r)]);
  std::string used_list;
  for (const auto& h : used) used_list += (used_list.empty() ? "" : ", ") + h;
  used_list = (used.size() == 1 ? "host " : "hosts ") + used_list;
  if (g.options.strategy == PlacementStrategy::STRICT_PACK) {
    return "STRICT_PACK keeps every bundle on one host, and the live ranks of " + used_list +
           ", where its other bundles are, cannot hold its " + bundles + " beside them";
  }
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (std::none_of(capacities.begin(), capacities.end(), [&](const ResourceSet& c) { return wanted[i].FitsIn(c); })) {
      return "bundle " + std::to_string(unplaced[i]) + " " + wanted[i].ToString() +
             " fits on no live rank, beside what the group's other bundles hold there";
    }
  }
  if (g.options.strategy == PlacementStrategy::STRICT_SPREAD) {
    std::set<std::string> spare;  // live hosts none of its bundles uses
    for (int r = 0; r < scheduler_.NumRanks(); ++r) {
      if (!scheduler_.IsLost(r) && !used.count(node_of_rank_[static_cast<size_t>(r)])) {
        spare.insert(node_of_rank_[static_cast<size_t>(r)]);
      }
    }
    return "STRICT_SPREAD puts every bundle on a different host; its " + bundles +
           (unplaced.size() == 1 ? " needs " : " need ") + std::to_string(unplaced.size()) + " live host" +
           (unplaced.size() == 1 ? "" : "s") + " none of its other bundles uses (they are on " + used_list + "), and " +
           (spare.empty() ? std::string("there is none")
                          : "the " + std::to_string(spare.size()) + " there are cannot hold them");
  }
  return "the live ranks cannot hold its " + bundles + " even idle";
}

void PlacementGroupManager::Remove(const std::string& id) {
  auto g = groups_.find(id);
  if (g == groups_.end()) return;
  // The whole reservation goes back at once; what its actors held inside it goes with it.
  for (size_t b = 0; b < g->second.ranks.size(); ++b) {
    if (g->second.ranks[b] >= 0) scheduler_.Release(g->second.ranks[b], g->second.bundles[b]);
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
  return g->second.created && !g->second.rescheduling ? PlacementGroupStatus::kCreated : PlacementGroupStatus::kPending;
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
  if (g == groups_.end() || !g->second.created || g->second.rescheduling) return {};
  return g->second.ranks;
}

std::vector<state::PlacementGroupState> PlacementGroupManager::List() const {
  std::vector<state::PlacementGroupState> out;
  for (const auto& [id, g] : groups_) {
    state::PlacementGroupState s;
    s.placement_group_id = id;
    s.name = g.options.name;
    s.strategy = StrategyName(g.options.strategy);
    s.state = g.rescheduling ? "RESCHEDULING" : g.created ? "CREATED" : "PENDING";
    for (const auto& b : g.bundles) s.bundles.push_back(b.ToMap());
    if (g.created) s.bundle_ranks = g.ranks;  // -1: a lost bundle, not placed again yet
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
      if (g.ranks[b] < 0) continue;
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
    if (pg.ranks[b] < 0) continue;  // lost with its rank: waits until placed again
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
    // A bundle lost with its rank (placed again elsewhere, or not yet): what was held in it
    // went with the rank.
    if (g->second.ranks[h.bundle] != h.rank) return;
    ResourceSet& free = g->second.free[h.bundle];
    release ? free.Add(amount) : free.Subtract(amount);
  } else {
    release ? scheduler_.Release(h.rank, amount) : scheduler_.Commit(h.rank, amount);
  }
}

}  // namespace prism::internal
