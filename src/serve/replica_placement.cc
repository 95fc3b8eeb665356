#include "serve/replica_placement.h"

#include <nlohmann/json.hpp>

namespace prism::serve::internal {

int PickReplicaRank(const std::vector<state::NodeState>& nodes, const std::map<int, int>& ours,
                    const std::map<std::string, double>& resources, std::string& why) {
  auto fits = [&](const std::map<std::string, double>& have) {
    for (const auto& [k, v] : resources) {
      auto it = have.find(k);
      if (v > 0 && (it == have.end() || it->second + 1e-9 < v)) return false;
    }
    return true;
  };
  auto count = [&](int rank) {
    auto it = ours.find(rank);
    return it == ours.end() ? 0 : it->second;
  };
  bool live_worker = false;
  for (const auto& n : nodes) live_worker |= n.rank != 0 && n.state != "DEAD";
  int best = -1;
  bool best_now = false;
  std::string offered, lost;
  for (const auto& n : nodes) {
    if (n.state == "DEAD") lost += (lost.empty() ? "" : ", ") + std::to_string(n.rank);
    if (n.state == "DEAD" || (n.rank == 0 && live_worker)) continue;
    nlohmann::json total(n.resources_total);
    offered += (offered.empty() ? "" : "; ") + std::string("rank ") + std::to_string(n.rank) + ": " + total.dump();
    if (!fits(n.resources_total)) continue;
    const bool now = fits(n.resources_available);
    if (best < 0 || (now && !best_now) || (now == best_now && count(n.rank) < count(best))) {
      best = n.rank;
      best_now = now;
    }
  }
  if (best < 0) {
    why = "no worker rank can hold a replica's resources " + nlohmann::json(resources).dump() +
          " (ranks offer " + (offered.empty() ? std::string("nothing") : offered) +
          (lost.empty() ? std::string() : "; lost, left out: rank " + lost) +
          "); lower RayActorOptions or start the job with more resources per rank";
  }
  return best;
}

}  // namespace prism::serve::internal
