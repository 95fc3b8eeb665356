// Settings resolution. Each field is taken from the highest source that gives it:
//   1. a default detected from the launcher and the host (shared among the ranks on it),
//   2. prism::Config from the user's code,
//   3. the PRISM_* environment variable (an empty value counts as unset),
//   4. the --prism-* flag.
// Every value a source gives is parsed and validated on its own, so an error message can
// name exactly where the bad value came from ("PRISM_NUM_CPUS", "--prism-num-cpus",
// "Config::num_cpus") and what to write instead.

#include "runtime/settings.h"

#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <thread>
#include <type_traits>

#include "common/resources.h"
#include "runtime/config_fields.h"
#include "prism/errors.h"

namespace prism::internal {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// One row per Config field: its flag, its variable and an example of a valid value.
struct Option {
  const char* field;
  const char* flag;
  const char* env;
  const char* example;
};
constexpr Option kNumCpus{"num_cpus", "--prism-num-cpus", "PRISM_NUM_CPUS", "4"};
constexpr Option kNumGpus{"num_gpus", "--prism-num-gpus", "PRISM_NUM_GPUS", "1"};
constexpr Option kObjectStore{"object_store_memory", "--prism-object-store-memory",
                              "PRISM_OBJECT_STORE_MEMORY", "2G"};
constexpr Option kResources{"resources", "--prism-resources", "PRISM_RESOURCES", "ssd:1,fpga:0.5"};
constexpr Option kLogDir{"log_dir", "--prism-log-dir", "PRISM_LOG_DIR", "/scratch/prism-logs"};
constexpr Option kRanksPerNode{"ranks_per_node", "--prism-ranks-per-node", "PRISM_RANKS_PER_NODE",
                               "2"};
constexpr Option kMaxInline{"max_inline_bytes", "--prism-max-inline-bytes",
                            "PRISM_MAX_INLINE_BYTES", "100K"};
constexpr Option kRankTimeout{"rank_timeout_s", "--prism-rank-timeout", "PRISM_RANK_TIMEOUT", "30"};
constexpr Option kPendingWarn{"pending_warn_s", "--prism-pending-warn", "PRISM_PENDING_WARN", "10"};
constexpr Option kLogLevel{"log_level", "--prism-log-level", "PRISM_LOG_LEVEL", "info"};
constexpr Option kTaskTable{"task_table_size", "--prism-task-table-size", "PRISM_TASK_TABLE_SIZE",
                            "100000"};
constexpr Option kDataPlane{"data_plane", "--prism-data-plane", "PRISM_DATA_PLANE", "mpi"};
constexpr Option kNetwork{"network", "--prism-network", "PRISM_NETWORK", "ib0"};
constexpr Option kLogToDriver{"log_to_driver", "--prism-log-to-driver", "PRISM_LOG_TO_DRIVER", "0"};
constexpr Option kDashboard{"dashboard", "--prism-dashboard", "PRISM_DASHBOARD", "loopback"};
constexpr Option kMaxLostRanks{"max_lost_ranks", "--prism-max-lost-ranks", "PRISM_MAX_LOST_RANKS", "1"};
constexpr const Option* kOptions[] = {&kNumCpus,     &kNumGpus,  &kObjectStore, &kResources,
                                      &kLogDir,      &kRanksPerNode, &kMaxInline,
                                      &kRankTimeout, &kPendingWarn, &kLogLevel, &kTaskTable, &kDataPlane,
                                      &kNetwork, &kLogToDriver, &kDashboard, &kMaxLostRanks};

[[noreturn]] void Fail(const std::string& message) { throw RuntimeError("prism: " + message); }

[[noreturn]] void FailNotA(const std::string& what, const std::string& text,
                           const std::string& kind, const std::string& example) {
  Fail(what + "=\"" + text + "\" is not " + kind + " (expected e.g. " + what + "=" + example + ")");
}

// `shown` is the value as the user wrote it, so the message quotes it verbatim.
void Require(bool ok, const std::string& what, const std::string& shown, const std::string& rule,
             const Option& o) {
  if (!ok) Fail(what + "=" + shown + ": " + rule + " (e.g. " + what + "=" + o.example + ")");
}

template <class T>
std::string Format(T v) {
  if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    std::ostringstream out;
    out << v;
    return out.str();
  }
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::optional<double> TryNumber(const std::string& text) {
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

double ParseNumber(const std::string& what, const std::string& text) {
  auto v = TryNumber(text);
  if (!v) FailNotA(what, text, "a number", "4");
  return *v;
}

/// A whole number of type T (an unsigned T rejects a sign), else the error names `kind`.
template <typename T>
T ParseWhole(const std::string& what, const std::string& text, const char* kind,
             const char* example) {
  T v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    FailNotA(what, text, kind, example);
  }
  return v;
}

int ParseInteger(const std::string& what, const std::string& text) {
  return ParseWhole<int>(what, text, "a whole number", "2");
}

uint64_t ParseCount(const std::string& what, const std::string& text) {
  return ParseWhole<uint64_t>(what, text, "a count (a whole number >= 0)", "100000");
}

void CheckResourceName(const std::string& what, const std::string& name) {
  if (name.empty()) Fail(what + ": a resource name is empty (expected e.g. ssd:1)");
  if (name.find_first_of(":,") != std::string::npos) {
    Fail(what + ": resource name \"" + name + "\" must not contain ':' or ','");
  }
  if (name == "CPU" || name == "GPU" || name == "memory" || name == "object_store_memory") {
    Fail(what + ": \"" + name + "\" is built in, not a custom resource; set it with " +
         (name == "memory" || name == "object_store_memory" ? "object_store_memory"
          : name == "CPU"  ? "num_cpus"
                           : "num_gpus") +
         " instead");
  }
}

void CheckResourceAmount(const std::string& what, const std::string& name, double amount,
                         const std::string& shown) {
  if (!(amount >= 0) || !std::isfinite(amount)) {
    Fail(what + ": resource \"" + name + "\" amount " + shown + " must be >= 0 (e.g. " + name +
         ":1)");
  }
  if (amount > internal::kMaxResourceAmount) {
    Fail(what + ": resource \"" + name + "\" amount " + shown + " is more than Prism accepts (at most " +
         Format(internal::kMaxResourceAmount) + ")");
  }
}

std::string AbsolutePath(const std::string& path) {
  std::string a = std::filesystem::absolute(path).lexically_normal().string();
  while (a.size() > 1 && a.back() == '/') a.pop_back();
  return a;
}

// Collects the --prism-* flags, last one wins. Throws on an unknown flag or a missing value.
std::map<std::string, std::string> ParseFlags(const std::vector<std::string>& args) {
  std::map<std::string, std::string> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--prism-", 0) != 0) continue;
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    auto known = std::find_if(std::begin(kOptions), std::end(kOptions),
                              [&](const Option* o) { return name == o->flag; });
    if (known == std::end(kOptions)) {
      std::string list;
      for (const Option* o : kOptions) list += std::string(list.empty() ? "" : ", ") + o->flag;
      Fail("unknown flag " + name + " (Prism's flags are: " + list + ")");
    }
    if (eq != std::string::npos) {
      flags[name] = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      flags[name] = args[++i];
    } else {
      Fail(name + " needs a value (e.g. " + name + "=" + (*known)->example + ")");
    }
  }
  return flags;
}

