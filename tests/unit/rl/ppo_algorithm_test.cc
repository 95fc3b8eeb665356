// PPO's Algorithm without MPI: the config's RLlib defaults, its checks and JSON, local
// sampling (num_env_runners 0), the metrics of an iteration, Save / FromCheckpoint, Restore
// into an algorithm with another learning rate.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "prism/errors.h"
#include "rl_test_util.h"
#include "prism/rl.h"

namespace prism::rl {
namespace {

using prism_test::ErrorOf;

std::string TempDir(const std::string& name) { return prism_rl_test::TempDir("prism_rl_algo_", name); }

TEST(PPOConfig, DefaultsAreRLlibs) {
  PPOConfig c;
  EXPECT_DOUBLE_EQ(c.lr, 5e-5);
  EXPECT_DOUBLE_EQ(c.gamma, 0.99);
  EXPECT_DOUBLE_EQ(c.lambda_, 1.0);
  EXPECT_EQ(c.train_batch_size, 4000);
  EXPECT_EQ(c.minibatch_size, 128);
  EXPECT_EQ(c.num_epochs, 30);
  EXPECT_DOUBLE_EQ(c.clip_param, 0.3);
  EXPECT_DOUBLE_EQ(c.vf_clip_param, 10.0);
  EXPECT_DOUBLE_EQ(c.vf_loss_coeff, 1.0);
  EXPECT_DOUBLE_EQ(c.entropy_coeff, 0.0);
  EXPECT_DOUBLE_EQ(c.kl_coeff, 0.2);
  EXPECT_DOUBLE_EQ(c.kl_target, 0.01);
  EXPECT_TRUE(c.use_kl_loss);
  EXPECT_EQ(c.num_env_runners, 2);
  EXPECT_EQ(c.hidden, (std::vector<int64_t>{64, 64}));
  // "auto" fragments: the train batch over every env copy.
  c.EnvRunners(2, 4);
  EXPECT_EQ(c.ResolvedRolloutFragmentLength(), 500);
  c.EnvRunners(0, 3);
  EXPECT_EQ(c.ResolvedRolloutFragmentLength(), 1334);
}

TEST(PPOConfig, TrainingChangesOnlyWhatItIsGivenAndJsonRoundTrips) {
  PPOConfig c = PPOConfig().Environment("Pendulum-v1", {{"g", 9.0}}).Training({.lr = 3e-4, .num_epochs = 6});
  EXPECT_DOUBLE_EQ(c.lr, 3e-4);
  EXPECT_EQ(c.num_epochs, 6);
  EXPECT_EQ(c.minibatch_size, 128);
  c.RLModule({32, 16}).Debugging(9).EnvRunners(1, 2, 50);
  PPOConfig back = PPOConfig::FromJson(c.ToJson());
  EXPECT_EQ(back.ToJson(), c.ToJson());
  EXPECT_EQ(back.env_config.at("g"), 9.0);
  EXPECT_EQ(back.hidden, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(back.seed, 9u);
  EXPECT_ERROR_HAS(PPOConfig::FromJson("{not json"), "FromJson");
}

TEST(PPOConfig, BadInputIsAClearError) {
  EXPECT_ERROR_HAS(PPOConfig().Build(), "CartPole-v1");  // no env: names the registered ones
  EXPECT_ERROR_HAS(PPOConfig().Environment("Nope-v0").Build(), "CartPole-v1, Pendulum-v1");
  EXPECT_ERROR_HAS(PPOConfig().Environment("CartPole-v1", {{"bogus", 1}}).Build(), "bogus");
  EXPECT_ERROR_HAS(PPOConfig().Environment("CartPole-v1").Training({.train_batch_size = 100}).Build(),
                   "minibatch_size (128) must be <= train_batch_size (100)");
  EXPECT_ERROR_HAS(PPOConfig().Environment("CartPole-v1").EnvRunners(0).Learners(2).Build(),
                   "num_learners 2 needs prism::Init");
  EXPECT_ERROR_HAS(PPOConfig().Environment("CartPole-v1").EnvRunners(0, 0).Build(),
                   "num_envs_per_env_runner must be >= 1");
  EXPECT_ERROR_HAS(PPOConfig().Environment("CartPole-v1").Training({.lr = -1.0}).Build(), "lr must be > 0");
  EXPECT_ERROR_HAS(PPOConfig().Environment("CartPole-v1").RLModule({}).Build(), "hidden");
  // Runners need the runtime (this binary never calls prism::Init).
  EXPECT_ERROR_HAS(PPOConfig().Environment("CartPole-v1").EnvRunners(2).Build(), "prism::Init");
  EXPECT_ERROR_HAS(Algorithm::FromCheckpoint(TempDir("missing")), "holds no algorithm.h5");
}

PPOConfig SmallLocal() {
  return PPOConfig()
      .Environment("CartPole-v1")
      .EnvRunners(0, 2)
      .Training({.lr = 3e-4, .lambda_ = 0.95, .train_batch_size = 1000, .num_epochs = 4,
                 .vf_loss_coeff = 0.01})
      .Debugging(3);
}

TEST(PpoAlgorithm, LocalIterationsReportMetricsAndCheckpointsRestoreThePolicy) {
  Algorithm algo = SmallLocal().Build();
  TrainResult r;
  for (int i = 0; i < 3; ++i) r = algo.Train();
  EXPECT_EQ(r.training_iteration, 3);
  EXPECT_GE(r.num_env_steps_sampled, 1000);
  EXPECT_LT(r.num_env_steps_sampled, 1002);
  EXPECT_EQ(r.num_env_steps_sampled_lifetime, algo.num_env_steps_sampled_lifetime());
  EXPECT_GE(r.num_env_steps_sampled_lifetime, 3000);
  EXPECT_TRUE(std::isfinite(r.episode_return_mean));
  EXPECT_LE(r.episode_return_min, r.episode_return_mean);
  EXPECT_GE(r.episode_return_max, r.episode_return_mean);
  EXPECT_DOUBLE_EQ(r.episode_len_mean, r.episode_return_mean);  // CartPole pays 1 per step
  EXPECT_GT(r.entropy, 0);
  EXPECT_GE(r.mean_kl, 0);
  EXPECT_GT(r.vf_loss, 0);
  EXPECT_GT(r.learn_s, 0);
  EXPECT_EQ(r.ToMap().at("num_env_steps_sampled"), static_cast<double>(r.num_env_steps_sampled));

  const std::string dir = TempDir("save");
  algo.Save(dir);
  Algorithm back = Algorithm::FromCheckpoint(dir);
  EXPECT_EQ(back.iteration(), 3);
  EXPECT_EQ(back.num_env_steps_sampled_lifetime(), algo.num_env_steps_sampled_lifetime());
  EXPECT_EQ(back.config().ToJson(), algo.config().ToJson());
  torch::manual_seed(11);
  for (int i = 0; i < 50; ++i) {
    torch::Tensor o = torch::randn({4}) * 0.2;
    std::vector<float> obs(o.data_ptr<float>(), o.data_ptr<float>() + 4);
    EXPECT_EQ(back.ComputeSingleAction(obs).index, algo.ComputeSingleAction(obs).index);
  }
  EXPECT_ERROR_HAS(algo.ComputeSingleAction({1, 2}), "observation space has 4");
  // Training goes on from the restored state.
  EXPECT_EQ(back.Train().training_iteration, 4);

  // A damaged checkpoint is an error, not weights.
  std::ofstream(dir + "/algorithm.h5", std::ios::trunc) << "garbage";
  EXPECT_THROW(Algorithm::FromCheckpoint(dir), Error);
  std::filesystem::remove_all(dir);
}

TEST(PpoAlgorithm, RestoreLoadsTheStateAndKeepsTheNewConfig) {
  Algorithm first = SmallLocal().Build();
  first.Train();
  first.Train();
  const std::string dir = TempDir("restore");
  first.Save(dir);

  // A trial resuming with a mutated learning rate (PBT's explore): the state is the
  // checkpoint's, the config the new one.
  Algorithm second = SmallLocal().Training({.lr = 1e-3}).Debugging(5).Build();
  second.Restore(dir);
  EXPECT_EQ(second.iteration(), 2);
  EXPECT_EQ(second.num_env_steps_sampled_lifetime(), first.num_env_steps_sampled_lifetime());
  EXPECT_DOUBLE_EQ(second.config().lr, 1e-3);
  torch::manual_seed(12);
  for (int i = 0; i < 50; ++i) {
    torch::Tensor o = torch::randn({4}) * 0.2;
    std::vector<float> obs(o.data_ptr<float>(), o.data_ptr<float>() + 4);
    EXPECT_EQ(second.ComputeSingleAction(obs).index, first.ComputeSingleAction(obs).index);
  }
  EXPECT_EQ(second.Train().training_iteration, 3);

  // Another module shape, another algorithm, or nothing: clear errors.
  Algorithm wide = SmallLocal().RLModule({32}).Build();
  EXPECT_ERROR_HAS(wide.Restore(dir), "same environment and RLModule sizes");
  const std::string dqn_dir = TempDir("restore_dqn");
  Algorithm dqn = DQNConfig().Environment("CartPole-v1").Build();
  dqn.Save(dqn_dir);
  EXPECT_ERROR_HAS(second.Restore(dqn_dir), "holds a DQN checkpoint; this algorithm is PPO");
  EXPECT_ERROR_HAS(second.Restore(TempDir("restore_none")), "holds no algorithm.h5");
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(dqn_dir);
}

// RLlib's result dict paths (what prism.rllib's train() nests, and what a Tune trial reports
// with rllib_result_names): each algorithm's learner keys, and every value under its path.
TEST(TrainResult, RllibMapPutsEveryValueUnderItsPathInRLlibsResultDict) {
  TrainResult r;
  r.training_iteration = 4;
  r.episode_return_mean = 21.5;
  r.num_env_steps_sampled = 1000;
  r.num_env_steps_sampled_lifetime = 4000;
  r.num_env_steps_trained = 32000;
  r.total_loss = 0.5;
  r.mean_kl = 0.01;
  r.mean_q = 3.0;
  r.epsilon = 0.9;
  r.replay_buffer_size = 4000;
  r.num_healthy_env_runners = 2;
  r.sample_s = 0.25;
  const auto ppo = r.ToRllibMap("PPO");
  EXPECT_EQ(ppo.at("env_runners/episode_return_mean"), 21.5);
  EXPECT_EQ(ppo.at("env_runners/num_env_steps_sampled_lifetime"), 4000);
  EXPECT_EQ(ppo.at("num_env_steps_sampled_lifetime"), 4000);
  EXPECT_EQ(ppo.at("training_iteration"), 4);
  EXPECT_EQ(ppo.at("learners/default_policy/mean_kl_loss"), 0.01);
  EXPECT_EQ(ppo.at("learners/default_policy/total_loss"), 0.5);
  EXPECT_EQ(ppo.at("learners/__all_modules__/num_env_steps_trained"), 1000);  // PPO trains on its sample
  EXPECT_EQ(ppo.at("fault_tolerance/num_healthy_workers"), 2);
  EXPECT_EQ(ppo.at("timers/env_runner_sampling_timer"), 0.25);
  EXPECT_EQ(ppo.count("learners/default_policy/qf_loss"), 0u);
  EXPECT_EQ(ppo.count("env_runners/epsilon"), 0u);
  const auto dqn = r.ToRllibMap("DQN");
  EXPECT_EQ(dqn.at("learners/default_policy/qf_loss"), 0.5);
  EXPECT_EQ(dqn.at("learners/default_policy/qf_mean"), 3.0);
  EXPECT_EQ(dqn.at("env_runners/epsilon"), 0.9);
  EXPECT_EQ(dqn.at("replay_buffer/num_env_steps_stored"), 4000);
  EXPECT_EQ(dqn.at("learners/__all_modules__/num_env_steps_trained"), 32000);
  EXPECT_EQ(dqn.count("learners/default_policy/policy_loss"), 0u);
  for (const auto& [name, value] : ppo) EXPECT_FALSE(name.empty()) << value;
}

}  // namespace
}  // namespace prism::rl
