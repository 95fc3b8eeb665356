#pragma once
// The one thing the node manager asks of the data plane: a large object's bytes from the
// rank that holds them. Implemented by transport/ucx (and transport/mpi, the fallback);
// the node only sees this interface, so neither side includes the other.

#include <functional>
#include <string>

#include "prism/internal/core_api.h"
#include "prism/internal/ids.h"

namespace prism::internal {

/// Fetches a large object's bytes from another rank (the data plane).
class ObjectFetcher {
 public:
  virtual ~ObjectFetcher() = default;
  /// Calls `done` (on any thread) with the bytes, or with null and an error text.
  virtual void Fetch(int holder, ObjectId id,
                     std::function<void(Payload, const std::string& error)> done) = 0;
  /// Recovery mode: `rank` was lost. Its fetches in flight fail, and later ones at once
  /// (a dead peer never answers). Any thread.
  virtual void PeerLost(int /*rank*/) {}
};

}  // namespace prism::internal
