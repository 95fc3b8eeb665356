// bench_report.h: what the perf/ programs share to report results: round statistics and a
// JSON file in Google Benchmark's shape (a "context" block, then one aggregate entry per
// benchmark), so that every program's file reads the same to the tools that parse them.
// None of the programs runs on Google Benchmark (each times whole rounds of its own, often
// across ranks), so the file is written with nlohmann-json in Prism's JSON convention
// (prism/internal/json.h): a NaN or an infinity is null.
// Header-only but for the build context (version, commit, build type): link prism_bench_info.
//
// MpiLibraryVersion() exists only where <mpi.h> was included first (the checkpoint benchmark
// runs without MPI).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace prism_bench {

// The build's version, commit (read when CMake configured) and build type: the generated
// perf/bench_build_info.cc.in (link prism_bench_info; perf/CMakeLists.txt).
extern const char* const kPrismVersion;
extern const char* const kPrismGitCommit;
extern const char* const kPrismBuildType;

// ---- Round statistics (0 for no rounds, so an empty benchmark still writes a number) ----

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
inline double Min(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}
inline double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

// ---- JSON values ------------------------------------------------------------------------

/// A JSON value whose object keys stay in the order they were written.
using Json = nlohmann::ordered_json;

/// A number; JSON has no NaN or infinity: those become null.
inline Json JsonNumber(double v) { return v; }
inline Json JsonString(const std::string& s) { return s; }

/// `v` as text, the way a benchmark's label or target quotes it ("%.10g").
inline std::string FormatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// ---- Facts about the machine ------------------------------------------------------------

inline std::string IsoDate() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  std::string s = buf;
  if (s.size() > 5) s.insert(s.size() - 2, ":");  // +0000 -> +00:00, as Google Benchmark
  return s;
}

inline std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

/// The first "cpu MHz" of /proc/cpuinfo; 0 where there is none.
inline double CpuMhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return std::atof(line.c_str() + colon + 1);
    }
  }
  return 0;
}

/// The 1, 5 and 15 minute load averages; zeros if they cannot be read.
inline void LoadAverage(double load[3]) {
  if (getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = 0;
}

/// Runs ucx_perftest's ucp_put_bw for `bytes` between two local processes (the reference the
/// data plane is measured against) and returns GB/s, or 0 if it cannot be run.
inline double UcxPerftestPutGbps(uint64_t bytes) {
  char cmd[512];
  std::snprintf(cmd, sizeof cmd,
                "command -v ucx_perftest >/dev/null || exit 1; port=$((20000 + $$ %% 20000)); "
                "timeout 60 ucx_perftest -p $port >/dev/null 2>&1 & sleep 1; "
                "timeout 60 ucx_perftest localhost -p $port -t ucp_put_bw -s %llu -n 20 2>/dev/null "
                "| awk '/Final:/ {print $6}'; wait",
                static_cast<unsigned long long>(bytes));
  FILE* pipe = popen(cmd, "r");
  if (pipe == nullptr) return 0;
  double mbps = 0;
  if (std::fscanf(pipe, "%lf", &mbps) != 1) mbps = 0;
  pclose(pipe);
  return mbps * 1e6 / 1e9;  // ucx_perftest's MB/s are 10^6 bytes
}

#ifdef MPI_VERSION
/// The library's version string up to its first line break or comma (Open MPI's is long).
inline std::string MpiLibraryVersion() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, static_cast<size_t>(std::max(0, len)));
  auto cut = s.find_first_of("\r\n,");
  return cut == std::string::npos ? s : s.substr(0, cut);
}
#endif

// ---- The report -------------------------------------------------------------------------

/// A field's value: a number, a bool, a Json; text only as JsonString(...), so that no
/// number is written as text by mistake.
struct FieldValue {
  template <class T, class D = std::decay_t<T>,
            std::enable_if_t<!std::is_same_v<D, std::string> && !std::is_same_v<D, const char*> &&
                                 !std::is_same_v<D, char*>,
                             int> = 0>
  FieldValue(T&& v) : json(std::forward<T>(v)) {}  // NOLINT: implicit, as Json is
  Json json;
};
/// Fields written in this order: name and value.
using Fields = std::vector<std::pair<std::string, FieldValue>>;

/// The "context" block. Optional parts are left out when unset, so each program's block
/// keeps the fields it has always had.
struct Context {
  std::string executable;
  std::optional<int> mhz_per_cpu;
  std::optional<std::vector<double>> load_avg_at_start;  // three values
  std::optional<int> mpi_ranks;  // with mpi_library_version, for MPI programs
  std::string mpi_library_version;
  bool quick = false;
  int rounds = 0;
  Fields fields;  // the program's own, after "rounds"
  std::string statistic;
};

