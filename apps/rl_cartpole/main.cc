// PPO on CartPole-v1 with prism::rl: RLlib's tuned CartPole example as one MPI job (and, with
// --env=Pendulum-v1 and RLlib's Pendulum settings, PPO on a continuous action space).
//
//   mpirun -n 3 ./rl_cartpole --runners=2 --stop-return=450
//   mpirun -n 3 ./rl_cartpole --env=Pendulum-v1 --runners=2 --envs-per-runner=4
//       --train-batch-size=1024 --minibatch-size=64 --num-epochs=6 --lr=3e-4 --gamma=0.95
//       --lambda=0.1 --vf-loss-coeff=1 --hidden=128,128 --stop-return=-300
//
// The driver (rank 0) learns; env runner actors on ranks 1..runners sample. Each iteration
// prints the smoothed episode return (last 100 episodes) and the env steps per second of
// sampling and of the whole iteration (and appends a row to --curve's CSV). When the return
// reaches --stop-return (or after --max-iterations or --max-env-steps) the algorithm is
// saved to --checkpoint-dir, restored into a new Algorithm, and its greedy policy is
// evaluated on --eval-episodes fresh episodes. Exit status 0 if the stop return was
// reached, 3 if not, 2 for bad flags, 1 for errors.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/driver.h"
#include "prism/api.h"
#include "prism/rl.h"

