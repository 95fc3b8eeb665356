#pragma once
// PPO's loss and its Learner (RLlib's PPOTorchLearner, new API stack): the clipped
// surrogate, the value loss clipped at vf_clip_param, the entropy bonus and the KL penalty
// whose coefficient adapts once per update as RLlib's PPOLearner does:
//   mean_kl > 2 * kl_target  -> kl_coeff *= 1.5
//   mean_kl < 0.5 * kl_target -> kl_coeff *= 0.5
// An update computes GAE over the batch, standardizes the advantages, then runs
// num_epochs passes of shuffled minibatches with Adam.

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "rl/ppo/rl_module.h"
#include "rl/ppo/sample_batch.h"

namespace prism::rl::ppo {

struct LossParams {
  double clip_param = 0.3;
  double vf_clip_param = 10.0;
  double vf_loss_coeff = 1.0;
  double entropy_coeff = 0.0;
  bool use_kl_loss = true;
  double kl_coeff = 0.2;
};

struct LossOutputs {
  torch::Tensor total;  // the loss to minimize (with grad)
  double policy_loss = 0, vf_loss = 0, entropy = 0, mean_kl = 0;
};

/// RLlib's PPO loss on one minibatch:
///   ratio   = exp(logp_new - logp_old)
///   surr    = min(A * ratio, A * clamp(ratio, 1 - clip, 1 + clip))
///   vf_loss = clamp((V(s) - value_target)^2, 0, vf_clip_param)
///   total   = mean(-surr + vf_loss_coeff * vf_loss - entropy_coeff * entropy)
///             + kl_coeff * mean(KL(old || new))          (if use_kl_loss)
/// Reported policy_loss is mean(-surr), vf_loss mean of the clipped value loss.
LossOutputs PpoLoss(RLModuleImpl& module, const torch::Tensor& obs, const torch::Tensor& actions,
                    const torch::Tensor& old_logp, const torch::Tensor& old_dist_inputs,
                    const torch::Tensor& advantages, const torch::Tensor& value_targets,
                    const LossParams& params);

/// RLlib's adaptive KL coefficient (above).
double UpdateKlCoeff(double kl_coeff, double mean_kl, double kl_target);

struct LearnerOptions {
  double lr = 5e-5;
  double gamma = 0.99;
  double lambda = 1.0;
  int64_t minibatch_size = 128;
  int64_t num_epochs = 30;
  double grad_clip = 0;  // <= 0: none
  double kl_target = 0.01;
  LossParams loss;
  uint64_t seed = 0;
};

/// Means over the update's minibatches.
struct LearnerStats {
  double total_loss = 0, policy_loss = 0, vf_loss = 0, entropy = 0, mean_kl = 0;
  double kl_coeff = 0;  // after the update's adaptation
  int64_t num_minibatches = 0;
};

/// A learner's rows after GAE: what a learner of a group receives (its shard of the train
/// batch, advantages already standardized over the whole batch).
struct LearnerShard {
  int64_t obs_size = 0, action_size = 1, dist_size = 0;
  std::vector<float> obs, actions, logp, dist_inputs, advantages, value_targets;
  int64_t size() const { return static_cast<int64_t>(logp.size()); }
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & obs_size & action_size & dist_size & obs & actions & logp & dist_inputs & advantages &
        value_targets;
  }
};

/// GAE over `batch`, advantages standardized over all of it, cut into `num_shards` shards
/// of equal size (rows [i * n / k, (i + 1) * n / k) after dropping the n % k last rows).
std::vector<LearnerShard> Postprocess(const SampleBatch& batch, double gamma, double lambda,
                                      int num_shards);

/// Averages `values` in place across a group of learners (every learner calls it with the
/// same count, in the same order): gradient all-reduce for data-parallel learners.
using AverageFn = std::function<void(std::vector<float>& values)>;

/// Owns the optimizer over a module. Not thread-safe.
class Learner {
 public:
  Learner(RLModule module, LearnerOptions options);
  /// One PPO update on `batch` (throws prism::Error for an empty or malformed batch).
  LearnerStats Update(const SampleBatch& batch);
  /// One PPO update on a postprocessed shard. With `average` (one learner of a group, each
  /// with its own shard of equal size), every minibatch's gradients are averaged across the
  /// group before the step, and so are the stats before the KL coefficient adapts: the
  /// group takes the steps one learner would on minibatches `group size` times as large.
  /// Each learner's minibatches hold minibatch_size / group size rows (at least 1).
  LearnerStats UpdateShard(const LearnerShard& shard, const AverageFn& average = {}, int group_size = 1);
  RLModule& module() { return module_; }
  torch::optim::Adam& optimizer() { return *optimizer_; }
  double kl_coeff() const { return options_.loss.kl_coeff; }
  void set_kl_coeff(double v) { options_.loss.kl_coeff = v; }

 private:
  RLModule module_;
  LearnerOptions options_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::mt19937_64 rng_;
};

}  // namespace prism::rl::ppo
