// prism::data memory (issue 17): a pipeline over 10x the object store's cap finishes
// without ObjectStoreFullError, spills nothing, and keeps each rank's resident memory
// within the cap plus a stated overhead.
//
//   mpirun -n 3 build/perf/prism_data_memory_benchmark --prism-num-cpus=2
//          --prism-object-store-memory=256M [--quick] [--factor=10] [--json=PATH]
//
// --quick: 4x the cap instead of 10x (the perf_data_memory_smoke test, with a 256 MiB cap).
// The pipeline: Range(rows, blocks of B rows) -> MapBatches(AddPayload, B), which adds a
// float32[1024] column (4 KiB a row), -> IterBatches(B) into the driver, which reads every
// batch. B makes blocks of 1/64 of a rank's cap (4 MiB for 256 MiB, 1 MiB for 64 MiB): with
// small caps the budget (one figure for the cluster, Ray's rule) does not stop blocks from
// gathering on one rank, which has its own store: at a 64 MiB cap, one run of two spilled
// 12 MiB on rank 0 (its store also holds the blocks the driver pulled) while the
// pipeline held 81 MB of its 96 MiB budget. At 256 MiB the busiest store peaked at 112 MiB.
// Rows are chosen so that the payload is `factor` (10) times one rank's cap (--prism-object-store-memory; 2.5 GiB for 256 MiB). The executor's
// default budget is DefaultObjectStoreBudget(): half the cluster's store.
//
// Measured on every rank, by a task pinned to it that takes no CPU: VmRSS before the
// pipeline, VmHWM (the process's peak resident set) after it; and the store's own figures
// from state::ListObjectStores: peak bytes in memory, and spilled_bytes_total before and
// after. Reported per rank: peak RSS, peak RSS above the pre-pipeline RSS (what the
// pipeline added), the store's peak, and bytes spilled during the pipeline.
// The stated overhead: a rank's peak RSS may exceed its RSS before the pipeline by at most
// the cap plus kOverheadBytes (the driver's batches in flight and the batcher's prefetch,
// the data plane's receive buffers, malloc's slack). The run fails (exit 1) if any rank
// spilled, exceeded that, or the pipeline threw.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"
#include "prism/api.h"
#include "prism/data.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kPayload = 1024;      // float32 per row: 4 KiB
constexpr uint64_t kOverheadBytes = 256ull << 20;
constexpr double kMiB = 1 << 20;

prism::data::Block AddPayload(prism::data::Block b) {
  auto ids = b.GetColumn("id").Values<int64_t>();
  std::vector<float> payload(ids.size() * kPayload);
  for (size_t r = 0; r < ids.size(); ++r) {
    std::fill(payload.begin() + static_cast<std::ptrdiff_t>(r * kPayload),
              payload.begin() + static_cast<std::ptrdiff_t>((r + 1) * kPayload), static_cast<float>(ids[r]));
  }
  return b.AddColumn("payload", prism::data::Column::FromVector(std::move(payload), {kPayload}));
}

/// This rank's VmRSS and VmHWM (bytes), from /proc/self/status.
std::vector<int64_t> Memory() {
  std::ifstream in("/proc/self/status");
  std::string line;
  int64_t rss = 0, hwm = 0;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::atoll(line.c_str() + 6) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::atoll(line.c_str() + 6) * 1024;
  }
  return {rss, hwm};
}

/// Memory() of every rank, by a zero-CPU task pinned to each.
std::vector<std::vector<int64_t>> MemoryOfEveryRank() {
  const int world = prism::GetRuntimeContext().GetWorldSize();
  std::vector<prism::ObjectRef<std::vector<int64_t>>> refs;
  for (int r = 0; r < world; ++r) {
    refs.push_back(prism::Task(Memory)
                       .SetResource("CPU", 0)
                       .SetSchedulingStrategy(prism::NodeAffinitySchedulingStrategy{r, false})
                       .Remote());
  }
  std::vector<std::vector<int64_t>> out;
  for (auto& ref : refs) out.push_back(*ref.Get(60000));
  return out;
}

}  // namespace

