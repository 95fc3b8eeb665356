#pragma once
// An RL algorithm as a Tune trainable (Ray: Tuner("PPO", param_space=config.to_dict())):
// every trial builds the algorithm from the base config with the trial's values laid over
// it, calls Train() once per report and checkpoints it. Link prism::rl_tune.
//
//   auto base = prism::rl::PPOConfig().Environment("CartPole-v1").EnvRunners(1);
//   prism::tune::Tuner tuner(prism::tune::AlgorithmTrainable(base),
//       {{"lr", prism::tune::LogUniform(1e-4, 3e-3)}, {"num_epochs", prism::tune::Choice({4, 8})}},
//       {.metric = "episode_return_mean", .mode = "max", .num_samples = 8,
//        .scheduler = std::make_shared<prism::tune::ASHAScheduler>()},
//       {.stop = {{"episode_return_mean", 450}, {"training_iteration", 40}}});
//   auto best = tuner.Fit().GetBestResult();
//   auto algo = prism::rl::Algorithm::FromCheckpoint(best.checkpoint);
//
// The trial's config keys are the config's own setting names (PPOConfig::ToJson's and
// DQNConfig::ToJson's: "lr", "gamma", "lambda" or "lambda_", "train_batch_size",
// "minibatch_size", "num_epochs", "clip_param", "entropy_coeff", "seed", ...; "hidden" as a
// JSON list, "[128, 128]"); a key the config does not have, or a value of the wrong type,
// fails the trial with an error that names the known keys. Every report carries
// TrainResult::ToMap()'s metrics (episode_return_mean, num_env_steps_sampled_lifetime,
// losses, ...); Tune counts training_iteration itself.
//
// Resources: a trial reserves 1 CPU for its own task (it samples, for DQN, and learns,
// with one LibTorch thread) plus 1 per env runner; its runners go wherever a CPU is free
// (RunnerPlacement::kAnyFreeCpu), so trials share the ranks as the Tuner counts them.
// num_learners > 1 is refused: learner actors are pinned to ranks 1..n.
//
// Checkpoints: every `checkpoint_frequency` reports (Algorithm::Save, committed into the
// trial's directory with the Tuner's retention); a paused, retried, exploited (PBT) or
// restored trial builds the algorithm from its own config and Restores the checkpoint's
// state into it, so a PBT mutation of "lr" takes effect on the exploited weights.
// Stop trials with RunConfig::stop or a scheduler: the loop itself does not end.

#include <string>

#include "prism/rl/algorithm.h"
#include "prism/rl/dqn.h"
#include "prism/tune/tuner.h"

namespace prism::tune {

struct AlgorithmTrainableOptions {
  /// Checkpoint every n-th report (>= 1); the last report before a stop may have none.
  int checkpoint_frequency = 1;
  /// Each report also carries TrainResult::ToRllibMap's names (env_runners/episode_return_mean,
  /// learners/default_policy/total_loss, ...), so a TuneConfig metric or stop criterion may use
  /// RLlib's names as Ray Tune shows an RLlib trial's (prism.rllib sets it).
  bool rllib_result_names = false;
};

/// Throws prism::Error for a config that does not validate, num_learners > 1, or a
/// checkpoint_frequency < 1.
Trainable AlgorithmTrainable(const rl::PPOConfig& config, AlgorithmTrainableOptions options = {});
Trainable AlgorithmTrainable(const rl::DQNConfig& config, AlgorithmTrainableOptions options = {});

}  // namespace prism::tune
