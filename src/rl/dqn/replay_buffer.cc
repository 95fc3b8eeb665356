// The uniform replay buffer (replay_buffer.h). Slots grow with the adds up to capacity (a
// large capacity costs memory only once it fills), then the ring overwrites the oldest.

#include "rl/dqn/replay_buffer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "prism/errors.h"

namespace prism::rl {
namespace {

// A uniform index in [0, n): the high 64 bits of a 64x64-bit product (Lemire), so the
// stream is the same with every standard library (std::uniform_int_distribution is not).
inline int64_t UniformIndex(std::mt19937_64& rng, int64_t n) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(rng()) * static_cast<uint64_t>(n)) >> 64);
}

}  // namespace

ReplayBuffer::ReplayBuffer(int64_t capacity, int64_t obs_size, const Space& action_space, uint64_t seed)
    : capacity_(capacity),
      obs_size_(obs_size),
      action_size_(action_space.size()),
      discrete_(action_space.kind == Space::Kind::kDiscrete),
      action_space_(action_space),
      rng_(seed) {
  if (capacity < 1)
    throw Error("prism::rl::ReplayBuffer: capacity is " + std::to_string(capacity) + "; it must be >= 1");
  if (obs_size < 1)
    throw Error("prism::rl::ReplayBuffer: obs_size is " + std::to_string(obs_size) + "; it must be >= 1");
  if (action_size_ < 1)
    throw Error("prism::rl::ReplayBuffer: the action space " + action_space.ToString() + " has no elements");
}

void ReplayBuffer::Add(const float* obs, const Action& action, double reward, const float* next_obs,
                       bool terminated) {
  action_space_.CheckAction(action, "prism::rl::ReplayBuffer::Add");
  if (!std::isfinite(reward))
    throw Error("prism::rl::ReplayBuffer::Add: the reward is " + std::to_string(reward) + "; it must be finite");
  const int64_t slot = next_;
  if (size_ < capacity_) {  // grow by one slot
    obs_.resize((size_ + 1) * obs_size_);
    next_obs_.resize((size_ + 1) * obs_size_);
    rewards_.resize(size_ + 1);
    terminated_.resize(size_ + 1);
    if (discrete_) actions_.resize(size_ + 1);
    else action_values_.resize((size_ + 1) * action_size_);
    ++size_;
  }
  std::copy(obs, obs + obs_size_, obs_.begin() + slot * obs_size_);
  std::copy(next_obs, next_obs + obs_size_, next_obs_.begin() + slot * obs_size_);
  if (discrete_) actions_[slot] = action.index;
  else std::copy(action.values.begin(), action.values.end(), action_values_.begin() + slot * action_size_);
  rewards_[slot] = static_cast<float>(reward);
  terminated_[slot] = terminated;
  next_ = (next_ + 1) % capacity_;
  ++num_added_;
}

void ReplayBuffer::Add(const std::vector<float>& obs, const Action& action, double reward,
                       const std::vector<float>& next_obs, bool terminated) {
  if (static_cast<int64_t>(obs.size()) != obs_size_ || static_cast<int64_t>(next_obs.size()) != obs_size_)
    throw Error("prism::rl::ReplayBuffer::Add: obs has " + std::to_string(obs.size()) + " values and next_obs " +
                std::to_string(next_obs.size()) + "; the buffer holds observations of " +
                std::to_string(obs_size_));
  Add(obs.data(), action, reward, next_obs.data(), terminated);
}

TransitionBatch ReplayBuffer::Sample(int64_t batch_size) {
  TransitionBatch out;
  Sample(batch_size, out);
  return out;
}

void ReplayBuffer::Sample(int64_t batch_size, TransitionBatch& out) {
  if (batch_size < 1)
    throw Error("prism::rl::ReplayBuffer::Sample: batch_size is " + std::to_string(batch_size) +
                "; it must be >= 1");
  if (size_ == 0)
    throw Error("prism::rl::ReplayBuffer::Sample: the buffer is empty; add transitions first "
                "(DQN waits for num_steps_sampled_before_learning_starts)");
  out.observations.resize(batch_size * obs_size_);
  out.next_observations.resize(batch_size * obs_size_);
  out.rewards.resize(batch_size);
  out.terminated.resize(batch_size);
  out.indices.resize(batch_size);
  out.actions.resize(discrete_ ? batch_size : 0);
  out.action_values.resize(discrete_ ? 0 : batch_size * action_size_);
  for (int64_t b = 0; b < batch_size; ++b) {
    const int64_t i = UniformIndex(rng_, size_);
    out.indices[b] = i;
    std::copy_n(obs_.begin() + i * obs_size_, obs_size_, out.observations.begin() + b * obs_size_);
    std::copy_n(next_obs_.begin() + i * obs_size_, obs_size_, out.next_observations.begin() + b * obs_size_);
    if (discrete_) out.actions[b] = actions_[i];
    else std::copy_n(action_values_.begin() + i * action_size_, action_size_, out.action_values.begin() + b * action_size_);
    out.rewards[b] = rewards_[i];
    out.terminated[b] = terminated_[i];
  }
}

}  // namespace prism::rl
