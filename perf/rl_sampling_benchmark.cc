// prism_rl_sampling_benchmark: PPO's sampling throughput, env steps/s WITH policy inference
// (issue 19's "sampling throughput (env steps/s with policy inference) ... in the perf suite"),
// next to the raw stepping of prism_rl_env_benchmark and Gymnasium's ~2.4 us Python step.
//
//   mpirun -n 3 ./prism_rl_sampling_benchmark [--quick] [--json=PATH] [--rounds=N]
//       [--seconds=S] [--iterations=N] [--runners=N] [--envs-per-runner=N]
//
// Two parts, CartPole-v1 and PPO's default RLModule (64x64 tanh MLPs for the policy and the
// value function, one LibTorch thread):
//
//   (a) one sampler on one core (rank 0, before any actor exists): ppo::Sampler, the loop an
//       env runner runs (a forward pass of both MLPs over every copy's observation, a
//       categorical sample, VectorEnv::StepAll, the rows copied into per-copy buffers), with
//       1, 8 and 64 vectorised copies. Each call loads the weights and samples 2000 steps,
//       what a runner does per iteration at RLlib's train_batch_size 4000 over 2 runners.
//       Rounds of --seconds; steps per wall-clock second and per second of the thread's CPU
//       time (what other load on a shared machine does not inflate).
//         rl_sampling_cartpole_sampler_envs_{1,8,64}
//   (b) end to end through the user's call: PPOConfig().EnvRunners(--runners, --envs-per-runner)
//       .Build(), then Algorithm::Train() --iterations times after one warm-up iteration
//       (actor start-up). Per iteration: the sample phase as Train() reports it
//       (num_env_steps_sampled / TrainResult::sample_s: the weights Put once, the runners'
//       Sample tasks, the Gets and the batch assembled on the driver) and the whole Train()
//       call, learning included (num_env_steps_sampled / the call's wall time). RLlib's tuned
//       CartPole settings (lr 3e-4, 6 epochs, vf_loss_coeff 0.01, train_batch_size 4000).
//         rl_sampling_cartpole_train_sample_phase   all runners together
//         rl_sampling_cartpole_train_overall        the whole Train() call
//
// Medians over rounds (a) or iterations (b). Results: stdout and a JSON file in Google
// Benchmark's shape (perf/bench_report.h). No target: the issue sets none for sampling with
// inference (RLlib's old tracker quotes 400-2,000 env steps/s for PPO). --quick: 2 short
// rounds and 2 iterations (ctest perf_rl_sampling_smoke).
//
// Part (a) uses the internal ppo::Sampler (src/rl/ppo/sampler.h): the public API has no
// sampling-only call; part (b) uses only prism/rl.h.

#include <time.h>

#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"
#include "prism/api.h"
#include "prism/rl.h"
#include "rl/ppo/sampler.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kStepsPerSample = 2000;  // a runner's share of train_batch_size 4000 over 2 runners

struct Options {
  bool quick = false;
  std::string json = "perf/results/rl_sampling_benchmark.json";
  int rounds = 5;
  double seconds = 1.0;
  int iterations = 10;
  int runners = 2;
  int envs_per_runner = 1;
};

/// Parses our flags (bench_cli.h). Exits on --help and on a bad flag.
Options ParseOptions(int argc, char** argv) {
  Options o;
  prism_bench::Cli cli("prism_rl_sampling_benchmark",
                       "prism::rl's sampling: (a) samplers on the driver, (b) PPO's Train() with env "
                       "runner actors:\n  mpirun -n <1 + runners> prism_rl_sampling_benchmark [flags]");
  cli.AddQuick("2 rounds of 0.1 s and 2 Train() iterations (a smoke run)")
      .AddJson("perf/results/rl_sampling_benchmark.json");
  cli.app.add_option("--rounds", o.rounds, "(a) measured rounds per sampler, after a warm-up (default 5)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--seconds", o.seconds, "(a) length of a round (default 1.0)")->check(CLI::PositiveNumber);
  cli.app.add_option("--iterations", o.iterations,
                     "(b) measured Train() iterations, after a warm-up one (default 10)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--runners", o.runners, "(b) env runner actors, on ranks 1..N (default 2)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--envs-per-runner", o.envs_per_runner, "(b) CartPole copies per runner (default 1)")
      ->check(CLI::PositiveNumber);
  cli.Parse(argc, argv, [&] {
    o.rounds = 2;
    o.seconds = 0.1;
    o.iterations = 2;
  });
  o.quick = cli.quick;
  o.json = cli.json;
  return o;
}

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

prism_bench::Json Num(double v) { return prism_bench::JsonNumber(v); }

