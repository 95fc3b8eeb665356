// Training throughput of prism::train: an MLP 784-512-512-10 on synthetic data, batch 128
// per worker, one intra-op thread per worker, on 1 worker and on 2, interleaved round by
// round. Reports samples/s and the scaling efficiency (2-worker rate / twice the 1-worker
// rate); the reference is PyTorch DDP with gloo on this machine: 88%.
//
//   mpirun -n 3 build/perf/prism_train_benchmark [--quick] [--rounds=N] [--steps=N] [--json=PATH]
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_cli.h"
#include "prism/api.h"
#include "prism/train.h"

namespace train = prism::train;

namespace {

/// Trains `steps` timed steps (after 5 warm-up steps) and reports the group's samples/s as
/// measured by world rank 0.
void ThroughputLoop(train::Config config) {
  torch::set_num_threads(1);
  const auto& ctx = train::GetContext();
  const int64_t batch = config.Get<int64_t>("batch", 128);
  const int steps = config.Get<int>("steps", 50);
  torch::manual_seed(7);
  torch::nn::Sequential mlp(torch::nn::Linear(784, 512), torch::nn::ReLU(), torch::nn::Linear(512, 512),
                            torch::nn::ReLU(), torch::nn::Linear(512, 10));
  mlp = train::PrepareModel(mlp);
  torch::optim::SGD opt(mlp->parameters(), 0.01);
  torch::manual_seed(100 + ctx.GetWorldRank());
  auto x = torch::randn({batch, 784});
  auto y = torch::randint(0, 10, {batch});
  auto step = [&] {
    opt.zero_grad();
    torch::nn::functional::cross_entropy(mlp->forward(x), y).backward();
    opt.step();
  };
  for (int i = 0; i < 5; ++i) step();
  ctx.GetCollective().Barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  ctx.GetCollective().Barrier();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  train::Report({{"samples_per_second", static_cast<double>(batch) * steps * ctx.GetWorldSize() / seconds},
                 {"step_ms", seconds / steps * 1e3}});
}
PRISM_REMOTE(ThroughputLoop);

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

}  // namespace

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_train_benchmark",
                       "prism::train's throughput: an MLP on 1 and 2 workers, scaling efficiency");
  cli.AddQuick("1 round of 3 steps (a smoke run)").AddJson("perf/results/train_benchmark.json");
  int rounds = 5, steps = 50;
  cli.app.add_option("--rounds", rounds, "measured rounds (default 5)")->check(CLI::PositiveNumber);
  cli.app.add_option("--steps", steps, "training steps per round (default 50)")->check(CLI::PositiveNumber);
  std::string storage_parent = std::filesystem::temp_directory_path();
  cli.app.add_option("--storage-path", storage_parent,
                     "where the runs' checkpoints go, a directory every rank sees (default $TMPDIR or /tmp)");
  cli.Parse(argc, argv, [&] {
    rounds = 1;
    steps = 3;
    cli.json = "perf/results/train_benchmark_quick.json";
  });
  const bool quick = cli.quick;
  const std::string& json = cli.json;
  prism::Init(argc, argv);
  int status = 0;
  try {
    const int world = prism::GetRuntimeContext().GetWorldSize();
    const int max_workers = std::min(2, world);
    const std::string storage = std::filesystem::path(storage_parent) /
                                ("prism-train-benchmark-" + std::to_string(getpid()));
    std::map<int, std::vector<double>> rate, step_ms;
    for (int round = 0; round < rounds; ++round) {
      for (int workers = 1; workers <= max_workers; ++workers) {
        train::TorchTrainerOptions o;
        o.train_loop_config.Set("steps", steps).Set("batch", 128);
        o.scaling_config.num_workers = workers;
        o.run_config.name = "throughput_" + std::to_string(workers) + "_" + std::to_string(round);
        o.run_config.storage_path = storage;
        o.run_config.verbose = false;
        train::Result r = train::TorchTrainer(ThroughputLoop, o).Fit();
        rate[workers].push_back(r.metrics.at("samples_per_second"));
        step_ms[workers].push_back(r.metrics.at("step_ms"));
      }
    }
    std::filesystem::remove_all(storage);

    std::printf("Prism train benchmark: MLP 784-512-512-10, batch 128 per worker, 1 thread per worker, "
                "%d timed steps, %d round(s), median [min, max]\n", steps, rounds);
    std::printf("%-34s %12s %12s %12s  %s\n", "benchmark", "median", "min", "max", "unit");
    for (auto& [workers, v] : rate) {
      std::printf("%-34s %12.0f %12.0f %12.0f  samples/s (%.2f ms/step)\n",
                  ("train_mlp_samples_per_second/" + std::to_string(workers) + "w").c_str(), Median(v),
                  *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()),
                  Median(step_ms[workers]));
    }
    double efficiency = 0;
    if (max_workers == 2) {
      std::vector<double> eff;
      for (int i = 0; i < rounds; ++i) eff.push_back(rate[2][i] / (2 * rate[1][i]));
      efficiency = Median(eff);
      std::printf("scaling efficiency, 2 workers: %.2f (PyTorch DDP + gloo here: 0.88)\n", efficiency);
    }

    nlohmann::ordered_json report;
    report["context"] = {{"mpi_ranks", world}, {"mode", quick ? "quick" : "full"}, {"rounds", rounds},
                         {"steps", steps}};
    report["benchmarks"] = nlohmann::ordered_json::array();
    for (auto& [workers, v] : rate) {
      report["benchmarks"].push_back({{"name", "train_mlp_samples_per_second/" + std::to_string(workers) + "w"},
                                      {"run_type", "iteration"},
                                      {"iterations", v.size()},
                                      {"real_time", Median(step_ms[workers])},
                                      {"time_unit", "ms"},
                                      {"items_per_second", Median(v)},
                                      {"scaling_efficiency", workers == 2 ? efficiency : 1.0}});
    }
    std::filesystem::path path(json);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path);
    out << report.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write " + json);
    std::printf("JSON: %s\n", std::filesystem::absolute(path).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_train_benchmark: %s\n", e.what());
    status = 1;
  }
  prism::Shutdown();
  return status;
}
