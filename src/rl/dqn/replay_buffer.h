#pragma once
// A uniform replay buffer of single transitions for DQN: a ring of `capacity` slots in flat
// arrays (struct of arrays, so a sampled batch is gathered straight into the tensors' order),
// sampled uniformly with replacement from a seeded generator, as RLlib's ReplayBuffer
// (rllib/utils/replay_buffers/replay_buffer.py: `random.randint(0, len - 1)` per item; the
// oldest transition is overwritten once full). No n-step returns, no priorities.

#include <cstdint>
#include <random>
#include <vector>

#include "prism/rl/env.h"

namespace prism::rl {

/// A batch of sampled transitions, row-major: observations [B * obs_size], actions [B]
/// indices (Discrete) or action_values [B * action_size] (Box), and so on.
struct TransitionBatch {
  std::vector<float> observations, next_observations;
  std::vector<int64_t> actions;      // Discrete action spaces
  std::vector<float> action_values;  // Box action spaces
  std::vector<float> rewards;
  std::vector<uint8_t> terminated;   // the episode ended here: no bootstrap from next_obs
  std::vector<int64_t> indices;      // the slots sampled (for tests and priorities later)
  int64_t size() const { return static_cast<int64_t>(rewards.size()); }
};

/// Transitions (obs, action, reward, next_obs, terminated). A truncated episode's last
/// transition is added with terminated false (its next_obs still bootstraps). With
/// VectorEnv's next-step autoreset, the step that resets a copy is not a transition: skip
/// it. Not thread-safe: one thread adds and samples.
class ReplayBuffer {
 public:
  /// Throws prism::Error for capacity < 1, obs_size < 1 or a bad action space.
  ReplayBuffer(int64_t capacity, int64_t obs_size, const Space& action_space, uint64_t seed = 0);

  /// Adds one transition, overwriting the oldest once full. `obs` and `next_obs` hold
  /// obs_size values; throws prism::Error (naming the sizes or the action and the space)
  /// otherwise, or for an action outside the action space.
  void Add(const float* obs, const Action& action, double reward, const float* next_obs,
           bool terminated);
  /// Add from vectors (checks their sizes).
  void Add(const std::vector<float>& obs, const Action& action, double reward,
           const std::vector<float>& next_obs, bool terminated);

  /// `batch_size` transitions drawn uniformly with replacement. Throws prism::Error if the
  /// buffer is empty or batch_size < 1.
  TransitionBatch Sample(int64_t batch_size);
  /// Sample into `out`, reusing its vectors.
  void Sample(int64_t batch_size, TransitionBatch& out);

  /// Transitions held (at most capacity).
  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  /// Transitions ever added (RLlib's num_added).
  int64_t num_added() const { return num_added_; }
  /// Reseeds the sampling generator.
  void Seed(uint64_t seed) { rng_.seed(seed); }

 private:
  int64_t capacity_, obs_size_, action_size_;
  bool discrete_;
  Space action_space_;
  int64_t size_ = 0, next_ = 0, num_added_ = 0;
  std::vector<float> obs_, next_obs_, action_values_, rewards_;
  std::vector<int64_t> actions_;
  std::vector<uint8_t> terminated_;
  std::mt19937_64 rng_;
};

}  // namespace prism::rl
