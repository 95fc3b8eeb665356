#include "scheduler/scheduler.h"

#include <algorithm>

namespace prism::internal {

Scheduler::Scheduler(std::vector<ResourceSet> capacities) {
  std::unordered_map<std::string, std::vector<int>> holders;
  for (auto& c : capacities) {
    const int r = static_cast<int>(ranks_.size());
    for (const auto& [name, units] : c.Entries()) {
      if (units > 0) holders[name].push_back(r);
    }
    max_cpu_ = std::max(max_cpu_, FromUnits(c.Get("CPU")));
    ranks_.push_back({std::move(c), ResourceSet()});
    load_.push_back(0);
    by_load_.emplace(0.0, r);
  }
  for (auto& [name, ranks] : holders) {
    if (ranks.size() == ranks_.size()) {
      held_by_all_.insert(name);
    } else {
      holders_.emplace(name, std::move(ranks));
    }
  }
}

void Scheduler::Commit(int rank, const ResourceSet& demand) {
  ranks_[rank].committed.Add(demand);
  Reindex(rank);
}

void Scheduler::Release(int rank, const ResourceSet& demand) {
  ranks_[rank].committed.Subtract(demand);
  Reindex(rank);
}

void Scheduler::Reindex(int rank) {
  const double load = Load(rank);
  if (load == load_[rank]) return;
  auto node = by_load_.extract({load_[rank], rank});  // reuses the node: no allocation
  node.value().first = load;
  by_load_.insert(std::move(node));
  load_[rank] = load;
}

template <typename Fits>
int Scheduler::LeastLoadedOf(const std::vector<int>& candidates, Fits&& fits) const {
  const size_t m = candidates.size();
  const size_t start = static_cast<size_t>(
      std::lower_bound(candidates.begin(), candidates.end(), next_) - candidates.begin());
  int best = -1;
  double best_load = 0;
  for (size_t k = 0; k < m; ++k) {
    const int r = candidates[(start + k) % m];
    if (!fits(r)) continue;
    if (best < 0 || load_[r] < best_load) {
      best = r;
      best_load = load_[r];
    }
  }
  return best;
}

bool Scheduler::Feasible(const ResourceSet& demand) const {
  for (const auto& r : ranks_) {
    if (demand.FitsIn(r.capacity)) return true;
  }
  return false;
}

std::string Scheduler::DescribeInfeasible(const ResourceSet& demand) const {
  std::vector<ResourceSet> capacities;
  for (const auto& r : ranks_) capacities.push_back(r.capacity);
  return "no rank can ever provide " + demand.ToString() +
         "; ranks offer:" + DescribeRankCapacities(capacities, 8);
}

double Scheduler::Load(int rank) const {
  const auto& r = ranks_[rank];
  double cap = FromUnits(r.capacity.Get(kCpuName));
  double used = FromUnits(r.committed.Get(kCpuName));
  return used / std::max(cap, 1.0);
}

int Scheduler::Place(const std::string& function, const ResourceSet& demand, int submitter,
                     const std::vector<uint64_t>& bytes_on_rank,
                     const SchedulingStrategy& strategy) {
  const int64_t depth = PipelineDepth(function);
  auto fits = [&](int r) {
    const auto& cap = ranks_[r].capacity;
    for (const auto& [name, amount] : demand.Entries()) {
      int64_t have = cap.Get(name);
      // Pipelining never oversizes a single task.
      if (amount > have || ranks_[r].committed.Get(name) + amount > have * depth) return false;
    }
    return true;
  };
  const int n = NumRanks();
  // Past this load no rank can take the demand's CPUs, whatever its capacity: a rank of
  // capacity c at load l has c * (depth - l) CPUs left (c >= 1), or less (c < 1).
  const double cpu = FromUnits(demand.Get(kCpuName));
  const double max_load = static_cast<double>(depth) - cpu / std::max(max_cpu_, 1.0) + 1e-9;
  if (cpu > 0 && !by_load_.empty() && by_load_.begin()->first > max_load) return -1;  // full
  using Kind = SchedulingStrategy::Kind;
  if (strategy.kind == Kind::kNodeAffinity) {
    const bool exists = strategy.rank >= 0 && strategy.rank < n;
    if (!strategy.soft) return exists && fits(strategy.rank) ? strategy.rank : -1;  // else waits
    // Soft: the rank only while it has room now (never queued behind its running tasks by
    // pipelining: elsewhere is better then).
    if (exists && demand.FitsIn(Free(strategy.rank))) return strategy.rank;
  } else if (strategy.kind == Kind::kSpread) {
    for (int k = 0; k < n; ++k) {
      const int r = (next_spread_ + k) % n;
      if (!fits(r)) continue;
      next_spread_ = (r + 1) % n;
      return r;
    }
    return -1;
  }
  if (submitter >= 0 && submitter < n && Load(submitter) < 0.5 && fits(submitter)) {
    return submitter;
  }
  int best = -1;
  uint64_t best_bytes = 0;
  for (int r = 0; r < static_cast<int>(bytes_on_rank.size()) && r < n; ++r) {
    if (bytes_on_rank[r] > best_bytes && fits(r)) {
      best = r;
      best_bytes = bytes_on_rank[r];
    }
  }
  if (best >= 0) return best;
  // A resource only some ranks hold: only they can fit, so look at them alone.
  const std::vector<int>* few = nullptr;
  for (const auto& [name, amount] : demand.Entries()) {
    if (amount <= 0 || held_by_all_.count(name)) continue;
    auto h = holders_.find(name);
    if (h == holders_.end()) return -1;                  // no rank has it
    if (h->second.size() * 2 > ranks_.size()) continue;  // most ranks: the walk below is as quick
    if (few == nullptr || h->second.size() < few->size()) few = &h->second;
  }
  if (few != nullptr) {
    best = LeastLoadedOf(*few, fits);
  } else {
    // The least loaded first; among equal loads, the first rank at or after next_.
    for (auto level = by_load_.begin(); level != by_load_.end() && best < 0;) {
      const double load = level->first;
      if (cpu > 0 && load > max_load) break;
      auto end = by_load_.lower_bound({load, n});
      auto from = by_load_.lower_bound({load, next_});
      for (auto it = from; it != end && best < 0; ++it) {
        if (fits(it->second)) best = it->second;
      }
      for (auto it = level; it != from && best < 0; ++it) {
        if (fits(it->second)) best = it->second;
      }
      level = end;
    }
  }
  if (best >= 0) next_ = (best + 1) % n;
  return best;
}

bool Scheduler::MayHaveRoom(const ResourceSet& demand) const {
  const double cpu = FromUnits(demand.Get(kCpuName));
  return cpu <= 0 || by_load_.empty() ||
         by_load_.begin()->first <= 1.0 - cpu / std::max(max_cpu_, 1.0) + 1e-9;
}

ResourceSet Scheduler::Free(int rank) const {
  ResourceSet free = ranks_[rank].capacity;
  for (const auto& [name, units] : ranks_[rank].committed.Entries()) {
    free.Set(name, std::max<int64_t>(0, free.Get(name) - units));
  }
  return free;
}

const std::pair<const std::string, double>* Scheduler::FindMean(const std::string& function) const {
  // Tasks come in runs of one function: compare with the last one before hashing.
  if (last_mean_ != nullptr && last_mean_->first == function) return last_mean_;
  auto it = mean_ns_.find(function);
  if (it == mean_ns_.end()) return nullptr;
  last_mean_ = &*it;  // the map's nodes never move
  return last_mean_;
}

void Scheduler::RecordRunTime(const std::string& function, uint64_t ns) {
  if (auto* known = FindMean(function)) {
    auto& mean = const_cast<double&>(known->second);
    mean = 0.8 * mean + 0.2 * static_cast<double>(ns);
    return;
  }
  last_mean_ = &*mean_ns_.try_emplace(function, static_cast<double>(ns)).first;
}

int64_t Scheduler::PipelineDepth(const std::string& function) const {
  const auto* known = FindMean(function);
  if (known == nullptr) return 1;
  double depth = static_cast<double>(kPipelineWindowNs) / std::max(known->second, 1.0);
  return std::clamp<int64_t>(static_cast<int64_t>(depth), 1, kMaxDepth);
}

}  // namespace prism::internal
