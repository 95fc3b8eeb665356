// prism::data ingest (issue 17, Ray Data's ingest benchmark): rows of 10 KiB (float32[2560])
// in batches of 4,096 into one consumer on the driver, from a Dataset held in the object
// store (ReadNumpy of a generated file, then Materialize: the timed part reads memory).
// The target is Ray's 3.9 GiB/s per consumer rounded up, 4 GiB/s.
//
//   mpirun -n 3 build/perf/prism_data_benchmark --prism-num-cpus=2 [--quick] [--rows=N]
//          [--rounds=R] [--json=PATH]
//
// Cases (one JSON entry each):
//   data_ingest               steady state: rounds 1.. of IterBatches(4096) over the
//                             materialized dataset in its default 4 MiB blocks (a batch
//                             spans ~10 blocks: one copy per batch into a reused buffer).
//                             Ray's release benchmark reads a materialized dataset on one
//                             node, where every block is in the local store: these rounds
//                             find the copies rank 0 pulled in round 0 (a rank keeps a pulled
//                             copy while the Dataset holds the refs), the same situation.
//   data_ingest_first_round   round 0 alone: about 2/3 of the blocks are pulled from ranks
//                             1-2, into fresh memory (the VM's first-touch page faults, ~0.3
//                             GB/s, bound it; pulls overlap the consumer's copies).
//   data_ingest_batch_blocks  the same rows read in blocks of one batch (ReadOptions::
//                             target_block_bytes = 40 MiB, Ray's blocks are up to 128 MiB):
//                             every batch is a slice of one block, no copy (steady state).
//   data_map_batches_identity ReadNumpy -> MapBatches(Identity, 4096) -> IterBatches(4096),
//                             streamed (not materialized): what a UDF call costs, with the
//                             UDF's task time (operator seconds) next to it.
//   data_udf_call             platform::Invoke<Block>(Identity) on one 40 MiB batch (a
//                             direct call) and, in the same rounds, what Invoke did before
//                             (the batch serialized in and out, copied each way).
// Each entry carries the consumer's call, Next(), end to end (median and p99 ms: the Get of
// the blocks, re-batching, waiting for tasks), and the time from IterBatches to the first
// batch.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"
#include "prism/api.h"
#include "prism/data.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kColumns = 2560;  // float32: 10 KiB a row
constexpr int64_t kBatch = 4096;
constexpr double kGiB = 1 << 30;

prism::data::Block Identity(prism::data::Block b) { return b; }

// A .npy file of `rows` rows of kColumns float32 values.
void WriteNpy(const std::string& path, int64_t rows) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) +
                       ", " + std::to_string(kColumns) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t n = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&n), 2);
  out << header;
  std::vector<float> row(kColumns);
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(row.begin(), row.end(), static_cast<float>(r));
    out.write(reinterpret_cast<const char*>(row.data()), kColumns * 4);
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

/// One round: GiB/s of batches delivered, each Next()'s time, and the time to the first.
struct Round {
  double gibps = 0;
  double first_batch_ms = 0;
  std::vector<double> next_ms;
  prism::data::DatasetStats stats;
};

