// prism_rl_env_benchmark: raw environment stepping on one core, no policy (issue 19's
// "raw CartPole stepping >= 10M steps/s per core vectorised"; Gymnasium's Python step is
// about 2.4 us, ~0.4M steps/s).
//
//   ./prism_rl_env_benchmark [--quick] [--json=PATH] [--rounds=N] [--seconds=S] [--num-envs=N]
//
// Each round runs one stepping loop on one thread for about --seconds (default 1.0) and
// reports env steps per wall-clock second (an autoreset step counts as a step), and per
// second of the thread's CPU time alongside (steps_per_cpu_second_median: on a loaded machine
// the wall figure is the lower bound, the CPU figure what one core does):
//   rl_env_cartpole_scalar_step  Env::Step through MakeEnv's virtual interface, one
//                                StepResult (a new observation vector) per step, Reset at the end
//   rl_env_cartpole_vector_step_actions  VectorEnv::StepAll(std::vector<Action>) over --num-envs copies
//                                (default 64): the struct-of-arrays CartPole, a Step per call
//   rl_env_cartpole_vector_step_indices  VectorEnv::StepAll(indices, out): the same loop with reused
//                                buffers, the path a sampler takes (target >= 10M steps/s)
//   rl_env_pendulum_scalar_step, rl_env_pendulum_vector_step_actions: Pendulum-v1 (the generic VectorEnv,
//                                a virtual Step per copy)
// Actions come from a precomputed table of pseudo-random bits (about half the episodes
// end by the pole falling within ~20-40 steps, so resets are part of the cost, as in
// sampling). The cost of reading the table is in the figures. Results: stdout and a JSON file in Google
// Benchmark's shape (perf/bench_report.h). --quick: 2 short rounds, no verdict.

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"
#include "prism/rl/env.h"

namespace {

using Clock = std::chrono::steady_clock;
using prism::rl::Action;

constexpr double kVectorTarget = 10e6;  // steps/s per core, vectorised

struct Options {
  bool quick = false;
  std::string json = "perf/results/rl_env_benchmark.json";
  int rounds = 5;
  double seconds = 1.0;
  int num_envs = 64;
};

/// Parses our flags (bench_cli.h). Exits on --help and on a bad flag.
Options ParseOptions(int argc, char** argv) {
  Options o;
  prism_bench::Cli cli("prism_rl_env_benchmark", "prism::rl's environments: env steps per second");
  cli.AddQuick("2 rounds of 0.05 s (a smoke run, no target verdict)")
      .AddJson("perf/results/rl_env_benchmark.json");
  cli.app.add_option("--rounds", o.rounds, "measured rounds per benchmark (default 5), after a warm-up round")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--seconds", o.seconds, "length of a round (default 1.0)")->check(CLI::PositiveNumber);
  cli.app.add_option("--num-envs", o.num_envs, "copies in the VectorEnv benchmarks (default 64)")
      ->check(CLI::PositiveNumber);
  cli.Parse(argc, argv, [&] {
    o.rounds = 2;
    o.seconds = 0.05;
  });
  o.quick = cli.quick;
  o.json = cli.json;
  return o;
}

// 64 Ki pseudo-random action bits (xorshift64), read in order and wrapped.
struct ActionTable {
  std::vector<int64_t> bits;
  size_t next = 0;
  ActionTable() : bits(1 << 16) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (auto& b : bits) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      b = static_cast<int64_t>(s >> 63);
    }
  }
  int64_t Next() {
    int64_t b = bits[next];
    next = (next + 1) & (bits.size() - 1);
    return b;
  }
};

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Rates {
  double wall = 0;  // steps per wall-clock second
  double cpu = 0;   // steps per second of this thread's CPU time (what other load does not inflate)
};

// Runs `chunk` (which returns the env steps it took) until `seconds` have passed.
Rates Rate(double seconds, const std::function<int64_t()>& chunk) {
  int64_t steps = 0;
  const auto start = Clock::now();
  const double cpu_start = ThreadCpuSeconds();
  double elapsed = 0;
  do {
    steps += chunk();
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  const double cpu = ThreadCpuSeconds() - cpu_start;
  return {static_cast<double>(steps) / elapsed, cpu > 0 ? static_cast<double>(steps) / cpu : 0};
}

// Scalar Env::Step with Reset at the end of each episode; steps per chunk: 1000.
std::function<int64_t()> ScalarLoop(const std::string& name, bool discrete) {
  auto env = std::shared_ptr<prism::rl::Env>(prism::rl::MakeEnv(name));
  env->Reset(0);
  auto table = std::make_shared<ActionTable>();
  return [env, table, discrete] {
    for (int i = 0; i < 1000; ++i) {
      int64_t b = table->Next();
      prism::rl::StepResult r =
          env->Step(discrete ? Action::Discrete(b) : Action::Box({b ? 1.5f : -1.5f}));
      if (r.terminated || r.truncated) env->Reset();
    }
    return int64_t{1000};
  };
}

std::function<int64_t()> VectorActionsLoop(const std::string& name, int n, bool discrete) {
  auto vec = std::make_shared<prism::rl::VectorEnv>(name, n, prism::rl::EnvConfig{}, 0);
  vec->Reset();
  auto table = std::make_shared<ActionTable>();
  auto actions = std::make_shared<std::vector<Action>>(n);
  return [=] {
    for (int k = 0; k < 16; ++k) {
      for (int i = 0; i < n; ++i) {
        int64_t b = table->Next();
        (*actions)[i] = discrete ? Action::Discrete(b) : Action::Box({b ? 1.5f : -1.5f});
      }
      prism::rl::VectorEnv::Step s = vec->StepAll(*actions);
      (void)s;
    }
    return int64_t{16} * n;
  };
}

std::function<int64_t()> VectorIndicesLoop(int n) {
  auto vec = std::make_shared<prism::rl::VectorEnv>("CartPole-v1", n, prism::rl::EnvConfig{}, 0);
  vec->Reset();
  auto table = std::make_shared<ActionTable>();
  auto actions = std::make_shared<std::vector<int64_t>>(n);
  auto out = std::make_shared<prism::rl::VectorEnv::Step>();
  return [=] {
    for (int k = 0; k < 16; ++k) {
      for (int i = 0; i < n; ++i) (*actions)[i] = table->Next();
      vec->StepAll(*actions, *out);
    }
    return int64_t{16} * n;
  };
}

prism_bench::Json Num(double v) { return prism_bench::JsonNumber(v); }

}  // namespace

