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
/// `placed`: the ranks of the group's other bundles, already placed (a group rescheduling
/// the bundles a lost rank held): the strategy counts them. STRICT_PACK puts `bundles` on
/// their node only, STRICT_SPREAD on nodes none of them uses; PACK tries their nodes first,
/// SPREAD the other nodes first; with `one_per_rank`, their ranks take no bundle.
std::vector<int> PlaceBundles(const std::vector<ResourceSet>& bundles, PlacementStrategy strategy,
                              const std::vector<ResourceSet>& available,
                              const std::vector<std::string>& node_of_rank, bool one_per_rank = false,
                              const std::vector<int>& placed = {});

/// Why PlaceBundles finds no place for `bundles` on `capacities` (the idle cluster), as text
/// naming what is short and what to do: a bundle no rank can hold; STRICT_SPREAD with more
/// bundles than hosts (naming the hosts and their ranks); one bundle per rank with more
/// bundles than ranks; STRICT_PACK with no host holding them all; else the ranks' offer.
std::string ExplainUnplaceable(const std::vector<ResourceSet>& bundles, PlacementStrategy strategy,
                               const std::vector<ResourceSet>& capacities,
                               const std::vector<std::string>& node_of_rank, bool one_per_rank);

}  // namespace prism::internal
