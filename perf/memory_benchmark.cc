// prism_memory_benchmark: rank 0's memory per queued task, and whether it comes back.
//
//   mpirun -n 3 ./prism_memory_benchmark [--tasks=N] [--rounds=R] [--settle-ms=MS]
//                                        [--max-residual-mb=X] [--malloc-trim] [--json=PATH]
//
// Each round the driver submits N no-op tasks at once (far more than the ranks can run, so
// almost all of them queue on the head), gets them all, drops every ref, and waits for the
// head to have forgotten them. Rank 0's resident set (VmRSS of /proc/self/status; rank 0
// holds the head, the driver and its node) is read before the round, sampled every 2 ms
// during it for the peak, and read again after. Reported per round: before, peak, after,
// malloc's bytes in use after (mallinfo2: still allocated, as opposed to freed but kept by
// malloc), and (peak - before) / N bytes per queued task. The residual is the last
// round's "after" minus the first round's "before": what rank 0 keeps once the tasks are
// gone.
//
// --max-residual-mb=X exits 1 if the residual is above X MiB (the perf_memory_returned
// test). --json writes the figures in bench_report.h's shape.
#include <malloc.h>
#include <mpi.h>
#include <prism/api.h>
#include <prism/state.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"

int NoOp() { return 0; }
PRISM_REMOTE(NoOp);

namespace {

/// Rank 0's resident set in bytes (VmRSS), 0 if /proc is not there.
int64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return 0;
}

/// Samples RSS every 2 ms while alive; Peak() is the largest seen.
class PeakSampler {
 public:
  PeakSampler() : peak_(RssBytes()), thread_([this] {
    while (!stop_.load()) {
      int64_t now = RssBytes();
      if (now > peak_.load()) peak_.store(now);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }) {}
  ~PeakSampler() {
    stop_.store(true);
    thread_.join();
  }
  int64_t Peak() const { return peak_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> peak_;
  std::thread thread_;
};

/// Bytes glibc's malloc has handed out and not had back (all arenas).
int64_t HeapInUse() {
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

struct Round {
  int64_t before = 0, peak = 0, after = 0;
  int64_t heap_after = 0;  // malloc'd and not freed, after the round
  double seconds = 0;
};

double MiB(int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_memory_benchmark",
                       "Rank 0's memory per queued task, and what it keeps once the tasks are done");
  cli.AddJson();
  int64_t tasks = 1000000;
  int rounds = 3, settle_ms = 500;
  double max_residual_mb = -1;
  bool trim = false;
  cli.app.add_option("--tasks", tasks, "no-op tasks submitted at once per round (default 1000000)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--rounds", rounds, "rounds (default 3)")->check(CLI::PositiveNumber);
  cli.app.add_option("--settle-ms", settle_ms, "wait after the refs are dropped (default 500)");
  cli.app.add_option("--max-residual-mb", max_residual_mb,
                     "exit 1 if rank 0 keeps more than X MiB after the rounds");
  cli.app.add_flag("--malloc-trim", trim,
                   "call malloc_trim(0) after each round before reading RSS: what is left is in "
                   "use, not freed memory malloc kept");
  cli.Parse(argc, argv);
  const std::string& json = cli.json;

  prism::Init(argc, argv);  // ranks 1..N-1 serve tasks here until Shutdown
  const int world = prism::GetRuntimeContext().GetWorldSize();
  std::printf("Prism memory: rank 0's RSS around %lld no-op tasks submitted at once, %d rank(s)\n",
              static_cast<long long>(tasks), world);
  std::printf("%5s %12s %12s %12s %14s %14s %9s\n", "round", "before MiB", "peak MiB",
              "after MiB", "heap used MiB", "bytes/task", "seconds");
  std::vector<Round> out;
  for (int r = 0; r < rounds; ++r) {
    Round round;
    round.before = RssBytes();
    auto t0 = std::chrono::steady_clock::now();
    {
      PeakSampler sampler;
      {
        std::vector<prism::ObjectRef<int>> refs;
        refs.reserve(static_cast<size_t>(tasks));
        for (int64_t i = 0; i < tasks; ++i) refs.push_back(prism::Task(NoOp).Remote());
        int64_t sum = 0;
        for (const auto& v : prism::Get(refs)) sum += *v;
        if (sum != 0) std::fprintf(stderr, "prism_memory_benchmark: wrong sum %lld\n",
                                   static_cast<long long>(sum));
      }  // every ref dropped here
      // A head call from this thread is answered after the drops it posted before it.
      (void)prism::state::SummarizeTasks();
      std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
      round.peak = sampler.Peak();
    }
    if (trim) malloc_trim(0);
    round.after = RssBytes();
    round.heap_after = HeapInUse();
    round.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%5d %12.1f %12.1f %12.1f %14.1f %14.0f %9.2f\n", r, MiB(round.before),
                MiB(round.peak), MiB(round.after), MiB(round.heap_after),
                static_cast<double>(round.peak - round.before) / static_cast<double>(tasks),
                round.seconds);
    std::fflush(stdout);
    out.push_back(round);
  }
  const int64_t residual = out.back().after - out.front().before;
  std::printf("residual: %.1f MiB kept by rank 0 after %d round(s) (last after - first before)\n",
              MiB(residual), rounds);

  int status = 0;
  if (!json.empty()) {
    prism_bench::Context c;
    c.executable = argv[0];
    c.mpi_ranks = world;
    c.rounds = rounds;
    c.statistic = "per round";
    std::vector<prism_bench::Entry> entries;
    auto entry = [&](const std::string& name, const std::string& unit, auto f) {
      prism_bench::Entry e;
      e.name = name;
      e.unit = unit;
      e.iterations = tasks;
      for (const auto& r : out) e.per_round.push_back(f(r));
      e.real_time = prism_bench::Median(e.per_round);
      entries.push_back(std::move(e));
    };
    entry("head_bytes_per_queued_task", "bytes", [&](const Round& r) {
      return static_cast<double>(r.peak - r.before) / static_cast<double>(tasks);
    });
    entry("head_mib_kept_after_tasks", "MiB",
          [&](const Round& r) { return MiB(r.after - out.front().before); });
    try {
      prism_bench::WriteReport(json, c, entries);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism_memory_benchmark: %s\n", e.what());
      status = 1;
    }
  }
  if (max_residual_mb >= 0 && MiB(residual) > max_residual_mb) {
    std::fprintf(stderr,
                 "prism_memory_benchmark: rank 0 kept %.1f MiB after its %lld tasks were gone "
                 "(bound %.1f MiB)\n",
                 MiB(residual), static_cast<long long>(tasks), max_residual_mb);
    status = 1;
  }
  prism::Shutdown();
  return status;
}