// The user-given sources of one run, in increasing precedence after Config.
struct Sources {
  const EnvFn& env;
  std::map<std::string, std::string> flags;

  // Calls take(what, text) for the environment variable, then for the flag, if given.
  template <class Take>
  void ForEachText(const Option& o, Take take) const {
    if (auto e = env(o.env); e && !e->empty()) take(std::string(o.env), *e);
    if (auto f = flags.find(o.flag); f != flags.end()) take(std::string(o.flag), f->second);
  }
};

// Resolves a numeric field: `parse` turns text into T, `ok` is the rule and `rule` says it.
template <class T, class Parse, class Ok>
void Resolve(T& out, const std::optional<T>& code, const Option& o, const Sources& src, Parse parse,
             Ok ok, const std::string& rule) {
  if (code) {
    const std::string what = std::string("Config::") + o.field;
    Require(ok(*code), what, Format(*code), rule, o);
    out = *code;
  }
  src.ForEachText(o, [&](const std::string& what, const std::string& text) {
    T v = parse(what, text);
    Require(ok(v), what, text, rule, o);
    out = v;
  });
}

/// The devices this rank's `num_gpus` stand for; see Settings::gpus. Throws when the
/// launcher lists fewer devices than the rank declares.
GpuDevices RankGpus(double num_gpus, const LaunchInfo& launch) {
  GpuDevices gpus;
  const size_t n = static_cast<size_t>(std::ceil(num_gpus));
  if (n == 0) return gpus;
  if (!launch.visible_gpus) {
    for (size_t i = 0; i < n; ++i) {
      gpus.ids.push_back(std::to_string(i));
      gpus.ordinals.push_back(static_cast<int>(i));
    }
    return gpus;
  }
  const auto& visible = *launch.visible_gpus;
  if (n > visible.size()) {
    std::string listed;
    for (const auto& id : visible) listed += (listed.empty() ? "" : ",") + id;
    Fail("this rank declares num_gpus=" + Format(num_gpus) + " but sees " +
         std::to_string(visible.size()) + " GPU" + (visible.size() == 1 ? "" : "s") + " (" +
         (launch.gpus_renumbered ? "CUDA_VISIBLE_DEVICES" : "Slurm's GPU list") + "=\"" + listed +
         "\"): declare at most " + std::to_string(visible.size()) +
         " (PRISM_NUM_GPUS / --prism-num-gpus), or make more devices visible");
  }
  // The host's ranks each take their own n devices when the list holds enough for all of
  // them (mpirun: every rank sees the same list); else (Slurm binding one GPU per task,
  // so each rank sees only its own) the first n.
  size_t first = 0;
  if ((static_cast<size_t>(launch.local_rank) + 1) * n <= visible.size()) {
    first = static_cast<size_t>(launch.local_rank) * n;
  }
  for (size_t i = first; i < first + n; ++i) {
    gpus.ids.push_back(visible[i]);
    int ordinal = static_cast<int>(i);
    if (!launch.gpus_renumbered) {
      int index = 0;
      auto [p, ec] = std::from_chars(visible[i].data(), visible[i].data() + visible[i].size(), index);
      if (ec == std::errc() && p == visible[i].data() + visible[i].size()) ordinal = index;
    }
    gpus.ordinals.push_back(ordinal);
  }
  return gpus;
}

}  // namespace

