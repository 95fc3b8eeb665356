// DQN behind prism::rl::Algorithm without MPI (DQNConfig, num_env_runners 0): the config's
// RLlib defaults, its checks and JSON, Train()'s metrics, Save / FromCheckpoint, and PPO's
// side of the shared Algorithm (its name, its DQN fields left 0).

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "prism/errors.h"
#include "rl_test_util.h"
#include "prism/rl.h"

namespace prism::rl {
namespace {

using prism_test::ErrorOf;

std::string TempDir(const std::string& name) { return prism_rl_test::TempDir("prism_rl_dqn_algo_", name); }

// Small and quick to learn from: learning starts at 300 steps, so the first iteration
// (>= 1000 env steps) already trains.
DQNConfig SmallCartPole() {
  DQNConfig c;
  c.Environment("CartPole-v1")
      .EnvRunners(0, 1)
      .Training({.lr = 1e-3, .num_steps_sampled_before_learning_starts = 300,
                 .epsilon = std::vector<std::pair<int64_t, double>>{{0, 1.0}, {3000, 0.1}}})
      .RLModule({32, 32})
      .Debugging(7);
  return c;
}

TEST(DqnAlgorithm, DefaultsAreRLlibs) {
  DQNConfig c;
  EXPECT_EQ(c.num_env_runners, 0);
  EXPECT_EQ(c.num_envs_per_env_runner, 1);
  EXPECT_DOUBLE_EQ(c.lr, 5e-4);
  EXPECT_DOUBLE_EQ(c.gamma, 0.99);
  EXPECT_EQ(c.train_batch_size, 32);
  EXPECT_EQ(c.replay_buffer_capacity, 50000);
  EXPECT_EQ(c.target_network_update_freq, 500);
  EXPECT_EQ(c.num_steps_sampled_before_learning_starts, 1000);
  EXPECT_EQ(c.epsilon, (std::vector<std::pair<int64_t, double>>{{0, 1.0}, {10000, 0.05}}));
  EXPECT_TRUE(c.double_q);
  EXPECT_TRUE(c.dueling);
  EXPECT_EQ(c.n_step, 1);
  EXPECT_DOUBLE_EQ(c.tau, 1.0);
  EXPECT_DOUBLE_EQ(c.grad_clip, 40.0);
  EXPECT_FALSE(c.training_intensity.has_value());
  EXPECT_EQ(c.hidden, (std::vector<int64_t>{256, 256}));
  EXPECT_TRUE(c.head_hiddens.empty());
  // Training() replaces only what it is given.
  c.Training({.gamma = 0.9, .n_step = 3});
  EXPECT_DOUBLE_EQ(c.gamma, 0.9);
  EXPECT_EQ(c.n_step, 3);
  EXPECT_DOUBLE_EQ(c.lr, 5e-4);
  EXPECT_EQ(c.train_batch_size, 32);
}

TEST(DqnAlgorithm, ReadmeExampleConfig) {
  // The README's / dqn.h's builder calls, as written there.
  DQNConfig c = DQNConfig()
                    .Environment("CartPole-v1")
                    .EnvRunners(/*num_env_runners=*/0, /*num_envs_per_env_runner=*/1)
                    .Training({.epsilon = {{{0, 1.0}, {10000, 0.02}}}, .n_step = 3})
                    .RLModule(/*hidden=*/{256}, /*head_hiddens=*/{256})
                    .Debugging(/*seed=*/0);
  EXPECT_EQ(c.n_step, 3);
  EXPECT_EQ(c.epsilon, (std::vector<std::pair<int64_t, double>>{{0, 1.0}, {10000, 0.02}}));
  EXPECT_EQ(c.hidden, (std::vector<int64_t>{256}));
  EXPECT_EQ(c.head_hiddens, (std::vector<int64_t>{256}));
  EXPECT_EQ(ErrorOf([&] { c.Validate(); }), "(no error)");
}

TEST(DqnAlgorithm, JsonRoundTrip) {
  DQNConfig c = SmallCartPole();
  c.Training({.train_batch_size = 64, .double_q = false, .dueling = false, .n_step = 3, .tau = 0.5,
              .training_intensity = 8.0})
      .RLModule({16}, {8});
  c.env_config["max_episode_steps"] = 200;
  DQNConfig back = DQNConfig::FromJson(c.ToJson());
  EXPECT_EQ(back.ToJson(), c.ToJson());
  EXPECT_EQ(back.env, "CartPole-v1");
  EXPECT_EQ(back.train_batch_size, 64);
  EXPECT_FALSE(back.double_q);
  EXPECT_FALSE(back.dueling);
  EXPECT_EQ(back.n_step, 3);
  EXPECT_DOUBLE_EQ(back.tau, 0.5);
  ASSERT_TRUE(back.training_intensity.has_value());
  EXPECT_DOUBLE_EQ(*back.training_intensity, 8.0);
  EXPECT_EQ(back.epsilon, c.epsilon);
  EXPECT_EQ(back.head_hiddens, (std::vector<int64_t>{8}));
  EXPECT_EQ(back.seed, 7u);
  EXPECT_FALSE(DQNConfig::FromJson(DQNConfig().ToJson()).training_intensity.has_value());
  EXPECT_ERROR_HAS(DQNConfig::FromJson("{not json"), "DQNConfig::FromJson");
}

TEST(DqnAlgorithm, BadConfigsGiveClearErrors) {
  // Runners need the runtime (this binary never calls prism::Init).
  EXPECT_ERROR_HAS(SmallCartPole().EnvRunners(2).Build(), "num_env_runners 2 needs prism::Init");
  EXPECT_ERROR_HAS(SmallCartPole().EnvRunners(1, 1, -1).Validate(), "rollout_fragment_length must be >= 1");
  EXPECT_ERROR_HAS(SmallCartPole().Fault(0).Validate(), "sample_timeout_s must be > 0");
  EXPECT_ERROR_HAS(SmallCartPole().Environment("NoSuchEnv-v0").Build(), "NoSuchEnv-v0");
  EXPECT_ERROR_HAS(SmallCartPole().Environment("NoSuchEnv-v0").Build(), "CartPole-v1");  // the registered ones
  EXPECT_ERROR_HAS(DQNConfig().Build(), "no environment");
  EXPECT_ERROR_HAS(SmallCartPole().Environment("Pendulum-v1").Build(), "DQN needs a Discrete action space");
  EXPECT_ERROR_HAS(SmallCartPole().Training({.gamma = 1.5}).Build(), "gamma");
  EXPECT_ERROR_HAS(SmallCartPole().Training({.n_step = 0}).Build(), "n_step");
  EXPECT_ERROR_HAS(SmallCartPole().Training({.train_batch_size = 0}).Build(), "train_batch_size");
  EXPECT_ERROR_HAS(SmallCartPole().Training({.epsilon = std::vector<std::pair<int64_t, double>>{{0, 1.5}}}).Build(),
                   "epsilon");
  EXPECT_ERROR_HAS(SmallCartPole().RLModule({}).Build(), "at least one hidden layer");
  EXPECT_ERROR_HAS(SmallCartPole().RLModule({32}, {0}).Build(), "head_hiddens");
  EXPECT_ERROR_HAS(SmallCartPole().EnvRunners(0, 0).Build(), "num_envs_per_env_runner");
  // Valid configs pass Validate.
  EXPECT_EQ(ErrorOf([] { SmallCartPole().Validate(); }), "(no error)");
}

TEST(DqnAlgorithm, TrainReportsSaneMetrics) {
  Algorithm algo = SmallCartPole().Build();
  EXPECT_EQ(algo.algorithm_name(), "DQN");
  EXPECT_ERROR_HAS(algo.config(), "dqn_config()");
  EXPECT_EQ(algo.dqn_config().hidden, (std::vector<int64_t>{32, 32}));
  double last_epsilon = 1.0;
  int64_t lifetime = 0;
  for (int i = 1; i <= 3; ++i) {
    TrainResult r = algo.Train();
    EXPECT_EQ(r.training_iteration, i);
    EXPECT_GE(r.num_env_steps_sampled, 1000);
    lifetime += r.num_env_steps_sampled;
    EXPECT_EQ(r.num_env_steps_sampled_lifetime, lifetime);
    // Learning starts at step 300: the first iteration already trains, 32 rows per update,
    // one update per env step from then on.
    EXPECT_GT(r.num_env_steps_trained, 0);
    EXPECT_EQ(r.num_env_steps_trained % 32, 0);
    EXPECT_LE(r.num_env_steps_trained, 32 * r.num_env_steps_sampled);
    EXPECT_TRUE(std::isfinite(r.total_loss));
    EXPECT_GE(r.total_loss, 0);
    EXPECT_TRUE(std::isfinite(r.mean_q));
    EXPECT_TRUE(std::isfinite(r.td_error_mean));
    EXPECT_GE(r.td_error_mean, 0);
    // Epsilon follows its schedule: 1 -> 0.1 over 3000 steps.
    EXPECT_LT(r.epsilon, last_epsilon);
    EXPECT_GE(r.epsilon, 0.1);
    last_epsilon = r.epsilon;
    EXPECT_EQ(r.replay_buffer_size, lifetime);  // n_step 1, below capacity
    EXPECT_GT(r.num_episodes, 0);
    EXPECT_GE(r.episode_return_mean, r.episode_return_min);
    EXPECT_LE(r.episode_return_mean, r.episode_return_max);
    EXPECT_GE(r.episode_return_min, 1);
    EXPECT_DOUBLE_EQ(r.sample_s, 0);
    EXPECT_GT(r.learn_s, 0);
    auto m = r.ToMap();
    EXPECT_DOUBLE_EQ(m.at("epsilon"), r.epsilon);
    EXPECT_DOUBLE_EQ(m.at("mean_q"), r.mean_q);
    EXPECT_DOUBLE_EQ(m.at("td_error_mean"), r.td_error_mean);
    EXPECT_DOUBLE_EQ(m.at("num_env_steps_trained"), static_cast<double>(r.num_env_steps_trained));
    EXPECT_DOUBLE_EQ(m.at("replay_buffer_size"), static_cast<double>(r.replay_buffer_size));
  }
  EXPECT_NEAR(last_epsilon, std::max(0.1, 1.0 - 0.9 * static_cast<double>(lifetime) / 3000), 1e-9);
  EXPECT_EQ(algo.iteration(), 3);
  EXPECT_EQ(algo.num_env_steps_sampled_lifetime(), lifetime);
  EXPECT_ERROR_HAS(algo.KillEnvRunner(0), "no env runner 0");
  EXPECT_NE(ErrorOf([&] { algo.ComputeSingleAction({0.f, 0.f}); }), "(no error)");
}

TEST(DqnAlgorithm, CheckpointGivesTheSameGreedyActions) {
  const std::string dir = TempDir("ckpt");
  // Non-default module and n-step: the restored config must match for the weights to load.
  DQNConfig c = SmallCartPole();
  c.RLModule({24}, {16}).Training({.dueling = false, .n_step = 3});
  Algorithm algo = c.Build();
  algo.Train();
  algo.Train();
  algo.Save(dir);
  ASSERT_TRUE(std::filesystem::exists(dir + "/dqn.h5"));
  ASSERT_TRUE(std::filesystem::exists(dir + "/dqn_config.json"));

  Algorithm again = Algorithm::FromCheckpoint(dir);
  EXPECT_EQ(again.algorithm_name(), "DQN");
  EXPECT_EQ(again.dqn_config().ToJson(), c.ToJson());
  EXPECT_EQ(again.iteration(), 2);
  EXPECT_EQ(again.num_env_steps_sampled_lifetime(), algo.num_env_steps_sampled_lifetime());

  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  int differs_from_fresh = 0;
  Algorithm fresh = c.Build();  // same seed, untrained
  for (int i = 0; i < 50; ++i) {
    std::vector<float> obs = {u(gen) * 10, u(gen) * 10, u(gen), u(gen) * 10};
    Action a = algo.ComputeSingleAction(obs);
    Action b = again.ComputeSingleAction(obs);
    EXPECT_EQ(a.index, b.index) << "observation " << i;
    differs_from_fresh += fresh.ComputeSingleAction(obs).index != a.index;
  }
  // The comparison means something: training changed some greedy actions.
  EXPECT_GT(differs_from_fresh, 0);

  // Training goes on from the restored counters.
  TrainResult r = again.Train();
  EXPECT_EQ(r.training_iteration, 3);
  EXPECT_GT(r.num_env_steps_sampled_lifetime, algo.num_env_steps_sampled_lifetime());
  std::filesystem::remove_all(dir);
}

TEST(DqnAlgorithm, BadCheckpointDirectories) {
  const std::string empty = TempDir("empty");
  std::filesystem::create_directories(empty);
  EXPECT_ERROR_HAS(Algorithm::FromCheckpoint(empty), "holds no");

  const std::string dir = TempDir("noconfig");
  Algorithm algo = SmallCartPole().RLModule({8}).Build();
  algo.Save(dir);
  std::filesystem::remove(dir + "/dqn_config.json");
  EXPECT_ERROR_HAS(Algorithm::FromCheckpoint(dir), "dqn_config.json");

  algo.Save(dir);
  { std::ofstream(dir + "/algorithm.h5") << "x"; }
  EXPECT_ERROR_HAS(Algorithm::FromCheckpoint(dir), "holds both");
  std::filesystem::remove_all(empty);
  std::filesystem::remove_all(dir);
}

TEST(DqnAlgorithm, PpoAlgorithmLeavesDqnFieldsZero) {
  Algorithm ppo = PPOConfig()
                      .Environment("CartPole-v1")
                      .EnvRunners(0, 1)
                      .Training({.train_batch_size = 200, .minibatch_size = 100, .num_epochs = 1})
                      .RLModule({16})
                      .Build();
  EXPECT_EQ(ppo.algorithm_name(), "PPO");
  EXPECT_ERROR_HAS(ppo.dqn_config(), "config()");
  EXPECT_EQ(ppo.config().train_batch_size, 200);
  TrainResult r = ppo.Train();
  EXPECT_GE(r.num_env_steps_sampled, 200);
  EXPECT_EQ(r.epsilon, 0);
  EXPECT_EQ(r.mean_q, 0);
  EXPECT_EQ(r.td_error_mean, 0);
  EXPECT_EQ(r.num_env_steps_trained, 0);
  EXPECT_EQ(r.replay_buffer_size, 0);
}

}  // namespace
}  // namespace prism::rl
