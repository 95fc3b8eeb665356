#include "serve/router_core.h"

namespace prism::serve::internal {

int ChooseReplica(const std::vector<ReplicaLoad>& replicas, int max_ongoing_requests, std::mt19937_64& rng) {
  std::vector<int> free;
  free.reserve(replicas.size());
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].accepting && replicas[i].in_flight < max_ongoing_requests) free.push_back(static_cast<int>(i));
  }
  if (free.empty()) return -1;
  if (free.size() == 1) return free[0];
  std::uniform_int_distribution<size_t> pick(0, free.size() - 1);
  const size_t a = pick(rng);
  size_t b = pick(rng);
  if (b == a) b = (a + 1 + pick(rng) % (free.size() - 1)) % free.size();  // a second, different one
  const int ra = free[a], rb = free[b];
  return replicas[static_cast<size_t>(rb)].in_flight < replicas[static_cast<size_t>(ra)].in_flight ? rb : ra;
}

std::optional<std::string> MatchRoute(const std::map<std::string, std::string>& routes, const std::string& path) {
  std::optional<std::string> best;
  for (const auto& [prefix, deployment] : routes) {
    const bool match = prefix == "/" || path == prefix ||
                       (path.compare(0, prefix.size(), prefix) == 0 &&
                        (prefix.back() == '/' || (path.size() > prefix.size() && path[prefix.size()] == '/')));
    if (match && (!best || prefix.size() > best->size())) best = prefix;
  }
  return best;
}

}  // namespace prism::serve::internal