/// The context of a program run under mpirun that reads no MPI version itself: its path,
/// the load average at its start, the rank count, quick or not, and its rounds.
inline Context MpiRunContext(const char* executable, const double load_avg[3], int ranks,
                             bool quick, int rounds) {
  Context c;
  c.executable = executable;
  c.load_avg_at_start = std::vector<double>(load_avg, load_avg + 3);
  c.mpi_ranks = ranks;
  c.mpi_library_version = "see mpirun --version";
  c.quick = quick;
  c.rounds = rounds;
  return c;
}

/// A benchmark's target, with the measured value's ratio to it.
struct Target {
  std::string text;
  double value = 0;
  double ratio_to_target = 0;
  bool met = false;
  bool verdict_valid = false;  // false in quick mode: too short for a verdict
};

/// One aggregate entry of "benchmarks". median/min/max are of per_round, in `unit`.
struct Entry {
  std::string name;
  int64_t family_index = 0;
  int64_t iterations = 0;
  double real_time = 0;
  double cpu_time = 0;
  std::string time_unit = "us";
  double items_per_second = 0;
  std::optional<double> bytes_per_second;
  Fields before_unit;  // after bytes_per_second
  std::string unit;
  std::vector<double> per_round;
  Fields after_rounds;  // after per_round, before the target
  std::optional<Target> target;
  std::optional<bool> extra;  // not one of the headline benchmarks
  std::string label;
};

inline Json ContextJson(const Context& c) {
  double load[3];
  LoadAverage(load);
  Json j;
  j["date"] = IsoDate();
  j["host_name"] = HostName();
  j["executable"] = c.executable;
  j["num_cpus"] = std::thread::hardware_concurrency();
  if (c.mhz_per_cpu) j["mhz_per_cpu"] = *c.mhz_per_cpu;
  j["cpu_scaling_enabled"] = false;
  j["caches"] = Json::array();
  j["load_avg"] = {load[0], load[1], load[2]};
  if (c.load_avg_at_start && c.load_avg_at_start->size() == 3) j["load_avg_at_start"] = *c.load_avg_at_start;
#ifdef NDEBUG
  j["library_build_type"] = "release";
#else
  j["library_build_type"] = "debug";
#endif
  if (c.mpi_ranks) {
    j["mpi_ranks"] = *c.mpi_ranks;
    j["mpi_library_version"] = c.mpi_library_version;
  }
  j["prism_version"] = kPrismVersion;
  j["prism_git_commit"] = kPrismGitCommit;
  j["prism_build_type"] = kPrismBuildType;
  j["mode"] = c.quick ? "quick" : "full";
  j["rounds"] = c.rounds;
  for (const auto& [k, v] : c.fields) j[k] = v.json;
  j["statistic"] = c.statistic;
  return j;
}

inline Json EntryJson(const Entry& e) {
  Json j;
  j["name"] = e.name;
  j["family_index"] = e.family_index;
  j["run_name"] = e.name;
  j["run_type"] = "aggregate";
  j["repetitions"] = e.per_round.size();
  j["threads"] = 1;
  j["aggregate_name"] = "median";
  j["aggregate_unit"] = "time";
  j["iterations"] = e.iterations;
  j["real_time"] = e.real_time;
  j["cpu_time"] = e.cpu_time;
  j["time_unit"] = e.time_unit;
  j["items_per_second"] = e.items_per_second;
  if (e.bytes_per_second) j["bytes_per_second"] = *e.bytes_per_second;
  for (const auto& [k, v] : e.before_unit) j[k] = v.json;
  j["unit"] = e.unit;
  j["median"] = Median(e.per_round);
  j["min"] = Min(e.per_round);
  j["max"] = Max(e.per_round);
  j["per_round"] = e.per_round;
  for (const auto& [k, v] : e.after_rounds) j[k] = v.json;
  if (e.target) {
    const Target& t = *e.target;
    j["target"] = t.text;
    j["target_value"] = t.value;
    j["ratio_to_target"] = t.ratio_to_target;
    j["target_met"] = t.met;
    j["target_verdict_valid"] = t.verdict_valid;
  }
  if (e.extra) j["extra"] = *e.extra;
  j["label"] = e.label;
  return j;
}

/// Writes the whole file at `path`, creating its directories; throws std::runtime_error if
/// it cannot.
inline void WriteReport(const std::string& path, const Context& context,
                        const std::vector<Entry>& entries) {
  Json report;
  report["context"] = ContextJson(context);
  report["benchmarks"] = Json::array();
  for (const Entry& e : entries) report["benchmarks"].push_back(EntryJson(e));
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p);
  if (!out) throw std::runtime_error("cannot write " + path);
  // Invalid UTF-8 in a label (a peer's output) is replaced rather than thrown on.
  out << report.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  if (!out) throw std::runtime_error("error writing " + path);
}

}  // namespace prism_bench
