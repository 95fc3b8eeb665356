#pragma once
// What an env runner does (RLlib's SingleAgentEnvRunner): steps a VectorEnv with its own
// RLModule copy and returns a SampleBatch. It lives in an actor on a worker rank, or on the
// driver when num_env_runners is 0.
//
// With VectorEnv's next-step autoreset, the step after an episode ends only resets that
// copy: it is no transition, but its forward pass is V(final observation), the bootstrap of
// a truncated episode. Each Sample returns every copy's transitions as one contiguous
// segment per copy; where a copy's segment stops mid-episode (or at a truncation not yet
// followed by its reset step), one more forward pass gives V(s_{t+1}).

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "prism/rl/env.h"
#include "rl/ppo/rl_module.h"
#include "rl/ppo/sample_batch.h"

namespace prism::rl::ppo {

class Sampler {
 public:
  /// Throws prism::Error for an unknown environment or a bad config (VectorEnv's errors).
  Sampler(const std::string& env, const EnvConfig& env_config, int num_envs, uint64_t seed,
          const std::vector<int64_t>& hidden);
  /// Loads weights made by GetWeights (prism::Error if they do not fit).
  void SetWeights(const uint8_t* data, size_t size) { ppo::SetWeights(*module_, data, size); }
  /// Steps until at least `min_steps` transitions are collected (across the copies) and
  /// returns them with the episodes that ended meanwhile. Episodes continue across calls.
  SampleBatch Sample(int64_t min_steps);
  RLModule& module() { return module_; }
  int num_envs() const { return env_.num_envs(); }

 private:
  VectorEnv env_;
  RLModule module_{nullptr};
  std::mt19937_64 rng_;
  std::vector<float> obs_;            // current observations [num_envs * obs_size]
  std::vector<uint8_t> reset_next_;   // copy i ended an episode: its next step resets it
  std::vector<double> episode_return_;
  std::vector<int64_t> episode_len_;
};

}  // namespace prism::rl::ppo
