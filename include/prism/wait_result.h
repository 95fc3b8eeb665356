#pragma once

#include <vector>

#include "prism/object_ref.h"

namespace prism {

/// Result of prism::Wait: refs split into ready and unready, each in input order.
template <typename T>
struct WaitResult {
  std::vector<ObjectRef<T>> ready;
  std::vector<ObjectRef<T>> unready;
};

}  // namespace prism
