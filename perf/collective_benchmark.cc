// prism_collective_benchmark: AllReduce (sum, float32) through prism::train's MPI collective
// against a raw blocking MPI_Allreduce of the same bytes, on every rank.
//
//   mpirun -n 3 ./prism_collective_benchmark [--quick] [--json=PATH] [--rounds=N]
//                                            [--sizes-mib=1,16,100]
//
// The driver (rank 0) starts one task per rank. Each creates the group's communicator
// (platform::Communicator) and builds the Collective on a Duplicate of it; the baseline
// runs raw MPI on the group's communicator itself. Both run round by round, interleaved (the order alternates), so that
// both see the same machine load. A round is a fixed number of operations (the same on
// every rank, as collectives need), timed between two barriers; a round's time is the
// slowest rank's. Reported: bus bandwidth = bytes * 2 (n - 1) / n / seconds (NCCL-tests'
// convention), median [min, max] across rounds, and the Collective/raw ratio (median of the
// per-round ratios; target >= 0.90). Table on stdout, JSON in Google Benchmark's shape
// (like perf/microbenchmark.cc) at --json (default perf/results/collective_benchmark.json).
#include <mpi.h>
#include <prism/api.h>
#include <prism/platform/communicator.h>
#include <prism/train/collective.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_report.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kTargetRatio = 0.90;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

/// One member's timings: for each size, for each round, seconds per operation of the
/// Collective and of raw MPI_Allreduce (flattened: size-major, then round, then the pair).
/// Throws if a warm-up result is wrong (so a fast but broken collective cannot pass).
std::vector<double> BenchMember(std::vector<int> ranks, std::vector<int64_t> sizes,
                                std::vector<int64_t> iterations, int rounds) {
  auto group = prism::platform::Communicator::Create("collective_benchmark", ranks);
  auto collective = prism::train::MakeMpiCollective(group.Duplicate());
  MPI_Comm raw = group.comm();
  const int n = static_cast<int>(ranks.size());

  std::vector<double> out;
  for (size_t s = 0; s < sizes.size(); ++s) {
    const int64_t count = sizes[s] / static_cast<int64_t>(sizeof(float));
    torch::Tensor tensor = torch::ones({count}, torch::kFloat32);
    std::vector<float> buffer(static_cast<size_t>(count), 1.0f);
    // Warm-up, checked: ones summed over n members.
    collective->AllReduce(tensor, prism::train::ReduceOp::kSum);
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw);
    if (!tensor.eq(static_cast<float>(n)).all().item<bool>() ||
        std::any_of(buffer.begin(), buffer.end(),
                    [n](float v) { return v != static_cast<float>(n); })) {
      throw std::runtime_error("warm-up AllReduce of " + std::to_string(sizes[s]) +
                               " bytes gave wrong sums");
    }
    // Zeros from here on: sums stay finite however many rounds run.
    tensor.zero_();
    std::fill(buffer.begin(), buffer.end(), 0.0f);

    auto time_collective = [&] {
      MPI_Barrier(raw);
      auto t0 = Clock::now();
      for (int64_t i = 0; i < iterations[s]; ++i) {
        collective->AllReduce(tensor, prism::train::ReduceOp::kSum);
      }
      return Seconds(Clock::now() - t0) / static_cast<double>(iterations[s]);
    };
    auto time_raw = [&] {
      MPI_Barrier(raw);
      auto t0 = Clock::now();
      for (int64_t i = 0; i < iterations[s]; ++i) {
        MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                      raw);
      }
      return Seconds(Clock::now() - t0) / static_cast<double>(iterations[s]);
    };
    for (int r = 0; r < rounds; ++r) {
      double c = 0, m = 0;
      if (r % 2 == 0) {
        c = time_collective();
        m = time_raw();
      } else {
        m = time_raw();
        c = time_collective();
      }
      out.push_back(c);
      out.push_back(m);
    }
  }
  return out;
}

PRISM_REMOTE(BenchMember);

