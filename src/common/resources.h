#pragma once
// Resource amounts in fixed point (1/10000 units, as Ray does), so that adding and
// subtracting fractional amounts never drifts. A ResourceSet is a small sorted vector: tasks
// carry one to three entries, and comparisons on the scheduling hot path stay cache-local.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace prism::internal {

inline constexpr int64_t kResourceUnit = 10000;
/// The largest amount of one resource Prism accepts anywhere (a task's demand, a bundle, a
/// rank's capacity): 1e14 (100 TB of "memory" in bytes). Its fixed-point units stay far
/// below int64's limit, and so do the sums over a cluster's ranks.
inline constexpr double kMaxResourceAmount = 1e14;

inline int64_t ToUnits(double amount) {
  return static_cast<int64_t>(amount * kResourceUnit + (amount >= 0 ? 0.5 : -0.5));
}
inline double FromUnits(int64_t units) { return static_cast<double>(units) / kResourceUnit; }

/// "CPU", made once (a literal would build a std::string per look-up on hot paths).
inline const std::string kCpuName = "CPU";

class ResourceSet {
 public:
  ResourceSet() = default;
  explicit ResourceSet(const std::map<std::string, double>& amounts);

  /// Amount of `name` in fixed-point units (0 if absent).
  int64_t Get(const std::string& name) const;
  void Set(const std::string& name, int64_t units);
  /// True if every amount here is <= the same amount in `capacity`.
  bool FitsIn(const ResourceSet& capacity) const;
  /// True if every amount here is <= `scale` times the same amount in `capacity`.
  bool FitsInScaled(const ResourceSet& capacity, int64_t scale) const;
  void Add(const ResourceSet& other);
  void Subtract(const ResourceSet& other);
  bool Empty() const { return entries_.empty(); }
  /// Removes every amount (keeping the storage, for a set refilled in a loop).
  void Clear() { entries_.clear(); }
  const std::vector<std::pair<std::string, int64_t>>& Entries() const { return entries_; }
  std::map<std::string, double> ToMap() const;
  /// "{CPU: 1, GPU: 0.5}"
  std::string ToString() const;
  friend bool operator==(const ResourceSet& a, const ResourceSet& b) {
    return a.entries_ == b.entries_;
  }

 private:
  void Combine(const ResourceSet& other, int64_t sign);
  std::vector<std::pair<std::string, int64_t>> entries_;  // sorted by name, no zeros kept
};

/// " rank 0 {CPU: 2}; rank 1 {...};" for the first `max_ranks` ranks (the per-rank
/// "rank:N" resources left out), with " ..." if there are more. Used in infeasibility errors.
std::string DescribeRankCapacities(const std::vector<ResourceSet>& capacities, size_t max_ranks);

}  // namespace prism::internal
