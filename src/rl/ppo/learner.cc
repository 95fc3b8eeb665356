// PPO's loss and Learner: see learner.h for the formulas (RLlib's ppo_torch_learner.py and
// ppo_learner.py). Minibatches: each epoch shuffles the rows and takes floor(n / minibatch)
// full minibatches (the remainder of a shuffle waits for the next epoch's); a batch smaller
// than one minibatch is one minibatch.

#include "rl/ppo/learner.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "prism/errors.h"
#include "rl/ppo/gae.h"

namespace prism::rl::ppo {

LossOutputs PpoLoss(RLModuleImpl& module, const torch::Tensor& obs, const torch::Tensor& actions,
                    const torch::Tensor& old_logp, const torch::Tensor& old_dist_inputs,
                    const torch::Tensor& advantages, const torch::Tensor& value_targets,
                    const LossParams& p) {
  const bool discrete = module.discrete();
  torch::Tensor dist_inputs = module.DistInputs(obs);
  torch::Tensor logp = LogProb(dist_inputs, actions, discrete);
  torch::Tensor ratio = torch::exp(logp - old_logp);
  torch::Tensor surrogate = torch::min(advantages * ratio,
                                       advantages * torch::clamp(ratio, 1 - p.clip_param, 1 + p.clip_param));
  torch::Tensor entropy = Entropy(dist_inputs, discrete);
  torch::Tensor vf_err = module.Values(obs) - value_targets;
  torch::Tensor vf_loss = torch::clamp(vf_err * vf_err, 0, p.vf_clip_param);
  torch::Tensor total = torch::mean(-surrogate + p.vf_loss_coeff * vf_loss - p.entropy_coeff * entropy);
  torch::Tensor mean_kl = torch::mean(Kl(old_dist_inputs, dist_inputs, discrete));
  if (p.use_kl_loss) total = total + p.kl_coeff * mean_kl;
  LossOutputs out;
  out.total = total;
  out.policy_loss = (-surrogate).mean().item<double>();
  out.vf_loss = vf_loss.mean().item<double>();
  out.entropy = entropy.mean().item<double>();
  out.mean_kl = mean_kl.item<double>();
  return out;
}

double UpdateKlCoeff(double kl_coeff, double mean_kl, double kl_target) {
  if (mean_kl > 2.0 * kl_target) return kl_coeff * 1.5;
  if (mean_kl < 0.5 * kl_target) return kl_coeff * 0.5;
  return kl_coeff;
}

Learner::Learner(RLModule module, LearnerOptions options)
    : module_(std::move(module)), options_(options), rng_(options.seed) {
  if (options_.minibatch_size < 1) throw Error("prism::rl: minibatch_size must be >= 1");
  if (options_.num_epochs < 1) throw Error("prism::rl: num_epochs must be >= 1");
  optimizer_ = std::make_unique<torch::optim::Adam>(module_->parameters(),
                                                    torch::optim::AdamOptions(options_.lr));
}

LearnerStats Learner::Update(const SampleBatch& b) {
  const int64_t n = b.size();
  if (n == 0) throw Error("prism::rl: the learner got an empty train batch");
  if (static_cast<int64_t>(b.obs.size()) != n * b.obs_size ||
      static_cast<int64_t>(b.actions.size()) != n * b.action_size ||
      static_cast<int64_t>(b.dist_inputs.size()) != n * b.dist_size ||
      static_cast<int64_t>(b.logp.size()) != n) {
    throw Error("prism::rl: malformed train batch of " + std::to_string(n) + " rows");
  }
  GaeResult gae = ComputeGae(b, options_.gamma, options_.lambda);
  Standardize(gae.advantages);

  auto f = torch::TensorOptions().dtype(torch::kFloat);
  auto copy = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
    return torch::from_blob(const_cast<float*>(v.data()), shape, f).clone();
  };
  torch::Tensor obs = copy(b.obs, {n, b.obs_size});
  torch::Tensor actions = module_->discrete() ? copy(b.actions, {n}) : copy(b.actions, {n, b.action_size});
  torch::Tensor old_logp = copy(b.logp, {n});
  torch::Tensor old_dist = copy(b.dist_inputs, {n, b.dist_size});
  torch::Tensor advantages = copy(gae.advantages, {n});
  torch::Tensor targets = copy(gae.value_targets, {n});

  const int64_t mb = std::min(options_.minibatch_size, n);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  LearnerStats stats;
  for (int64_t epoch = 0; epoch < options_.num_epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng_);
    torch::Tensor perm = torch::from_blob(order.data(), {n}, torch::kLong);
    for (int64_t start = 0; start + mb <= n; start += mb) {
      torch::Tensor idx = perm.slice(0, start, start + mb);
      LossOutputs loss = PpoLoss(*module_, obs.index_select(0, idx), actions.index_select(0, idx),
                                 old_logp.index_select(0, idx), old_dist.index_select(0, idx),
                                 advantages.index_select(0, idx), targets.index_select(0, idx),
                                 options_.loss);
      optimizer_->zero_grad();
      loss.total.backward();
      if (options_.grad_clip > 0) {
        torch::nn::utils::clip_grad_norm_(module_->parameters(), options_.grad_clip);
      }
      optimizer_->step();
      stats.total_loss += loss.total.item<double>();
      stats.policy_loss += loss.policy_loss;
      stats.vf_loss += loss.vf_loss;
      stats.entropy += loss.entropy;
      stats.mean_kl += loss.mean_kl;
      ++stats.num_minibatches;
    }
  }
  const double k = static_cast<double>(std::max<int64_t>(stats.num_minibatches, 1));
  stats.total_loss /= k;
  stats.policy_loss /= k;
  stats.vf_loss /= k;
  stats.entropy /= k;
  stats.mean_kl /= k;
  if (options_.loss.use_kl_loss) {
    options_.loss.kl_coeff = UpdateKlCoeff(options_.loss.kl_coeff, stats.mean_kl, options_.kl_target);
  }
  stats.kl_coeff = options_.loss.kl_coeff;
  return stats;
}

}  // namespace prism::rl::ppo
