// prism::data's RandomShuffle against a raw MPI_Alltoallv of the same bytes over the same
// ranks, in the same run (issue 17). The input is a materialized Dataset of rows of 1 KiB
// (an int64 "id" and a uint8[1016] "payload"), spread over the ranks' object stores; a round
// times RandomShuffle(seed).Materialize(): from the blocks in the stores to the shuffled
// blocks in the stores (each member task Gets its blocks, writes its rows into per-member
// buckets, swaps them with collective::Group::AllToAllV, orders the received rows and Puts
// its output blocks). The raw reference is one task per rank (a placement group, one bundle
// per rank) calling MPI_Alltoallv on a communicator of its own with each rank's share of the
// bytes (an equal part to every rank, itself included), on buffers kept from round to round;
// a round is the slowest rank's time. Reported: medians over the rounds, GiB/s of the whole
// dataset, and their ratio (target >= 0.7x of raw).
//
//   mpirun -n 3 build/perf/prism_data_shuffle_benchmark --prism-num-cpus=2 \
//          --prism-object-store-memory=6G [--bytes=2147483648] [--rounds=3] [--quick] [--json=PATH]
//
// PRISM_DATA_A2A_TIMING=1 makes each member print its phases (get, partition, write
// buckets, AllToAllV, order, gather + put) to stderr.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"
#include "prism/api.h"
#include "prism/data.h"
#include "prism/platform/communicator.h"
#include "prism/platform/placement.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace prism::data;
constexpr int64_t kRowBytes = 1024;
constexpr int64_t kPayload = kRowBytes - 8;
constexpr int64_t kUnit = 4096;  // MPI_Alltoallv's element: a contiguous type of 4 KiB

// The payload of each row: its id's low byte, repeated.
Block AddPayload(Block b) {
  auto ids = b.GetColumn("id").Values<int64_t>();
  std::vector<uint8_t> payload(ids.size() * kPayload);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memset(payload.data() + i * kPayload, static_cast<int>(ids[i] & 0xff), kPayload);
  }
  return b.AddColumn("payload", Column::FromVector(std::move(payload), {kPayload}));
}

/// Raw MPI_Alltoallv of `bytes_per_rank` (an equal part to every rank) `rounds` times on a
/// communicator of its own; returns each round's slowest-rank seconds. The buffers stay
/// allocated (and their pages mapped) from call to call, as the shuffle's pool does.
std::vector<double> RawAlltoallv(std::string key, std::vector<int> ranks, int64_t bytes_per_rank, int rounds) {
  prism::platform::Communicator comm = prism::platform::Communicator::Create(key, ranks);
  const int n = comm.Size();
  const int64_t units = bytes_per_rank / n / kUnit;  // per peer
  static std::vector<char> send, recv;
  const size_t total = static_cast<size_t>(units * kUnit * n);
  if (send.size() < total) {
    send.assign(total, 1);
    recv.assign(total, 0);
  }
  MPI_Datatype unit;
  MPI_Type_contiguous(kUnit, MPI_BYTE, &unit);
  MPI_Type_commit(&unit);
  std::vector<int> counts(static_cast<size_t>(n), static_cast<int>(units)), displs(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) displs[j] = static_cast<int>(units * j);
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    MPI_Barrier(comm.comm());
    const double t0 = MPI_Wtime();
    MPI_Alltoallv(send.data(), counts.data(), displs.data(), unit, recv.data(), counts.data(), displs.data(), unit,
                  comm.comm());
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, comm.comm());
    times.push_back(dt);
  }
  MPI_Type_free(&unit);
  return times;
}

