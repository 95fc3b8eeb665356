// prism_reference_benchmark: the machine's own figures, measured in the same suite run as
// Prism's, so that perf/suite.py compare can tell a slower machine from a slower Prism.
// Plain MPI and memcpy; no Prism.
//
//   mpirun -n 2 ./prism_reference_benchmark [--quick] [--json=PATH] [--rounds=N] [--min-time=S]
//
//   reference_memcpy_gigabytes      memcpy of 64 MiB into a reused, pre-touched buffer (GB/s);
//                                   rank 0 only, the other ranks wait without spinning
//   reference_mpi_pingpong_latency  8-byte MPI_Send/MPI_Recv ping-pong between ranks 0 and 1:
//                                   one-way latency, half the round trip (us)
//   reference_mpi_pingpong_gigabytes  the same with 1 MiB messages: bytes / one-way time (GB/s)
//   reference_matmul_gflops         a 128x128 float matrix product in plain loops (i-k-j),
//                                   rank 0 only: the core's compute speed (GFLOP/s)
//
// Each figure is the median over --rounds rounds (default 5, quick 3) of at least --min-time
// seconds each (default 0.5, quick 0.05), after one warm-up round. Ranks beyond 1 take no
// part in the ping-pong and sleep in a polled barrier, so they do not steal a core.
// A watchdog (alarm) ends the program if it runs longer than 300 s (quick: 60 s).
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPingTag = 11;
constexpr size_t kMemcpyBytes = size_t{64} << 20;
constexpr int kLatencyBytes = 8;
constexpr int kBandwidthBytes = 1 << 20;

struct Options {
  bool quick = false;
  std::string json = "perf/results/reference_benchmark.json";
  int rounds = 5;
  double min_time_s = 0.5;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

/// Waits for every rank without spinning: a nonblocking barrier tested every 1 ms.
void QuietBarrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  while (!done) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

/// Repeats `op` (which does `per_call` operations) until min_time has passed; returns
/// seconds per operation.
double OneRound(const std::function<void()>& op, int per_call, double min_time_s) {
  int64_t ops = 0;
  auto t0 = Clock::now();
  double elapsed = 0;
  do {
    op();
    ops += per_call;
    elapsed = Seconds(Clock::now() - t0);
  } while (elapsed < min_time_s);
  return elapsed / static_cast<double>(ops);
}

/// Rank 0's memcpy bandwidth, GB/s per round.
std::vector<double> MemcpyRounds(const Options& o) {
  std::vector<char> src(kMemcpyBytes, 1), dst(kMemcpyBytes, 0);
  auto op = [&] {
    std::memcpy(dst.data(), src.data(), kMemcpyBytes);
    asm volatile("" : : "r"(dst.data()) : "memory");  // keep the copy
  };
  OneRound(op, 1, o.min_time_s / 4);  // warm-up
  std::vector<double> gbps;
  for (int r = 0; r < o.rounds; ++r) gbps.push_back(kMemcpyBytes / OneRound(op, 1, o.min_time_s) / 1e9);
  return gbps;
}

/// Rank 0's matrix-multiply speed, GFLOP/s per round.
std::vector<double> MatmulRounds(const Options& o) {
  constexpr int n = 128;
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n, 0.0f);
  auto op = [&] {
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < n; ++k) {
        const float aik = a[i * n + k];
        for (int j = 0; j < n; ++j) c[i * n + j] += aik * b[k * n + j];
      }
    }
    asm volatile("" : : "r"(c.data()) : "memory");
  };
  OneRound(op, 1, o.min_time_s / 4);  // warm-up
  std::vector<double> gflops;
  for (int r = 0; r < o.rounds; ++r) gflops.push_back(2.0 * n * n * n / OneRound(op, 1, o.min_time_s) / 1e9);
  return gflops;
}

