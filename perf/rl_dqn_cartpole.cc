// prism_rl_dqn_cartpole: DQN's learning check on CartPole-v1, RLlib's target for it: an
// episode_return_mean (last 100 episodes) of 450 within 100k env steps. Runs DqnTrainer
// (src/rl/dqn/dqn_trainer.h) with RLlib DQNConfig's defaults, one process, one torch
// thread, for each seed in turn, and prints the env steps each seed took to reach the
// target (or "not reached"), the best mean return and the wall time.
//
//   ./prism_rl_dqn_cartpole [--seeds=0,1,2,3,4] [--max-steps=100000] [--target=450]
//                           [--hiddens=256,256] [--head-hiddens=] [--n-step=1]
//                           [--final-epsilon=0.05] [--verbose] [--curve=PATH]
//
// --curve=PATH writes the learning curve as CSV: a row per seed each time another 1000 env
// steps have been sampled (and the row that reached the target), with the smoothed return
// (perf/plot_rl_curves.py plots it).
//
// The flags other than seeds, steps and target change RLlib's defaults, e.g. RLlib's tuned
// example rllib/tuned_examples/dqn/cartpole_dqn.py: --hiddens=256 --head-hiddens=256
// --final-epsilon=0.02 and n_step (2, 5) (a fixed --n-step here; no prioritized replay).
//
// Exit code 0 if every seed reached the target, 1 otherwise (2 for a bad argument).

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "rl/dqn/dqn_trainer.h"

namespace {

/// "256,256" -> {256, 256}; "" -> {}.
std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> seeds{0, 1, 2, 3, 4};
  int64_t max_steps = 100000;
  double target = 450;
  bool verbose = false;
  std::string curve_path;
  prism::rl::dqn::DqnConfig base;
  base.env = "CartPole-v1";
  prism_bench::Cli cli("prism_rl_dqn_cartpole",
                       "DQN's learning check on CartPole-v1 (RLlib's target: a mean return of 450 "
                       "within 100k env steps), seed after seed.\n"
                       "Exit code 0 if every seed reached the target, 1 otherwise, 2 for a bad flag.");
  // A list of whole numbers, possibly empty ("--head-hiddens=": no head layers).
  auto list_flag = [&](const char* name, std::vector<int64_t>& out, const char* what) {
    cli.app.add_option_function<std::string>(
        name,
        [&out, name](const std::string& v) {
          try {
            out = ParseList(v);
          } catch (const std::exception&) {
            throw CLI::ValidationError(name, "'" + v + "' is not a list of whole numbers like 256,256");
          }
        },
        what);
  };
  list_flag("--seeds", seeds, "the seeds, one run each (default 0,1,2,3,4)");
  cli.app.add_option("--max-steps", max_steps, "env steps per seed at most (default 100000)");
  cli.app.add_option("--target", target, "the mean return to reach (default 450)");
  list_flag("--hiddens", base.model.hiddens, "hidden layers of the Q network (default RLlib's 256)");
  list_flag("--head-hiddens", base.model.head_hiddens, "hidden layers of the dueling heads (default RLlib's)");
  cli.app.add_option("--n-step", base.n_step, "n-step returns (default 1)");
  cli.app.add_option("--final-epsilon", base.epsilon.back().second, "the exploration's last epsilon (default 0.05)");
  cli.app.add_flag("--verbose", verbose, "a line per iteration");
  cli.app.add_option("--curve", curve_path, "write the learning curve as CSV (perf/plot_rl_curves.py plots it)");
  cli.Parse(argc, argv);
  std::ofstream curve;
  if (!curve_path.empty()) {
    curve.open(curve_path, std::ios::trunc);
    if (!curve) {
      std::fprintf(stderr, "cannot write --curve file %s\n", curve_path.c_str());
      return 2;
    }
    curve << "env,seed,iteration,env_steps,episode_return_mean,episode_return_min,episode_return_max,"
             "epsilon,wall_s\n";
  }
  torch::set_num_threads(1);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines show as they come, also in a file
  auto list = [](const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return "[" + s + "]";
  };
  std::printf("DQN on CartPole-v1: lr 5e-4, batch 32, buffer 50000, target freq 500, learning starts 1000,\n"
              "epsilon 1.0 -> %.3g over 10k, double Q, dueling, n_step %d, hiddens %s tanh, head %s relu;\n"
              "target %.0f within %lld steps\n",
              base.epsilon.back().second, base.n_step, list(base.model.hiddens).c_str(),
              list(base.model.head_hiddens).c_str(), target, static_cast<long long>(max_steps));
  std::printf("%6s %16s %12s %10s\n", "seed", "steps_to_target", "best_mean", "wall_s");
  const auto all_start = std::chrono::steady_clock::now();
  int reached = 0;
  for (int64_t seed : seeds) {
    prism::rl::dqn::DqnConfig c = base;
    c.seed = static_cast<uint64_t>(seed);
    prism::rl::dqn::DqnTrainer trainer(c);
    const auto start = std::chrono::steady_clock::now();
    int64_t steps = 0, hit = -1, next_row = 0;
    double best = 0;
    while (steps < max_steps) {
      prism::rl::dqn::DqnMetrics m = trainer.TrainIteration();
      steps = m.num_env_steps_sampled_lifetime;
      if (m.episode_return_mean > best) best = m.episode_return_mean;
      if (curve.is_open() && (steps >= next_row || m.episode_return_mean >= target)) {
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        curve << "CartPole-v1," << seed << ',' << m.training_iteration << ',' << steps << ','
              << m.episode_return_mean << ',' << m.episode_return_min << ',' << m.episode_return_max << ','
              << m.epsilon << ',' << wall << '\n';
        curve.flush();
        next_row = steps + 1000;
      }
      if (verbose) {
        std::printf("  seed %lld it %lld steps %lld return_mean %.1f eps %.3f loss %.4f q %.2f\n",
                    static_cast<long long>(seed), static_cast<long long>(m.training_iteration),
                    static_cast<long long>(steps), m.episode_return_mean, m.epsilon, m.loss, m.q_mean);
      }
      if (m.episode_return_mean >= target) {
        hit = steps;
        break;
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (hit >= 0) {
      ++reached;
      std::printf("%6lld %16lld %12.1f %10.1f\n", static_cast<long long>(seed), static_cast<long long>(hit), best, secs);
    } else {
      std::printf("%6lld %16s %12.1f %10.1f\n", static_cast<long long>(seed), "not reached", best, secs);
    }
    std::fflush(stdout);
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - all_start).count();
  std::printf("reached %d of %zu seeds; total wall time %.1f s\n", reached, seeds.size(), total);
  return reached == static_cast<int>(seeds.size()) ? 0 : 1;
}
