#pragma once
// Where the bundles of a placement group go: pure logic over per-rank free resources and
// the node each rank sits on. All or nothing: either every bundle gets a rank, or none.

#include <string>
#include <vector>

#include "prism/placement_group.h"
#include "common/resources.h"

namespace prism::internal {

/// One rank per bundle, or an empty vector if the bundles do not fit `available` under
/// `strategy`. Nodes are compared by `node_of_rank`. With `one_per_rank`, no two bundles
/// share a rank.
std::vector<int> PlaceBundles(const std::vector<ResourceSet>& bundles, PlacementStrategy strategy,
                              const std::vector<ResourceSet>& available,
                              const std::vector<std::string>& node_of_rank, bool one_per_rank = false);

}  // namespace prism::internal