std::string NetworkSetting(const Config& code, const std::vector<std::string>& args, const EnvFn& env) {
  std::string network = code.network.value_or("any");
  const Sources src{env, ParseFlags(args)};
  src.ForEachText(kNetwork, [&](const std::string&, const std::string& text) { network = text; });
  return network;
}

void ApplyEnvVars(const std::map<std::string, std::string>& vars) {
  for (const auto& [name, value] : vars) {
    if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos ||
        value.find('\0') != std::string::npos) {
      Fail("Config::env_vars has an invalid variable \"" + name +
           "\": a name must be non-empty and hold no '=' (and neither name nor value a NUL)");
    }
  }
  for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
}

void ApplyNetwork(const std::string& network) {
  if (network == "any" || network.empty()) return;
  if (network == "shm") {
    // Open MPI: loopback and shared memory only (no tcp btl, so no listening socket);
    // UCX: the same.
    setenv("OMPI_MCA_btl", "self,vader", 1);
    setenv("UCX_TLS", "self,sm", 1);
    return;
  }
  setenv("OMPI_MCA_btl_tcp_if_include", network.c_str(), 1);
  setenv("UCX_NET_DEVICES", network.c_str(), 1);
}

HostFacts ReadHostFacts() {
  HostFacts facts;
  facts.cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    facts.allowed_cores = static_cast<unsigned>(CPU_COUNT(&allowed));
  }
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    facts.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) facts.hostname = name;
  return facts;
}

unsigned DefaultNumCpus(const HostFacts& host, int local_size) {
  const unsigned share = host.cores / static_cast<unsigned>(std::max(1, local_size));
  const unsigned allowed = host.allowed_cores > 0 ? host.allowed_cores : host.cores;
  // Unbound ranks all see every core: each takes its share. A bound rank sees only its own
  // cores (or its socket's, shared with the socket's other ranks): the smaller bound holds.
  return std::max(1u, std::min(share, allowed));
}

namespace {

// Settings that change how ranks talk to each other or what a node is: a job whose ranks
// disagree on them does not work, so Init stops it.
bool MustAgree(const std::string& name) {
  return name == kDataPlane.field || name == kRanksPerNode.field || name == kLogToDriver.field;
}

// Settings that are a rank's own resources: they may differ between ranks on purpose.
bool PerRank(const std::string& name) {
  return name == kNumCpus.field || name == kNumGpus.field || name == kObjectStore.field ||
         name == kResources.field;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
  }
  return "?";
}

