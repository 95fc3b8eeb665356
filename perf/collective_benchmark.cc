// prism_collective_benchmark: AllReduce (sum, float32) through prism::collective::Group (the
// library under prism::train, Data and users' actor groups) against a raw blocking
// MPI_Allreduce of the same bytes and, on 2 ranks, PyTorch's gloo (perf/peers/ddp_bench.py),
// all in one run.
//
//   mpirun -n 2 ./prism_collective_benchmark [--quick] [--json=PATH] [--rounds=N]
//                                            [--sizes-mib=1,4,16,64,256] [--gloo=SCRIPT|off]
//
// For each size the driver (rank 0) starts one task per rank. Each makes a Group (its own
// communicator and, on one host, its shared-memory segment); the baseline runs raw MPI on the
// group's communicator. Both run round by round, interleaved (the order alternates), so both
// see the same machine load. A round is a fixed number of operations (the same on every rank),
// timed between two barriers; a round's time is the slowest rank's. Then, on 2 ranks, the
// driver runs the gloo peer for the same size and rounds (Debian's python3 with python3-torch;
// the Prism ranks sit idle meanwhile), so the three are measured within seconds of each other.
// Reported: bus bandwidth = bytes * 2 (n - 1) / n / seconds (NCCL-tests' convention), median
// [min, max] across rounds, and Prism / max(raw MPI, gloo) of the medians (target >= 1.0).
// Table on stdout, JSON in Google Benchmark's shape at --json (default
// perf/results/collective_benchmark.json).
#include <mpi.h>
#include <prism/api.h>
#include <prism/collective.h>
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

#include "bench_cli.h"
#include "bench_report.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kTargetRatio = 1.0;  // Prism / max(raw MPI, gloo)

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

/// One member's timings for one size: for each round, seconds per operation of the Group's
/// AllReduce and of raw MPI_Allreduce (flattened: round, then the pair). Throws if a warm-up
/// result is wrong (so a fast but broken collective cannot pass).
std::vector<double> BenchMember(std::vector<int> ranks, int64_t bytes, int64_t iterations,
                                int rounds, int algorithm) {
  namespace coll = prism::collective;
  coll::GroupOptions options;
  options.algorithm = static_cast<coll::Algorithm>(algorithm);
  coll::Group group =
      coll::Group::Create("collective_benchmark/" + std::to_string(bytes), ranks, options);
  // The raw baseline runs on a communicator of its own over the same members.
  auto raw_comm = prism::platform::Communicator::Create(
      "collective_benchmark_raw/" + std::to_string(bytes), ranks);
  MPI_Comm raw = raw_comm.comm();
  const int n = static_cast<int>(ranks.size());
  const int64_t count = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> buffer(static_cast<size_t>(count), 1.0f), raw_buffer(buffer);
  // Warm-up, checked: ones summed over n members.
  group.AllReduce(buffer, coll::ReduceOp::kSum);
  MPI_Allreduce(MPI_IN_PLACE, raw_buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw);
  auto wrong = [n](const std::vector<float>& v) {
    return std::any_of(v.begin(), v.end(), [n](float x) { return x != static_cast<float>(n); });
  };
  if (wrong(buffer) || wrong(raw_buffer)) {
    throw std::runtime_error("warm-up AllReduce of " + std::to_string(bytes) + " bytes gave wrong sums");
  }
  // Zeros from here on: sums stay finite however many rounds run.
  std::fill(buffer.begin(), buffer.end(), 0.0f);
  std::fill(raw_buffer.begin(), raw_buffer.end(), 0.0f);

  auto time_group = [&] {
    group.Barrier();
    auto t0 = Clock::now();
    for (int64_t i = 0; i < iterations; ++i) group.AllReduce(buffer, coll::ReduceOp::kSum);
    return Seconds(Clock::now() - t0) / static_cast<double>(iterations);
  };
  auto time_raw = [&] {
    MPI_Barrier(raw);
    auto t0 = Clock::now();
    for (int64_t i = 0; i < iterations; ++i) {
      MPI_Allreduce(MPI_IN_PLACE, raw_buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    raw);
    }
    return Seconds(Clock::now() - t0) / static_cast<double>(iterations);
  };
  std::vector<double> out;
  for (int r = 0; r < rounds; ++r) {
    double c = 0, m = 0;
    if (r % 2 == 0) {
      c = time_group();
      m = time_raw();
    } else {
      m = time_raw();
      c = time_group();
    }
    out.push_back(c);
    out.push_back(m);
  }
  group.Barrier();
  return out;
}

PRISM_REMOTE(BenchMember);

