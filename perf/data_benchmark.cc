// prism::data ingest (issue 17, Ray Data's ingest benchmark): rows of 10 KiB (float32[2560])
// in batches of 4,096 into one consumer on the driver, from a Dataset held in the object
// store (ReadNumpy of a generated file, then Materialize: the timed part reads memory).
// Reports GiB/s of batches delivered per round and the delay between batches (median and
// p99); the target is Ray's 3.9 GiB/s per consumer rounded up, 4 GiB/s.
//
//   mpirun -n 3 build/perf/prism_data_benchmark --prism-num-cpus=2 [--quick] [--rows=N]
//          [--json=PATH]
//
// First slice: not yet in perf/run_suite.sh. Read its rounds apart: the first fetches the
// blocks from the ranks that made them; later ones find the copies rank 0 fetched (a
// rank keeps a pulled copy while the Dataset holds the refs), so they measure batching on
// local memory. On the shared 2-core VM (Nov 25, load ~3, 40,960 rows, mpirun -n 3):
// round 0 0.50 GiB/s, rounds 1-4 4.6-6.6 GiB/s, median 6.05; batch delay median 6 ms.


#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_report.h"
#include "prism/api.h"
#include "prism/data.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kColumns = 2560;  // float32: 10 KiB a row
constexpr int64_t kBatch = 4096;

void Usage() {
  std::fprintf(stderr,
               "usage: mpirun -n 3 prism_data_benchmark --prism-num-cpus=2 [--quick] [--rows=N] "
               "[--json=PATH]\n");
}

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

}  // namespace

int main(int argc, char** argv) {
  prism_bench::CommandLine cl = prism_bench::ParseCommandLine(argc, argv, "prism_data_benchmark", {"--quick"}, Usage);
  const bool quick = cl.switches.count("--quick") > 0;
  const int64_t rows = cl.values.count("rows") ? std::stoll(cl.values["rows"]) : (quick ? 8192 : 40960);
  const std::string json = cl.values.count("json") ? cl.values["json"] : "perf/results/data_benchmark.json";
  const int rounds = quick ? 2 : 5;
  prism::Init(argc, argv);

  const std::string dir = std::filesystem::temp_directory_path() / ("prism-data-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  WriteNpy(dir + "/x.npy", rows);
  prism::data::Dataset ds = prism::data::ReadNumpy(dir + "/x.npy").Materialize();

  std::vector<double> gibps, delays_ms;
  for (int round = 0; round < rounds; ++round) {
    int64_t got = 0;
    const auto t0 = Clock::now();
    auto last = t0;
    for (const prism::data::Block& batch : ds.IterBatches(kBatch)) {
      got += batch.num_rows();
      const auto now = Clock::now();
      delays_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
      last = now;
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    gibps.push_back(static_cast<double>(got) * kColumns * 4 / s / (1 << 30));
    std::printf("round %d: %lld rows in %.3f s: %.2f GiB/s\n", round, static_cast<long long>(got), s,
                gibps.back());
  }
  std::printf("%s", ds.Stats().ToString().c_str());
  const double median = prism_bench::Median(gibps);
  std::printf("ingest: median %.2f GiB/s (target >= 4), batch delay median %.2f ms, p99 %.2f ms\n",
              median, Percentile(delays_ms, 0.5), Percentile(delays_ms, 0.99));

  prism_bench::Context c;
  c.executable = "prism_data_benchmark";
  c.mpi_ranks = prism::GetRuntimeContext().GetWorldSize();
  c.quick = quick;
  c.rounds = rounds;
  c.fields = {{"rows", prism_bench::JsonNumber(static_cast<double>(rows))},
              {"row_bytes", prism_bench::JsonNumber(kColumns * 4)},
              {"batch_rows", prism_bench::JsonNumber(kBatch)}};
  c.statistic = "median";
  prism_bench::Entry e;
  e.name = "data_ingest";
  e.iterations = rounds;
  e.unit = "GiB/s";
  e.per_round = gibps;
  e.after_rounds = {{"batch_delay_median_ms", prism_bench::JsonNumber(Percentile(delays_ms, 0.5))},
                    {"batch_delay_p99_ms", prism_bench::JsonNumber(Percentile(delays_ms, 0.99))}};
  prism_bench::Target t;
  t.text = ">= 4 GiB/s per consumer (Ray: 3.9)";
  t.value = 4;
  t.ratio_to_target = median / 4;
  t.met = median >= 4;
  t.verdict_valid = !quick;
  e.target = t;
  prism_bench::WriteReport(json, c, {e});

  std::filesystem::remove_all(dir);
  prism::Shutdown();
  return 0;
}