Round Consume(const prism::data::Dataset& ds, int64_t expect_rows) {
  Round round;
  int64_t got = 0;
  const auto t0 = Clock::now();
  prism::data::BatchIterator it = ds.IterBatches(kBatch);
  for (;;) {
    const auto before = Clock::now();
    std::optional<prism::data::Block> batch = it.Next();
    const auto after = Clock::now();
    if (!batch) break;
    // Touch the batch as a consumer would (one float per row), so a lazy copy could not hide.
    const float* values = batch->GetColumn("data").Values<float>().data();
    volatile float sink = values[0] + values[(batch->num_rows() - 1) * kColumns];
    (void)sink;
    round.next_ms.push_back(std::chrono::duration<double, std::milli>(after - before).count());
    if (got == 0) round.first_batch_ms = std::chrono::duration<double, std::milli>(after - t0).count();
    got += batch->num_rows();
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (got != expect_rows) {
    throw std::runtime_error("got " + std::to_string(got) + " rows, expected " + std::to_string(expect_rows));
  }
  round.gibps = static_cast<double>(got) * kColumns * 4 / s / kGiB;
  round.stats = it.Stats();
  return round;
}

struct Case {
  std::string name;
  std::string what;
  std::vector<Round> rounds;
};

prism_bench::Entry ToEntry(const Case& c, bool with_target, bool quick, double udf_seconds = -1) {
  std::vector<double> gibps, next_ms, first_ms;
  for (const Round& r : c.rounds) {
    gibps.push_back(r.gibps);
    first_ms.push_back(r.first_batch_ms);
    next_ms.insert(next_ms.end(), r.next_ms.begin(), r.next_ms.end());
  }
  prism_bench::Entry e;
  e.name = c.name;
  e.iterations = static_cast<int64_t>(c.rounds.size());
  e.unit = "GiB/s";
  e.per_round = gibps;
  e.label = c.what;
  e.after_rounds = {{"next_call_median_ms", prism_bench::JsonNumber(Percentile(next_ms, 0.5))},
                    {"next_call_p99_ms", prism_bench::JsonNumber(Percentile(next_ms, 0.99))},
                    {"first_batch_median_ms", prism_bench::JsonNumber(prism_bench::Median(first_ms))}};
  if (udf_seconds >= 0) e.after_rounds.push_back({"udf_operator_seconds_median", prism_bench::JsonNumber(udf_seconds)});
  if (with_target) {
    const double median = prism_bench::Median(gibps);
    prism_bench::Target t;
    t.text = ">= 4 GiB/s per consumer (Ray: 3.9)";
    t.value = 4;
    t.ratio_to_target = median / 4;
    t.met = median >= 4;
    t.verdict_valid = !quick;
    e.target = t;
  } else {
    e.extra = true;
  }
  std::printf("%-26s median %6.2f GiB/s [%.2f..%.2f] over %zu rounds; Next() median %.2f ms, p99 %.2f ms; "
              "first batch %.1f ms\n",
              c.name.c_str(), prism_bench::Median(gibps), prism_bench::Min(gibps), prism_bench::Max(gibps),
              gibps.size(), Percentile(next_ms, 0.5), Percentile(next_ms, 0.99), prism_bench::Median(first_ms));
  return e;
}

}  // namespace

