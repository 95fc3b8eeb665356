#pragma once
// Pendulum-v1 (internal: MakeEnv("Pendulum-v1") is the public way). The class is visible
// here so tests can put the pendulum in a given state.

#include "rl/env/internal.h"

namespace prism::rl::internal {

/// Gymnasium's PendulumEnv under its 200-step TimeLimit (pendulum.cc cites the source).
class PendulumEnv : public Env {
 public:
  explicit PendulumEnv(const EnvConfig& config);
  const Space& observation_space() const override { return observation_space_; }
  const Space& action_space() const override { return action_space_; }
  std::vector<float> Reset(std::optional<uint64_t> seed = std::nullopt) override;
  StepResult Step(const Action& action) override;

  /// Puts the pendulum at angle `th` (0 upright) turning at `thdot` mid-episode, with
  /// `elapsed_steps` taken, for tests.
  void SetState(double th, double thdot, int64_t elapsed_steps = 0);
  double th() const { return th_; }
  double thdot() const { return thdot_; }

 private:
  std::vector<float> Observe() const;

  Space observation_space_, action_space_;
  double g_;
  int64_t max_episode_steps_;
  EnvRng rng_;
  double th_ = 0, thdot_ = 0;
  int64_t elapsed_steps_ = 0;
  bool running_ = false, ever_reset_ = false;
};

/// Gymnasium's angle_normalize: x wrapped into [-pi, pi) (Python's floor modulo).
double AngleNormalize(double x);

}  // namespace prism::rl::internal
