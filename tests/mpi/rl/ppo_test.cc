// PPO on real ranks (3: the driver and two env runner actors on ranks 1 and 2): CartPole
// learns, the weights reach every runner, a killed runner restarts while training goes on,
// a checkpoint restores the same greedy policy, bad input fails clearly.

#include <gtest/gtest.h>
#include <prism/api.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "prism/rl.h"

namespace prism::rl {
namespace {

/// CartPole that takes 3 ms a step on rank 1 (env runner 0): a straggler.
class SlowOnRank1 : public Env {
 public:
  SlowOnRank1() : env_(MakeEnv("CartPole-v1")) {}
  const Space& observation_space() const override { return env_->observation_space(); }
  const Space& action_space() const override { return env_->action_space(); }
  std::vector<float> Reset(std::optional<uint64_t> seed) override { return env_->Reset(seed); }
  StepResult Step(const Action& a) override {
    if (prism::GetRuntimeContext().GetRank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return env_->Step(a);
  }

 private:
  std::unique_ptr<Env> env_;
};
PRISM_RL_REGISTER_ENV("SlowOnRank1-v0", [](const EnvConfig&) { return std::make_unique<SlowOnRank1>(); });

/// CartPole whose steps fail on rank 2 (env runner 1): a broken environment.
class BrokenOnRank2 : public Env {
 public:
  BrokenOnRank2() : env_(MakeEnv("CartPole-v1")) {}
  const Space& observation_space() const override { return env_->observation_space(); }
  const Space& action_space() const override { return env_->action_space(); }
  std::vector<float> Reset(std::optional<uint64_t> seed) override { return env_->Reset(seed); }
  StepResult Step(const Action& a) override {
    if (prism::GetRuntimeContext().GetRank() == 2) throw Error("BrokenOnRank2: the simulator crashed");
    return env_->Step(a);
  }

 private:
  std::unique_ptr<Env> env_;
};
PRISM_RL_REGISTER_ENV("BrokenOnRank2-v0", [](const EnvConfig&) { return std::make_unique<BrokenOnRank2>(); });

/// CartPole that cannot be made on rank 2 (where learner 1 of a group builds its module).
class UnmakeableOnRank2 : public Env {
 public:
  UnmakeableOnRank2() : env_(MakeEnv("CartPole-v1")) {
    if (prism::GetRuntimeContext().GetRank() == 2) throw Error("UnmakeableOnRank2: no simulator license here");
  }
  const Space& observation_space() const override { return env_->observation_space(); }
  const Space& action_space() const override { return env_->action_space(); }
  std::vector<float> Reset(std::optional<uint64_t> seed) override { return env_->Reset(seed); }
  StepResult Step(const Action& a) override { return env_->Step(a); }