// The effective value of a setting, as text; "" for one without a plain text form (the
// dashboard: its source's text stands for it).
std::string EffectiveText(const Settings& s, const std::string& name) {
  if (name == kNumCpus.field) return Format(s.num_cpus);
  if (name == kNumGpus.field) return Format(s.num_gpus);
  if (name == kObjectStore.field) return Format(s.object_store_memory);
  if (name == kResources.field) {
    std::string text;
    for (const auto& [k, v] : s.custom_resources) text += (text.empty() ? "" : ",") + k + ":" + Format(v);
    return text;
  }
  if (name == kLogDir.field) return s.log_dir;
  if (name == kRanksPerNode.field) return Format(s.ranks_per_node);
  if (name == kMaxInline.field) return Format(s.max_inline_bytes);
  if (name == kRankTimeout.field) return Format(s.rank_timeout_s);
  if (name == kPendingWarn.field) return Format(s.pending_warn_s);
  if (name == kLogLevel.field) return LevelName(s.log_level);
  if (name == kTaskTable.field) return Format(s.task_table_size);
  if (name == kMaxLostRanks.field) return Format(s.max_lost_ranks);
  if (name == kDataPlane.field) return s.data_plane;
  if (name == kNetwork.field) return s.network;
  if (name == kLogToDriver.field) return s.log_to_driver ? "on" : "off";
  return "";
}

template <class T>
bool IsGiven(const std::optional<T>& field) {
  return field.has_value();
}
template <class K, class V>
bool IsGiven(const std::map<K, V>& field) {
  return !field.empty();
}

// "rank 3", "ranks 0-2, 5" with their hosts: "ranks 0-1 (host a), 2 (host b)".
std::string RanksAndHosts(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  constexpr size_t kMaxRuns = 6;
  size_t runs = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    const auto host = [&](size_t k) -> const std::string& { return hosts.at(static_cast<size_t>(ranks[k])); };
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1 && host(j + 1) == host(i)) ++j;
    if (runs == kMaxRuns) {
      out += ", ... (" + std::to_string(ranks.size() - i) + " more)";
      break;
    }
    out += (runs ? ", " : "") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "") +
           " (host " + host(i) + ")";
    ++runs;
    i = j + 1;
  }
  return out;
}

}  // namespace

std::vector<GivenSetting> GivenSettings(const Settings& s, const Config& code,
                                        const std::vector<std::string>& args, const EnvFn& env,
                                        const std::vector<std::string>& prism_env) {
  const auto flags = ParseFlags(args);
  std::map<std::string, bool> in_code;
  ForEachConfigField([&](const char* name, const auto& field) { in_code[name] = IsGiven(field); }, code);
  std::vector<GivenSetting> out;
  for (const Option* o : kOptions) {
    std::string source, text;
    if (auto f = flags.find(o->flag); f != flags.end()) {
      source = std::string(o->flag) + "=" + f->second;
      text = f->second;
    } else if (auto e = env(o->env); e && !e->empty()) {
      source = std::string(o->env) + "=" + *e;
      text = *e;
    } else if (in_code[o->field]) {
      source = std::string("Config::") + o->field;
    }
    if (source.empty() && !MustAgree(o->field)) continue;
    std::string value = EffectiveText(s, o->field);
    if (value.empty() && !text.empty()) value = text;
    out.push_back({o->field, value, source});
  }
  for (const auto& entry : prism_env) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || entry.rfind("PRISM_", 0) != 0 || entry.rfind("PRISM_TRAIN_", 0) == 0) continue;
    const std::string name = entry.substr(0, eq);
    const bool setting = std::any_of(std::begin(kOptions), std::end(kOptions),
                                     [&](const Option* o) { return name == o->env; });
    if (!setting) out.push_back({name, entry.substr(eq + 1), ""});
  }
  return out;
}

