// Greedy, first fit, on scratch copies of the free resources:
//   STRICT_PACK   try each node in turn; all bundles must fit on that node's ranks.
//   PACK          STRICT_PACK if possible, else fill nodes one after another.
//   STRICT_SPREAD each bundle on a node no earlier bundle used.
//   SPREAD        prefer an unused node, else any node with room.
// With one_per_rank, a rank that took a bundle takes no other.
// Ranks inside a node are tried in rank order. Greedy placement can miss a packing that
// exists (bin packing is NP-hard); bundles are tried largest first to make that rarer.
#include "scheduler/bundle_placement.h"

#include <algorithm>
#include <numeric>
#include <set>

namespace prism::internal {

namespace {

struct Scratch {
  std::vector<ResourceSet> free;
  bool one_per_rank = false;
  std::set<int> used{};
  bool Take(int rank, const ResourceSet& bundle) {
    if (!bundle.FitsIn(free[rank]) || (one_per_rank && used.count(rank))) return false;
    free[rank].Subtract(bundle);
    used.insert(rank);
    return true;
  }
};

std::vector<std::string> Nodes(const std::vector<std::string>& node_of_rank) {
  std::vector<std::string> nodes;
  for (const auto& n : node_of_rank) {
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  return nodes;
}

int64_t Size(const ResourceSet& r) {
  int64_t total = 0;
  for (const auto& [name, units] : r.Entries()) total += units;
  return total;
}

}  // namespace

std::vector<int> PlaceBundles(const std::vector<ResourceSet>& bundles, PlacementStrategy strategy,
                              const std::vector<ResourceSet>& available,
                              const std::vector<std::string>& node_of_rank, bool one_per_rank) {
  const int n = static_cast<int>(available.size());
  std::vector<size_t> order(bundles.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return Size(bundles[a]) > Size(bundles[b]); });
  const auto nodes = Nodes(node_of_rank);
  std::vector<int> result(bundles.size(), -1);

  auto on_node = [&](Scratch& s, const std::string& node, const ResourceSet& b) {
    for (int r = 0; r < n; ++r) {
      if (node_of_rank[r] == node && s.Take(r, b)) return r;
    }
    return -1;
  };
  auto strict_pack = [&]() -> bool {
    for (const auto& node : nodes) {
      Scratch s{available, one_per_rank};
      bool ok = true;
      for (size_t i : order) {
        result[i] = on_node(s, node, bundles[i]);
        if (result[i] < 0) {
          ok = false;
          break;
        }
      }
      if (ok) return true;
    }
    return false;
  };

  switch (strategy) {
    case PlacementStrategy::STRICT_PACK:
      if (strict_pack()) return result;
      return {};
    case PlacementStrategy::PACK: {
      if (strict_pack()) return result;
      Scratch s{available, one_per_rank};
      for (size_t i : order) {
        result[i] = -1;
        for (const auto& node : nodes) {
          result[i] = on_node(s, node, bundles[i]);
          if (result[i] >= 0) break;
        }
        if (result[i] < 0) return {};
      }
      return result;
    }
    case PlacementStrategy::STRICT_SPREAD:
    case PlacementStrategy::SPREAD: {
      const bool strict = strategy == PlacementStrategy::STRICT_SPREAD;
      Scratch s{available, one_per_rank};
      std::set<std::string> used;
      for (size_t i : order) {
        result[i] = -1;
        for (const auto& node : nodes) {  // unused nodes first
          if (used.count(node)) continue;
          result[i] = on_node(s, node, bundles[i]);
          if (result[i] >= 0) break;
        }
        if (result[i] < 0 && !strict) {
          for (const auto& node : nodes) {
            result[i] = on_node(s, node, bundles[i]);
            if (result[i] >= 0) break;
          }
        }
        if (result[i] < 0) return {};
        used.insert(node_of_rank[result[i]]);
      }
      return result;
    }
  }
  return {};
}

}  // namespace prism::internal