 private:
  std::unique_ptr<Env> env_;
};
PRISM_RL_REGISTER_ENV("UnmakeableOnRank2-v0", [](const EnvConfig&) { return std::make_unique<UnmakeableOnRank2>(); });

template <typename F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

PPOConfig CartPole() {
  // RLlib's tuned CartPole example's settings (tuned_examples/ppo/cartpole_ppo.py).
  return PPOConfig()
      .Environment("CartPole-v1")
      .EnvRunners(/*num_env_runners=*/2, /*num_envs_per_env_runner=*/1)
      .Training({.lr = 3e-4, .gamma = 0.99, .num_epochs = 6, .vf_loss_coeff = 0.01})
      .Debugging(1);
}

TEST(PpoMpi, CartPoleWithTwoRunnersReaches150AndRestoresTheSamePolicy) {
  ASSERT_GE(prism::GetRuntimeContext().GetWorldSize(), 3);
  torch::set_num_threads(1);
  Algorithm algo = CartPole().Build();
  auto start = std::chrono::steady_clock::now();
  TrainResult r;
  bool killed = false;
  for (int it = 0; it < 40; ++it) {
    r = algo.Train();
    std::printf("iter %ld return %.1f steps %ld (lifetime %ld) sample %.2fs learn %.2fs runners %d kl %.4f\n",
                static_cast<long>(r.training_iteration), r.episode_return_mean,
                static_cast<long>(r.num_env_steps_sampled), static_cast<long>(r.num_env_steps_sampled_lifetime),
                r.sample_s, r.learn_s, r.num_healthy_env_runners, r.mean_kl);
    if (it == 0) {
      EXPECT_EQ(r.num_healthy_env_runners, 2);
      EXPECT_GE(r.num_env_steps_sampled, 4000);  // 2 runners x 2000 ("auto" fragments)
      EXPECT_LT(r.episode_return_mean, 50);      // a random policy
    }
    if (it == 2) {
      // A runner dies; the iteration goes on with the other, and it is back later.
      algo.KillEnvRunner(0);
      killed = true;
    }
    if (r.episode_return_mean >= 150) break;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("reached %.1f after %ld iterations, %ld env steps, %.1f s\n", r.episode_return_mean,
              static_cast<long>(r.training_iteration), static_cast<long>(r.num_env_steps_sampled_lifetime),
              seconds);
  EXPECT_TRUE(killed);
  EXPECT_GE(r.episode_return_mean, 150);
  EXPECT_EQ(r.num_healthy_env_runners, 2) << "the killed runner never came back";

  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("prism_rl_ppo_mpi_" + std::to_string(getpid()))).string();
  algo.Save(dir);
  Algorithm back = Algorithm::FromCheckpoint(dir);
  EXPECT_EQ(back.iteration(), algo.iteration());
  auto env = MakeEnv("CartPole-v1");
  std::vector<float> obs = env->Reset(7);
  int same = 0, steps = 0;
  bool done = false;
  while (!done && steps < 500) {
    Action a = algo.ComputeSingleAction(obs);
    same += back.ComputeSingleAction(obs).index == a.index;
    StepResult s = env->Step(a);
    obs = s.observation;
    done = s.terminated || s.truncated;
    ++steps;
  }
  EXPECT_EQ(same, steps);
  EXPECT_GE(steps, 100) << "the greedy policy balanced only " << steps << " steps";
  // The restored algorithm's runners sample with its weights.
  TrainResult again = back.Train();
  EXPECT_EQ(again.training_iteration, algo.iteration() + 1);
  EXPECT_EQ(again.num_healthy_env_runners, 2);
  std::filesystem::remove_all(dir);
}

TEST(PpoMpi, IterationsGoOnWithoutAStragglingOrDeadRunner) {
  // Runner 0 needs 0.6 s for its 200 steps; the iteration waits 0.25 s for it.
  Algorithm algo = PPOConfig()
                       .Environment("SlowOnRank1-v0")
                       .EnvRunners(2, 1, /*rollout_fragment_length=*/200)
                       .Training({.train_batch_size = 400, .minibatch_size = 100, .num_epochs = 1})
                       .Fault(/*sample_timeout_s=*/0.25)
                       .Build();
  TrainResult r = algo.Train();
  EXPECT_EQ(r.num_healthy_env_runners, 1);
  EXPECT_GE(r.num_env_steps_sampled, 200);
  EXPECT_LT(r.num_env_steps_sampled, 400);
  // Next iteration: runner 0's call queues behind the straggling one, and runner 0 is killed
  // meanwhile (it restarts): the queued call fails with ActorError (or times out), and the
  // iteration learns from runner 1's sample.
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    algo.KillEnvRunner(0);
  });
  r = algo.Train();
  killer.join();
  EXPECT_EQ(r.num_healthy_env_runners, 1);
  EXPECT_EQ(r.training_iteration, 2);
  EXPECT_GE(r.num_env_steps_sampled_lifetime, 400);
  // The restarted runner samples again (still slowly): a generous timeout takes it in.
  Algorithm patient = PPOConfig()
                          .Environment("SlowOnRank1-v0")
                          .EnvRunners(2, 1, 100)
                          .Training({.train_batch_size = 200, .minibatch_size = 100, .num_epochs = 1})
                          .Build();
  EXPECT_EQ(patient.Train().num_healthy_env_runners, 2);
  EXPECT_NE(ErrorOf([&] { algo.KillEnvRunner(5); }).find("no env runner 5"), std::string::npos);
}

TEST(PpoMpi, ALearnerGroupAveragingGradientsLearnsCartPole) {
  torch::set_num_threads(1);
  Algorithm algo = CartPole().Learners(2).Build();
  TrainResult r;
  for (int it = 0; it < 40; ++it) {
    r = algo.Train();
    std::printf("2 learners: iter %ld return %.1f learn %.2fs kl %.4f kl_coeff %.3f\n",
                static_cast<long>(r.training_iteration), r.episode_return_mean, r.learn_s, r.mean_kl,
                r.curr_kl_coeff);
    EXPECT_TRUE(std::isfinite(r.total_loss));
    if (r.episode_return_mean >= 150) break;
  }
  EXPECT_GE(r.episode_return_mean, 150);
  // The driver's module holds learner 0's weights: its greedy policy balances too.
  auto env = MakeEnv("CartPole-v1");
  std::vector<float> obs = env->Reset(3);
  int steps = 0;
  for (bool done = false; !done && steps < 500; ++steps) {
    StepResult s = env->Step(algo.ComputeSingleAction(obs));
    obs = s.observation;
    done = s.terminated || s.truncated;
  }
  EXPECT_GE(steps, 100);
  // Restored, the new learners start from the checkpoint's weights (the old group goes
  // first: its workers hold the ranks' CPUs).
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("prism_rl_ppo_learners_" + std::to_string(getpid()))).string();
  algo.Save(dir);
  // The checkpoint carries the group's Adam moments (two per weight), not the driver's
  // never-stepped optimizer: it is about 3x the size of one saved before any update.
  const std::string fresh_dir = dir + "_fresh";
  CartPole().EnvRunners(0).Learners(2).Build().Save(fresh_dir);
  EXPECT_GT(std::filesystem::file_size(dir + "/algorithm.h5"),
            2 * std::filesystem::file_size(fresh_dir + "/algorithm.h5"));
  std::filesystem::remove_all(fresh_dir);
  const int64_t iterations = algo.iteration();
  std::vector<float> probe = env->Reset(5);
  const int64_t greedy = algo.ComputeSingleAction(probe).index;
  { Algorithm gone = std::move(algo); }
  Algorithm back = Algorithm::FromCheckpoint(dir);
  EXPECT_EQ(back.ComputeSingleAction(probe).index, greedy);
  TrainResult after = back.Train();
  EXPECT_EQ(after.training_iteration, iterations + 1);
  EXPECT_GE(after.episode_return_mean, 100);  // no relapse to a random policy
  std::filesystem::remove_all(dir);
  EXPECT_NE(ErrorOf([] { CartPole().Learners(3).Build(); }).find("num_learners 3 is larger than the 2 worker ranks"),
            std::string::npos);
}