namespace {

struct Options {
  bool quick = false;
  std::string json = "perf/results/collective_benchmark.json";
  int rounds = 5;
  std::vector<int64_t> sizes_mib = {1, 4, 16, 64, 256};
  int64_t budget_bytes = int64_t{512} << 20;  // per timed block: iterations = budget / size
  int timeout_s = 900;
  std::string gloo;  // the peer script; "" = perf/peers/ddp_bench.py next to this source
  bool gloo_off = false;
  prism::collective::Algorithm algorithm = prism::collective::Algorithm::kAuto;
};

/// Parses our flags (bench_cli.h). Exits on --help and on a bad flag.
Options ParseOptions(int argc, char** argv) {
  Options o;
  prism_bench::Cli cli("prism_collective_benchmark",
                       "AllReduce on a prism::train collective group against gloo (torch DDP's "
                       "peer); run under mpirun with at least 2 ranks");
  cli.AddQuick("1 MiB only, 3 short rounds, no gloo (a smoke run of a few seconds)")
      .AddJson("perf/results/collective_benchmark.json");
  std::string gloo;
  cli.app.add_option("--rounds", o.rounds, "measured rounds (default 5)")->check(CLI::PositiveNumber);
  cli.app.add_option("--sizes-mib", o.sizes_mib, "AllReduce sizes in MiB (default 1,4,16,64,256)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--gloo", gloo,
                     "the gloo peer (default perf/peers/ddp_bench.py of this source tree, run with "
                     "/usr/bin/python3); off to skip it. Only on 2 ranks (the peer's size)");
  const std::map<std::string, prism::collective::Algorithm> algorithms = {
      {"auto", prism::collective::Algorithm::kAuto},
      {"ring", prism::collective::Algorithm::kRing},
      {"mpi", prism::collective::Algorithm::kMpi},
      {"hierarchical", prism::collective::Algorithm::kHierarchical}};
  cli.app.add_option("--algorithm", o.algorithm,
                     "the Group's algorithm: auto (the default), ring, mpi, or hierarchical "
                     "(shared memory within each host, a ring between hosts)")
      ->transform(CLI::CheckedTransformer(algorithms, CLI::ignore_case));
  cli.Parse(argc, argv, [&] {
    o.rounds = 3;
    o.sizes_mib = {1};
    o.budget_bytes = int64_t{8} << 20;
    o.timeout_s = 100;
    o.gloo_off = true;
  });
  o.quick = cli.quick;
  o.json = cli.json;
  if (cli.Given("--gloo")) {
    o.gloo_off = gloo == "off";
    if (!o.gloo_off) o.gloo = gloo;
  }
  if (o.gloo.empty()) o.gloo = PRISM_BENCH_SOURCE_DIR "/perf/peers/ddp_bench.py";
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
  double ratio = 0;  // Prism's median / the best other median
};

std::string SizeName(int64_t bytes) {
  if (bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes) + "B";
}

/// The gloo peer's seconds per operation, one per round, for `mib`; empty (with the reason on
/// stderr) if it cannot run here.
std::vector<double> RunGloo(const Options& opt, int64_t mib) {
  char tmpl[] = "/tmp/prism-collective-gloo-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) return {};
  close(fd);
  const std::string out = tmpl;
  const std::string cmd = "/usr/bin/python3 '" + opt.gloo + "' --no-train --sizes-mib=" +
                          std::to_string(mib) + " --rounds=" + std::to_string(opt.rounds) +
                          " --json= --seconds-out='" + out + "' > /dev/null";
  const int rc = std::system(cmd.c_str());
  std::vector<double> secs;
  std::ifstream in(out);
  int64_t got_mib = 0;
  if (rc == 0 && (in >> got_mib) && got_mib == mib) {
    double x = 0;
    while (in >> x) secs.push_back(x);
  } else {
    std::fprintf(stderr, "prism_collective_benchmark: the gloo peer did not run (%s exited %d; "
                 "it needs /usr/bin/python3 with python3-torch)\n", opt.gloo.c_str(), rc);
  }
  std::remove(out.c_str());
  return secs;
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
    e.before_unit = {{"bytes", r.bytes}};
    e.unit = "GB/s (bus bandwidth)";
    e.per_round = r.bus_gbps;
    if (r.has_target) {
      e.after_rounds = {{"ratio_to_best_other", prism_bench::JsonNumber(r.ratio)}};
      e.target = prism_bench::Target{
          "Prism bus bandwidth / max(raw MPI_Allreduce, gloo) >= " +
              prism_bench::FormatNumber(kTargetRatio),
          kTargetRatio, r.ratio / kTargetRatio, r.ratio >= kTargetRatio, !opt.quick};
    }
    e.label = r.note;
    entries.push_back(std::move(e));
  }
  prism_bench::WriteReport(opt.json, c, entries);
}