int main(int argc, char** argv) {
  Options opt = ParseOptions(argc, argv);
  double load[3];
  prism_bench::LoadAverage(load);
  std::vector<double> load_at_start(load, load + 3);

  struct Row {
    std::string name, label;
    std::function<int64_t()> chunk;
    bool headline;
  };
  const std::string n = std::to_string(opt.num_envs);
  std::vector<Row> rows;
  rows.push_back({"rl_env_cartpole_scalar_step", "CartPole-v1, Env::Step (virtual, a new observation each step)",
                  ScalarLoop("CartPole-v1", true), false});
  rows.push_back({"rl_env_cartpole_vector_step_actions", "CartPole-v1, VectorEnv::StepAll(Actions), " + n + " copies",
                  VectorActionsLoop("CartPole-v1", opt.num_envs, true), false});
  rows.push_back({"rl_env_cartpole_vector_step_indices", "CartPole-v1, VectorEnv::StepAll(indices, out), " + n + " copies",
                  VectorIndicesLoop(opt.num_envs), true});
  rows.push_back({"rl_env_pendulum_scalar_step", "Pendulum-v1, Env::Step", ScalarLoop("Pendulum-v1", false), false});
  rows.push_back({"rl_env_pendulum_vector_step_actions", "Pendulum-v1, VectorEnv::StepAll(Actions), " + n + " copies (generic path)",
                  VectorActionsLoop("Pendulum-v1", opt.num_envs, false), false});

  std::vector<prism_bench::Entry> entries;
  bool met = true;
  std::printf("%-37s %14s %14s %14s %10s %14s\n", "benchmark", "median steps/s", "min", "max", "ns/step",
              "steps/cpu-s");
  for (size_t r = 0; r < rows.size(); ++r) {
    Row& row = rows[r];
    Rate(opt.seconds / 4, row.chunk);  // warm-up
    std::vector<double> rates, cpu_rates;
    for (int k = 0; k < opt.rounds; ++k) {
      Rates r = Rate(opt.seconds, row.chunk);
      rates.push_back(r.wall);
      cpu_rates.push_back(r.cpu);
    }
    const double med = prism_bench::Median(rates), cpu_med = prism_bench::Median(cpu_rates);
    std::printf("%-37s %14.0f %14.0f %14.0f %10.1f %14.0f\n", row.name.c_str(), med,
                prism_bench::Min(rates), prism_bench::Max(rates), 1e9 / med, cpu_med);
    prism_bench::Entry e;
    e.name = row.name;
    e.family_index = static_cast<int64_t>(r);
    e.iterations = static_cast<int64_t>(med * opt.seconds * opt.rounds);
    e.real_time = e.cpu_time = 1e9 / med;
    e.time_unit = "ns";
    e.items_per_second = med;
    e.unit = "steps/s";
    e.per_round = rates;
    e.after_rounds = {{"steps_per_cpu_second_median", Num(cpu_med)}};
    if (row.headline) {
      bool ok = med >= kVectorTarget;
      met = met && ok;
      e.target = prism_bench::Target{"vectorised CartPole steps/s per core >= 10M", kVectorTarget,
                                     med / kVectorTarget, ok, !opt.quick};
    } else {
      e.extra = true;
    }
    e.label = row.label;
    entries.push_back(e);
  }

  prism_bench::Context c;
  c.executable = argv[0];
  c.load_avg_at_start = load_at_start;
  c.quick = opt.quick;
  c.rounds = opt.rounds;
  c.fields = {{"seconds_per_round", Num(opt.seconds)}, {"num_envs", opt.num_envs},
              {"threads", 1}};
  c.statistic = "median across rounds (min/max across rounds alongside)";
  try {
    prism_bench::WriteReport(opt.json, c, entries);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_rl_env_benchmark: %s\n", e.what());
    return 1;
  }
  std::printf("target (vectorised >= 10M steps/s per core): %s%s\nwrote %s\n", met ? "met" : "not met",
              opt.quick ? " (quick run: no verdict)" : "", opt.json.c_str());
  return 0;
}
