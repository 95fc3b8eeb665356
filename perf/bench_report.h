// bench_report.h: what the perf/ programs share to report results: round statistics and a
// JSON file in Google Benchmark's shape (a "context" block, then one aggregate entry per
// benchmark), so that every program's file reads the same to the tools that parse them.
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
#include <map>
#include <set>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

inline std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

/// JSON has no NaN or infinity: those become null.
inline std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

inline std::string JsonString(const std::string& s) { return "\"" + JsonEscape(s) + "\""; }

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

/// Fields written as given: name and an already formatted JSON value (JsonNumber, JsonString).
using Fields = std::vector<std::pair<std::string, std::string>>;

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

inline void WriteContext(std::ostream& out, const Context& c) {
  double load[3];
  LoadAverage(load);
  auto triple = [](const double* v) {
    return "[" + JsonNumber(v[0]) + ", " + JsonNumber(v[1]) + ", " + JsonNumber(v[2]) + "]";
  };
  out << "  \"context\": {\n";
  out << "    \"date\": \"" << IsoDate() << "\",\n";
  out << "    \"host_name\": " << JsonString(HostName()) << ",\n";
  out << "    \"executable\": " << JsonString(c.executable) << ",\n";
  out << "    \"num_cpus\": " << std::thread::hardware_concurrency() << ",\n";
  if (c.mhz_per_cpu) out << "    \"mhz_per_cpu\": " << *c.mhz_per_cpu << ",\n";
  out << "    \"cpu_scaling_enabled\": false,\n";
  out << "    \"caches\": [],\n";
  out << "    \"load_avg\": " << triple(load) << ",\n";
  if (c.load_avg_at_start && c.load_avg_at_start->size() == 3)
    out << "    \"load_avg_at_start\": " << triple(c.load_avg_at_start->data()) << ",\n";
#ifdef NDEBUG
  out << "    \"library_build_type\": \"release\",\n";
#else
  out << "    \"library_build_type\": \"debug\",\n";
#endif
  if (c.mpi_ranks) {
    out << "    \"mpi_ranks\": " << *c.mpi_ranks << ",\n";
    out << "    \"mpi_library_version\": " << JsonString(c.mpi_library_version) << ",\n";
  }
  out << "    \"prism_version\": \"" << kPrismVersion << "\",\n";
  out << "    \"prism_git_commit\": \"" << kPrismGitCommit << "\",\n";
  out << "    \"prism_build_type\": \"" << kPrismBuildType << "\",\n";
  out << "    \"mode\": \"" << (c.quick ? "quick" : "full") << "\",\n";
  out << "    \"rounds\": " << c.rounds << ",\n";
  for (const auto& [k, v] : c.fields) out << "    \"" << k << "\": " << v << ",\n";
  out << "    \"statistic\": " << JsonString(c.statistic) << "\n";
  out << "  }";
}

inline void WriteEntry(std::ostream& out, const Entry& e) {
  auto fields = [&](const Fields& f) {
    for (const auto& [k, v] : f) out << "      \"" << k << "\": " << v << ",\n";
  };
  out << "    {\n";
  out << "      \"name\": " << JsonString(e.name) << ",\n";
  out << "      \"family_index\": " << e.family_index << ",\n";
  out << "      \"run_name\": " << JsonString(e.name) << ",\n";
  out << "      \"run_type\": \"aggregate\",\n";
  out << "      \"repetitions\": " << e.per_round.size() << ",\n";
  out << "      \"threads\": 1,\n";
  out << "      \"aggregate_name\": \"median\",\n";
  out << "      \"aggregate_unit\": \"time\",\n";
  out << "      \"iterations\": " << e.iterations << ",\n";
  out << "      \"real_time\": " << JsonNumber(e.real_time) << ",\n";
  out << "      \"cpu_time\": " << JsonNumber(e.cpu_time) << ",\n";
  out << "      \"time_unit\": " << JsonString(e.time_unit) << ",\n";
  out << "      \"items_per_second\": " << JsonNumber(e.items_per_second) << ",\n";
  if (e.bytes_per_second)
    out << "      \"bytes_per_second\": " << JsonNumber(*e.bytes_per_second) << ",\n";
  fields(e.before_unit);
  out << "      \"unit\": " << JsonString(e.unit) << ",\n";
  out << "      \"median\": " << JsonNumber(Median(e.per_round)) << ",\n";
  out << "      \"min\": " << JsonNumber(Min(e.per_round)) << ",\n";
  out << "      \"max\": " << JsonNumber(Max(e.per_round)) << ",\n";
  out << "      \"per_round\": [";
  for (size_t i = 0; i < e.per_round.size(); ++i)
    out << (i ? ", " : "") << JsonNumber(e.per_round[i]);
  out << "],\n";
  fields(e.after_rounds);
  if (e.target) {
    const Target& t = *e.target;
    out << "      \"target\": " << JsonString(t.text) << ",\n";
    out << "      \"target_value\": " << JsonNumber(t.value) << ",\n";
    out << "      \"ratio_to_target\": " << JsonNumber(t.ratio_to_target) << ",\n";
    out << "      \"target_met\": " << (t.met ? "true" : "false") << ",\n";
    out << "      \"target_verdict_valid\": " << (t.verdict_valid ? "true" : "false") << ",\n";
  }
  if (e.extra) out << "      \"extra\": " << (*e.extra ? "true" : "false") << ",\n";
  out << "      \"label\": " << JsonString(e.label) << "\n";
  out << "    }";
}

/// Writes the whole file at `path`, creating its directories; throws std::runtime_error if
/// it cannot.
inline void WriteReport(const std::string& path, const Context& context,
                        const std::vector<Entry>& entries) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "{\n";
  WriteContext(out, context);
  out << ",\n  \"benchmarks\": [";
  for (size_t i = 0; i < entries.size(); ++i) {
    out << (i ? ",\n" : "\n");
    WriteEntry(out, entries[i]);
  }
  out << "\n  ]\n}\n";
  if (!out) throw std::runtime_error("error writing " + path);
}

// ---- Command line ------------------------------------------------------------------------

/// A benchmark's own flags: bare switches (--quick) and --key=value pairs.
struct CommandLine {
  std::set<std::string> switches;
  std::map<std::string, std::string> values;
};

/// Reads a benchmark's flags, skipping --prism-* ones (and a separate value after them:
/// prism::Init reads those). `switches` lists the bare flags the program knows; --help
/// prints `usage` and exits 0; anything else prints it and exits 2 (every rank sees the
/// same argv, so every rank exits the same way, before MPI starts).
inline CommandLine ParseCommandLine(int argc, char** argv, const char* program,
                                    const std::set<std::string>& switches, void (*usage)()) {
  auto starts_with = [](const std::string& s, const char* p) { return s.rfind(p, 0) == 0; };
  CommandLine out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (starts_with(a, "--prism-")) {
      if (a.find('=') == std::string::npos && i + 1 < argc && !starts_with(argv[i + 1], "--")) ++i;
      continue;
    }
    if (switches.count(a)) {
      out.switches.insert(a);
    } else if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else if (starts_with(a, "--") && a.find('=') != std::string::npos) {
      out.values[a.substr(2, a.find('=') - 2)] = a.substr(a.find('=') + 1);
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", program, a.c_str());
      usage();
      std::exit(2);
    }
  }
  return out;
}

}  // namespace prism_bench