SettingsAgreement CompareSettings(const std::vector<std::vector<GivenSetting>>& by_rank,
                                  const std::vector<std::string>& hosts) {
  // name -> (what the rank has -> its ranks); a rank without the name is in the "" group.
  std::map<std::string, std::map<std::pair<std::string, std::string>, std::vector<int>>> seen;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    for (const auto& g : by_rank[r]) seen[g.name][{g.value, g.source}].push_back(static_cast<int>(r));
  }
  SettingsAgreement result;
  for (auto& [name, groups] : seen) {
    const bool variable = name.rfind("PRISM_", 0) == 0;
    std::string env_name = name;
    for (const Option* o : kOptions) {
      if (name == o->field) env_name = o->env;
    }
    const std::string how =
        " Give every rank the same settings: mpirun passes only the variables named with -x to "
        "the ranks it starts (mpirun -x " + env_name + "=<value> ..., or -x " + env_name +
        " to forward the launching shell's value); srun exports the launching shell's "
        "environment by default (unless --export says otherwise); flags (--prism-*) reach "
        "every rank that gets the same command line.";
    std::vector<char> has(by_rank.size(), 0);
    for (const auto& [key, ranks] : groups) {
      for (int r : ranks) has[static_cast<size_t>(r)] = 1;
    }
    std::vector<int> missing;
    for (size_t r = 0; r < has.size(); ++r) {
      if (!has[r]) missing.push_back(static_cast<int>(r));
    }
    // Equal values agree, whichever source gave them (a variable here, a flag there).
    std::map<std::string, std::vector<std::string>> values;
    for (const auto& [key, ranks] : groups) values[key.first].push_back(key.second);
    if (values.size() == 1 && missing.empty()) continue;
    // In order of each group's first rank: rank 0's value first.
    std::vector<std::pair<std::pair<std::string, std::string>, std::vector<int>>> ordered(groups.begin(), groups.end());
    std::sort(ordered.begin(), ordered.end(),
              [](const auto& a, const auto& b) { return a.second.front() < b.second.front(); });
    std::string listed;
    for (const auto& [key, ranks] : ordered) {
      const auto& [value, source] = key;
      const std::string what = variable       ? "\"" + value + "\""
                               : source.empty() ? value + " (the default)"
                                                : value + " (" + source + ")";
      listed += (listed.empty() ? "" : "; ") + what + " on " + RanksAndHosts(ranks, hosts);
    }
    if (!missing.empty()) {
      listed += "; " + std::string(variable ? "unset" : "not set (the default)") + " on " +
                RanksAndHosts(missing, hosts);
    }
    if (MustAgree(name)) {
      result.error += std::string(result.error.empty() ? "prism: " : "\nprism: ") + "the setting " + name +
                      " must be the same on every rank, and it differs: " + listed + "." + how;
      continue;
    }
    std::string text = std::string(variable ? "the variable " : "the setting ") + name +
                       " differs between ranks: " + listed + ".";
    if (PerRank(name)) text += " (It may differ on purpose, as ranks' resources can; if so, ignore this.)";
    result.warnings.push_back(text + how);
  }
  return result;
}

uint64_t ParseBytes(const std::string& what, const std::string& text) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  // Whole numbers take the integer path so sizes above 2^53 stay exact.
  uint64_t whole = 0;
  double number = 0;
  auto [p, ec] = std::from_chars(begin, end, whole);
  bool integral = ec == std::errc() && (p == end || *p != '.');
  if (!integral) {
    auto [q, ec2] = std::from_chars(begin, end, number);
    if (ec2 != std::errc() || !std::isfinite(number)) FailNotA(what, text, "a size", "2G");
    p = q;
  }
  std::string suffix(p, end);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() == 3 && suffix.substr(1) == "IB") suffix.resize(1);
  if (suffix.size() == 2 && suffix[1] == 'B') suffix.resize(1);
  static const std::map<std::string, uint64_t> kUnits = {{"", 1},           {"B", 1},
                                                         {"K", 1ULL << 10}, {"M", 1ULL << 20},
                                                         {"G", 1ULL << 30}, {"T", 1ULL << 40}};
  auto unit = kUnits.find(suffix);
  if (text.empty() || unit == kUnits.end()) FailNotA(what, text, "a size", "2G");
  if (!integral && number < 0) {
    Fail(what + "=" + text + ": must be >= 0 (e.g. " + what + "=2G)");
  }
  uint64_t bytes = 0;
  bool overflow = integral ? __builtin_mul_overflow(whole, unit->second, &bytes)
                           : number * static_cast<double>(unit->second) >= 0x1p64;
  if (overflow) Fail(what + "=" + text + ": too large (at most 16E bytes)");
  if (!integral) bytes = static_cast<uint64_t>(number * static_cast<double>(unit->second));
  return bytes;
}

