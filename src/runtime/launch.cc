// Launcher detection. The variables we trust, in order:
//   mpirun (Open MPI): OMPI_COMM_WORLD_{SIZE,LOCAL_RANK,LOCAL_SIZE}. mpirun inside an
//     salloc also inherits SLURM_JOB_ID and friends; OMPI_* wins, slurm_job stays true.
//   srun --mpi=pmix:   PMIX_RANK plus SLURM_{PROCID,STEP_ID,NTASKS,LOCALID,...}.
//   Slurm allocation:  SLURM_JOB_ID, SLURM_ARRAY_*, SLURM_CPUS_PER_TASK, SLURM_GPUS_ON_NODE,
//     SLURM_STEP_GPUS / SLURM_JOB_GPUS (which GPUs, when CUDA_VISIBLE_DEVICES is unset),
//     SLURM_NODEID, SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE (e.g. "2(x3),1": two
//     tasks on each of the first three nodes, one on the fourth).

#include "runtime/launch.h"

#include <charconv>
#include <cstdlib>
#include <vector>

namespace prism::internal {
namespace {

std::optional<int> ParseInt(const std::string& s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int> EnvInt(const EnvFn& env, const std::string& name) {
  auto s = env(name);
  return s ? ParseInt(*s) : std::nullopt;
}

std::optional<double> EnvDouble(const EnvFn& env, const std::string& name) {
  auto s = env(name);
  if (!s) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc() || p != s->data() + s->size() || !(v >= 0)) return std::nullopt;
  return v;
}

// Expands SLURM_TASKS_PER_NODE ("2(x3),1") and returns the count of node `node`, or the
// first node's if `node` is unknown or out of range.
std::optional<int> TasksOnNode(const std::string& spec, std::optional<int> node) {
  std::vector<int> counts;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(pos, end - pos);
    int repeat = 1;
    if (size_t paren = item.find("(x"); paren != std::string::npos && item.back() == ')') {
      auto r = ParseInt(item.substr(paren + 2, item.size() - paren - 3));
      if (!r || *r < 1) return std::nullopt;
      repeat = *r;
      item.resize(paren);
    }
    auto count = ParseInt(item);
    if (!count) return std::nullopt;
    for (int i = 0; i < repeat && counts.size() < 100000; ++i) counts.push_back(*count);
    pos = end + 1;
  }
  if (counts.empty()) return std::nullopt;
  if (node && *node >= 0 && static_cast<size_t>(*node) < counts.size()) return counts[*node];
  return counts.front();
}

/// The entries of a device list ("2,5", "GPU-8f3c...,GPU-1a2b...", Slurm's "0-2,5"),
/// ranges expanded; "" and Slurm's "NoDevFiles" list none.
std::vector<std::string> SplitDeviceList(const std::string& text) {
  std::vector<std::string> ids;
  if (text == "NoDevFiles") return ids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    size_t dash = item.find('-');
    auto lo = dash == std::string::npos ? std::nullopt : ParseInt(item.substr(0, dash));
    auto hi = dash == std::string::npos ? std::nullopt : ParseInt(item.substr(dash + 1));
    if (lo && hi && *lo <= *hi && *hi - *lo < 4096) {
      for (int i = *lo; i <= *hi; ++i) ids.push_back(std::to_string(i));
    } else if (!item.empty()) {
      ids.push_back(item);
    }
    pos = end + 1;
  }
  return ids;
}

}  // namespace

EnvFn ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
}

std::string LaunchInfo::launcher_name() const {
  switch (launcher) {
    case Launcher::kMpirun:
      return "mpirun";
    case Launcher::kSrun:
      return "srun";
    case Launcher::kNone:
      break;
  }
  return "none";
}