struct SamplerRounds {
  std::vector<double> wall, cpu;  // env steps per wall-clock second, per CPU second
};

// Part (a): one Sampler, `n` copies, rounds of `seconds` of Sample(kStepsPerSample) calls.
SamplerRounds MeasureSampler(int n, const Options& o) {
  prism::rl::ppo::Sampler sampler("CartPole-v1", {}, n, /*seed=*/0, /*hidden=*/{64, 64});
  const std::vector<uint8_t> weights = prism::rl::ppo::GetWeights(*sampler.module());
  auto round = [&](double seconds, SamplerRounds* out) {
    int64_t steps = 0;
    const auto start = Clock::now();
    const double cpu_start = ThreadCpuSeconds();
    double elapsed = 0;
    do {
      sampler.SetWeights(weights.data(), weights.size());
      steps += sampler.Sample(kStepsPerSample).size();
      elapsed = Since(start);
    } while (elapsed < seconds);
    const double cpu = ThreadCpuSeconds() - cpu_start;
    if (out != nullptr) {
      out->wall.push_back(static_cast<double>(steps) / elapsed);
      out->cpu.push_back(cpu > 0 ? static_cast<double>(steps) / cpu : 0);
    }
  };
  round(o.seconds / 4, nullptr);  // warm-up
  SamplerRounds r;
  for (int k = 0; k < o.rounds; ++k) round(o.seconds, &r);
  return r;
}

struct TrainRounds {
  std::vector<double> sample_rate, overall_rate, sample_s, train_s, learn_s, steps;
  int64_t healthy_min = 0;
};