TEST(PpoMpi, ALearnerThatFailsFailsTrainNamingItAndTheGroupGivesItsRanksBack) {
  auto failing = [] {
    return PPOConfig()
        .Environment("UnmakeableOnRank2-v0")
        .EnvRunners(0)
        .Learners(2)
        .Training({.train_batch_size = 200, .minibatch_size = 100, .num_epochs = 1})
        .Build();
  };
  Algorithm algo = failing();
  const auto start = std::chrono::steady_clock::now();
  const std::string error = ErrorOf([&] { algo.Train(); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));  // an event, not a timeout
  EXPECT_NE(error.find("learner 1 on rank 2"), std::string::npos) << error;
  EXPECT_NE(error.find("no simulator license here"), std::string::npos) << error;
  // A later Train fails the same way, and the failed group's CPUs are free for a healthy one
  // while the failed algorithm lives.
  EXPECT_NE(ErrorOf([&] { algo.Train(); }).find("learner 1 on rank 2"), std::string::npos);
  Algorithm healthy =
      CartPole().EnvRunners(0).Learners(2).Training({.train_batch_size = 200, .minibatch_size = 100}).Build();
  EXPECT_TRUE(std::isfinite(healthy.Train().total_loss));
}

TEST(PpoMpi, AnEnvironmentErrorOnARunnerReachesTheDriver) {
  Algorithm algo = PPOConfig()
                       .Environment("BrokenOnRank2-v0")
                       .EnvRunners(2, 1, 100)
                       .Training({.train_batch_size = 200, .minibatch_size = 100, .num_epochs = 1})
                       .Build();
  std::string error = ErrorOf([&] { algo.Train(); });
  EXPECT_NE(error.find("the simulator crashed"), std::string::npos) << error;
}

TEST(PpoMpi, BadInputIsAClearError) {
  EXPECT_NE(ErrorOf([] { CartPole().EnvRunners(3).Build(); }).find("larger than the 2 worker ranks"),
            std::string::npos)
      << ErrorOf([] { CartPole().EnvRunners(3).Build(); });
  EXPECT_NE(ErrorOf([] { CartPole().Environment("Acrobot-v1").Build(); }).find("CartPole-v1, Pendulum-v1"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { CartPole().Training({.minibatch_size = 5000}).Build(); })
                .find("minibatch_size (5000) must be <= train_batch_size (4000)"),
            std::string::npos);
}

TEST(PpoMpi, PendulumSamplesOnRunnersWithAGaussianPolicy) {
  Algorithm algo = PPOConfig()
                       .Environment("Pendulum-v1")
                       .EnvRunners(2, 2)
                       .Training({.train_batch_size = 800, .num_epochs = 2})
                       .Build();
  TrainResult r = algo.Train();
  EXPECT_EQ(r.num_healthy_env_runners, 2);
  EXPECT_GE(r.num_env_steps_sampled, 800);
  EXPECT_EQ(r.num_episodes, 4);  // each of the 4 copies ends one 200-step episode (truncated)
  EXPECT_NEAR(r.episode_len_mean, 200, 1e-9);
  EXPECT_TRUE(std::isfinite(r.total_loss));
  EXPECT_EQ(algo.ComputeSingleAction({1, 0, 0}).values.size(), 1u);
}

}  // namespace
}  // namespace prism::rl