std::map<std::string, double> ParseResourceList(const std::string& what, const std::string& text) {
  std::map<std::string, double> resources;
  std::stringstream in(text);
  for (std::string entry; std::getline(in, entry, ',');) {
    entry = Trim(entry);
    if (entry.empty()) continue;
    size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      Fail(what + "=\"" + text + "\": entry \"" + entry + "\" has no amount (expected e.g. " +
           what + "=ssd:1,fpga:0.5)");
    }
    std::string name = Trim(entry.substr(0, colon));
    std::string amount_text = Trim(entry.substr(colon + 1));
    const std::string source = what + "=\"" + text + "\"";
    CheckResourceName(source, name);
    auto amount = TryNumber(amount_text);
    if (!amount) {
      Fail(source + ": amount \"" + amount_text + "\" of \"" + name +
           "\" is not a number (expected e.g. " + what + "=ssd:1,fpga:0.5)");
    }
    CheckResourceAmount(source, name, *amount, amount_text);
    if (!resources.emplace(name, *amount).second) {
      Fail(source + ": resource \"" + name + "\" is given twice");
    }
  }
  return resources;
}

LogLevel ParseLogLevel(const std::string& what, const std::string& text) {
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "error") return LogLevel::kError;
  if (lower == "warn" || lower == "warning") return LogLevel::kWarn;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "debug") return LogLevel::kDebug;
  FailNotA(what, text, "a log level (error, warn, info or debug)", "info");
}

