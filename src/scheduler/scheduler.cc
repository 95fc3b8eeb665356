#include "scheduler/scheduler.h"

#include <algorithm>
#include <limits>

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
  }
  while (leaves_ < ranks_.size()) leaves_ *= 2;
  tree_.assign(2 * leaves_, std::numeric_limits<double>::infinity());
  for (size_t r = 0; r < ranks_.size(); ++r) tree_[leaves_ + r] = 0;
  for (size_t k = leaves_ - 1; k >= 1; --k) tree_[k] = std::min(tree_[2 * k], tree_[2 * k + 1]);
  if (!ranks_.empty()) levels_[0.0] = static_cast<int>(ranks_.size());
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
  const double old = load_[rank];
  if (load == old) return;
  load_[rank] = load;
  auto level = levels_.find(old);
  if (--level->second == 0) levels_.erase(level);
  ++levels_[load];
  size_t k = leaves_ + static_cast<size_t>(rank);
  tree_[k] = load;
  for (k /= 2; k >= 1; k /= 2) {
    const double m = std::min(tree_[2 * k], tree_[2 * k + 1]);
    if (m == tree_[k]) break;  // the ancestors' minimums stand
    tree_[k] = m;
  }
}

int Scheduler::FirstAtLoad(int from, double load) const {
  const size_t n = ranks_.size();
  if (from < 0 || static_cast<size_t>(from) >= n) return -1;
  // Climb from `from`'s leaf: at each step, a right sibling whose minimum is <= load may
  // hold the rank; descend into the first such subtree that does (its minimum may be a
  // lower load only, when lower loads were passed over because nothing there fit).
  auto descend = [&](size_t k) -> int {
    // The leftmost leaf == load under k, or -1: depth-first, left before right, pruning
    // subtrees whose minimum is above `load`.
    size_t stack[64];
    int top = 0;
    stack[top++] = k;
    while (top > 0) {
      const size_t j = stack[--top];
      if (tree_[j] > load) continue;
      if (j >= leaves_) {
        if (tree_[j] == load) return static_cast<int>(j - leaves_);
        continue;
      }
      stack[top++] = 2 * j + 1;
      stack[top++] = 2 * j;
    }
    return -1;
  };
  size_t k = leaves_ + static_cast<size_t>(from);
  if (tree_[k] == load) return from;
  while (k > 1) {
    if ((k & 1) == 0) {  // a left child: its right sibling holds the ranks after it
      const int r = descend(k + 1);
      if (r >= 0) return r;
    }
    k /= 2;
  }
  return -1;
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
    if (!r.lost && demand.FitsIn(r.capacity)) return true;
  }
  return false;
}

std::string Scheduler::DescribeInfeasible(const ResourceSet& demand) const {
  std::vector<ResourceSet> capacities;
  std::string lost;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    capacities.push_back(ranks_[i].lost ? ResourceSet() : ranks_[i].capacity);
    if (ranks_[i].lost) lost += (lost.empty() ? "" : ", ") + std::to_string(i);
  }
  return "no rank can ever provide " + demand.ToString() + "; ranks offer:" +
         DescribeRankCapacities(capacities, 8) + (lost.empty() ? "" : " lost ranks (offering nothing): " + lost);
}

double Scheduler::Load(int rank) const {
  const auto& r = ranks_[rank];
  if (r.lost) return std::numeric_limits<double>::infinity();
  double cap = FromUnits(r.capacity.Get(kCpuName));
  double used = FromUnits(r.committed.Get(kCpuName));
  return used / std::max(cap, 1.0);
}

int Scheduler::Place(const std::string& function, const ResourceSet& demand, int submitter,
                     const std::vector<uint64_t>& bytes_on_rank,
                     const SchedulingStrategy& strategy) {
  const int64_t depth = PipelineDepth(function);
  auto fits = [&](int r) {
    if (ranks_[r].lost) return false;
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
  if (cpu > 0 && LeastLoad() > max_load) return -1;  // full
  using Kind = SchedulingStrategy::Kind;
  if (strategy.kind == Kind::kNodeAffinity) {
    const bool exists = strategy.rank >= 0 && strategy.rank < n;
    if (!strategy.soft) return exists && fits(strategy.rank) ? strategy.rank : -1;  // else waits
    // Soft: the rank only while it has room now (never queued behind its running tasks by
    // pipelining: elsewhere is better then).
    if (exists && !ranks_[strategy.rank].lost && demand.FitsIn(Free(strategy.rank))) return strategy.rank;
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
    for (auto level = levels_.begin(); level != levels_.end() && best < 0; ++level) {
      const double load = level->first;
      if (cpu > 0 && load > max_load) break;
      for (int r = FirstAtLoad(next_, load); r >= 0 && best < 0; r = FirstAtLoad(r + 1, load)) {
        if (fits(r)) best = r;
      }
      for (int r = FirstAtLoad(0, load); r >= 0 && r < next_ && best < 0;
           r = FirstAtLoad(r + 1, load)) {
        if (fits(r)) best = r;
      }
    }
  }
  if (best >= 0) next_ = (best + 1) % n;
  return best;
}

void Scheduler::RemoveRank(int rank) {
  ranks_[rank].lost = true;
  Reindex(rank);  // an infinite load: never the least loaded
}

bool Scheduler::MayHaveRoom(const ResourceSet& demand) const {
  const double cpu = FromUnits(demand.Get(kCpuName));
  return cpu <= 0 || ranks_.empty() || LeastLoad() <= 1.0 - cpu / std::max(max_cpu_, 1.0) + 1e-9;
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
