// prism_checkpoint_benchmark: write bandwidth of prism::train::SaveStateDict against a raw
// HDF5 write of the same bytes.
//
//   ./prism_checkpoint_benchmark [--quick] [--json=PATH] [--rounds=N] [--bytes=N] [--dir=DIR]
//
// The model is an MLP shaped like the classic 784-512-512-10 one, with its hidden width
// scaled so the parameters total --bytes (default 256 MiB of float32). Each round writes
//   save_state_dict  SaveStateDict(file, model): one dataset per tensor, close, fsync,
//                    rename over the destination, fsync of the directory
//   hdf5_raw_write   the same bytes (the parameters concatenated) as one dataset: H5Dwrite,
//                    H5Fflush, fsync, close
// both into --dir (default $TMPDIR or /tmp), in alternating order, after one warm-up round;
// files are deleted and sync() is called between writes (untimed). Reported: median, min and max GB/s across
// rounds and the ratio of the medians (target: SaveStateDict >= 0.80 of the raw write), to
// stdout and to a JSON file in Google Benchmark's shape. Finally the last file saved is
// loaded back and compared with the model: a wrong file fails the run (exit code 1).

#include <hdf5.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"
#include "prism/train/checkpoint.h"


namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  bool quick = false;
  std::string json = "perf/results/checkpoint_benchmark.json";
  int rounds = 5;
  size_t bytes = size_t{256} << 20;
  std::string dir;
};

/// Parses our flags (bench_cli.h). Exits on --help and on a bad flag.
Options ParseOptions(int argc, char** argv) {
  Options o;
  prism_bench::Cli cli("prism_checkpoint_benchmark",
                       "SaveStateDict's write bandwidth against a raw HDF5 write of the same bytes");
  cli.AddQuick("8 MiB, 2 rounds (a smoke run)").AddJson(o.json);
  cli.app.add_option("--rounds", o.rounds, "measured rounds (default 5), after one warm-up round")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--bytes", o.bytes, "parameter bytes of the model (default 268435456 = 256 MiB)");
  cli.app.add_option("--dir", o.dir, "where the files are written (default $TMPDIR or /tmp)");
  cli.Parse(argc, argv, [&] {
    o.rounds = 2;
    o.bytes = size_t{8} << 20;
  });
  o.quick = cli.quick;
  o.json = cli.json;
  if (o.bytes < (size_t{1} << 16)) o.bytes = size_t{1} << 16;
  if (o.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    o.dir = tmp && *tmp ? tmp : "/tmp";
  }
  return o;
}

/// 784 -> H -> H -> H -> 10, with H chosen so the float32 parameters total about `bytes`.
struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(int64_t hidden)
      : fc1(register_module("fc1", torch::nn::Linear(784, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, hidden))),
        fc4(register_module("fc4", torch::nn::Linear(hidden, 10))) {}
  torch::nn::Linear fc1, fc2, fc3, fc4;
};
TORCH_MODULE(Mlp);

int64_t HiddenFor(size_t bytes) {
  // parameters = 2H^2 + (784 + 10 + 3)H + 10 (weights and biases); solve for H.
  double floats = static_cast<double>(bytes) / 4;
  double h = (-797 + std::sqrt(797.0 * 797 + 8 * (floats - 10))) / 4;
  return std::max<int64_t>(8, static_cast<int64_t>(h));
}

size_t ParameterBytes(const torch::nn::Module& m) {
  size_t n = 0;
  for (const auto& p : m.parameters()) n += static_cast<size_t>(p.numel()) * p.element_size();
  return n;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "prism_checkpoint_benchmark: %s\n", what.c_str());
  std::exit(1);
}

/// The reference: one dataset of `data`, flushed and fsynced before the file is closed.
void RawHdf5Write(const std::string& file, const torch::Tensor& data) {
  hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) Die("H5Fcreate failed for " + file);
  hsize_t n = static_cast<hsize_t>(data.numel());
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t dataset = H5Dcreate2(f, "data", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT);
  if (space < 0 || dataset < 0) Die("cannot create the dataset in " + file);
  if (H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data_ptr()) < 0)
    Die("H5Dwrite failed for " + file);
  if (H5Fflush(f, H5F_SCOPE_LOCAL) < 0) Die("H5Fflush failed for " + file);
  void* handle = nullptr;
  if (H5Fget_vfd_handle(f, H5P_DEFAULT, &handle) < 0 || handle == nullptr)
    Die("no file descriptor for " + file);
  if (::fsync(*static_cast<int*>(handle)) != 0) Die("fsync failed for " + file);
  H5Dclose(dataset);
  H5Sclose(space);
  if (H5Fclose(f) < 0) Die("H5Fclose failed for " + file);
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

using prism_bench::Max;
using prism_bench::Median;
using prism_bench::Min;

/// The file system type of `dir` as statfs reports it (hex magic), for the record.
std::string FsType(const std::string& dir) {
  struct statfs s {};
  if (statfs(dir.c_str(), &s) != 0) return "unknown";
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(s.f_type));
  return buf;
}

struct Result {
  std::string name;
  std::vector<double> gbps;     // per round
  std::vector<double> seconds;  // per round
  std::string label;
};

