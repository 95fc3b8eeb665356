#pragma once
// The router's decisions, without actors or threads (unit-tested with a seeded generator).
//
// Power of two choices, as Ray Serve's router: of the replicas that accept requests and
// have fewer than max_ongoing_requests in flight, pick two at random and send to the one
// with fewer in flight (ties: the first pick). With none free the request waits in the
// router's queue, up to max_queued_requests (-1: no limit); beyond that it is refused
// (BackPressureError, HTTP 503). Queued requests go out in arrival order as replies free
// slots.

#include <cstddef>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace prism::serve::internal {

/// One replica as the choice sees it.
struct ReplicaLoad {
  int in_flight = 0;
  bool accepting = true;  // false: draining, dead, or not yet running
};

/// The index of the replica to send to, or -1 when none has room.
int ChooseReplica(const std::vector<ReplicaLoad>& replicas, int max_ongoing_requests, std::mt19937_64& rng);

/// The route prefix (a key of `routes`) that serves `path`: the longest that equals it or
/// is followed in it by '/' ("/" matches every path); nullopt if none. The HTTP ingress
/// sends each request to the application whose prefix this picks.
std::optional<std::string> MatchRoute(const std::map<std::string, std::string>& routes, const std::string& path);

/// Whether one more request may wait when `queued` already do.
inline bool CanQueue(size_t queued, int max_queued_requests) {
  return max_queued_requests < 0 || queued < static_cast<size_t>(max_queued_requests);
}

}  // namespace prism::serve::internal
