// DQN with env runner actors on real ranks (3: the driver learns, runners on ranks 1 and 2):
// the runners' rows fill the driver's replay buffer, CartPole learns with the weights they
// get each training step, a killed runner restarts while training goes on, and a checkpoint
// restores into an algorithm whose runners sample again.

#include <gtest/gtest.h>
#include <prism/api.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "prism/rl.h"

namespace prism::rl {
namespace {

DQNConfig CartPoleWithRunners() {
  // RLlib's tuned CartPole settings (smaller heads for a short test), 2 runners of 16-step
  // fragments, and RLlib's native ratio of one replayed row per sampled step.
  return DQNConfig()
      .Environment("CartPole-v1")
      .EnvRunners(/*num_env_runners=*/2, /*num_envs_per_env_runner=*/1, /*rollout_fragment_length=*/16)
      .Training({.epsilon = {{{0, 1.0}, {5000, 0.02}}}, .n_step = 3, .training_intensity = 32})
      .RLModule({64}, {64})
      .Debugging(2);
}

TEST(DqnMpi, RunnersSampleLearnSurviveAKillAndRestore) {
  ASSERT_GE(prism::GetRuntimeContext().GetWorldSize(), 3);
  torch::set_num_threads(1);
  Algorithm algo = CartPoleWithRunners().Build();
  const auto start = std::chrono::steady_clock::now();
  TrainResult r = algo.Train();
  EXPECT_EQ(r.num_healthy_env_runners, 2);
  EXPECT_GE(r.num_env_steps_sampled, 1000);
  EXPECT_LT(r.num_env_steps_sampled, 1000 + 32);  // whole store steps of 2 x 16
  // n_step 3: each copy holds back up to 2 steps' rows until their third step comes.
  EXPECT_LE(r.replay_buffer_size, r.num_env_steps_sampled);
  EXPECT_GE(r.replay_buffer_size, r.num_env_steps_sampled - 2 * 2);
  EXPECT_GT(r.num_env_steps_trained, 0);

  algo.KillEnvRunner(0);  // it restarts; the next iteration goes on with runner 1
  double best = 0;
  for (int it = 0; it < 25 && best < 100; ++it) {
    r = algo.Train();
    best = std::max(best, r.episode_return_mean);
    std::printf("iter %ld return %.1f steps %ld epsilon %.3f runners %d\n", static_cast<long>(r.training_iteration),
                r.episode_return_mean, static_cast<long>(r.num_env_steps_sampled_lifetime), r.epsilon,
                r.num_healthy_env_runners);
  }
  std::printf("best mean return %.1f after %ld env steps, %.1f s\n", best,
              static_cast<long>(r.num_env_steps_sampled_lifetime),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  EXPECT_GE(best, 100) << "DQN with env runners did not learn";  // a random policy: ~22
  EXPECT_EQ(r.num_healthy_env_runners, 2) << "the killed runner never came back";

  const std::string dir =
      (std::filesystem::temp_directory_path() / ("prism_rl_dqn_mpi_" + std::to_string(getpid()))).string();
  algo.Save(dir);
  Algorithm back = Algorithm::FromCheckpoint(dir);
  EXPECT_EQ(back.iteration(), algo.iteration());
  EXPECT_EQ(back.dqn_config().num_env_runners, 2);
  TrainResult again = back.Train();
  EXPECT_EQ(again.training_iteration, algo.iteration() + 1);
  EXPECT_EQ(again.num_healthy_env_runners, 2);
  std::filesystem::remove_all(dir);
}

TEST(DqnMpi, MoreRunnersThanWorkerRanksIsAClearError) {
  try {
    DQNConfig().Environment("CartPole-v1").EnvRunners(5).Build();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_env_runners 5 is larger than the 2 worker ranks"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace prism::rl