namespace {

struct Options {
  bool quick = false;
  std::string json = "perf/results/collective_benchmark.json";
  int rounds = 5;
  std::vector<int64_t> sizes_mib = {1, 16, 100};
  int64_t budget_bytes = int64_t{512} << 20;  // per timed block: iterations = budget / size
  int timeout_s = 900;
};

void Usage() {
  std::printf(
      "usage: prism_collective_benchmark [--quick] [--json=PATH] [--rounds=N]\n"
      "                                  [--sizes-mib=A,B,...] [--prism-* flags]\n"
      "  --quick         1 MiB only, 3 short rounds (a smoke run of a few seconds)\n"
      "  --json=PATH     where the Google-Benchmark-style JSON goes\n"
      "                  (default perf/results/collective_benchmark.json)\n"
      "  --sizes-mib     AllReduce sizes in MiB (default 1,16,100)\n"
      "Run under mpirun with at least 2 ranks.\n");
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  prism_bench::CommandLine cl =
      prism_bench::ParseCommandLine(argc, argv, "prism_collective_benchmark", {"--quick"}, Usage);
  const bool quick = cl.switches.count("--quick") > 0;
  std::map<std::string, std::string>& given = cl.values;
  if (quick) {
    o.quick = true;
    o.rounds = 3;
    o.sizes_mib = {1};
    o.budget_bytes = int64_t{8} << 20;
    o.timeout_s = 100;
  }
  try {
    for (const auto& [k, v] : given) {
      if (k == "json") {
        o.json = v;
      } else if (k == "rounds") {
        o.rounds = std::max(1, std::stoi(v));
      } else if (k == "sizes-mib") {
        o.sizes_mib.clear();
        std::stringstream ss(v);
        std::string item;
        while (std::getline(ss, item, ',')) {
          if (!item.empty()) o.sizes_mib.push_back(std::max<int64_t>(1, std::stoll(item)));
        }
        if (o.sizes_mib.empty()) throw std::invalid_argument("--sizes-mib lists no size");
      } else {
        std::fprintf(stderr, "prism_collective_benchmark: unknown flag --%s\n", k.c_str());
        Usage();
        std::exit(2);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_collective_benchmark: bad flag value: %s\n", e.what());
    std::exit(2);
  }
  return o;
}

using prism_bench::Max;
using prism_bench::Median;
using prism_bench::Min;

struct Result {
  std::string name;
  std::string note;
  int64_t bytes = 0;
  int64_t iterations = 0;        // operations over all rounds
  std::vector<double> seconds;   // per operation, one per round (slowest rank)
  std::vector<double> bus_gbps;  // one per round
  bool has_target = false;
  double ratio = 0;  // median of per-round raw/Collective time ratios
};

std::string SizeName(int64_t bytes) {
  if (bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes) + "B";
}

void WriteJson(const Options& opt, int world, const std::vector<Result>& results,
               const std::string& exe, const double load_start[3]) {
  prism_bench::Context c;
  c.executable = exe;
  c.load_avg_at_start = std::vector<double>(load_start, load_start + 3);
  c.mpi_ranks = world;
  c.mpi_library_version = prism_bench::MpiLibraryVersion();
  c.quick = opt.quick;
  c.rounds = opt.rounds;
  c.statistic =
      "median across rounds (min/max across rounds alongside); a round's time is the slowest "
      "rank's";
  std::vector<prism_bench::Entry> entries;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const double sec = Median(r.seconds);
    prism_bench::Entry e;
    e.name = r.name;
    e.family_index = static_cast<int64_t>(i);
    e.iterations = r.iterations;
    e.real_time = e.cpu_time = sec * 1e6;
    e.time_unit = "us";
    e.items_per_second = sec > 0 ? 1 / sec : 0;
    e.bytes_per_second = sec > 0 ? r.bytes / sec : 0;
    e.before_unit = {{"bytes", std::to_string(r.bytes)}};
    e.unit = "GB/s (bus bandwidth)";
    e.per_round = r.bus_gbps;
    if (r.has_target) {
      e.after_rounds = {{"ratio_to_raw_mpi", prism_bench::JsonNumber(r.ratio)}};
      e.target = prism_bench::Target{
          "Collective/raw MPI_Allreduce bus bandwidth >= " + prism_bench::JsonNumber(kTargetRatio),
          kTargetRatio, r.ratio / kTargetRatio, r.ratio >= kTargetRatio, !opt.quick};
    }
    e.label = r.note;
    entries.push_back(std::move(e));
  }
  prism_bench::WriteReport(opt.json, c, entries);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = ParseOptions(argc, argv);
  prism::Init(argc, argv);  // ranks 1..N-1 serve tasks here until Shutdown
  const int world = prism::GetRuntimeContext().GetWorldSize();
  if (world < 2) {
    std::fprintf(stderr,
                 "prism_collective_benchmark: needs at least 2 ranks (got %d): run it under "
                 "mpirun -n 3\n",
                 world);
    prism::Shutdown();
    return 2;
  }
  double load_start[3];
  prism_bench::LoadAverage(load_start);

  std::vector<int> ranks(static_cast<size_t>(world));
  std::iota(ranks.begin(), ranks.end(), 0);
  std::vector<int64_t> sizes, iterations;
  for (int64_t mib : opt.sizes_mib) {
    sizes.push_back(mib << 20);
    iterations.push_back(std::max<int64_t>(2, opt.budget_bytes / (mib << 20)));
  }

  std::printf(
      "Prism collective benchmark: AllReduce(sum, float32) on %d ranks, %s mode, %d rounds; "
      "bus bandwidth GB/s, median [min, max] across rounds; load avg %.2f\n",
      world, opt.quick ? "quick" : "full", opt.rounds, load_start[0]);
  std::fflush(stdout);

  std::vector<prism::ObjectRef<std::vector<double>>> refs;
  for (int w : ranks) {
    refs.push_back(prism::Task(BenchMember)
                       .SetResource("rank:" + std::to_string(w), 0.01)
                       .SetResource("CPU", 0)
                       .Remote(ranks, sizes, iterations, opt.rounds));
  }
  std::vector<std::vector<double>> per_rank;
  try {
    for (auto& ref : refs) per_rank.push_back(*ref.Get(opt.timeout_s * 1000));
  } catch (const std::exception& e) {
    // A member stuck in MPI cannot be stopped from here: report and end the whole job.
    std::fprintf(stderr, "prism_collective_benchmark: failed: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(3);
  }

  const double bus_factor = 2.0 * (world - 1) / world;
  std::vector<Result> results;
  std::printf("\n%-10s %6s  %-30s %-30s %s\n", "size", "iters", "Collective GB/s", "raw MPI GB/s",
              "ratio (target >= 0.90)");
  bool all_met = true;
  for (size_t s = 0; s < sizes.size(); ++s) {
    Result coll, raw;
    coll.name = "allreduce_collective/" + SizeName(sizes[s]);
    raw.name = "allreduce_raw_mpi/" + SizeName(sizes[s]);
    coll.note = "prism::train MPI Collective::AllReduce(kSum), float32, " + std::to_string(world) +
                " ranks";
    raw.note = "blocking MPI_Allreduce(MPI_IN_PLACE, MPI_SUM), float32, same members";
    coll.bytes = raw.bytes = sizes[s];
    coll.iterations = raw.iterations = iterations[s] * opt.rounds;
    coll.has_target = true;
    std::vector<double> ratios;
    for (int r = 0; r < opt.rounds; ++r) {
      double c = 0, m = 0;  // the slowest rank's time per operation
      for (const auto& v : per_rank) {
        size_t at = (s * static_cast<size_t>(opt.rounds) + static_cast<size_t>(r)) * 2;
        c = std::max(c, v[at]);
        m = std::max(m, v[at + 1]);
      }
      coll.seconds.push_back(c);
      raw.seconds.push_back(m);
      coll.bus_gbps.push_back(static_cast<double>(sizes[s]) * bus_factor / c / 1e9);
      raw.bus_gbps.push_back(static_cast<double>(sizes[s]) * bus_factor / m / 1e9);
      ratios.push_back(m / c);
    }
    coll.ratio = Median(ratios);
    all_met = all_met && coll.ratio >= kTargetRatio;
    char cbuf[64], rbuf[64];
    std::snprintf(cbuf, sizeof cbuf, "%.3f [%.3f, %.3f]", Median(coll.bus_gbps), Min(coll.bus_gbps),
                  Max(coll.bus_gbps));
    std::snprintf(rbuf, sizeof rbuf, "%.3f [%.3f, %.3f]", Median(raw.bus_gbps), Min(raw.bus_gbps),
                  Max(raw.bus_gbps));
    std::printf("%-10s %6lld  %-30s %-30s %.3f [%.3f, %.3f] %s\n", SizeName(sizes[s]).c_str(),
                static_cast<long long>(iterations[s]), cbuf, rbuf, coll.ratio, Min(ratios),
                Max(ratios), coll.ratio >= kTargetRatio ? "MET" : "NOT MET");
    results.push_back(coll);
    results.push_back(raw);
  }
  std::printf("Target Collective >= %.2f x raw MPI at every size: %s%s\n", kTargetRatio,
              all_met ? "MET" : "NOT MET",
              opt.quick ? " (quick mode: too short for a verdict, run the full mode)" : "");

  int status = 0;
  try {
    WriteJson(opt, world, results, argv[0], load_start);
    std::printf("\nJSON: %s\n", std::filesystem::absolute(opt.json).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_collective_benchmark: %s\n", e.what());
    status = 1;
  }
  std::fflush(stdout);
  prism::Shutdown();
  return status;
}
