// prism::data side by side with Dask (issue 17): the pipeline of perf/peers/dask_data_bench.py
// in Prism Data, the same rows, the same steps, the same check:
//
//   1. Range(N, P) -> MapBatches(Generate): columns id, key = (id * 2654435761) % 1024,
//      value = (id % 1000) * 0.001
//   2. MapBatches(Scale): value = value * 2 + 1
//   3. RandomShuffle(seed 7)
//   4. GroupBy("key").Aggregate({Count(), Sum("value"), Mean("value")}) -> 1,024 rows, read
//      on the driver
//
// One round is the whole pipeline from the first call to the aggregated table on the driver
// (what the user waits for). Every round is checked: the counts add up to N and the sums to
// the closed form. perf/run_peers.sh runs this and the Dask script back to back.
//
//   mpirun -n 3 build/perf/prism_data_pipeline_benchmark [--quick] [--rows=N]
//          [--partitions=P] [--rounds=R] [--json=PATH]

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"
#include "prism/api.h"
#include "prism/data.h"

namespace {

using prism::data::Block;
using prism::data::Column;
constexpr int64_t kKeys = 1024;
constexpr int64_t kMult = 2654435761;

Block Generate(const Block& in) {
  const Column& id = in.GetColumn("id");
  const int64_t n = in.num_rows();
  std::vector<int64_t> key(static_cast<size_t>(n));
  std::vector<double> value(static_cast<size_t>(n));
  const int64_t* ids = id.Values<int64_t>().data();
  for (int64_t i = 0; i < n; ++i) {
    key[static_cast<size_t>(i)] = (ids[i] * kMult) % kKeys;
    value[static_cast<size_t>(i)] = static_cast<double>(ids[i] % 1000) * 0.001;
  }
  return in.AddColumn("key", Column::FromVector(std::move(key)))
      .AddColumn("value", Column::FromVector(std::move(value)));
}

Block Scale(const Block& in) {
  const int64_t n = in.num_rows();
  const double* v = in.GetColumn("value").Values<double>().data();
  std::vector<double> scaled(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) scaled[static_cast<size_t>(i)] = v[i] * 2 + 1;
  return in.AddColumn("value", Column::FromVector(std::move(scaled)));
}

PRISM_REMOTE(Generate, Scale);

}  // namespace

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_data_pipeline_benchmark",
                       "A Prism Data pipeline end to end:\n  mpirun -n 3 prism_data_pipeline_benchmark [flags]");
  cli.AddQuick().AddJson("perf/results/data_pipeline_benchmark.json");
  int64_t n = 0, parts = 0;
  int rounds = 0;
  cli.app.add_option("--rows", n, "rows (default 8000000, quick 200000)")->check(CLI::PositiveNumber);
  cli.app.add_option("--partitions", parts, "partitions (default 24, quick 6)")->check(CLI::PositiveNumber);
  cli.app.add_option("--rounds", rounds, "measured rounds (default 3, quick 1)")->check(CLI::PositiveNumber);
  cli.Parse(argc, argv);
  cli.QuickDefault("--rows", n, 200'000, 8'000'000);
  cli.QuickDefault("--partitions", parts, 6, 24);
  cli.QuickDefault("--rounds", rounds, 1, 3);
  const bool quick = cli.quick;
  const std::string& json = cli.json;
  prism::Init(argc, argv);
  using namespace prism::data;

  const int64_t full = n / 1000, rest = n % 1000;
  const double want_sum = 2 * 0.001 * static_cast<double>(full * (999 * 1000 / 2) + (rest - 1) * rest / 2) +
                          static_cast<double>(n);
  std::vector<double> seconds;
  int status = 0;
  for (int r = 0; r < rounds && status == 0; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    Dataset table = Range(n, parts)
                        .MapBatches(Generate, 1 << 20)
                        .MapBatches(Scale, 1 << 20)
                        .RandomShuffle(7)
                        .GroupBy("key")
                        .Aggregate({Count(), Sum("value"), Mean("value")});
    int64_t groups = 0, rows = 0;
    double sum = 0, key0_sum = 0;
    int64_t key0_count = 0;
    for (const Block& batch : table.IterBatches(kKeys)) {
      const int64_t* keys = batch.GetColumn("key").Values<int64_t>().data();
      const int64_t* counts = batch.GetColumn("count()").Values<int64_t>().data();
      const double* sums = batch.GetColumn("sum(value)").Values<double>().data();
      for (int64_t i = 0; i < batch.num_rows(); ++i) {
        ++groups;
        rows += counts[i];
        sum += sums[i];
        if (keys[i] == 0) key0_count = counts[i], key0_sum = sums[i];
      }
    }
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (groups != std::min(kKeys, n) || rows != n || std::abs(sum - want_sum) > 1e-6 * std::max(1.0, want_sum)) {
      std::fprintf(stderr, "prism_data_pipeline_benchmark: wrong result in round %d: %lld groups, %lld rows "
                   "(want %lld), sum %.6f (want %.6f)\n", r, static_cast<long long>(groups),
                   static_cast<long long>(rows), static_cast<long long>(n), sum, want_sum);
      status = 1;
    }
    std::printf("round %d: %.2f s (%.2f M rows/s); key 0: count %lld, sum %.3f\n", r, seconds.back(),
                static_cast<double>(n) / seconds.back() / 1e6, static_cast<long long>(key0_count), key0_sum);
    std::fflush(stdout);
    if (r + 1 == rounds) std::printf("%s", table.Stats().ToString().c_str());
  }

  prism_bench::Context c;
  c.executable = "prism_data_pipeline_benchmark";
  c.mpi_ranks = prism::GetRuntimeContext().GetWorldSize();
  c.quick = quick;
  c.rounds = rounds;
  c.fields = {{"rows", prism_bench::JsonNumber(static_cast<double>(n))},
              {"partitions", prism_bench::JsonNumber(static_cast<double>(parts))}};
  c.statistic = "median";
  prism_bench::Entry e;
  e.name = "data_pipeline_seconds";
  e.iterations = rounds;
  e.unit = "s";
  e.per_round = seconds;
  prism_bench::WriteReport(json, c, {e});
  prism::Shutdown();
  return status;
}
