#include "scheduler/scheduler.h"

#include <algorithm>

namespace prism::internal {

Scheduler::Scheduler(std::vector<ResourceSet> capacities) {
  for (auto& c : capacities) ranks_.push_back({std::move(c), ResourceSet()});
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
  double cap = FromUnits(r.capacity.Get("CPU"));
  double used = FromUnits(r.committed.Get("CPU"));
  return used / std::max(cap, 1.0);
}

int Scheduler::Place(const std::string& function, const ResourceSet& demand, int submitter,
                     const std::vector<uint64_t>& bytes_on_rank, const SchedulingStrategy& strategy) {
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
  double best_load = 0;
  for (int k = 0; k < n; ++k) {
    int r = (next_ + k) % n;
    if (!fits(r)) continue;
    double load = Load(r);
    if (best < 0 || load < best_load) {
      best = r;
      best_load = load;
    }
  }
  if (best >= 0) next_ = (best + 1) % n;
  return best;
}

ResourceSet Scheduler::Free(int rank) const {
  ResourceSet free = ranks_[rank].capacity;
  for (const auto& [name, units] : ranks_[rank].committed.Entries()) {
    free.Set(name, std::max<int64_t>(0, free.Get(name) - units));
  }
  return free;
}

void Scheduler::RecordRunTime(const std::string& function, uint64_t ns) {
  auto [it, fresh] = mean_ns_.try_emplace(function, static_cast<double>(ns));
  if (!fresh) it->second = 0.8 * it->second + 0.2 * static_cast<double>(ns);
}

int64_t Scheduler::PipelineDepth(const std::string& function) const {
  auto it = mean_ns_.find(function);
  if (it == mean_ns_.end()) return 1;
  double depth = static_cast<double>(kPipelineWindowNs) / std::max(it->second, 1.0);
  return std::clamp<int64_t>(static_cast<int64_t>(depth), 1, kMaxDepth);
}

}  // namespace prism::internal
