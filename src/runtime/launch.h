#pragma once
// What the launcher (mpirun, srun, or none) tells a process through its environment:
// how many ranks share the job and the host, which job this is, and the CPUs and GPUs
// Slurm gave us. Everything reads the environment through an EnvFn, so tests pass a map.

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace prism::internal {

/// Looks up one environment variable; nullopt when it is not set.
using EnvFn = std::function<std::optional<std::string>(const std::string& name)>;

/// An EnvFn over the real process environment (getenv). Thread-safe as long as nobody
/// calls setenv concurrently.
EnvFn ProcessEnv();

/// Who started this process.
enum class Launcher { kNone, kMpirun, kSrun };

/// Launcher facts read from the environment by DetectLaunch. Plain value.
struct LaunchInfo {
  Launcher launcher = Launcher::kNone;
  /// OMPI_COMM_WORLD_SIZE, else (under srun) SLURM_NTASKS; 1 if none.
  int world_size_hint = 1;
  /// OMPI_COMM_WORLD_LOCAL_RANK, else SLURM_LOCALID, else 0.
  int local_rank = 0;
  /// Ranks on this host: OMPI_COMM_WORLD_LOCAL_SIZE, else SLURM_NTASKS_PER_NODE, else this
  /// node's entry of SLURM_TASKS_PER_NODE ("2(x3),1"), else 1. Always >= 1.
  int local_size = 1;
  /// SLURM_JOB_ID, or "<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>" for an array task;
  /// "" outside Slurm (the runtime then makes one).
  std::string job_id;
  /// SLURM_STEP_ID in an srun step (concurrent steps of one job keep separate temp dirs).
  std::string step_id;
  /// SLURM_NODEID.
  std::optional<int> slurm_node_id;
  /// SLURM_CPUS_PER_TASK.
  std::optional<double> slurm_cpus_per_task;
  /// GPUs on this host: SLURM_GPUS_ON_NODE, else the number of CUDA_VISIBLE_DEVICES
  /// entries ("" or "NoDevFiles" count as 0); nullopt if neither is set.
  std::optional<double> gpus_on_node;
  /// The GPUs this process sees, as the launcher names them (numbers or UUIDs):
  /// CUDA_VISIBLE_DEVICES's entries, else SLURM_STEP_GPUS, else SLURM_JOB_GPUS. nullopt
  /// when none is set; empty when it lists none ("" or "NoDevFiles").
  std::optional<std::vector<std::string>> visible_gpus;
  /// True when visible_gpus came from CUDA_VISIBLE_DEVICES: CUDA then numbers those
  /// devices 0, 1, ... in that order. Otherwise CUDA sees every device of the host and a
  /// Slurm index is its CUDA ordinal.
  bool gpus_renumbered = false;
  /// True when SLURM_JOB_ID is set (also for mpirun inside an allocation).
  bool slurm_job = false;

  /// "none", "mpirun" or "srun".
  std::string launcher_name() const;
};

/// Reads the launcher's environment. Malformed launcher variables are ignored (treated as
/// unset): they are not the user's to fix. Never throws.
LaunchInfo DetectLaunch(const EnvFn& env);

/// True if a launcher that needs MPI_Init started this process: mpirun (OMPI_COMM_WORLD_SIZE
/// or PMIX_RANK), srun --mpi=pmix (PMIX_RANK), MPICH's hydra (PMI_RANK), or any srun step
/// (SLURM_STEP_ID with SLURM_PROCID). False for `./app`, which becomes a one-rank cluster.
bool LaunchedByMpiLauncher(const EnvFn& env);

/// A one-line explanation when the environment shows a known launch mistake, else "".
/// Today: srun without PMIx (--mpi=pmi2/none) under Debian's Open MPI, where every task
/// would silently become its own one-rank cluster.
std::string LaunchMisuseHint(const EnvFn& env);

/// A warning when a Slurm job asked for several tasks but Prism started as one rank
/// without srun (the batch script ran ./app directly), else "".
std::string SingleRankHint(const EnvFn& env, int world_size);

/// The node this rank counts as: "node-<SLURM_NODEID>" in an srun step (Slurm's own node
/// numbering, right even where host names repeat), else the host name.
std::string NodeIdentity(const LaunchInfo& launch, const std::string& hostname);

}  // namespace prism::internal
