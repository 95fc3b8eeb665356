// prism_many_ranks_benchmark: the real runtime on many ranks, however few cores there are
// (perf/README.md, "Scale": mpirun with 16, 32 and 64 ranks on 2 cores, oversubscribed).
//
//   mpirun -n N ./prism_many_ranks_benchmark [--rounds=R] [--idle-s=S] [--bytes=B]
//                                            [--quick] [--json=PATH]
//
// Measured, on rank 0 unless said:
//   init          prism::Init's wall time on each rank (gathered by the fan-out below):
//                 rank 0's and the slowest rank's
//   idle CPU      every rank's process CPU time (CLOCK_PROCESS_CPUTIME_ID) over --idle-s
//                 seconds of an idle job, summed: the cores an idle job keeps busy
//   fan-out       one task pinned to each rank (rank:N, no CPU), all submitted, then all
//                 gotten: the time for the round, per round
//   broadcast     one Put of --bytes bytes, then a task on each worker rank that reads it
//                 (the head's broadcast tree: each copy serves at most two readers): the time
//                 until every rank has it
//   shutdown      prism::Shutdown's wall time on rank 0 (printed after it; not in the JSON,
//                 which is written before Shutdown)
#include <prism/api.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"

namespace {
double g_init_seconds = 0;

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

/// This rank's Init time and process CPU seconds so far.
std::vector<double> RankFacts() { return {g_init_seconds, ProcessCpuSeconds()}; }
/// Reads the broadcast object (a copy, as a user's function taking the value would).
int64_t ReadBytes(std::vector<uint8_t> v) { return static_cast<int64_t>(v.size()); }
PRISM_REMOTE(RankFacts, ReadBytes);

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// One task pinned to every rank; returns each rank's facts.
std::vector<std::vector<double>> FanOut(int world) {
  std::vector<prism::ObjectRef<std::vector<double>>> refs;
  refs.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    refs.push_back(prism::Task(RankFacts)
                       .SetResource("CPU", 0)
                       .SetResource("rank:" + std::to_string(r), 0.001)
                       .Remote());
  }
  std::vector<std::vector<double>> out;
  for (auto& ref : refs) out.push_back(*ref.Get(120000));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_many_ranks_benchmark",
                       "Init, fan-out, broadcast and idle CPU on many ranks:\n"
                       "  mpirun -n N prism_many_ranks_benchmark [flags]");
  cli.AddQuick("3 rounds, 2 s idle, 1 MiB broadcast").AddJson();
  int rounds = 0;
  double idle_s = 0;
  uint64_t bytes = 0;
  cli.app.add_option("--rounds", rounds, "fan-out and broadcast rounds (default 5)")->check(CLI::PositiveNumber);
  cli.app.add_option("--idle-s", idle_s, "idle window for the idle CPU (default 5)")->check(CLI::PositiveNumber);
  cli.app.add_option("--bytes", bytes, "broadcast object size (default 16777216)")->check(CLI::PositiveNumber);
  cli.Parse(argc, argv);
  cli.QuickDefault("--rounds", rounds, 3, 5);
  cli.QuickDefault("--idle-s", idle_s, 2, 5);
  cli.QuickDefault("--bytes", bytes, 1048576, 16777216);
  const bool quick = cli.quick;
  const std::string& json = cli.json;
  double load_start[3];
  prism_bench::LoadAverage(load_start);
  const auto init0 = Clock::now();
  prism::Init(argc, argv);  // ranks 1..N-1 serve here until Shutdown
  g_init_seconds = Since(init0);
  const int world = prism::GetRuntimeContext().GetWorldSize();
  std::printf("Prism on %d ranks (%u cores here)\n", world, std::thread::hardware_concurrency());

  // Init, from every rank (the first fan-out).
  auto facts = FanOut(world);
  double slowest_init = 0;
  for (const auto& f : facts) slowest_init = std::max(slowest_init, f[0]);
  std::printf("  Init: rank 0 %.3f s, slowest rank %.3f s\n", g_init_seconds, slowest_init);

  // Idle CPU: process CPU time of every rank across an idle window.
  std::vector<double> cpu0;
  for (const auto& f : facts) cpu0.push_back(f[1]);
  auto t_idle = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
  facts = FanOut(world);
  const double window = Since(t_idle);
  double cpu = 0;
  for (size_t r = 0; r < facts.size(); ++r) cpu += facts[r][1] - cpu0[r];
  const double idle_cores = cpu / window;
  std::printf("  idle: %.3f cores busy over %.1f s (all %d ranks; %.2f%% of a core per rank)\n",
              idle_cores, window, world, 100 * idle_cores / world);

  // Fan-out rounds.
  std::vector<double> fan_ms;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    (void)FanOut(world);
    fan_ms.push_back(Since(t0) * 1e3);
  }
  std::printf("  fan-out of one task to each of %d ranks: %.1f ms (median of %d)\n", world,
              prism_bench::Median(fan_ms), rounds);

  // Broadcast rounds.
  std::vector<double> bcast_ms;
  const std::vector<uint8_t> payload(bytes, 7);
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    auto ref = prism::Put(payload);
    std::vector<prism::ObjectRef<int64_t>> reads;
    for (int r = 1; r < world; ++r) {
      reads.push_back(prism::Task(ReadBytes)
                          .SetResource("CPU", 0)
                          .SetResource("rank:" + std::to_string(r), 0.001)
                          .Remote(ref));
    }
    for (auto& read : reads) {
      if (*read.Get(300000) != static_cast<int64_t>(bytes)) {
        std::fprintf(stderr, "prism_many_ranks_benchmark: a rank read the wrong size\n");
        prism::Shutdown();
        return 1;
      }
    }
    bcast_ms.push_back(Since(t0) * 1e3);
  }
  std::printf("  broadcast of %.1f MiB to %d ranks: %.1f ms (median of %d)\n",
              static_cast<double>(bytes) / (1 << 20), world - 1, prism_bench::Median(bcast_ms),
              rounds);

  int status = 0;
  if (!json.empty()) {
    prism_bench::Context c = prism_bench::MpiRunContext(argv[0], load_start, world, quick, rounds);
    c.fields.push_back({"broadcast_bytes", prism_bench::JsonNumber(static_cast<double>(bytes))});
    c.statistic = "median of rounds";
    std::vector<prism_bench::Entry> entries;
    auto add = [&](const std::string& name, const std::string& unit, std::vector<double> v,
                   const std::string& label) {
      prism_bench::Entry e;
      e.name = name + "_" + std::to_string(world);
      e.family_index = static_cast<int64_t>(entries.size());
      e.unit = unit;
      e.iterations = static_cast<int64_t>(v.size());
      e.per_round = std::move(v);
      e.real_time = prism_bench::Median(e.per_round);
      e.label = label;
      entries.push_back(std::move(e));
    };
    add("init_s_rank0", "s", {g_init_seconds}, "prism::Init on rank 0");
    add("init_s_slowest", "s", {slowest_init}, "prism::Init on the slowest rank");
    add("idle_cores", "cores", {idle_cores}, "CPU of every rank over an idle window, in cores");
    add("fanout_ms", "ms", fan_ms, "one pinned task to every rank, submitted and gotten");
    add("broadcast_ms", "ms", bcast_ms, "Put, then every worker rank reads it");
    try {
      prism_bench::WriteReport(json, c, entries);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism_many_ranks_benchmark: %s\n", e.what());
      status = 1;
    }
  }
  const auto t_shutdown = Clock::now();
  prism::Shutdown();
  std::printf("  Shutdown: %.3f s on rank 0\n", Since(t_shutdown));
  return status;
}