namespace {

struct Options {
  std::string env = "CartPole-v1";
  int runners = 2, envs = 1, learners = 1, max_iterations = 200, eval_episodes = 10;
  double stop_return = NAN, lr = 3e-4, vf_loss_coeff = 0.01, lambda = 1.0, gamma = 0.99;
  double vf_clip_param = 10, clip_param = 0.3, entropy_coeff = 0, grad_clip = 0;
  int64_t train_batch_size = 4000, minibatch_size = 128, num_epochs = 6, max_env_steps = 0;
  std::vector<int64_t> hidden = {64, 64};
  uint64_t seed = 0;
  std::string checkpoint_dir = "/tmp/prism_rl_cartpole";
  std::string curve;
};

/// Declares the flags on `app`, bound to `o`.
void AddFlags(CLI::App& app, Options& o) {
  app.add_option("--env", o.env, "a registered environment: CartPole-v1 (default), Pendulum-v1");
  app.add_option("--runners", o.runners,
                 "env runner actors, one per worker rank (default 2; 0: sample on the driver)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--envs-per-runner", o.envs, "environment copies per runner (default 1)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--learners", o.learners,
                 "1: learn on the driver (default); N > 1: a group of N learners on ranks 1..N")
      ->check(CLI::Range(0, 4096));
  app.add_option("--stop-return", o.stop_return,
                 "stop when the mean return of the last 100 episodes reaches R (default 450 for "
                 "CartPole-v1, -300 for Pendulum-v1)")
      ->check(CLI::Range(-1e9, 1e9));
  app.add_option("--max-iterations", o.max_iterations, "stop after N iterations anyway (default 200)")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--max-env-steps", o.max_env_steps,
                 "stop after N env steps sampled anyway (default: no limit)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000000000}));
  app.add_option("--train-batch-size", o.train_batch_size, "env steps per iteration (default 4000)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  app.add_option("--minibatch-size", o.minibatch_size, "(default 128)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  app.add_option("--num-epochs", o.num_epochs, "(default 6)")->check(CLI::Range(int64_t{1}, int64_t{10000}));
  app.add_option("--lr", o.lr, "(default 0.0003)")->check(CLI::Range(1e-12, 10.0));
  app.add_option("--vf-loss-coeff", o.vf_loss_coeff, "(default 0.01)")->check(CLI::Range(0.0, 1e6));
  app.add_option("--lambda", o.lambda, "GAE lambda (default 1.0, RLlib's)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--gamma", o.gamma, "discount (default 0.99, RLlib's)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--vf-clip-param", o.vf_clip_param, "cap of the squared value error (default 10, RLlib's)")
      ->check(CLI::Range(1e-12, 1e12));
  app.add_option("--clip-param", o.clip_param, "PPO's ratio clip (default 0.3, RLlib's)")
      ->check(CLI::Range(1e-12, 1e6));
  app.add_option("--entropy-coeff", o.entropy_coeff, "(default 0)")->check(CLI::Range(0.0, 1e6));
  app.add_option("--grad-clip", o.grad_clip, "global gradient norm cap (default 0: none)")
      ->check(CLI::Range(0.0, 1e12));
  app.add_option("--hidden", o.hidden,
                 "hidden layer sizes of the policy and value MLPs, e.g. 128,128 (default 64,64)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--curve", o.curve, "write one CSV row per iteration (the learning curve)");
  app.add_option("--seed", o.seed, "(default 0)");
  app.add_option("--checkpoint-dir", o.checkpoint_dir, "(default /tmp/prism_rl_cartpole)");
  app.add_option("--eval-episodes", o.eval_episodes, "greedy episodes after restoring (default 10)")
      ->check(CLI::Range(0, 1000000));
}

int Run(Options o) {
  namespace rl = prism::rl;
  if (std::isnan(o.stop_return)) {
    if (o.env == "CartPole-v1") {
      o.stop_return = 450;  // RLlib's tuned CartPole example
    } else if (o.env == "Pendulum-v1") {
      o.stop_return = -300;  // RLlib's Pendulum PPO example
    } else {
      o.stop_return = INFINITY;  // no target: run --max-iterations
    }
  }
  torch::set_num_threads(1);  // tiny MLPs: one thread is fastest, and leaves the runners a core
  rl::Algorithm algo = rl::PPOConfig()
                           .Environment(o.env)
                           .EnvRunners(o.runners, o.envs)
                           .Learners(o.learners)
                           .Training({.lr = o.lr,
                                      .gamma = o.gamma,
                                      .lambda_ = o.lambda,
                                      .train_batch_size = o.train_batch_size,
                                      .minibatch_size = o.minibatch_size,
                                      .num_epochs = o.num_epochs,
                                      .clip_param = o.clip_param,
                                      .vf_clip_param = o.vf_clip_param,
                                      .vf_loss_coeff = o.vf_loss_coeff,
                                      .entropy_coeff = o.entropy_coeff,
                                      .grad_clip = o.grad_clip})
                           .RLModule(o.hidden)
                           .Debugging(o.seed)
                           .Build();
  std::ofstream curve;
  if (!o.curve.empty()) {
    curve.open(o.curve, std::ios::trunc);
    if (!curve) throw prism::Error("cannot write --curve file " + o.curve);
    curve << "env,seed,iteration,env_steps,episode_return_mean,episode_return_min,episode_return_max,"
             "num_episodes,sample_s,learn_s,wall_s\n";
  }
  const auto start = std::chrono::steady_clock::now();
  rl::TrainResult r;
  bool reached = false;
  for (int it = 0; it < o.max_iterations && !reached; ++it) {
    r = algo.Train();
    const double iter_s = r.sample_s + r.learn_s;
    std::printf("iter %3ld  return %6.1f (min %5.1f max %5.1f)  env steps %7ld  sample %7.0f steps/s  "
                "overall %6.0f steps/s  policy_loss %+.4f vf_loss %.3f entropy %.3f kl %.4f\n",
                static_cast<long>(r.training_iteration), r.episode_return_mean, r.episode_return_min,
                r.episode_return_max, static_cast<long>(r.num_env_steps_sampled_lifetime),
                r.num_env_steps_sampled / r.sample_s, r.num_env_steps_sampled / iter_s, r.policy_loss,
                r.vf_loss, r.entropy, r.mean_kl);
    std::fflush(stdout);
    if (curve.is_open()) {
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      curve << o.env << ',' << o.seed << ',' << r.training_iteration << ',' << r.num_env_steps_sampled_lifetime
            << ',' << r.episode_return_mean << ',' << r.episode_return_min << ',' << r.episode_return_max << ','
            << r.num_episodes << ',' << r.sample_s << ',' << r.learn_s << ',' << wall << '\n';
      curve.flush();
    }
    reached = r.episode_return_mean >= o.stop_return;
    if (o.max_env_steps > 0 && r.num_env_steps_sampled_lifetime >= o.max_env_steps) break;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s return %.1f after %ld iterations, %ld env steps, %.1f s (%.0f env steps/s overall)\n",
              reached ? "reached" : "did not reach", r.episode_return_mean,
              static_cast<long>(r.training_iteration), static_cast<long>(r.num_env_steps_sampled_lifetime),
              seconds, r.num_env_steps_sampled_lifetime / seconds);

  algo.Save(o.checkpoint_dir);
  rl::Algorithm restored = rl::Algorithm::FromCheckpoint(o.checkpoint_dir);
  std::printf("saved to %s and restored (iteration %ld)\n", o.checkpoint_dir.c_str(),
              static_cast<long>(restored.iteration()));
  auto env = rl::MakeEnv(o.env);
  double total = 0;
  for (int e = 0; e < o.eval_episodes; ++e) {
    std::vector<float> obs = env->Reset(1000000 + e);
    double ret = 0;
    for (bool done = false; !done;) {
      rl::StepResult s = env->Step(restored.ComputeSingleAction(obs, /*explore=*/false));
      obs = s.observation;
      ret += s.reward;
      done = s.terminated || s.truncated;
    }
    total += ret;
  }
  if (o.eval_episodes > 0) {
    std::printf("greedy evaluation of the restored policy: mean return %.1f over %d episodes\n",
                total / o.eval_episodes, o.eval_episodes);
  }
  return reached ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"PPO on CartPole-v1 (or Pendulum-v1) with prism::rl:\n"
               "  mpirun -n <1 + runners> rl_cartpole [flags]\n"
               "Exit status: 0 the stop return was reached, 3 not, 2 bad flags, 1 errors.",
               "rl_cartpole"};
  Options o;
  AddFlags(app, o);
  return prism_apps::RunDriver(app, argc, argv, [&] { return Run(o); });
}
