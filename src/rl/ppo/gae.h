#pragma once
// Generalized advantage estimation (Schulman et al. 2016) over a SampleBatch's segments,
// with Gymnasium's two ways for an episode to end, as RLlib's GAE connector does:
//   terminated   the MDP ended: V(s_{t+1}) = 0
//   truncated    cut by a time limit: bootstrap from V(s_{t+1}) of the final observation
//   segment_end  the runner stopped sampling mid-episode: bootstrap from V(s_{t+1}) too
// and no advantage flows across any of the three.

#include <cstdint>
#include <vector>

#include "rl/ppo/sample_batch.h"

namespace prism::rl::ppo {

struct GaeResult {
  std::vector<float> advantages;     // A_t (not standardized)
  std::vector<float> value_targets;  // A_t + V(s_t): the value function's regression target
};

/// delta_t = r_t + gamma * V(s_{t+1}) - V(s_t); A_t = delta_t + gamma * lambda * A_{t+1}
/// within a segment. Throws prism::Error if the vectors' sizes differ or the last row does
/// not end a segment (a row that neither ends an episode nor a segment needs row t+1).
GaeResult ComputeGae(const SampleBatch& batch, double gamma, double lambda);

/// (x - mean) / max(std, 1e-4) in place, as RLlib standardizes advantages over the train
/// batch. No-op on an empty vector.
void Standardize(std::vector<float>& x);

}  // namespace prism::rl::ppo
