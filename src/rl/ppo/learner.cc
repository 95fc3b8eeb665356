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

std::vector<LearnerShard> Postprocess(const SampleBatch& b, double gamma, double lambda, int num_shards) {
  const int64_t n = b.size();
  if (n == 0) throw Error("prism::rl: the learner got an empty train batch");
  if (static_cast<int64_t>(b.obs.size()) != n * b.obs_size ||
      static_cast<int64_t>(b.actions.size()) != n * b.action_size ||
      static_cast<int64_t>(b.dist_inputs.size()) != n * b.dist_size ||
      static_cast<int64_t>(b.logp.size()) != n) {
    throw Error("prism::rl: malformed train batch of " + std::to_string(n) + " rows");
  }
  if (num_shards < 1 || num_shards > n) {
    throw Error("prism::rl: cannot cut " + std::to_string(n) + " rows into " + std::to_string(num_shards) +
                " learner shards");
  }
  GaeResult gae = ComputeGae(b, gamma, lambda);
  Standardize(gae.advantages);
  const int64_t per = n / num_shards;
  std::vector<LearnerShard> shards(num_shards);
  for (int k = 0; k < num_shards; ++k) {
    LearnerShard& s = shards[k];
    s.obs_size = b.obs_size;
    s.action_size = b.action_size;
    s.dist_size = b.dist_size;
    const int64_t lo = k * per, hi = lo + per;
    auto rows = [&](const std::vector<float>& v, int64_t width) {
      return std::vector<float>(v.begin() + lo * width, v.begin() + hi * width);
    };
    s.obs = rows(b.obs, b.obs_size);
    s.actions = rows(b.actions, b.action_size);
    s.logp = rows(b.logp, 1);
    s.dist_inputs = rows(b.dist_inputs, b.dist_size);
    s.advantages = rows(gae.advantages, 1);
    s.value_targets = rows(gae.value_targets, 1);
  }
  return shards;
}

LearnerStats Learner::Update(const SampleBatch& b) {
  return UpdateShard(Postprocess(b, options_.gamma, options_.lambda, 1)[0]);
}

LearnerStats Learner::UpdateShard(const LearnerShard& b, const AverageFn& average, int group_size) {
  const int64_t n = b.size();
  if (n == 0) throw Error("prism::rl: the learner got an empty shard");
  auto copy = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
    return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat).clone();
  };
  torch::Tensor obs = copy(b.obs, {n, b.obs_size});
  torch::Tensor actions = module_->discrete() ? copy(b.actions, {n}) : copy(b.actions, {n, b.action_size});
  torch::Tensor old_logp = copy(b.logp, {n});
  torch::Tensor old_dist = copy(b.dist_inputs, {n, b.dist_size});
  torch::Tensor advantages = copy(b.advantages, {n});
  torch::Tensor targets = copy(b.value_targets, {n});

  const int64_t per_learner = std::max<int64_t>(options_.minibatch_size / std::max(group_size, 1), 1);
  const int64_t mb = std::min(per_learner, n);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::vector<torch::Tensor> params = module_->parameters();
  std::vector<float> flat;
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
      if (average) {
        // One flat buffer per step: a single all-reduce of every gradient.
        flat.clear();
        for (auto& p : params) {
          torch::Tensor g = p.grad().defined() ? p.grad().contiguous() : torch::zeros_like(p);
          flat.insert(flat.end(), g.data_ptr<float>(), g.data_ptr<float>() + g.numel());
        }
        average(flat);
        size_t offset = 0;
        torch::NoGradGuard no_grad;
        for (auto& p : params) {
          if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
          p.grad().copy_(torch::from_blob(flat.data() + offset, p.sizes(), torch::kFloat));
          offset += static_cast<size_t>(p.numel());
        }
      }
      if (options_.grad_clip > 0) {
        torch::nn::utils::clip_grad_norm_(params, options_.grad_clip);
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
  std::vector<float> means{static_cast<float>(stats.total_loss / k), static_cast<float>(stats.policy_loss / k),
                           static_cast<float>(stats.vf_loss / k), static_cast<float>(stats.entropy / k),
                           static_cast<float>(stats.mean_kl / k)};
  if (average) average(means);
  stats.total_loss = means[0];
  stats.policy_loss = means[1];
  stats.vf_loss = means[2];
  stats.entropy = means[3];
  stats.mean_kl = means[4];
  if (options_.loss.use_kl_loss) {
    options_.loss.kl_coeff = UpdateKlCoeff(options_.loss.kl_coeff, stats.mean_kl, options_.kl_target);
  }
  stats.kl_coeff = options_.loss.kl_coeff;
  return stats;
}

}  // namespace prism::rl::ppo
