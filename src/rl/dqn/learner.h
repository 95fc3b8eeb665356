#pragma once
// DQN's loss and Learner (RLlib's DQNTorchLearner and DQNLearner, new API stack, num_atoms 1;
// rllib/algorithms/dqn/torch/dqn_torch_learner.py, rllib/algorithms/dqn/dqn_learner.py):
//
//   q_selected = Q_online(s)[a]
//   a*         = argmax_a' Q_online(s')[a']     (double_q)
//              = argmax_a' Q_target(s')[a']     (otherwise: q_next_best = max Q_target(s'))
//   target     = r + gamma^n * (1 - terminated) * Q_target(s')[a*]     (no gradient)
//   loss       = mean(huber(q_selected - target))   Huber with delta 1 (torch's HuberLoss
//                                                    default, as RLlib), or mean squared error
//   td_error   = |q_selected - target|
//
// One update: Adam (lr, adam_epsilon), gradients clipped by their global norm at grad_clip
// (RLlib's grad_clip 40, grad_clip_by "global_norm"), then the target network update of
// DQNLearner.after_gradient_based_update: if the lifetime env steps sampled minus those at
// the last target update reach target_network_update_freq,
//   target <- tau * online + (1 - tau) * target        (tau 1: a hard copy)
// and the last update's step becomes the current one.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "rl/dqn/q_module.h"
#include "rl/dqn/replay_buffer.h"

namespace prism::rl::dqn {

struct LossParams {
  double gamma = 0.99;
  bool double_q = true;
  std::string td_error_loss_fn = "huber";  // or "mse"
};

struct LossOutputs {
  torch::Tensor total;     // the loss to minimize (with grad)
  torch::Tensor td_error;  // [B], no grad
  double loss = 0, q_mean = 0, q_min = 0, q_max = 0, td_error_mean = 0;
};

/// RLlib's DQN loss (above) on one batch: obs and next_obs [B, obs_size], actions [B]
/// (int64), rewards, terminated (0/1) and n_steps (the n of each row's n-step return) as
/// [B] floats. Gradients flow into `online` only.
LossOutputs DqnLoss(QModuleImpl& online, QModuleImpl& target, const torch::Tensor& obs,
                    const torch::Tensor& actions, const torch::Tensor& rewards,
                    const torch::Tensor& next_obs, const torch::Tensor& terminated,
                    const torch::Tensor& n_steps, const LossParams& params);

/// target <- tau * online + (1 - tau) * target, parameter by parameter (RLlib's
/// update_target_network). Throws prism::Error for tau outside (0, 1] or modules of other
/// shapes.
void UpdateTargetNetwork(QModuleImpl& online, QModuleImpl& target, double tau);

struct LearnerOptions {
  double lr = 5e-4;
  double adam_epsilon = 1e-8;
  double grad_clip = 40.0;  // <= 0: no clipping
  int64_t target_network_update_freq = 500;
  double tau = 1.0;
  LossParams loss;
};

struct UpdateStats {
  double loss = 0, q_mean = 0, q_min = 0, q_max = 0, td_error_mean = 0;
  double grad_norm = 0;         // the global norm before clipping
  bool target_updated = false;
};

/// Owns the online module, its target copy and Adam. Not thread-safe.
class Learner {
 public:
  /// The target starts as a copy of `online`. Throws prism::Error for a bad option.
  Learner(QModule online, const Space& observation_space, const Space& action_space,
          LearnerOptions options);
  /// One gradient step on `batch` (from the replay buffer), then the target update rule with
  /// `lifetime_env_steps` as the timestep. `n_steps` holds each row's n (its reward is an
  /// n-step discounted sum and next_obs n steps on); null: every row is a 1-step transition.
  /// Throws prism::Error for an empty batch, one of the wrong observation size or n_steps of
  /// another length.
  UpdateStats Update(const TransitionBatch& batch, int64_t lifetime_env_steps,
                     const std::vector<float>* n_steps = nullptr);

  QModule& module() { return online_; }
  QModule& target() { return target_; }
  torch::optim::Adam& optimizer() { return *optimizer_; }
  int64_t last_target_update_ts() const { return last_target_update_ts_; }
  int64_t num_target_updates() const { return num_target_updates_; }
  int64_t num_updates() const { return num_updates_; }
  /// For Load: the counters a checkpoint recorded.
  void RestoreCounters(int64_t last_target_update_ts, int64_t num_target_updates, int64_t num_updates);

 private:
  QModule online_, target_;
  LearnerOptions options_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  int64_t last_target_update_ts_ = 0, num_target_updates_ = 0, num_updates_ = 0;
};

}  // namespace prism::rl::dqn