PRISM_REMOTE(AddPayload, RawAlltoallv);

}  // namespace

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_data_shuffle_benchmark",
                       "Prism Data's all-to-all shuffle against a raw MPI_Alltoallv:\n"
                       "  mpirun -n 3 prism_data_shuffle_benchmark --prism-num-cpus=2 [flags]");
  cli.AddQuick().AddJson("perf/results/data_shuffle_benchmark.json");
  int64_t bytes = 0, blocks = 0;
  int rounds = 0;
  cli.app.add_option("--blocks", blocks, "input blocks (default 16 per rank)")->check(CLI::PositiveNumber);
  cli.app.add_option("--bytes", bytes, "bytes shuffled (default 2 GiB, quick 32 MiB)")->check(CLI::PositiveNumber);
  cli.app.add_option("--rounds", rounds, "measured rounds (default 3, quick 1)")->check(CLI::PositiveNumber);
  cli.Parse(argc, argv);
  cli.QuickDefault("--bytes", bytes, int64_t{32} << 20, int64_t{2} << 30);
  cli.QuickDefault("--rounds", rounds, 1, 3);
  cli.QuickDefault("--json", cli.json, "perf/results/data_shuffle_benchmark_quick.json",
                   "perf/results/data_shuffle_benchmark.json");
  const bool quick = cli.quick;
  const std::string& json = cli.json;
  prism::Init(argc, argv);
  const int world = prism::GetRuntimeContext().GetWorldSize();
  if (!cli.Given("--blocks")) blocks = 16 * world;
  const int64_t rows = bytes / kRowBytes;
  double load_start[3];
  prism_bench::LoadAverage(load_start);
  int status = 0;
  try {
    std::printf("Prism data shuffle benchmark: %d ranks, %.3f GiB (%lld rows of %lld bytes in %lld blocks), %d "
                "round(s); load avg %.2f\n",
                world, static_cast<double>(rows * kRowBytes) / (1 << 30), static_cast<long long>(rows),
                static_cast<long long>(kRowBytes), static_cast<long long>(blocks), rounds, load_start[0]);
    std::fflush(stdout);
    const auto m0 = Clock::now();
    Dataset input = Range(rows, blocks).MapBatches(AddPayload, int64_t{1} << 40).Materialize();
    std::printf("input materialized in %.2f s\n", std::chrono::duration<double>(Clock::now() - m0).count());

    // Prism: RandomShuffle(seed).Materialize(), one seed a round.
    std::vector<double> prism_s;
    std::string stats;
    for (int r = 0; r < rounds; ++r) {
      const auto t0 = Clock::now();
      Dataset out = input.RandomShuffle(static_cast<uint64_t>(r + 1)).Materialize();
      prism_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      stats = out.Stats().ToString();
      if (out.Count() != rows) throw prism::Error("the shuffle lost rows: " + std::to_string(out.Count()));
      std::printf("prism round %d: %.3f s (%.2f GiB/s)\n", r, prism_s.back(),
                  static_cast<double>(rows * kRowBytes) / prism_s.back() / (1 << 30));
      std::fflush(stdout);
    }
    std::printf("%s", stats.c_str());

    // Raw MPI_Alltoallv of the same bytes from one task per rank.
    prism::PlacementGroupCreationOptions pg_options;
    pg_options.bundles.assign(static_cast<size_t>(world), {{"CPU", 1.0}});
    pg_options.strategy = prism::PlacementStrategy::SPREAD;
    pg_options.one_bundle_per_rank = world > 1;
    prism::PlacementGroup pg = prism::CreatePlacementGroup(pg_options);
    if (!pg.Wait(60)) throw prism::Error("could not reserve one CPU per rank for the raw MPI reference");
    std::vector<int> ranks;
    for (const auto& where : prism::platform::BundleLocations(pg)) ranks.push_back(where.rank);
    std::vector<prism::ObjectRef<std::vector<double>>> refs;
    for (int i = 0; i < world; ++i) {
      refs.push_back(prism::Task(RawAlltoallv)
                         .SetPlacementGroup(pg, i)
                         .Remote(std::string("shuffle-bench-raw"), ranks, rows * kRowBytes / world, rounds + 1));
    }
    std::vector<double> raw_s = *prism::Get(refs[0]);
    for (auto& ref : refs) prism::Get(ref);
    prism::RemovePlacementGroup(pg.GetID());
    raw_s.erase(raw_s.begin());  // the first round maps the receive buffers' pages
    for (size_t r = 0; r < raw_s.size(); ++r) {
      std::printf("raw MPI_Alltoallv round %zu: %.3f s (%.2f GiB/s)\n", r, raw_s[r],
                  static_cast<double>(rows * kRowBytes) / raw_s[r] / (1 << 30));
    }
    const double prism_med = prism_bench::Median(prism_s), raw_med = prism_bench::Median(raw_s);
    const double gib = static_cast<double>(rows * kRowBytes) / (1 << 30);
    const double ratio = raw_med / prism_med;
    std::printf("RandomShuffle: median %.3f s (%.2f GiB/s); raw MPI_Alltoallv: median %.3f s (%.2f GiB/s); "
                "ratio %.2fx (target >= 0.7x): %s\n",
                prism_med, gib / prism_med, raw_med, gib / raw_med, ratio,
                quick ? "quick mode, no verdict" : (ratio >= 0.7 ? "MET" : "NOT MET"));

    prism_bench::Context c;
    c.executable = "prism_data_shuffle_benchmark";
    c.mpi_ranks = world;
    c.mpi_library_version = prism_bench::MpiLibraryVersion();
    c.load_avg_at_start = std::vector<double>(load_start, load_start + 3);
    c.quick = quick;
    c.rounds = rounds;
    c.fields = {{"bytes", prism_bench::JsonNumber(static_cast<double>(rows * kRowBytes))},
                {"row_bytes", prism_bench::JsonNumber(kRowBytes)},
                {"input_blocks", prism_bench::JsonNumber(static_cast<double>(blocks))}};
    c.statistic = "median across rounds";
    auto gibps = [&](const std::vector<double>& s) {
      std::vector<double> out;
      for (double x : s) out.push_back(gib / x);
      return out;
    };
    prism_bench::Entry shuffle;
    shuffle.name = "data_random_shuffle";
    shuffle.iterations = rounds;
    shuffle.unit = "GiB/s";
    shuffle.per_round = gibps(prism_s);
    shuffle.after_rounds = {{"median_seconds", prism_bench::JsonNumber(prism_med)},
                            {"ratio_to_raw_alltoallv", prism_bench::JsonNumber(ratio)}};
    prism_bench::Target t;
    t.text = ">= 0.7x raw MPI_Alltoallv of the same bytes";
    t.value = 0.7;
    t.ratio_to_target = ratio / 0.7;
    t.met = ratio >= 0.7;
    t.verdict_valid = !quick;
    shuffle.target = t;
    prism_bench::Entry raw;
    raw.name = "mpi_alltoallv_raw";
    raw.family_index = 1;
    raw.iterations = static_cast<int64_t>(raw_s.size());
    raw.unit = "GiB/s";
    raw.per_round = gibps(raw_s);
    raw.after_rounds = {{"median_seconds", prism_bench::JsonNumber(raw_med)}};
    raw.extra = true;
    prism_bench::WriteReport(json, c, {shuffle, raw});
    std::printf("\nJSON: %s\n", json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_data_shuffle_benchmark: %s\n", e.what());
    status = 1;
  }
  prism::Shutdown();
  return status;
}