Settings ResolveSettings(const Config& code, const std::vector<std::string>& args, const EnvFn& env,
                         const LaunchInfo& launch, const HostFacts& host,
                         const std::string& launch_id) {
  const Sources src{env, ParseFlags(args)};
  const unsigned local = static_cast<unsigned>(std::max(1, launch.local_size));
  Settings s;

  // Detected defaults, shared among the ranks on this host.
  s.num_cpus = launch.slurm_cpus_per_task.value_or(DefaultNumCpus(host, launch.local_size));
  s.num_gpus = std::floor(launch.gpus_on_node.value_or(0) / local);
  s.object_store_memory =
      std::max(kMiB, static_cast<uint64_t>(static_cast<double>(host.memory_bytes) * 0.3 / local));
  s.job_id = launch.job_id.empty() ? launch_id : launch.job_id;
  s.launch_id = launch_id;
  std::string tmp = env("TMPDIR").value_or("");
  // Two launches in one allocation (a job script running two mpiruns at once) share the
  // Slurm job id, and mpirun's ranks have no step id: the launch id keeps them apart.
  s.session_dir = AbsolutePath(tmp.empty() ? "/tmp" : tmp) + "/prism-" + s.job_id +
                  (launch.step_id.empty() ? "" : "." + launch.step_id) +
                  (launch.job_id.empty() ? "" : "-" + launch_id);
  s.log_dir = s.session_dir + "/logs";

  auto non_negative = [](auto v) { return v >= 0 && std::isfinite(static_cast<double>(v)); };
  auto amount = [](double v) { return v >= 0 && v <= internal::kMaxResourceAmount; };
  auto positive = [](double v) { return v > 0 && std::isfinite(v); };
  auto any = [](auto) { return true; };
  Resolve(s.num_cpus, code.num_cpus, kNumCpus, src, ParseNumber, amount, "must be >= 0 and at most 1e14");
  Resolve(s.num_gpus, code.num_gpus, kNumGpus, src, ParseNumber, amount, "must be >= 0 and at most 1e14");
  if (s.num_gpus > 1 && s.num_gpus != std::floor(s.num_gpus)) {
    Fail("num_gpus=" + Format(s.num_gpus) +
         ": a rank offers whole GPUs, or a fraction of one below 1 (e.g. num_gpus=2)");
  }
  s.gpus = RankGpus(s.num_gpus, launch);
  Resolve(
      s.object_store_memory, code.object_store_memory, kObjectStore, src, ParseBytes,
      [](uint64_t v) { return v >= kMiB; }, "must be at least 1M (1048576 bytes)");
  Resolve(s.ranks_per_node, code.ranks_per_node, kRanksPerNode, src, ParseInteger, non_negative,
          "must be >= 0 (0 groups ranks by real host)");
  Resolve(s.max_inline_bytes, code.max_inline_bytes, kMaxInline, src, ParseBytes, any, "");
  Resolve(s.rank_timeout_s, code.rank_timeout_s, kRankTimeout, src, ParseNumber, positive,
          "must be > 0 seconds");
  Resolve(s.pending_warn_s, code.pending_warn_s, kPendingWarn, src, ParseNumber, non_negative,
          "must be >= 0 seconds (0: never warn)");
  Resolve(s.task_table_size, code.task_table_size, kTaskTable, src, ParseCount, any, "");
  Resolve(s.max_lost_ranks, code.max_lost_ranks, kMaxLostRanks, src, ParseInteger, [](int v) { return v >= -1; },
          "must be >= 0, or -1 for no limit");

  if (!code.resources.empty()) {
    for (const auto& [name, amount] : code.resources) {
      CheckResourceName("Config::resources", name);
      CheckResourceAmount("Config::resources", name, amount, Format(amount));
    }
    s.custom_resources = code.resources;
  }
  src.ForEachText(kResources, [&](const std::string& what, const std::string& text) {
    s.custom_resources = ParseResourceList(what, text);
  });

  auto take_plane = [&](const std::string& what, const std::string& text) {
    if (text != "ucx" && text != "mpi") FailNotA(what, text, "a data plane (ucx or mpi)", "mpi");
    s.data_plane = text;
  };
  if (code.data_plane) take_plane("Config::data_plane", *code.data_plane);
  src.ForEachText(kDataPlane, take_plane);

  auto take_network = [&](const std::string& what, const std::string& text) {
    if (text != "any" && text != "shm" && if_nametoindex(text.c_str()) == 0) {
      std::string names;
      if (struct if_nameindex* all = if_nameindex()) {
        for (auto* i = all; i->if_index != 0; ++i) names += std::string(names.empty() ? "" : ", ") + i->if_name;
        if_freenameindex(all);
      }
      Fail(what + "=\"" + text + "\" is not a network interface of this host (it has: " + names +
           "); give one of them, \"shm\" (one node, shared memory only) or \"any\"");
    }
    s.network = text;
  };
  if (code.network) take_network("Config::network", *code.network);
  src.ForEachText(kNetwork, take_network);

  if (code.ray_namespace) {
    if (code.ray_namespace->empty()) {
      Fail("Config::ray_namespace is empty: give a name, or leave it unset for the job's "
           "anonymous namespace");
    }
    s.ray_namespace = *code.ray_namespace;
  }
  if (code.log_to_driver) s.log_to_driver = *code.log_to_driver;
  s.wait_infeasible = code.wait_infeasible.value_or(false);
  src.ForEachText(kLogToDriver, [&](const std::string& what, const std::string& text) {
    std::string lower = text;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "1" || lower == "true" || lower == "on" || lower == "yes") {
      s.log_to_driver = true;
    } else if (lower == "0" || lower == "false" || lower == "off" || lower == "no") {
      s.log_to_driver = false;
    } else {
      FailNotA(what, text, "on or off (1/0, true/false)", "0");
    }
  });

  auto take_dashboard = [&](const std::string& what, const std::string& text) {
    std::string why;
    if (!dashboard::ParseDashboardSetting(text, &s.dashboard, &why)) Fail(what + "=\"" + text + "\" " + why);
  };
  if (code.dashboard) take_dashboard("Config::dashboard", *code.dashboard);
  src.ForEachText(kDashboard, take_dashboard);

  if (code.log_level) s.log_level = ParseLogLevel("Config::log_level", *code.log_level);
  src.ForEachText(kLogLevel, [&](const std::string& what, const std::string& text) {
    s.log_level = ParseLogLevel(what, text);
  });

  auto take_dir = [&](const std::string& what, const std::string& dir) {
    if (dir.empty()) Fail(what + " is empty (expected e.g. " + what + "=" + kLogDir.example + ")");
    s.log_dir = AbsolutePath(dir);
  };
  if (code.log_dir) take_dir("Config::log_dir", *code.log_dir);
  src.ForEachText(kLogDir, take_dir);
  return s;
}

}  // namespace prism::internal
