#pragma once
// A PPO train batch as env runners return it: struct of arrays, one row per transition.
// Rows come in segments: each segment is one env copy's consecutive transitions from one
// Sample call, and ends either where an episode ended (terminated or truncated) or where
// sampling stopped (segment_end). GAE runs backwards within a segment (gae.h).

#include <cstdint>
#include <vector>

namespace prism::rl::ppo {

struct SampleBatch {
  int64_t obs_size = 0;
  int64_t action_size = 1;  // 1 for Discrete (the index as a float), d for Box(d)
  int64_t dist_size = 0;    // the action distribution's inputs: n logits, or d means + d log-stds

  std::vector<float> obs;            // [n * obs_size]
  std::vector<float> actions;        // [n * action_size]
  std::vector<float> logp;           // log-prob of the action under the sampling policy
  std::vector<float> dist_inputs;    // [n * dist_size], the sampling policy's (for the KL)
  std::vector<float> values;         // V(s_t) under the sampling policy
  std::vector<float> rewards;
  std::vector<uint8_t> terminated;   // the MDP ended: V(s_{t+1}) = 0
  std::vector<uint8_t> truncated;    // cut by a step limit: bootstrap from bootstrap_values
  std::vector<uint8_t> segment_end;  // sampling stopped here: bootstrap from bootstrap_values
  std::vector<float> bootstrap_values;  // V(s_{t+1}) where truncated or segment_end, else 0

  // Episodes that ended during the sample (their whole return, even if it began earlier).
  std::vector<double> episode_returns;
  std::vector<int64_t> episode_lens;

  int64_t size() const { return static_cast<int64_t>(rewards.size()); }
  /// Appends `other`'s rows and episodes (same sizes, else prism::Error).
  void Append(const SampleBatch& other);

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & obs_size & action_size & dist_size & obs & actions & logp & dist_inputs & values &
        rewards & terminated & truncated & segment_end & bootstrap_values & episode_returns &
        episode_lens;
  }
};

}  // namespace prism::rl::ppo
