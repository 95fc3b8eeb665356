#pragma once
// CartPole-v1 (internal: MakeEnv("CartPole-v1") is the public way). The class is visible
// here so tests can put the cart in a given state.

#include <array>

#include "rl/env/internal.h"

namespace prism::rl::internal {

/// Gymnasium's CartPoleEnv under its 500-step TimeLimit (cartpole.cc cites the source).
class CartPoleEnv : public Env {
 public:
  explicit CartPoleEnv(const EnvConfig& config);
  const Space& observation_space() const override { return observation_space_; }
  const Space& action_space() const override { return action_space_; }
  std::vector<float> Reset(std::optional<uint64_t> seed = std::nullopt) override;
  StepResult Step(const Action& action) override;

  /// Puts the cart in (x, x_dot, theta, theta_dot) mid-episode with `elapsed_steps` taken
  /// (Gymnasium's env.unwrapped.state = ...), for tests.
  void SetState(const std::array<double, 4>& state, int64_t elapsed_steps = 0);
  const std::array<double, 4>& state() const { return state_; }

 private:
  Space observation_space_, action_space_;
  int64_t max_episode_steps_;
  EnvRng rng_;
  std::array<double, 4> state_{};
  int64_t elapsed_steps_ = 0;
  enum class Phase { kNotReset, kRunning, kTerminated, kTruncated } phase_ = Phase::kNotReset;
};

}  // namespace prism::rl::internal