// Part (b): Train() through the public API.
TrainRounds MeasureTrain(const Options& o) {
  namespace rl = prism::rl;
  rl::Algorithm algo = rl::PPOConfig()
                           .Environment("CartPole-v1")
                           .EnvRunners(o.runners, o.envs_per_runner)
                           .Training({.lr = 3e-4, .num_epochs = 6, .vf_loss_coeff = 0.01})
                           .Debugging(0)
                           .Build();
  algo.Train();  // warm-up: the runner actors start during it
  TrainRounds r;
  r.healthy_min = o.runners;
  for (int i = 0; i < o.iterations; ++i) {
    const auto start = Clock::now();
    rl::TrainResult t = algo.Train();
    const double train_s = Since(start);
    const double steps = static_cast<double>(t.num_env_steps_sampled);
    r.sample_rate.push_back(steps / t.sample_s);
    r.overall_rate.push_back(steps / train_s);
    r.sample_s.push_back(t.sample_s);
    r.train_s.push_back(train_s);
    r.learn_s.push_back(t.learn_s);
    r.steps.push_back(steps);
    r.healthy_min = std::min<int64_t>(r.healthy_min, t.num_healthy_env_runners);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = ParseOptions(argc, argv);
  prism::Init(argc, argv);  // ranks 1..N-1 host the env runners of part (b) until Shutdown
  const int world = prism::GetRuntimeContext().GetWorldSize();
  if (world < opt.runners + 1) {
    std::fprintf(stderr,
                 "prism_rl_sampling_benchmark: --runners=%d needs %d ranks (one runner per rank 1..N-1), "
                 "got %d: run it under mpirun -n %d\n",
                 opt.runners, opt.runners + 1, world, opt.runners + 1);
    prism::Shutdown();
    return 2;
  }
  torch::set_num_threads(1);  // as the runners do: the MLPs are small
  double load[3];
  prism_bench::LoadAverage(load);
  std::vector<double> load_at_start(load, load + 3);
  std::vector<prism_bench::Entry> entries;

  std::printf("(a) one sampler on one core: CartPole-v1, 64x64 MLPs, Sample(%lld) per call\n",
              static_cast<long long>(kStepsPerSample));
  std::printf("%-40s %14s %12s %12s %10s %14s\n", "benchmark", "median steps/s", "min", "max", "us/step",
              "steps/cpu-s");
  int64_t family = 0;
  for (int n : {1, 8, 64}) {
    SamplerRounds r = MeasureSampler(n, opt);
    const double med = prism_bench::Median(r.wall), cpu_med = prism_bench::Median(r.cpu);
    prism_bench::Entry e;
    e.name = "rl_sampling_cartpole_sampler_envs_" + std::to_string(n);
    std::printf("%-40s %14.0f %12.0f %12.0f %10.2f %14.0f\n", e.name.c_str(), med, prism_bench::Min(r.wall),
                prism_bench::Max(r.wall), 1e6 / med, cpu_med);
    e.family_index = family++;
    e.iterations = static_cast<int64_t>(med * opt.seconds * opt.rounds);
    e.real_time = e.cpu_time = 1e9 / med;
    e.time_unit = "ns";
    e.items_per_second = med;
    e.unit = "steps/s";
    e.per_round = r.wall;
    e.after_rounds = {{"steps_per_cpu_second_median", Num(cpu_med)}, {"num_envs", n}};
    e.label = "ppo::Sampler, CartPole-v1, " + std::to_string(n) +
              " copies, 64x64 MLPs, one thread: env steps/s with policy inference";
    entries.push_back(e);
    std::fflush(stdout);
  }

  std::printf("\n(b) Algorithm::Train(), %d env runner actors x %d copies, train_batch_size 4000, "
              "%d iterations after a warm-up one\n",
              opt.runners, opt.envs_per_runner, opt.iterations);
  TrainRounds t = MeasureTrain(opt);
  const double sample_med = prism_bench::Median(t.sample_rate), overall_med = prism_bench::Median(t.overall_rate);
  const double sample_s = prism_bench::Median(t.sample_s), train_s = prism_bench::Median(t.train_s);
  const double learn_s = prism_bench::Median(t.learn_s), steps = prism_bench::Median(t.steps);
  std::printf("%-40s %14.0f %12.0f %12.0f   (%.0f per runner; median sample_s %.3f s for %.0f steps)\n",
              "rl_sampling_cartpole_train_sample_phase", sample_med, prism_bench::Min(t.sample_rate),
              prism_bench::Max(t.sample_rate), sample_med / opt.runners, sample_s, steps);
  std::printf("%-40s %14.0f %12.0f %12.0f   (median Train() %.3f s, learn_s %.3f s; sampling %.0f%% of it)\n",
              "rl_sampling_cartpole_train_overall", overall_med, prism_bench::Min(t.overall_rate),
              prism_bench::Max(t.overall_rate), train_s, learn_s, 100 * sample_s / train_s);
  const std::string setup = std::to_string(opt.runners) + " env runner actors x " +
                            std::to_string(opt.envs_per_runner) + " copies, CartPole-v1, 64x64 MLPs, " +
                            "train_batch_size 4000";
  prism_bench::Fields common = {{"runners", opt.runners},
                                {"envs_per_runner", opt.envs_per_runner},
                                {"env_steps_per_iteration_median", Num(steps)},
                                {"sample_s_median", Num(sample_s)},
                                {"learn_s_median", Num(learn_s)},
                                {"train_s_median", Num(train_s)},
                                {"min_healthy_env_runners", t.healthy_min}};
  prism_bench::Entry sample;
  sample.name = "rl_sampling_cartpole_train_sample_phase";
  sample.family_index = family++;
  sample.iterations = opt.iterations;
  sample.real_time = sample.cpu_time = 1e9 / sample_med;
  sample.time_unit = "ns";
  sample.items_per_second = sample_med;
  sample.unit = "steps/s";
  sample.per_round = t.sample_rate;
  sample.after_rounds = common;
  sample.after_rounds.push_back({"steps_per_second_per_runner_median", Num(sample_med / opt.runners)});
  sample.label = "Algorithm::Train()'s sample phase (num_env_steps_sampled / TrainResult::sample_s), " + setup;
  entries.push_back(sample);
  prism_bench::Entry overall = sample;
  overall.name = "rl_sampling_cartpole_train_overall";
  overall.family_index = family++;
  overall.real_time = overall.cpu_time = 1e9 / overall_med;
  overall.items_per_second = overall_med;
  overall.per_round = t.overall_rate;
  overall.after_rounds = common;
  overall.label = "the whole Algorithm::Train() call, learning included (num_env_steps_sampled / its wall time), " +
                  setup;
  entries.push_back(overall);

  prism_bench::Context c;
  c.executable = argv[0];
  c.load_avg_at_start = load_at_start;
  c.mpi_ranks = world;
  c.mpi_library_version = prism_bench::MpiLibraryVersion();
  c.quick = opt.quick;
  c.rounds = opt.rounds;
  c.fields = {{"seconds_per_round", Num(opt.seconds)},
              {"train_iterations", opt.iterations},
              {"steps_per_sample_call", kStepsPerSample},
              {"torch_threads", 1}};
  c.statistic = "median across rounds (a) or Train() iterations (b); min/max alongside";
  int status = 0;
  try {
    prism_bench::WriteReport(opt.json, c, entries);
    std::printf("wrote %s\n", opt.json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_rl_sampling_benchmark: %s\n", e.what());
    status = 1;
  }
  prism::Shutdown();
  return status;
}