PRISM_REMOTE(AddPayload, Memory);

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_data_memory_benchmark",
                       "Prism Data on a dataset larger than the object store:\n"
                       "  mpirun -n 3 prism_data_memory_benchmark --prism-num-cpus=2 "
                       "--prism-object-store-memory=256M [flags]");
  cli.AddQuick().AddJson("perf/results/data_memory_benchmark.json");
  double factor = 0;
  cli.app.add_option("--factor", factor, "the dataset's size over the object store's (default 10, quick 4)")
      ->check(CLI::PositiveNumber);
  cli.Parse(argc, argv);
  cli.QuickDefault("--factor", factor, 4, 10);
  const bool quick = cli.quick;
  const std::string& json = cli.json;
  prism::Init(argc, argv);
  namespace pd = prism::data;
  const int world = prism::GetRuntimeContext().GetWorldSize();

  const std::vector<prism::state::ObjectStoreState> before = prism::state::ListObjectStores();
  const uint64_t cap = before.at(0).capacity_bytes;
  const int64_t row_bytes = kPayload * 4 + 8;
  const int64_t kBlockRows = std::max<int64_t>(16, static_cast<int64_t>(cap / 64) / row_bytes);
  const int64_t rows = std::max<int64_t>(kBlockRows, static_cast<int64_t>(factor * static_cast<double>(cap)) /
                                                         row_bytes / kBlockRows * kBlockRows);
  const double data_bytes = static_cast<double>(rows) * static_cast<double>(row_bytes);
  std::printf("%d ranks, object store cap %.0f MiB a rank (budget %.0f MiB); %lld rows of %lld bytes: "
              "%.0f MiB, %.1fx the cap\n",
              world, static_cast<double>(cap) / kMiB, static_cast<double>(pd::DefaultObjectStoreBudget()) / kMiB,
              static_cast<long long>(rows), static_cast<long long>(row_bytes), data_bytes / kMiB,
              data_bytes / static_cast<double>(cap));
  const auto rss_before = MemoryOfEveryRank();

  bool ok = true;
  std::string failure;
  double seconds = 0;
  pd::DatasetStats stats;
  try {
    const auto t0 = Clock::now();
    pd::Dataset ds = pd::Range(rows, rows / kBlockRows).MapBatches(AddPayload, kBlockRows);
    int64_t got = 0;
    double check = 0;
    pd::BatchIterator it = ds.IterBatches(kBlockRows);
    while (std::optional<pd::Block> batch = it.Next()) {
      auto payload = batch->GetColumn("payload").Values<float>();
      for (size_t i = 0; i < payload.size(); i += 1024) check += payload[i];  // read every row
      got += batch->num_rows();
    }
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    stats = it.Stats();
    const double expect = static_cast<double>(rows) * static_cast<double>(rows - 1) / 2;
    if (got != rows || check != expect) {
      ok = false;
      failure = "got " + std::to_string(got) + " rows (sum " + std::to_string(check) + "), expected " +
                std::to_string(rows);
    }
  } catch (const std::exception& e) {
    ok = false;
    failure = e.what();
  }
  const auto rss_after = MemoryOfEveryRank();
  const std::vector<prism::state::ObjectStoreState> after = prism::state::ListObjectStores();
  std::printf("%s", stats.ToString().c_str());
  std::printf("pipeline: %.2f s, %.2f GiB/s\n", seconds, data_bytes / std::max(1e-9, seconds) / (1 << 30));

  std::vector<prism_bench::Entry> entries;
  uint64_t spilled_total = 0;
  double worst_added = 0;
  for (int r = 0; r < world; ++r) {
    const uint64_t spilled = after[r].spilled_bytes_total - before[r].spilled_bytes_total;
    spilled_total += spilled;
    const double peak = static_cast<double>(rss_after[r][1]);
    const double added = peak - static_cast<double>(rss_before[r][0]);
    worst_added = std::max(worst_added, added);
    std::printf("rank %d: RSS before %.0f MiB, peak (VmHWM) %.0f MiB, added %.0f MiB (cap %.0f + overhead "
                "allowance %.0f); store peak %.0f MiB; spilled %llu bytes\n",
                r, static_cast<double>(rss_before[r][0]) / kMiB, peak / kMiB, added / kMiB,
                static_cast<double>(cap) / kMiB, static_cast<double>(kOverheadBytes) / kMiB,
                static_cast<double>(after[r].peak_used_bytes) / kMiB, static_cast<unsigned long long>(spilled));
    prism_bench::Entry e;
    e.name = "data_memory_peak_rss/rank" + std::to_string(r);
    e.iterations = 1;
    e.unit = "MiB";
    e.per_round = {peak / kMiB};
    e.after_rounds = {{"rss_before_mib", prism_bench::JsonNumber(static_cast<double>(rss_before[r][0]) / kMiB)},
                      {"added_mib", prism_bench::JsonNumber(added / kMiB)},
                      {"store_peak_mib", prism_bench::JsonNumber(static_cast<double>(after[r].peak_used_bytes) / kMiB)},
                      {"spilled_bytes", prism_bench::JsonNumber(static_cast<double>(spilled))}};
    prism_bench::Target t;
    t.text = "peak RSS above the pre-pipeline RSS <= cap + " + std::to_string(kOverheadBytes >> 20) + " MiB";
    t.value = static_cast<double>(cap + kOverheadBytes) / kMiB;
    t.ratio_to_target = added / static_cast<double>(cap + kOverheadBytes);
    t.met = added <= static_cast<double>(cap + kOverheadBytes);
    t.verdict_valid = true;
    e.target = t;
    entries.push_back(e);
    ok = ok && t.met;
  }
  {
    prism_bench::Entry e;
    e.name = "data_memory_spilled_bytes";
    e.iterations = 1;
    e.unit = "bytes";
    e.per_round = {static_cast<double>(spilled_total)};
    e.after_rounds = {{"pipeline_seconds", prism_bench::JsonNumber(seconds)},
                      {"data_over_cap", prism_bench::JsonNumber(data_bytes / static_cast<double>(cap))},
                      {"finished", failure.empty()}};
    prism_bench::Target t;
    t.text = "0 bytes spilled, no ObjectStoreFullError";
    t.value = 0;
    t.met = spilled_total == 0 && failure.empty();
    t.ratio_to_target = t.met ? 1 : 0;
    t.verdict_valid = true;
    e.target = t;
    entries.push_back(e);
    ok = ok && t.met;
  }
  if (!failure.empty()) std::printf("FAILED: %s\n", failure.c_str());
  std::printf("memory: %s (spilled %llu bytes, worst added RSS %.0f MiB against cap + overhead %.0f MiB)\n",
              ok ? "ok" : "FAILED", static_cast<unsigned long long>(spilled_total), worst_added / kMiB,
              static_cast<double>(cap + kOverheadBytes) / kMiB);

  prism_bench::Context c;
  c.executable = "prism_data_memory_benchmark";
  c.mpi_ranks = world;
  c.quick = quick;
  c.rounds = 1;
  c.fields = {{"rows", prism_bench::JsonNumber(static_cast<double>(rows))},
              {"block_rows", prism_bench::JsonNumber(static_cast<double>(kBlockRows))},
              {"row_bytes", prism_bench::JsonNumber(static_cast<double>(row_bytes))},
              {"object_store_cap_bytes", prism_bench::JsonNumber(static_cast<double>(cap))},
              {"budget_bytes", prism_bench::JsonNumber(static_cast<double>(pd::DefaultObjectStoreBudget()))},
              {"overhead_allowance_bytes", prism_bench::JsonNumber(static_cast<double>(kOverheadBytes))}};
  c.statistic = "median";
  prism_bench::WriteReport(json, c, entries);
  prism::Shutdown();
  return ok ? 0 : 1;
}
