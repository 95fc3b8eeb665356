#pragma once
// Where a placement group's bundles landed: what a library needs to start one worker per
// bundle and tell each its local rank and node (prism::train, WorkerGroup).

#include <string>
#include <vector>

#include "prism/placement_group.h"

namespace prism::platform {

struct BundleLocation {
  int rank = -1;        // the rank holding the bundle
  std::string node_id;  // its node (ranks on one host share it)
};

/// Where each bundle of a created group is reserved, in bundle order; empty while the
/// group is pending (see PlacementGroup::Wait) or after it was removed. Throws Error for an
/// empty handle. Thread-safe; one control call to the head.
std::vector<BundleLocation> BundleLocations(const PlacementGroup& pg);

}  // namespace prism::platform