PRISM_REMOTE(Identity);

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_data_benchmark",
                       "Prism Data's read throughput and batch latency:\n"
                       "  mpirun -n 3 prism_data_benchmark --prism-num-cpus=2 [flags]");
  cli.AddQuick().AddJson("perf/results/data_benchmark.json");
  int64_t rows = 0;
  int rounds = 0;
  cli.app.add_option("--rows", rows, "rows of the dataset (default 81920, quick 8192)")
      ->check(CLI::Range(kBatch, int64_t{1} << 40));
  cli.app.add_option("--rounds", rounds, "measured rounds (default 7, quick 3)")->check(CLI::Range(2, 1 << 20));
  cli.Parse(argc, argv);
  cli.QuickDefault("--rows", rows, 8192, 81920);
  cli.QuickDefault("--rounds", rounds, 3, 7);
  const bool quick = cli.quick;
  const std::string& json = cli.json;
  const std::vector<double> load_at_start = [] {
    double l[3];
    prism_bench::LoadAverage(l);
    return std::vector<double>{l[0], l[1], l[2]};
  }();
  prism::Init(argc, argv);
  namespace pd = prism::data;

  const std::string dir = std::filesystem::temp_directory_path() / ("prism-data-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  WriteNpy(dir + "/x.npy", rows);
  const double store = prism::ClusterResources().at("object_store_memory");
  std::printf("%lld rows of %lld bytes (%.2f GiB), batches of %lld rows; object store %.2f GiB over %d ranks\n",
              static_cast<long long>(rows), static_cast<long long>(kColumns * 4),
              static_cast<double>(rows) * kColumns * 4 / kGiB, static_cast<long long>(kBatch), store / kGiB,
              prism::GetRuntimeContext().GetWorldSize());

  std::vector<prism_bench::Entry> entries;
  {
    Case first{"data_ingest_first_round", "round 0: blocks pulled from the ranks that read them", {}};
    Case steady{"data_ingest", "rounds 1..: materialized 4 MiB blocks, one copy per batch", {}};
    pd::Dataset ds = pd::ReadNumpy(dir + "/x.npy").Materialize();
    for (int r = 0; r < rounds; ++r) (r == 0 ? first : steady).rounds.push_back(Consume(ds, rows));
    std::printf("blocks: %lld\n", static_cast<long long>(ds.NumBlocks()));
    entries.push_back(ToEntry(steady, true, quick));
    entries.push_back(ToEntry(first, false, quick));
  }
  {
    Case aligned{"data_ingest_batch_blocks", "rounds 1..: blocks of one batch (40 MiB), zero-copy slices", {}};
    pd::ReadOptions options;
    options.target_block_bytes = static_cast<uint64_t>(kBatch * kColumns * 4);
    pd::Dataset ds = pd::ReadNumpy(dir + "/x.npy", options).Materialize();
    for (int r = 0; r < rounds; ++r) {
      Round round = Consume(ds, rows);
      if (r > 0) aligned.rounds.push_back(std::move(round));
    }
    entries.push_back(ToEntry(aligned, false, quick));
  }
  {
    Case mapped{"data_map_batches_identity", "ReadNumpy -> MapBatches(Identity, 4096) streamed", {}};
    pd::Dataset ds = pd::ReadNumpy(dir + "/x.npy").MapBatches(Identity, kBatch);
    std::vector<double> udf_seconds;
    for (int r = 0; r < rounds; ++r) {
      mapped.rounds.push_back(Consume(ds, rows));
      udf_seconds.push_back(mapped.rounds.back().stats.operators.at(0).seconds);
    }
    std::printf("%s", mapped.rounds.back().stats.ToString().c_str());
    entries.push_back(ToEntry(mapped, false, quick, prism_bench::Median(udf_seconds)));
  }

  {
    // The UDF call alone, on one 40 MiB batch: platform::Invoke now (a direct call) against
    // what it did before (serialize the argument, read it without an owner, so a copy;
    // the same for the result), measured in the same run.
    pd::Block batch = *pd::ReadNumpy(dir + "/x.npy").Limit(kBatch).IterBatches(kBatch).Next();
    const double bytes = static_cast<double>(batch.size_bytes());
    std::vector<double> direct, serialized;
    for (int r = 0; r < std::max(rounds, 5); ++r) {
      auto t0 = Clock::now();
      pd::Block out = prism::platform::Invoke<pd::Block>("Identity", batch);
      auto t1 = Clock::now();
      pd::Block arg = prism::platform::FromBytes<pd::Block>(prism::platform::ToBytes(batch));
      pd::Block res = prism::platform::FromBytes<pd::Block>(prism::platform::ToBytes(Identity(arg)));
      auto t2 = Clock::now();
      if (out.num_rows() != res.num_rows()) throw std::runtime_error("identity changed the rows");
      direct.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      serialized.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    std::printf("udf call on a %.0f MiB batch: direct %.1f us, serialized in and out %.0f us (%.2f GiB/s)\n",
                bytes / (1 << 20), prism_bench::Median(direct), prism_bench::Median(serialized),
                bytes / (prism_bench::Median(serialized) * 1e-6) / kGiB);
    prism_bench::Entry e;
    e.name = "data_udf_call";
    e.iterations = static_cast<int64_t>(direct.size());
    e.unit = "us";
    e.per_round = direct;
    e.label = "platform::Invoke<Block>(Identity) on one batch: a direct call";
    e.after_rounds = {{"serialized_median_us", prism_bench::JsonNumber(prism_bench::Median(serialized))},
                      {"batch_bytes", prism_bench::JsonNumber(bytes)}};
    e.extra = true;
    entries.push_back(e);
  }

  prism_bench::Context c;
  c.executable = "prism_data_benchmark";
  c.mpi_ranks = prism::GetRuntimeContext().GetWorldSize();
  c.load_avg_at_start = load_at_start;
  c.quick = quick;
  c.rounds = rounds;
  c.fields = {{"rows", prism_bench::JsonNumber(static_cast<double>(rows))},
              {"row_bytes", prism_bench::JsonNumber(kColumns * 4)},
              {"batch_rows", prism_bench::JsonNumber(kBatch)},
              {"object_store_bytes", prism_bench::JsonNumber(store)}};
  c.statistic = "median";
  prism_bench::WriteReport(json, c, entries);

  std::filesystem::remove_all(dir);
  prism::Shutdown();
  return 0;
}
