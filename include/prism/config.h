#pragma once
// Runtime configuration. Every field is optional: unset fields come from the environment
// (PRISM_*), then the command line (--prism-*), else from what the launcher and the
// hardware say. Precedence, lowest first: detected default < Config in code < environment
// < command-line flag.
//
//   field                 flag                          environment
//   num_cpus              --prism-num-cpus=4            PRISM_NUM_CPUS
//   num_gpus              --prism-num-gpus=1            PRISM_NUM_GPUS
//   object_store_memory   --prism-object-store-memory=  PRISM_OBJECT_STORE_MEMORY (bytes,
//                                                       or with K/M/G suffix)
//   resources             --prism-resources=a:1,b:2     PRISM_RESOURCES
//   log_dir               --prism-log-dir=DIR           PRISM_LOG_DIR
//   ranks_per_node        --prism-ranks-per-node=2      PRISM_RANKS_PER_NODE
//   max_inline_bytes      --prism-max-inline-bytes=     PRISM_MAX_INLINE_BYTES
//   rank_timeout_s        --prism-rank-timeout=30       PRISM_RANK_TIMEOUT
//   pending_warn_s        --prism-pending-warn=10       PRISM_PENDING_WARN (seconds; 0: never)
//   log_level             --prism-log-level=info        PRISM_LOG_LEVEL (error|warn|info|debug)
//   task_table_size       --prism-task-table-size=N     PRISM_TASK_TABLE_SIZE
//   data_plane            --prism-data-plane=ucx        PRISM_DATA_PLANE (ucx|mpi)
//   network               --prism-network=ib0           PRISM_NETWORK (any|shm|<interface>)
//   ray_namespace, env_vars: in code only (Ray's RayConfig fields)
//   wait_infeasible: in code only (ray::Init sets it: Ray's rule)
//   log_to_driver         --prism-log-to-driver=0       PRISM_LOG_TO_DRIVER (1|0|true|false)
//   dashboard             --prism-dashboard=loopback    PRISM_DASHBOARD (off|loopback|report|
//                                                       <addr>:<port>)
//   max_lost_ranks        --prism-max-lost-ranks=1      PRISM_MAX_LOST_RANKS (-1: no limit)

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace prism {

struct Config {
  /// CPUs this rank offers to tasks. Default: SLURM_CPUS_PER_TASK, else the host's cores
  /// divided among the ranks on the host, and at most the CPUs the rank is bound to (its
  /// affinity mask: mpirun --bind-to core, srun --cpu-bind, taskset); at least 1.
  std::optional<double> num_cpus;
  /// GPUs this rank offers. Default: SLURM_GPUS_ON_NODE / CUDA_VISIBLE_DEVICES shared
  /// among the ranks on the host. Whole, or a fraction below 1; at most as many as the
  /// rank sees (CUDA_VISIBLE_DEVICES, else SLURM_STEP_GPUS / SLURM_JOB_GPUS), whose
  /// entries GetGpuIds() returns.
  std::optional<double> num_gpus;
  /// Bytes of object memory per rank; beyond it the least recently used objects spill to
  /// disk (see README). Default: 30% of the host's memory divided among its ranks.
  std::optional<uint64_t> object_store_memory;
  /// Custom resources this rank offers, e.g. {{"ssd", 1}}.
  std::map<std::string, double> resources;
  /// Where logs go. Default: $TMPDIR (else /tmp) /prism-<job id>/logs, private to the job.
  std::optional<std::string> log_dir;
  /// Group consecutive ranks into simulated nodes of this many ranks (0 = real hosts).
  std::optional<int> ranks_per_node;
  /// Values up to this size travel inside control messages; larger ones stay where they
  /// were made and are pulled by the rank that needs them. Default 100 KiB (Ray's).
  std::optional<uint64_t> max_inline_bytes;
  /// A rank silent for this long is declared dead: the job ends, or in recovery mode
  /// (mpirun --enable-recovery) goes on without it. Default 60 s.
  std::optional<double> rank_timeout_s;
  /// A task that has waited this long for resources only an actor's end or a placement
  /// group's removal can free is named in a warning on rank 0, with what it wants and what
  /// holds it (again each time its wait doubles). 0: never. Default 10 s.
  std::optional<double> pending_warn_s;
  /// error, warn, info or debug. Default warn.
  std::optional<std::string> log_level;
  /// How many ended tasks the head keeps for prism::state::ListTasks (the most recent);
  /// SummarizeTasks counts all of them regardless. Default 10000.
  std::optional<uint64_t> task_table_size;
  /// How objects move between ranks: "ucx" (default; UCX picks shared memory, RDMA or
  /// TCP) or "mpi" (point-to-point over the control plane's MPI, the fallback).
  std::optional<std::string> data_plane;
  /// Where ranks listen for each other (MPI's TCP transport and UCX): "any" (default: every
  /// interface, as Open MPI and UCX do by themselves), an interface name such as "ib0" or
  /// "eth1" (only that one), or "shm" (shared memory only, no TCP listener at all: one node).
  /// Read before MPI starts, so the program's Config must say the same on every rank.
  std::optional<std::string> network;
  /// The job's namespace for named actors (Ray's ray_namespace). Default: an anonymous
  /// namespace of this job. Every rank's Config must say the same.
  std::optional<std::string> ray_namespace;
  /// Environment variables set in every rank's process at Init, before MPI starts and
  /// before any task runs (Ray's job runtime_env env_vars; overwrites existing values).
  /// Tasks share their rank's process, so this is the only environment they have.
  std::map<std::string, std::string> env_vars;
  /// Whether worker ranks' stdout and stderr reach the driver's console, each line as
  /// "(rank=N, host=H) line" (Ray's log_to_driver). Default true. Either way every worker
  /// rank also keeps its output in <log_dir>/rank-N.out. Off, a worker's output goes where
  /// the launcher sends it (mpirun and srun print it unprefixed).
  std::optional<bool> log_to_driver;
  /// A task, actor or placement group that no rank could ever hold, even in an idle
  /// cluster: false (the default) refuses it at once with ResourceError, at Remote() or
  /// CreatePlacementGroup, naming what the ranks offer (an MPI job's ranks are fixed, so it
  /// could never run); true leaves it pending for good with a warning naming what it asks
  /// for, as Ray does while it waits for a node that could (Get waits, Wait reports it
  /// unready, a group's Wait returns false). ray::Init (prism/ray_compat.h) sets true.
  std::optional<bool> wait_infeasible;
  /// Rank 0's dashboard (README, "Dashboard"): "off" (the default); "loopback" (127.0.0.1,
  /// a port the kernel picks); "<address>:<port>" ("*:8265" for every interface; port 0:
  /// the kernel picks), which then needs the random token the printed URL carries; or
  /// "report" (no server). The URL is printed and written to <session dir>/dashboard.url;
  /// unless off, Shutdown writes one self-contained HTML report to $PRISM_STORAGE_PATH
  /// (else ~/prism_results)/prism-dashboard-<job id>.html.
  std::optional<std::string> dashboard;
  /// Recovery mode (mpirun --enable-recovery): the job goes on after losing up to this many
  /// worker ranks; the next loss ends it with exit status 75 (kExitPreempted: a job script
  /// requeues it, and it resumes from its checkpoints on other nodes). -1 (the default):
  /// no limit. Read on rank 0.
  std::optional<int> max_lost_ranks;
};

}  // namespace prism
