// DQN's loss and Learner (learner.h has the formulas and RLlib's files).

#include "rl/dqn/learner.h"

#include <cmath>
#include <string>

#include "prism/errors.h"

namespace prism::rl::dqn {

LossOutputs DqnLoss(QModuleImpl& online, QModuleImpl& target, const torch::Tensor& obs,
                    const torch::Tensor& actions, const torch::Tensor& rewards,
                    const torch::Tensor& next_obs, const torch::Tensor& terminated,
                    const torch::Tensor& n_steps, const LossParams& params) {
  if (params.td_error_loss_fn != "huber" && params.td_error_loss_fn != "mse") {
    throw Error("prism::rl: td_error_loss_fn must be 'huber' or 'mse', got '" + params.td_error_loss_fn + "'");
  }
  torch::Tensor q_curr = online.QValues(obs);
  torch::Tensor q_selected = q_curr.gather(1, actions.reshape({-1, 1}).to(torch::kLong)).squeeze(1);
  torch::Tensor q_target_value;
  {
    torch::NoGradGuard no_grad;
    torch::Tensor q_target_next = target.QValues(next_obs);
    torch::Tensor best = params.double_q ? online.QValues(next_obs).argmax(1, /*keepdim=*/true)
                                         : q_target_next.argmax(1, /*keepdim=*/true);
    torch::Tensor q_next_best = q_target_next.gather(1, best).squeeze(1);
    torch::Tensor discount = torch::pow(torch::full_like(n_steps, params.gamma), n_steps);
    q_target_value = rewards + discount * (1.0 - terminated) * q_next_best;
  }
  LossOutputs out;
  out.total = params.td_error_loss_fn == "huber"
                  ? torch::nn::functional::huber_loss(q_selected, q_target_value,
                                                      torch::nn::functional::HuberLossFuncOptions().delta(1.0))
                  : torch::nn::functional::mse_loss(q_selected, q_target_value);
  torch::NoGradGuard no_grad;
  out.td_error = (q_selected - q_target_value).abs().detach();
  out.loss = out.total.item<double>();
  out.q_mean = q_selected.mean().item<double>();
  out.q_min = q_selected.min().item<double>();
  out.q_max = q_selected.max().item<double>();
  out.td_error_mean = out.td_error.mean().item<double>();
  return out;
}

void UpdateTargetNetwork(QModuleImpl& online, QModuleImpl& target, double tau) {
  if (!(tau > 0.0 && tau <= 1.0)) {
    throw Error("prism::rl: tau is " + std::to_string(tau) + "; it must lie in (0, 1]");
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> src = online.parameters();
  std::vector<torch::Tensor> dst = target.parameters();
  if (src.size() != dst.size()) throw Error("prism::rl: the target network has another shape");
  for (size_t i = 0; i < src.size(); ++i) {
    if (!src[i].sizes().equals(dst[i].sizes())) throw Error("prism::rl: the target network has another shape");
  }
  for (size_t i = 0; i < src.size(); ++i) {
    if (tau == 1.0) {
      dst[i].copy_(src[i]);
    } else {
      dst[i].mul_(1.0 - tau).add_(src[i], tau);
    }
  }
}

Learner::Learner(QModule online, const Space& observation_space, const Space& action_space,
                 LearnerOptions options)
    : online_(std::move(online)), target_(nullptr), options_(std::move(options)) {
  if (!(options_.lr > 0)) throw Error("prism::rl: lr must be > 0, got " + std::to_string(options_.lr));
  if (!(options_.tau > 0.0 && options_.tau <= 1.0)) {
    throw Error("prism::rl: tau is " + std::to_string(options_.tau) + "; it must lie in (0, 1]");
  }
  if (options_.target_network_update_freq < 0) {
    throw Error("prism::rl: target_network_update_freq must be >= 0");
  }
  if (options_.loss.td_error_loss_fn != "huber" && options_.loss.td_error_loss_fn != "mse") {
    throw Error("prism::rl: td_error_loss_fn must be 'huber' or 'mse', got '" + options_.loss.td_error_loss_fn + "'");
  }
  target_ = CloneQModule(*online_, observation_space, action_space);
  for (auto& p : target_->parameters()) p.set_requires_grad(false);
  optimizer_ = std::make_unique<torch::optim::Adam>(
      online_->parameters(), torch::optim::AdamOptions(options_.lr).eps(options_.adam_epsilon));
}

UpdateStats Learner::Update(const TransitionBatch& b, int64_t lifetime_env_steps, const std::vector<float>* n_steps_in) {
  const int64_t n = b.size();
  const int64_t os = online_->obs_size();
  if (n == 0) throw Error("prism::rl: the DQN learner got an empty train batch");
  if (static_cast<int64_t>(b.observations.size()) != n * os ||
      static_cast<int64_t>(b.next_observations.size()) != n * os ||
      static_cast<int64_t>(b.actions.size()) != n || static_cast<int64_t>(b.terminated.size()) != n) {
    throw Error("prism::rl: malformed DQN train batch of " + std::to_string(n) + " rows (observations of " +
                std::to_string(os) + " values expected)");
  }
  auto f = torch::TensorOptions().dtype(torch::kFloat);
  torch::Tensor obs = torch::from_blob(const_cast<float*>(b.observations.data()), {n, os}, f);
  torch::Tensor next_obs = torch::from_blob(const_cast<float*>(b.next_observations.data()), {n, os}, f);
  torch::Tensor actions = torch::from_blob(const_cast<int64_t*>(b.actions.data()), {n}, torch::kLong);
  torch::Tensor rewards = torch::from_blob(const_cast<float*>(b.rewards.data()), {n}, f);
  torch::Tensor terminated =
      torch::from_blob(const_cast<uint8_t*>(b.terminated.data()), {n}, torch::kUInt8).to(torch::kFloat);
  if (n_steps_in != nullptr && static_cast<int64_t>(n_steps_in->size()) != n) {
    throw Error("prism::rl: the DQN learner got " + std::to_string(n_steps_in->size()) + " n-steps for " +
                std::to_string(n) + " rows");
  }
  torch::Tensor n_steps = n_steps_in == nullptr
                              ? torch::ones({n}, f)
                              : torch::from_blob(const_cast<float*>(n_steps_in->data()), {n}, f);

  LossOutputs loss = DqnLoss(*online_, *target_, obs, actions, rewards, next_obs, terminated, n_steps, options_.loss);
  optimizer_->zero_grad();
  loss.total.backward();
  UpdateStats stats;
  if (options_.grad_clip > 0) {
    stats.grad_norm = torch::nn::utils::clip_grad_norm_(online_->parameters(), options_.grad_clip);
  } else {
    double sq = 0;
    for (const auto& p : online_->parameters()) {
      if (p.grad().defined()) sq += p.grad().pow(2).sum().item<double>();
    }
    stats.grad_norm = std::sqrt(sq);
  }
  optimizer_->step();
  ++num_updates_;
  stats.loss = loss.loss;
  stats.q_mean = loss.q_mean;
  stats.q_min = loss.q_min;
  stats.q_max = loss.q_max;
  stats.td_error_mean = loss.td_error_mean;
  if (lifetime_env_steps - last_target_update_ts_ >= options_.target_network_update_freq) {
    UpdateTargetNetwork(*online_, *target_, options_.tau);
    last_target_update_ts_ = lifetime_env_steps;
    ++num_target_updates_;
    stats.target_updated = true;
  }
  return stats;
}

void Learner::RestoreCounters(int64_t last_target_update_ts, int64_t num_target_updates, int64_t num_updates) {
  last_target_update_ts_ = last_target_update_ts;
  num_target_updates_ = num_target_updates;
  num_updates_ = num_updates;
}

}  // namespace prism::rl::dqn
