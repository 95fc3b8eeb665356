// Greedy, first fit, on scratch copies of the free resources:
//   STRICT_PACK   try each node in turn; all bundles must fit on that node's ranks.
//   PACK          STRICT_PACK if possible, else fill nodes one after another.
//   STRICT_SPREAD each bundle on a node no earlier bundle used.
//   SPREAD        prefer an unused node, else any node with room.
// With one_per_rank, a rank that took a bundle takes no other.
// Ranks inside a node are tried in rank order. Greedy placement can miss a packing that
// exists (bin packing is NP-hard); bundles are tried largest first to make that rarer.
//
// Cost with N ranks: the ranks of each node are listed once (O(N)); a scratch copy holds
// only the ranks a bundle was put on, and SPREAD walks the nodes no bundle used yet. A copy
// of every rank per node tried, a scan of every rank per node, and a walk of every node per
// bundle made a 4-bundle PACK group take 204 ms at 1,000 ranks and a bundle on each of
// 1,000 ranks 86 ms (perf/head_simulation_benchmark.cc).
#include "scheduler/bundle_placement.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>

namespace prism::internal {

namespace {

/// What is free on each rank as bundles are put down: `available`, except on the ranks
/// that took a bundle.
struct Scratch {
  const std::vector<ResourceSet>& available;
  bool one_per_rank = false;
  std::unordered_map<int, ResourceSet> taken{};
  bool Take(int rank, const ResourceSet& bundle) {
    auto it = taken.find(rank);
    if (one_per_rank && it != taken.end()) return false;
    if (!bundle.FitsIn(it == taken.end() ? available[rank] : it->second)) return false;
    if (it == taken.end()) it = taken.emplace(rank, available[rank]).first;
    it->second.Subtract(bundle);
    return true;
  }
};

/// The nodes in order of their first rank, and each node's ranks in rank order.
struct Nodes {
  std::vector<std::vector<int>> ranks;
  std::vector<size_t> of_rank;
  Nodes(const std::vector<std::string>& node_of_rank, size_t num_ranks) {
    std::unordered_map<std::string, size_t> index;
    for (size_t r = 0; r < num_ranks; ++r) {
      auto [it, fresh] = index.emplace(node_of_rank[r], ranks.size());
      if (fresh) ranks.emplace_back();
      ranks[it->second].push_back(static_cast<int>(r));
      of_rank.push_back(it->second);
    }
  }
};

int64_t Size(const ResourceSet& r) {
  int64_t total = 0;
  for (const auto& [name, units] : r.Entries()) total += units;
  return total;
}

}  // namespace

std::vector<int> PlaceBundles(const std::vector<ResourceSet>& bundles, PlacementStrategy strategy,
                              const std::vector<ResourceSet>& available,
                              const std::vector<std::string>& node_of_rank, bool one_per_rank) {
  std::vector<size_t> order(bundles.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return Size(bundles[a]) > Size(bundles[b]); });
  const Nodes nodes(node_of_rank, available.size());
  std::vector<int> result(bundles.size(), -1);

  auto on_node = [&](Scratch& s, size_t node, const ResourceSet& b) {
    for (int r : nodes.ranks[node]) {
      if (s.Take(r, b)) return r;
    }
    return -1;
  };
  auto strict_pack = [&]() -> bool {
    for (size_t node = 0; node < nodes.ranks.size(); ++node) {
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
        for (size_t node = 0; node < nodes.ranks.size(); ++node) {
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
      std::set<size_t> unused;  // nodes no bundle is on yet, in order
      for (size_t node = 0; node < nodes.ranks.size(); ++node) unused.insert(unused.end(), node);
      for (size_t i : order) {
        result[i] = -1;
        for (size_t node : unused) {  // unused nodes first
          result[i] = on_node(s, node, bundles[i]);
          if (result[i] >= 0) break;
        }
        if (result[i] < 0 && !strict) {
          for (size_t node = 0; node < nodes.ranks.size(); ++node) {
            result[i] = on_node(s, node, bundles[i]);
            if (result[i] >= 0) break;
          }
        }
        if (result[i] < 0) return {};
        unused.erase(nodes.of_rank[static_cast<size_t>(result[i])]);
      }
      return result;
    }
  }
  return {};
}

}  // namespace prism::internal