/// Ping-pong of `bytes` between ranks 0 and 1; on rank 0, one-way seconds per round. Rank 0
/// decides when a round ends and tells rank 1 through the message's first byte.
std::vector<double> PingPongRounds(const Options& o, int rank, int bytes) {
  std::vector<char> buf(static_cast<size_t>(bytes), 0);
  std::vector<double> one_way;
  const int batch = bytes > 4096 ? 8 : 256;
  for (int r = -1; r < o.rounds; ++r) {  // round -1 is the warm-up
    if (rank == 0) {
      double min_time = r < 0 ? o.min_time_s / 4 : o.min_time_s;
      auto op = [&] {
        for (int i = 0; i < batch; ++i) {
          buf[0] = 1;
          MPI_Send(buf.data(), bytes, MPI_CHAR, 1, kPingTag, MPI_COMM_WORLD);
          MPI_Recv(buf.data(), bytes, MPI_CHAR, 1, kPingTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
      };
      double t = OneRound(op, batch, min_time) / 2;
      buf[0] = 0;  // end of round
      MPI_Send(buf.data(), bytes, MPI_CHAR, 1, kPingTag, MPI_COMM_WORLD);
      if (r >= 0) one_way.push_back(t);
    } else {
      for (;;) {
        MPI_Recv(buf.data(), bytes, MPI_CHAR, 0, kPingTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (buf[0] == 0) break;
        MPI_Send(buf.data(), bytes, MPI_CHAR, 0, kPingTag, MPI_COMM_WORLD);
      }
    }
  }
  return one_way;
}

prism_bench::Entry MakeEntry(const std::string& name, const std::string& unit,
                             std::vector<double> per_round, double seconds_per_op, double bytes,
                             const std::string& label) {
  prism_bench::Entry e;
  e.name = name;
  e.iterations = static_cast<int64_t>(per_round.size());
  e.real_time = seconds_per_op * 1e6;
  e.cpu_time = e.real_time;
  e.time_unit = "us";
  e.items_per_second = 1 / seconds_per_op;
  if (bytes > 0) e.bytes_per_second = bytes / seconds_per_op;
  e.unit = unit;
  e.per_round = std::move(per_round);
  e.label = label;
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  prism_bench::Cli cli("prism_reference_benchmark",
                       "The machine's memcpy bandwidth and MPI ping-pong, the references Prism is "
                       "measured against; run under mpirun -n 2 or more for the ping-pong (1 rank: "
                       "memcpy only)");
  cli.AddQuick("3 short rounds").AddJson(o.json);
  cli.app.add_option("--rounds", o.rounds, "measured rounds")->check(CLI::PositiveNumber);
  cli.app.add_option("--min-time", o.min_time_s, "seconds each round runs at least")->check(CLI::PositiveNumber);
  cli.Parse(argc, argv, [&] {
    o.rounds = 3;
    o.min_time_s = 0.05;
  });
  o.quick = cli.quick;
  o.json = cli.json;
  alarm(o.quick ? 60 : 300);  // watchdog: SIGALRM ends the process (and mpirun the job)

  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  double load_start[3];
  prism_bench::LoadAverage(load_start);

  std::vector<prism_bench::Entry> entries;
  if (rank == 0) {
    auto gbps = MemcpyRounds(o);
    double med = prism_bench::Median(gbps);
    entries.push_back(MakeEntry("reference_memcpy_gigabytes", "GB/s", gbps, kMemcpyBytes / (med * 1e9),
                                kMemcpyBytes, "memcpy 64 MiB, reused pre-touched destination"));
    auto gflops = MatmulRounds(o);
    entries.push_back(MakeEntry("reference_matmul_gflops", "GFLOP/s", gflops,
                                1 / (prism_bench::Median(gflops) * 1e9 / (2.0 * 128 * 128 * 128)), 0,
                                "128x128 float matrix product, plain loops, one core"));
  }
  QuietBarrier();
  if (world >= 2) {
    if (rank <= 1) {
      auto lat = PingPongRounds(o, rank, kLatencyBytes);
      auto bw = PingPongRounds(o, rank, kBandwidthBytes);
      if (rank == 0) {
        std::vector<double> us, gbps;
        for (double t : lat) us.push_back(t * 1e6);
        for (double t : bw) gbps.push_back(kBandwidthBytes / t / 1e9);
        entries.push_back(MakeEntry("reference_mpi_pingpong_latency", "us", us,
                                    prism_bench::Median(us) / 1e6, 0, "8 B one-way, rank 0 <-> rank 1"));
        entries.push_back(MakeEntry("reference_mpi_pingpong_gigabytes", "GB/s", gbps,
                                    kBandwidthBytes / (prism_bench::Median(gbps) * 1e9), kBandwidthBytes,
                                    "1 MiB one-way, rank 0 <-> rank 1"));
      }
    }
  } else if (rank == 0) {
    std::fprintf(stderr, "prism_reference_benchmark: 1 rank, so no MPI ping-pong (run under mpirun -n 2+)\n");
  }
  QuietBarrier();

  int status = 0;
  if (rank == 0) {
    std::printf("Prism reference figures: %d rank(s), %s mode, %d rounds of >= %.2f s, load avg %.2f\n", world,
                o.quick ? "quick" : "full", o.rounds, o.min_time_s, load_start[0]);
    for (const auto& e : entries) {
      std::printf("%-34s %12.4g %12.4g %12.4g  %s\n", e.name.c_str(), prism_bench::Median(e.per_round),
                  prism_bench::Min(e.per_round), prism_bench::Max(e.per_round), e.unit.c_str());
    }
    prism_bench::Context c;
    c.executable = argv[0];
    c.load_avg_at_start = std::vector<double>(load_start, load_start + 3);
    c.mpi_ranks = world;
    c.mpi_library_version = prism_bench::MpiLibraryVersion();
    c.quick = o.quick;
    c.rounds = o.rounds;
    c.fields = {{"min_time_s", prism_bench::JsonNumber(o.min_time_s)}};
    c.statistic = "median across rounds (min/max across rounds alongside)";
    try {
      prism_bench::WriteReport(o.json, c, entries);
      std::printf("JSON: %s\n", std::filesystem::absolute(o.json).c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism_reference_benchmark: %s\n", e.what());
      status = 1;
    }
  }
  MPI_Finalize();
  return status;
}
