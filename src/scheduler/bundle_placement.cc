// Greedy, first fit, on scratch copies of the free resources:
//   STRICT_PACK   try each node in turn; all bundles must fit on that node's ranks.
//   PACK          STRICT_PACK if possible, else fill nodes one after another.
//   STRICT_SPREAD each bundle on a node no earlier bundle used.
//   SPREAD        prefer an unused node, else any node with room.
// With one_per_rank, a rank that took a bundle takes no other.
// Bundles already placed (a group rescheduling those of a lost rank) count as if put down
// first: their nodes are tried first by PACK and are the only ones STRICT_PACK tries; they
// are used nodes for the SPREADs.
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
#include <string>
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

/// "h1 (ranks 0-1), h2 (rank 2)": the hosts in order of their first rank, at most 8.
std::string DescribeHosts(const Nodes& nodes, const std::vector<std::string>& node_of_rank) {
  constexpr size_t kMaxShown = 8;
  std::string s;
  for (size_t n = 0; n < nodes.ranks.size() && n < kMaxShown; ++n) {
    const auto& ranks = nodes.ranks[n];
    std::string listed;
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      listed += (listed.empty() ? "" : ", ") + std::to_string(ranks[i]) +
                (j > i ? "-" + std::to_string(ranks[j]) : "");
      i = j + 1;
    }
    s += (s.empty() ? "" : ", ") + node_of_rank[static_cast<size_t>(ranks.front())] + " (rank" +
         (ranks.size() == 1 ? " " : "s ") + listed + ")";
  }
  if (nodes.ranks.size() > kMaxShown) s += ", ...";
  return s;
}

std::string Count(size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

int64_t Size(const ResourceSet& r) {
  int64_t total = 0;
  for (const auto& [name, units] : r.Entries()) total += units;
  return total;
}

}  // namespace

std::vector<int> PlaceBundles(const std::vector<ResourceSet>& bundles, PlacementStrategy strategy,
                              const std::vector<ResourceSet>& available,
                              const std::vector<std::string>& node_of_rank, bool one_per_rank,
                              const std::vector<int>& placed) {
  std::vector<size_t> order(bundles.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return Size(bundles[a]) > Size(bundles[b]); });
  const Nodes nodes(node_of_rank, available.size());
  std::vector<int> result(bundles.size(), -1);
  // The placed bundles' nodes first, then the others, each in order.
  std::vector<size_t> node_order;
  std::vector<bool> placed_node(nodes.ranks.size(), false);
  for (int r : placed) {
    const size_t node = nodes.of_rank[static_cast<size_t>(r)];
    if (!placed_node[node]) node_order.push_back(node);
    placed_node[node] = true;
  }
  const size_t num_placed_nodes = node_order.size();
  for (size_t node = 0; node < nodes.ranks.size(); ++node) {
    if (!placed_node[node]) node_order.push_back(node);
  }
  auto fresh = [&]() {
    Scratch s{available, one_per_rank};
    if (one_per_rank) {
      for (int r : placed) s.taken.emplace(r, available[static_cast<size_t>(r)]);
    }
    return s;
  };

  auto on_node = [&](Scratch& s, size_t node, const ResourceSet& b) {
    for (int r : nodes.ranks[node]) {
      if (s.Take(r, b)) return r;
    }
    return -1;
  };
  auto strict_pack = [&](size_t num_nodes) -> bool {
    for (size_t n = 0; n < num_nodes; ++n) {
      const size_t node = node_order[n];
      Scratch s = fresh();
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
      if (strict_pack(placed.empty() ? node_order.size() : num_placed_nodes)) return result;
      return {};
    case PlacementStrategy::PACK: {
      if (strict_pack(node_order.size())) return result;
      Scratch s = fresh();
      for (size_t i : order) {
        result[i] = -1;
        for (size_t node : node_order) {
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
      Scratch s = fresh();
      std::set<size_t> unused;  // nodes no bundle is on yet, in order
      for (size_t node = 0; node < nodes.ranks.size(); ++node) {
        if (!placed_node[node]) unused.insert(unused.end(), node);
      }
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

std::string ExplainUnplaceable(const std::vector<ResourceSet>& bundles, PlacementStrategy strategy,
                               const std::vector<ResourceSet>& capacities,
                               const std::vector<std::string>& node_of_rank, bool one_per_rank) {
  const Nodes nodes(node_of_rank, capacities.size());
  const std::string offer = "; ranks offer:" + DescribeRankCapacities(capacities, 8);
  for (size_t i = 0; i < bundles.size(); ++i) {
    bool fits = false;
    for (const auto& c : capacities) fits = fits || bundles[i].FitsIn(c);
    if (!fits) {
      return "bundle " + std::to_string(i) + " " + bundles[i].ToString() +
             " fits on no rank: reserve less per bundle, or give the ranks more (e.g. "
             "--prism-num-cpus, --prism-resources)" + offer;
    }
  }
  const size_t hosts = nodes.ranks.size();
  if (strategy == PlacementStrategy::STRICT_SPREAD && bundles.size() > hosts) {
    return "STRICT_SPREAD puts every bundle on a different host, so its " +
           Count(bundles.size(), "bundle", "bundles") + " need " + std::to_string(bundles.size()) +
           " distinct hosts, and the job has " + Count(hosts, "host", "hosts") + ": " +
           DescribeHosts(nodes, node_of_rank) + ". Use at most " + Count(hosts, "bundle", "bundles") +
           ", or SPREAD (which lets bundles share a host when hosts run out), or launch the job on " +
           std::to_string(bundles.size()) + " nodes or more";
  }
  if (one_per_rank && bundles.size() > capacities.size()) {
    return "one bundle per rank, so its " + Count(bundles.size(), "bundle", "bundles") + " need " +
           std::to_string(bundles.size()) + " ranks, and the job has " +
           Count(capacities.size(), "rank", "ranks") + ". Use at most " +
           Count(capacities.size(), "bundle", "bundles") + ", or launch more ranks";
  }
  if (strategy == PlacementStrategy::STRICT_PACK) {
    return "STRICT_PACK puts every bundle on one host, and no host's ranks hold them all (hosts: " +
           DescribeHosts(nodes, node_of_rank) + "). Use PACK (which spills onto other hosts), or "
           "fewer or smaller bundles" + offer;
  }
  if (strategy == PlacementStrategy::STRICT_SPREAD) {
    return "STRICT_SPREAD puts every bundle on a different host, and no " +
           std::to_string(bundles.size()) + " distinct hosts each hold one (hosts: " +
           DescribeHosts(nodes, node_of_rank) + "). Use SPREAD, or fewer or smaller bundles" + offer;
  }
  return "the bundles together need more than the job's ranks offer: use fewer or smaller "
         "bundles, or launch more ranks" + offer;
}

}  // namespace prism::internal