void WriteJson(const Options& o, const std::vector<Result>& results, double ratio, size_t bytes,
               int64_t hidden, const std::string& exe) {
  prism_bench::Context c;
  c.executable = exe;
  c.quick = o.quick;
  c.rounds = o.rounds;
  c.fields = {{"bytes", bytes},
              {"mlp_hidden_width", hidden},
              {"storage_dir", prism_bench::JsonString(o.dir)},
              {"storage_fs_type", prism_bench::JsonString(FsType(o.dir))}};
  c.statistic = "median across rounds (min/max across rounds alongside)";
  std::vector<prism_bench::Entry> entries;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const bool is_save = r.name == "save_state_dict";
    const double median_s = Median(r.seconds);
    prism_bench::Entry e;
    e.name = r.name;
    e.family_index = static_cast<int64_t>(i);
    e.iterations = static_cast<int64_t>(r.gbps.size());  // one write per round
    e.real_time = e.cpu_time = median_s * 1e3;
    e.time_unit = "ms";
    e.items_per_second = median_s > 0 ? 1 / median_s : 0;
    e.bytes_per_second = Median(r.gbps) * 1e9;
    e.unit = "GB/s";
    e.per_round = r.gbps;
    e.after_rounds = {{"bytes", bytes}};
    if (is_save) {
      e.after_rounds.push_back({"ratio_to_raw", prism_bench::JsonNumber(ratio)});
      e.target = prism_bench::Target{">= 0.80 of hdf5_raw_write", 0.8, ratio / 0.8, ratio >= 0.8,
                                     !o.quick};
    }
    e.extra = !is_save;
    e.label = r.label;
    entries.push_back(std::move(e));
  }
  try {
    prism_bench::WriteReport(o.json, c, entries);
  } catch (const std::exception& e) {
    Die(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o = ParseOptions(argc, argv);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  torch::set_num_threads(1);  // nothing to compute; keep the other core for the writes

  const int64_t hidden = HiddenFor(o.bytes);
  torch::manual_seed(0);
  Mlp model(hidden);
  const size_t bytes = ParameterBytes(*model);
  // The raw write's source: the same parameter bytes, laid end to end.
  std::vector<torch::Tensor> flat;
  for (const auto& p : model->parameters()) flat.push_back(p.detach().reshape({-1}));
  const torch::Tensor raw = torch::cat(flat);

  std::string dir;
  {
    std::string pattern = o.dir + "/prism-checkpoint-bench-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) Die("cannot create a directory under " + o.dir);
    dir = buf.data();
  }
  const std::string save_file = dir + "/model.h5";
  const std::string raw_file = dir + "/raw.h5";

  std::printf("prism_checkpoint_benchmark: MLP 784-%lld-%lld-%lld-10, %.1f MiB of float32 "
              "parameters, %d rounds (+1 warm-up) in %s\n",
              static_cast<long long>(hidden), static_cast<long long>(hidden),
              static_cast<long long>(hidden), bytes / 1048576.0, o.rounds, dir.c_str());

  Result save{"save_state_dict", {}, {}, ""};
  Result reference{"hdf5_raw_write", {}, {}, ""};
  auto measure = [&](Result& r, bool record, const std::function<void()>& write,
                     const std::string& file) {
    auto t0 = Clock::now();
    write();
    double s = Seconds(t0);
    if (record) {
      r.seconds.push_back(s);
      r.gbps.push_back(static_cast<double>(bytes) / s / 1e9);
    }
    std::error_code ec;
    fs::remove(file, ec);
    // Untimed: the next write starts with no writeback or journal work left from this one.
    ::sync();
  };
  auto run_save = [&] { prism::train::SaveStateDict(save_file, *model); };
  auto run_raw = [&] { RawHdf5Write(raw_file, raw); };
  try {
    for (int round = 0; round <= o.rounds; ++round) {
      const bool record = round > 0;  // round 0 warms up allocation and the page cache
      if (round % 2 == 0) {
        measure(reference, record, run_raw, raw_file);
        measure(save, record, run_save, save_file);
      } else {
        measure(save, record, run_save, save_file);
        measure(reference, record, run_raw, raw_file);
      }
    }
    // The file the rounds measured must be right: write once more, read back, compare.
    run_save();
    torch::manual_seed(1);
    Mlp loaded(hidden);
    prism::train::LoadStateDict(save_file, *loaded);
    auto a = model->named_parameters(), b = loaded->named_parameters();
    for (const auto& item : a) {
      if (!torch::equal(item.value(), *b.find(item.key())))
        Die("the saved file does not hold the model's " + item.key());
    }
  } catch (const std::exception& e) {
    Die(e.what());
  }
  std::error_code ec;
  fs::remove_all(dir, ec);

  const double ratio = Median(save.gbps) / Median(reference.gbps);
  char label[160];
  std::snprintf(label, sizeof label, "%zu tensors, %.1f MiB; %.2fx the raw HDF5 write",
                model->parameters().size(), bytes / 1048576.0, ratio);
  save.label = label;
  reference.label = "one float32 dataset of the same bytes: H5Dwrite + H5Fflush + fsync";

  std::printf("\n%-18s %10s %10s %10s %12s\n", "benchmark", "median", "min", "max", "median ms");
  for (const Result* r : {&save, &reference}) {
    std::printf("%-18s %6.3f GB/s %6.3f GB/s %6.3f GB/s %10.1f ms\n", r->name.c_str(),
                Median(r->gbps), Min(r->gbps), Max(r->gbps), Median(r->seconds) * 1e3);
  }
  std::printf("\nratio save_state_dict / hdf5_raw_write (medians): %.3f  (target >= 0.80: %s%s)\n",
              ratio, ratio >= 0.8 ? "met" : "NOT met",
              o.quick ? "; quick mode, sizes too small for a verdict" : "");
  WriteJson(o, {save, reference}, ratio, bytes, hidden, argv[0]);
  std::printf("JSON: %s\n", o.json.c_str());
  return 0;
}
