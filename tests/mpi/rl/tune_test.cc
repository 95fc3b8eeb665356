// An Algorithm as a Tune trainable (prism/rl/tune.h) on 3 ranks with 2 CPUs each: PPO
// trials with their own learning rates, two at a time (a trial holds 2 CPUs: its task and
// one env runner placed wherever a CPU is free), each reporting Train()'s metrics and
// checkpointing an algorithm that restores with the trial's config; a DQN trial; a key the
// config does not have fails its trial with the known keys named.

#include <gtest/gtest.h>
#include <prism/api.h>

#include <cmath>
#include <filesystem>

#include "prism/rl.h"
#include "prism/rl/tune.h"
#include "prism/tune.h"
#include "../../common/test_util.h"

namespace prism::rl {
namespace {

namespace fs = std::filesystem;

tune::RunConfig RunNamed(const std::string& name) {
  tune::RunConfig run;
  run.name = name;
  run.storage_path = prism_test::SharedTestDir() + "/prism-rl-tune-" + std::to_string(::getpid());
  run.verbose = 0;
  return run;
}

PPOConfig SmallPpo() {
  return PPOConfig()
      .Environment("CartPole-v1")
      .EnvRunners(1)
      .Training({.lr = 3e-4, .train_batch_size = 400, .minibatch_size = 100, .num_epochs = 2});
}

TEST(AlgorithmTrainable, PpoTrialsReportTrainAndCheckpointWithTheirOwnConfig) {
  tune::Trainable trainable = tune::AlgorithmTrainable(SmallPpo());
  EXPECT_EQ(trainable.resources.at("CPU"), 2);  // its task and one env runner
  tune::RunConfig run = RunNamed("ppo");
  run.stop = {{"training_iteration", 3}};
  tune::Tuner tuner(trainable, {{"lr", tune::GridSearch({1e-3, 1e-4})}, {"lambda", 0.95}, {"hidden", "[32]"}},
                    {.metric = "episode_return_mean", .mode = "max"}, run);
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    ASSERT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << ": " << r.error;
    EXPECT_EQ(r.metrics.at("training_iteration"), 3);
    EXPECT_GE(r.metrics.at("num_env_steps_sampled_lifetime"), 3 * 400);
    EXPECT_TRUE(std::isfinite(r.metrics.at("episode_return_mean")));
    EXPECT_EQ(r.metrics_history.size(), 3u);
    ASSERT_FALSE(r.checkpoint.empty());
    Algorithm back = Algorithm::FromCheckpoint(r.checkpoint);
    EXPECT_EQ(back.iteration(), 3);
    EXPECT_DOUBLE_EQ(back.config().lr, r.config.Get<double>("lr", 0));
    EXPECT_DOUBLE_EQ(back.config().lambda_, 0.95);
    EXPECT_EQ(back.config().hidden, (std::vector<int64_t>{32}));
    EXPECT_EQ(back.config().env_runner_placement, RunnerPlacement::kAnyFreeCpu);
  }
  fs::remove_all(results.experiment_path());
}

TEST(AlgorithmTrainable, DqnTrialsRunOnTheirOwnTask) {
  DQNConfig dqn = DQNConfig().Environment("CartPole-v1").Training(
      {.num_steps_sampled_before_learning_starts = 100, .training_intensity = 1.0});  // an update per 32 steps
  tune::RunConfig run = RunNamed("dqn");
  run.stop = {{"training_iteration", 2}};
  tune::Tuner tuner(tune::AlgorithmTrainable(dqn), {{"gamma", tune::GridSearch({0.99, 0.9})}},
                    {.metric = "episode_return_mean", .mode = "max"}, run);
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    ASSERT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << ": " << r.error;
    EXPECT_GT(r.metrics.at("num_env_steps_sampled_lifetime"), 0);
    Algorithm back = Algorithm::FromCheckpoint(r.checkpoint);
    EXPECT_EQ(back.algorithm_name(), "DQN");
    EXPECT_DOUBLE_EQ(back.dqn_config().gamma, r.config.Get<double>("gamma", 0));
  }
  fs::remove_all(results.experiment_path());
}

TEST(AlgorithmTrainable, PbtExploitRestoresTheTopTrialsStateWithTheMutatedConfig) {
  tune::PBTOptions options;
  options.time_attr = "training_iteration";
  options.perturbation_interval = 2;
  options.hyperparam_mutations = {{"lr", tune::Choice({1e-4, 3e-4, 1e-3})}};
  options.seed = 3;
  auto pbt = std::make_shared<tune::PopulationBasedTraining>(options);
  tune::RunConfig run = RunNamed("pbt");
  run.stop = {{"training_iteration", 12}};  // a perturbation check every 2 iterations: the trials overlap for some
  tune::Tuner tuner(tune::AlgorithmTrainable(SmallPpo()), {{"lr", tune::GridSearch({1e-4, 1e-3})}},
                    {.metric = "episode_return_mean", .mode = "max", .scheduler = pbt}, run);
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 2u);
  ASSERT_FALSE(pbt->PolicyLog().empty()) << "PBT never exploited";
  const tune::PerturbationRecord& record = pbt->PolicyLog().back();
  for (const auto& r : results) {
    ASSERT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << ": " << r.error;
    if (r.trial_id != record.trial) continue;
    // The bottom trial went on from the top trial's algorithm (its iterations and steps,
    // not a fresh start) with the explored learning rate.
    Algorithm back = Algorithm::FromCheckpoint(r.checkpoint);
    EXPECT_DOUBLE_EQ(back.config().lr, record.new_config.Get<double>("lr", 0));
    EXPECT_GE(back.iteration(), 4);
    EXPECT_GE(back.num_env_steps_sampled_lifetime(), 4 * 400);
  }
  fs::remove_all(results.experiment_path());
}

TEST(AlgorithmTrainable, BadInputIsAClearError) {
  tune::RunConfig run = RunNamed("bad");
  run.stop = {{"training_iteration", 1}};
  tune::Tuner typo(tune::AlgorithmTrainable(SmallPpo()), {{"learning_rate", 0.1}}, {}, run);
  tune::ResultGrid results = typo.Fit();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, tune::TrialStatus::kError);
  EXPECT_NE(results[0].error.find("sets \"learning_rate\", which PPOConfig has no setting for"), std::string::npos)
      << results[0].error;
  EXPECT_NE(results[0].error.find("lr"), std::string::npos);

  run.name = "bad_type";
  tune::Tuner wrong(tune::AlgorithmTrainable(SmallPpo()), {{"num_epochs", "many"}}, {}, run);
  results = wrong.Fit();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].error.find("\"num_epochs\" is \"many\", not an integer"), std::string::npos)
      << results[0].error;

  EXPECT_THROW(tune::AlgorithmTrainable(SmallPpo().Learners(2)), Error);
  EXPECT_THROW(tune::AlgorithmTrainable(SmallPpo(), {.checkpoint_frequency = 0}), Error);
  EXPECT_THROW(tune::AlgorithmTrainable(PPOConfig()), Error);  // no environment
  fs::remove_all(fs::path(results.experiment_path()).parent_path());
}

}  // namespace
}  // namespace prism::rl