LaunchInfo DetectLaunch(const EnvFn& env) {
  LaunchInfo info;
  const bool slurm_task = env("SLURM_STEP_ID") || env("SLURM_PROCID");
  if (env("OMPI_COMM_WORLD_SIZE")) {
    info.launcher = Launcher::kMpirun;
  } else if (slurm_task && env("PMIX_RANK")) {
    info.launcher = Launcher::kSrun;
  }

  if (info.launcher == Launcher::kMpirun) {
    info.world_size_hint = EnvInt(env, "OMPI_COMM_WORLD_SIZE").value_or(1);
  } else if (info.launcher == Launcher::kSrun) {
    info.world_size_hint = EnvInt(env, "SLURM_NTASKS").value_or(1);
  }
  if (info.world_size_hint < 1) info.world_size_hint = 1;

  info.slurm_node_id = EnvInt(env, "SLURM_NODEID");
  if (auto r = EnvInt(env, "OMPI_COMM_WORLD_LOCAL_RANK")) {
    info.local_rank = *r;
  } else if (auto id = EnvInt(env, "SLURM_LOCALID")) {
    info.local_rank = *id;
  }
  std::optional<int> local_size = EnvInt(env, "OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local_size) local_size = EnvInt(env, "SLURM_NTASKS_PER_NODE");
  if (!local_size) {
    if (auto spec = env("SLURM_TASKS_PER_NODE")) {
      local_size = TasksOnNode(*spec, info.slurm_node_id);
    }
  }
  info.local_size = local_size && *local_size >= 1 ? *local_size : 1;
  if (info.local_rank < 0 || info.local_rank >= info.local_size) info.local_rank = 0;

  if (auto job = env("SLURM_JOB_ID")) {
    info.slurm_job = true;
    info.job_id = *job;
    auto array_job = env("SLURM_ARRAY_JOB_ID");
    auto array_task = env("SLURM_ARRAY_TASK_ID");
    if (array_job && array_task) info.job_id = *array_job + "_" + *array_task;
  }
  if (info.launcher == Launcher::kSrun) info.step_id = env("SLURM_STEP_ID").value_or("");
  info.slurm_cpus_per_task = EnvDouble(env, "SLURM_CPUS_PER_TASK");
  if (auto cuda = env("CUDA_VISIBLE_DEVICES")) {
    info.visible_gpus = SplitDeviceList(*cuda);
    info.gpus_renumbered = true;
  } else if (auto step = env("SLURM_STEP_GPUS")) {
    info.visible_gpus = SplitDeviceList(*step);
  } else if (auto job = env("SLURM_JOB_GPUS")) {
    info.visible_gpus = SplitDeviceList(*job);
  }
  info.gpus_on_node = EnvDouble(env, "SLURM_GPUS_ON_NODE");
  if (!info.gpus_on_node && info.gpus_renumbered) {
    info.gpus_on_node = static_cast<double>(info.visible_gpus->size());
  }
  return info;
}

bool LaunchedByMpiLauncher(const EnvFn& env) {
  return env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK") || env("PMI_RANK") ||
         (env("SLURM_STEP_ID") && env("SLURM_PROCID"));
}

std::string LaunchMisuseHint(const EnvFn& env) {
  // Requiring SLURM_STEP_ID keeps a batch script (SLURM_PROCID=0, SLURM_NTASKS=3, no srun)
  // that runs ./app directly from getting the hint.
  auto ntasks = EnvInt(env, "SLURM_NTASKS");
  if (env("SLURM_PROCID") && env("SLURM_STEP_ID") && ntasks && *ntasks > 1 && !env("PMIX_RANK") &&
      !env("OMPI_COMM_WORLD_SIZE")) {
    return "prism: started by srun without PMIx (SLURM_NTASKS=" + std::to_string(*ntasks) +
           " but no PMIX_RANK): Debian's Open MPI needs `srun --mpi=pmix`";
  }
  return "";
}

std::string SingleRankHint(const EnvFn& env, int world_size) {
  auto ntasks = EnvInt(env, "SLURM_NTASKS");
  if (world_size != 1 || !ntasks || *ntasks < 2 || env("SLURM_STEP_ID") ||
      env("OMPI_COMM_WORLD_SIZE")) {
    return "";
  }
  return "prism: warning: this Slurm job asked for " + std::to_string(*ntasks) +
         " tasks (SLURM_NTASKS=" + std::to_string(*ntasks) +
         ") but Prism started as 1 rank, so the other " + std::to_string(*ntasks - 1) +
         " sit idle: start the program with `srun --mpi=pmix ./app` in the job script";
}

std::string NodeIdentity(const LaunchInfo& launch, const std::string& hostname) {
  if (launch.launcher == Launcher::kSrun && launch.slurm_node_id) {
    return "node-" + std::to_string(*launch.slurm_node_id);
  }
  return hostname;
}

}  // namespace prism::internal
