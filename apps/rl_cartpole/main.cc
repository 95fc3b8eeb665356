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

#include "prism/api.h"
#include "prism/rl.h"

namespace {

constexpr const char* kUsage =
    "usage: mpirun -n <1 + runners> rl_cartpole [flags]\n"
    "  --env=NAME            a registered environment: CartPole-v1 (default), Pendulum-v1\n"
    "  --runners=N           env runner actors, one per worker rank (default 2; 0: sample on the driver)\n"
    "  --envs-per-runner=N   environment copies per runner (default 1)\n"
    "  --learners=N          1: learn on the driver (default); N > 1: learner actors on ranks 1..N\n"
    "  --stop-return=R       stop when the mean return of the last 100 episodes reaches R\n"
    "                        (default 450 for CartPole-v1, -300 for Pendulum-v1)\n"
    "  --max-iterations=N    stop after N iterations anyway (default 200)\n"
    "  --max-env-steps=N     stop after N env steps sampled anyway (default: no limit)\n"
    "  --train-batch-size=N  env steps per iteration (default 4000)\n"
    "  --minibatch-size=N    (default 128)\n"
    "  --num-epochs=N        (default 6)\n"
    "  --lr=X                (default 0.0003)\n"
    "  --vf-loss-coeff=X     (default 0.01)\n"
    "  --lambda=X            GAE lambda (default 1.0, RLlib's)\n"
    "  --gamma=X             discount (default 0.99, RLlib's)\n"
    "  --vf-clip-param=X     cap of the squared value error (default 10, RLlib's)\n"
    "  --clip-param=X        PPO's ratio clip (default 0.3, RLlib's)\n"
    "  --entropy-coeff=X     (default 0)\n"
    "  --grad-clip=X         global gradient norm cap (default 0: none)\n"
    "  --hidden=A,B,...      hidden layer sizes of the policy and value MLPs (default 64,64)\n"
    "  --curve=PATH          write one CSV row per iteration (the learning curve)\n"
    "  --seed=N              (default 0)\n"
    "  --checkpoint-dir=DIR  (default /tmp/prism_rl_cartpole)\n"
    "  --eval-episodes=N     greedy episodes after restoring (default 10)\n";

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
  bool help = false;
};

/// "128,128" -> {128, 128}; false for anything else than positive whole numbers.
bool ParseSizes(const std::string& text, std::vector<int64_t>& out) {
  std::vector<int64_t> sizes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 1 << 20) return false;
    sizes.push_back(v);
  }
  if (sizes.empty()) return false;
  out = std::move(sizes);
  return true;
}

bool ParseNumber(const std::string& text, double lo, double hi, double& out) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  out = v;
  return true;
}

/// Reads "--flag=value" / "--flag value"; skips --prism-* (Init's). Returns an error message.
std::string ParseFlags(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--prism-", 0) == 0) {
      if (arg.find('=') == std::string::npos && i + 1 < argc) ++i;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    std::string name = arg, value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return name + " needs a value";
    }
    double v = 0;
    auto number = [&](double lo, double hi) { return ParseNumber(value, lo, hi, v); };
    const std::string bad = name + ": '" + value + "' is out of range or not a number";
    if (name == "--env") {
      o.env = value;
    } else if (name == "--runners") {
      if (!number(0, 4096)) return bad;
      o.runners = static_cast<int>(v);
    } else if (name == "--learners") {
      if (!number(0, 4096)) return bad;
      o.learners = static_cast<int>(v);
    } else if (name == "--envs-per-runner") {
      if (!number(1, 4096)) return bad;
      o.envs = static_cast<int>(v);
    } else if (name == "--stop-return") {
      if (!number(-1e9, 1e9)) return bad;
      o.stop_return = v;
    } else if (name == "--max-iterations") {
      if (!number(1, 1e7)) return bad;
      o.max_iterations = static_cast<int>(v);
    } else if (name == "--max-env-steps") {
      if (!number(1, 1e15)) return bad;
      o.max_env_steps = static_cast<int64_t>(v);
    } else if (name == "--train-batch-size") {
      if (!number(1, 1e8)) return bad;
      o.train_batch_size = static_cast<int64_t>(v);
    } else if (name == "--minibatch-size") {
      if (!number(1, 1e8)) return bad;
      o.minibatch_size = static_cast<int64_t>(v);
    } else if (name == "--num-epochs") {
      if (!number(1, 1e4)) return bad;
      o.num_epochs = static_cast<int64_t>(v);
    } else if (name == "--lr") {
      if (!number(1e-12, 10)) return bad;
      o.lr = v;
    } else if (name == "--vf-loss-coeff") {
      if (!number(0, 1e6)) return bad;
      o.vf_loss_coeff = v;
    } else if (name == "--lambda") {
      if (!number(0, 1)) return bad;
      o.lambda = v;
    } else if (name == "--gamma") {
      if (!number(0, 1)) return bad;
      o.gamma = v;
    } else if (name == "--vf-clip-param") {
      if (!number(1e-12, 1e12)) return bad;
      o.vf_clip_param = v;
    } else if (name == "--clip-param") {
      if (!number(1e-12, 1e6)) return bad;
      o.clip_param = v;
    } else if (name == "--entropy-coeff") {
      if (!number(0, 1e6)) return bad;
      o.entropy_coeff = v;
    } else if (name == "--grad-clip") {
      if (!number(0, 1e12)) return bad;
      o.grad_clip = v;
    } else if (name == "--hidden") {
      if (!ParseSizes(value, o.hidden)) return name + ": '" + value + "' is not a list like 64,64";
    } else if (name == "--curve") {
      o.curve = value;
    } else if (name == "--seed") {
      if (!number(0, 1e15)) return bad;
      o.seed = static_cast<uint64_t>(v);
    } else if (name == "--checkpoint-dir") {
      o.checkpoint_dir = value;
    } else if (name == "--eval-episodes") {
      if (!number(0, 1e6)) return bad;
      o.eval_episodes = static_cast<int>(v);
    } else {
      return "unknown argument '" + arg + "'";
    }
  }
  return "";
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
  try {
    prism::Init(argc, argv);  // ranks 1..N-1 host the env runners here and never return
  } catch (const prism::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  Options o;
  const std::string flag_error = ParseFlags(argc, argv, o);
  int status = 0;
  if (!flag_error.empty()) {
    std::cerr << "error: " << flag_error << "\n" << kUsage;
    status = 2;
  } else if (o.help) {
    std::cout << kUsage;
  } else {
    try {
      status = Run(o);
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      status = 1;
    }
  }
  prism::Shutdown();
  return status;
}
