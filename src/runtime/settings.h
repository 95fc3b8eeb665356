#pragma once
// The runtime's effective configuration: prism::Config merged with the environment
// (PRISM_*), the command line (--prism-*) and what the launcher and the host report.
// Precedence, lowest first: detected default < Config in code < environment < flag.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dashboard/setting.h"
#include "node_manager/gpu_pool.h"
#include "prism/config.h"
#include "runtime/launch.h"

namespace prism::internal {

/// How much the runtime logs.
enum class LogLevel { kError, kWarn, kInfo, kDebug };

/// What the host offers, before it is shared among the ranks on it.
struct HostFacts {
  unsigned cores = 1;
  uint64_t memory_bytes = 0;
  std::string hostname;
  /// The CPUs this process may run on (its affinity mask: the launcher's binding, taskset,
  /// a cpuset); 0 = not known, taken as every core.
  unsigned allowed_cores = 0;
};

/// Reads the real host: hardware_concurrency, the affinity mask (sched_getaffinity),
/// physical memory, gethostname. Never throws.
HostFacts ReadHostFacts();

/// The CPUs a rank offers by default, when neither Slurm (--cpus-per-task) nor the user
/// says: its share of the host's cores among the host's `local_size` ranks, and never more
/// than the CPUs its affinity mask allows. A rank bound to one core (mpirun --bind-to core,
/// srun --cpu-bind=cores, taskset -c 0) offers 1, not the node's cores. At least 1.
unsigned DefaultNumCpus(const HostFacts& host, int local_size);

/// Fully resolved, validated settings of one rank. Plain value.
struct Settings {
  double num_cpus = 1;
  double num_gpus = 0;
  /// The devices num_gpus stands for (ceil(num_gpus) of them): the launcher's visible
  /// GPUs (LaunchInfo::visible_gpus), this rank's share of them when the host's ranks see
  /// the same list, else "0", "1", ... when nothing lists them (as Ray numbers GPUs it
  /// was told about but cannot see).
  GpuDevices gpus;
  uint64_t object_store_memory = 0;
  /// Custom resources only; CPU, GPU and memory are the fields above.
  std::map<std::string, double> custom_resources;
  /// Absolute path. Default: session_dir + "/logs".
  std::string log_dir;
  /// Ranks per simulated node; 0 = group ranks by real host.
  int ranks_per_node = 0;
  uint64_t max_inline_bytes = 100 * 1024;
  double rank_timeout_s = 60;
  /// Config::pending_warn_s: 0 = never warn.
  double pending_warn_s = 10;
  LogLevel log_level = LogLevel::kWarn;
  /// Worker ranks' stdout and stderr go to the driver's console, "(rank=N, host=H) "
  /// before each line (Config::log_to_driver).
  bool log_to_driver = true;
  /// Config::wait_infeasible: a request no rank could ever hold waits (Ray's rule) instead
  /// of failing at once.
  bool wait_infeasible = false;
  /// Ended tasks the head keeps for prism::state::ListTasks.
  uint64_t task_table_size = 10000;
  /// Config::max_lost_ranks: -1 = no limit.
  int max_lost_ranks = -1;
  /// "ucx" or "mpi".
  std::string data_plane = "ucx";
  /// "any", "shm" or an interface name (Config::network).
  std::string network = "any";
  /// Config::dashboard: rank 0's dashboard and end-of-job report (off by default).
  dashboard::DashboardSetting dashboard;
  /// Config::ray_namespace; "" = the job's anonymous namespace (the node manager names it).
  std::string ray_namespace;
  /// LaunchInfo::job_id, else the launch id.
  std::string job_id;
  /// Made once by rank 0 for this launch (mpirun or srun) and shared by every rank: two
  /// launches in one Slurm job never share it.
  std::string launch_id;
  /// $TMPDIR (else /tmp) + "/prism-" + job_id [+ "." + step id] [+ "-" + launch id when the
  /// job id came from Slurm], as an absolute path: private to this launch.
  std::string session_dir;
};

/// Merges `code`, the PRISM_* variables of `env`, the --prism-* flags in `args` (argv[1..];
/// "--prism-x=v" or "--prism-x v"; other arguments belong to the user's program and are
/// ignored) and the defaults from `launch` and `host`. Custom resources from a higher source
/// replace the lower source's whole list. Every value given by any source is validated,
/// even one a higher source overrides.
/// Throws prism::RuntimeError naming the source, the bad value and the fix, e.g.
/// `prism: PRISM_NUM_CPUS="abc" is not a number (expected e.g. PRISM_NUM_CPUS=4)`, and on
/// an unknown --prism-* flag (listing the known ones).
Settings ResolveSettings(const Config& code, const std::vector<std::string>& args, const EnvFn& env,
                         const LaunchInfo& launch, const HostFacts& host,
                         const std::string& launch_id);

/// A setting as one rank resolved it, for comparing the ranks at Init (under mpirun only
/// the variables given with -x reach the other hosts' ranks).
struct GivenSetting {
  /// The setting's name (Config's field, e.g. "num_cpus"), or a PRISM_* variable that is
  /// not a setting (e.g. "PRISM_STORAGE_PATH", read by the libraries).
  std::string name;
  /// The effective value as text ("3", "ucx", "on"); for a variable, its value.
  std::string value;
  /// Where it came from: "PRISM_NUM_CPUS=3", "--prism-num-cpus=3", "Config::num_cpus", or
  /// "" for the detected default (a variable: "").
  std::string source;
};

/// What this rank was given: each setting a source (Config, PRISM_* variable or
/// --prism-* flag) gave, those every rank must agree on (data_plane, ranks_per_node,
/// log_to_driver) even at their defaults, and the PRISM_* variables of `prism_env`
/// ("NAME=value") that are not settings (PRISM_TRAIN_*, a training worker's own, excluded).
/// Settings left at their detected defaults are not listed: they may differ between
/// hosts (num_cpus, object_store_memory), and the lists stay short on big jobs.
std::vector<GivenSetting> GivenSettings(const Settings& s, const Config& code,
                                        const std::vector<std::string>& args, const EnvFn& env,
                                        const std::vector<std::string>& prism_env);

/// What the ranks' settings say together: warnings for settings and PRISM_* variables that
/// differ between ranks (set on some and not others, or to different values), and an
/// error when one that every rank must agree on differs. Each names the ranks, their
/// hosts and the values, and says how to pass settings to every rank. The warnings are
/// for the log (no "prism:" prefix); the error is a whole message.
struct SettingsAgreement {
  std::vector<std::string> warnings;
  std::string error;  ///< "" when nothing must stop the job
};

/// Compares GivenSettings of every rank (`by_rank[r]`, on host `hosts[r]`). Pure.
SettingsAgreement CompareSettings(const std::vector<std::vector<GivenSetting>>& by_rank,
                                  const std::vector<std::string>& hosts);

/// Config::network as the highest source gives it ("any" if none), read before MPI_Init:
/// what ApplyNetwork sets up. ResolveSettings validates it afterwards.
std::string NetworkSetting(const Config& code, const std::vector<std::string>& args, const EnvFn& env);
/// Restricts where MPI's TCP transport and UCX listen, through their environment variables
/// (OMPI_MCA_btl_tcp_if_include / OMPI_MCA_btl and UCX_NET_DEVICES / UCX_TLS); must run
/// before MPI_Init. "any" changes nothing.
void ApplyNetwork(const std::string& network);

/// Sets Config::env_vars in this process (overwriting). Throws RuntimeError, before setting
/// any, for a name that is empty or holds '=' or a NUL. Must run before threads start.
void ApplyEnvVars(const std::map<std::string, std::string>& vars);

/// Parses a byte count: "1073741824", "512M", "2G", "100K", "1.5G", "1T" (K/M/G/T are
/// powers of 1024; case-insensitive; an optional trailing "B" or "iB" is accepted).
/// Fractions of a byte are dropped. `what` names the source in the error ("PRISM_X",
/// "--prism-x"). Throws prism::RuntimeError on anything else, negatives and overflow.
uint64_t ParseBytes(const std::string& what, const std::string& text);

/// Parses "ssd:1,fpga:0.5" ("" is the empty list). Throws prism::RuntimeError on a
/// malformed entry, a negative amount, a duplicate, or a built-in name (CPU, GPU, memory).
std::map<std::string, double> ParseResourceList(const std::string& what, const std::string& text);

/// Parses error|warn|info|debug (case-insensitive; "warning" is accepted too). Throws
/// prism::RuntimeError otherwise.
LogLevel ParseLogLevel(const std::string& what, const std::string& text);

}  // namespace prism::internal