std::string Cell(const std::vector<double>& v) {
  if (v.empty()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f [%.3f, %.3f]", Median(v), Min(v), Max(v));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = ParseOptions(argc, argv);
  prism::Init(argc, argv);  // ranks 1..N-1 serve tasks here until Shutdown
  const int world = prism::GetRuntimeContext().GetWorldSize();
  if (world < 2) {
    std::fprintf(stderr,
                 "prism_collective_benchmark: needs at least 2 ranks (got %d): run it under "
                 "mpirun -n 2\n",
                 world);
    prism::Shutdown();
    return 2;
  }
  const bool gloo = !opt.gloo_off && world == 2;
  double load_start[3];
  prism_bench::LoadAverage(load_start);

  std::vector<int> ranks(static_cast<size_t>(world));
  std::iota(ranks.begin(), ranks.end(), 0);

  std::printf(
      "Prism collective benchmark: AllReduce(sum, float32) on %d ranks, %s mode, %d rounds%s; "
      "bus bandwidth GB/s, median [min, max] across rounds; load avg %.2f\n",
      world, opt.quick ? "quick" : "full", opt.rounds,
      gloo ? ", gloo peer on 2 processes" : (world == 2 ? "" : " (gloo only on 2 ranks)"),
      load_start[0]);
  std::printf("\n%-8s %6s  %-26s %-26s %-26s %s\n", "size", "iters", "Prism GB/s", "raw MPI GB/s",
              "gloo GB/s", "Prism/max(others) (target >= 1.00)");
  std::fflush(stdout);

  const double bus_factor = 2.0 * (world - 1) / world;
  std::vector<Result> results;
  bool all_met = true;
  for (int64_t mib : opt.sizes_mib) {
    const int64_t bytes = mib << 20;
    const int64_t iterations = std::max<int64_t>(2, opt.budget_bytes / bytes);
    std::vector<prism::ObjectRef<std::vector<double>>> refs;
    for (int w : ranks) {
      refs.push_back(prism::Task(BenchMember)
                         .SetResource("rank:" + std::to_string(w), 0.01)
                         .SetResource("CPU", 0)
                         .Remote(ranks, bytes, iterations, opt.rounds, static_cast<int>(opt.algorithm)));
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
    Result coll, raw, peer;
    coll.name = "allreduce_collective/" + SizeName(bytes);
    raw.name = "allreduce_raw_mpi/" + SizeName(bytes);
    peer.name = "allreduce_gloo/" + SizeName(bytes);
    coll.note = "prism::collective::Group::AllReduce(kSum), float32, " + std::to_string(world) +
                " ranks";
    raw.note = "blocking MPI_Allreduce(MPI_IN_PLACE, MPI_SUM), float32, same members";
    peer.note = "PyTorch dist.all_reduce(SUM), gloo, float32, 2 processes (perf/peers/ddp_bench.py)";
    coll.bytes = raw.bytes = peer.bytes = bytes;
    coll.iterations = raw.iterations = iterations * opt.rounds;
    coll.has_target = true;
    for (int r = 0; r < opt.rounds; ++r) {
      double c = 0, m = 0;  // the slowest rank's time per operation
      for (const auto& v : per_rank) {
        c = std::max(c, v[static_cast<size_t>(2 * r)]);
        m = std::max(m, v[static_cast<size_t>(2 * r + 1)]);
      }
      coll.seconds.push_back(c);
      raw.seconds.push_back(m);
      coll.bus_gbps.push_back(static_cast<double>(bytes) * bus_factor / c / 1e9);
      raw.bus_gbps.push_back(static_cast<double>(bytes) * bus_factor / m / 1e9);
    }
    if (gloo) {
      peer.seconds = RunGloo(opt, mib);
      peer.iterations = std::max<int64_t>(2, (int64_t{512} << 20) / bytes) *
                        static_cast<int64_t>(peer.seconds.size());
      for (double sec : peer.seconds) {
        peer.bus_gbps.push_back(static_cast<double>(bytes) * bus_factor / sec / 1e9);
      }
    }
    const double best_other = std::max(Median(raw.bus_gbps), Median(peer.bus_gbps));
    coll.ratio = best_other > 0 ? Median(coll.bus_gbps) / best_other : 0;
    all_met = all_met && coll.ratio >= kTargetRatio;
    std::printf("%-8s %6lld  %-26s %-26s %-26s %.2f %s\n", SizeName(bytes).c_str(),
                static_cast<long long>(iterations), Cell(coll.bus_gbps).c_str(),
                Cell(raw.bus_gbps).c_str(), Cell(peer.bus_gbps).c_str(), coll.ratio,
                coll.ratio >= kTargetRatio ? "MET" : "NOT MET");
    std::fflush(stdout);
    results.push_back(coll);
    results.push_back(raw);
    if (!peer.seconds.empty()) results.push_back(peer);
  }
  double load_end[3];
  prism_bench::LoadAverage(load_end);
  std::printf("Target Prism >= max(raw MPI, gloo) at every size: %s%s; load avg at end %.2f\n",
              all_met ? "MET" : "NOT MET",
              opt.quick ? " (quick mode: too short for a verdict, run the full mode)" : "",
              load_end[0]);

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
