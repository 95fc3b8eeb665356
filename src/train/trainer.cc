// TorchTrainer::Fit, on the driver: pick one rank per worker, reserve them with a placement
// group, run the loop as one pinned task per worker, show world rank 0's reports as they
// come (through the GCS KV), and on a failure abort the group and start again from the
// latest checkpoint, up to FailureConfig::max_failures.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "checkpoint/checkpoint_store.h"
#include "prism/api.h"
#include "prism/kv.h"
#include "prism/placement_group.h"
#include "prism/remote.h"
#include "prism/state.h"
#include "prism/train/collective.h"
#include "prism/train/trainer.h"
#include "prism/platform/preemption.h"
#include "train/worker.h"

namespace prism::train::internal {

WorkerOutcome PrismTrainRunWorker(WorkerSpec spec) { return RunWorker(spec); }
bool PrismTrainAbortGroup(int tag) {
  AbortGroup(tag);
  return true;
}
bool PrismTrainStopGroup(int tag) {
  RequestStop(tag);
  return true;
}

/// The storage probe file of the driver (rank < 0) or of a worker's rank.
std::string ProbeFile(const std::string& dir, const std::string& run_id, int rank) {
  return dir + "/.prism-probe-" + run_id + "-" + (rank < 0 ? "driver" : "rank" + std::to_string(rank));
}

/// Run on each worker's rank before training: writes this rank's probe file into `dir`
/// and checks that the driver's is visible. Returns "" or what this rank could not do.
std::string PrismTrainProbeStorage(std::string dir, std::string run_id, int rank) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string where = "rank " + std::to_string(rank) + " (host " + host + ")";
  if (!std::filesystem::exists(ProbeFile(dir, run_id, -1))) {
    return where + " cannot see the probe file the driver wrote in " + dir;
  }
  std::ofstream(ProbeFile(dir, run_id, rank)) << host << "\n";
  return "";
}

}  // namespace prism::train::internal

PRISM_REMOTE(prism::train::internal::PrismTrainRunWorker,
             prism::train::internal::PrismTrainAbortGroup,
             prism::train::internal::PrismTrainStopGroup,
             prism::train::internal::PrismTrainProbeStorage);

namespace prism::train {
namespace {

using internal::ReportRecord;
using internal::WorkerSpec;

std::string Describe(const std::map<std::string, double>& resources) {
  std::ostringstream out;
  out << "{";
  bool first = true;
  for (const auto& [k, v] : resources) {
    out << (first ? "" : ", ") << k << ": " << v;
    first = false;
  }
  return out.str() + "}";
}

std::string DefaultName() {
  // Under Slurm the job id names the run: a requeued job keeps its id and resumes.
  if (std::getenv("SLURM_JOB_ID") != nullptr) return "TorchTrainer_" + GetRuntimeContext().GetJobId();
  char buf[64];
  std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "TorchTrainer_%Y-%m-%d_%H-%M-%S", std::localtime(&now));
  return buf;
}

std::string DefaultStorage() {
  if (const char* s = std::getenv("PRISM_STORAGE_PATH"); s && *s) return s;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/prism_results";
}

struct Placement {
  std::vector<int> ranks;  // by world rank
  std::vector<int> local_rank, local_world_size, node_rank;
};

/// One rank per worker, each with `resources` free, ordered by the strategy.
Placement PickRanks(int n, const std::map<std::string, double>& resources,
                    const std::string& strategy) {
  std::vector<state::NodeState> nodes = state::ListNodes();
  std::map<std::string, std::vector<int>> fitting;  // node id -> ranks with room
  std::vector<std::string> node_order;
  std::ostringstream seen;
  for (const auto& node : nodes) {
    bool fits = true;
    for (const auto& [k, v] : resources) {
      auto it = node.resources_available.find(k);
      if (it == node.resources_available.end() || it->second + 1e-9 < v) fits = false;
    }
    seen << "\n  rank " << node.rank << " (" << node.node_id << "): "
         << Describe(node.resources_available) << (fits ? "" : " - too little");
    if (!fits) continue;
    if (!fitting.count(node.node_id)) node_order.push_back(node.node_id);
    fitting[node.node_id].push_back(node.rank);
  }
  std::vector<int> chosen;
  if (strategy == "PACK" || strategy == "STRICT_PACK") {
    std::stable_sort(node_order.begin(), node_order.end(), [&](const auto& a, const auto& b) {
      return fitting[a].size() > fitting[b].size();
    });
    for (const auto& node : node_order) {
      for (int r : fitting[node]) {
        if (static_cast<int>(chosen.size()) < n) chosen.push_back(r);
      }
      if (strategy == "STRICT_PACK") break;
    }
  } else if (strategy == "SPREAD" || strategy == "STRICT_SPREAD") {
    for (size_t round = 0; static_cast<int>(chosen.size()) < n; ++round) {
      bool any = false;
      for (const auto& node : node_order) {
        if (round < fitting[node].size() && static_cast<int>(chosen.size()) < n) {
          chosen.push_back(fitting[node][round]);
          any = true;
        }
      }
      if (!any || strategy == "STRICT_SPREAD") break;
    }
  } else {
    throw Error("prism::train: placement_strategy \"" + strategy +
                "\" is not one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD");
  }
  if (static_cast<int>(chosen.size()) < n) {
    throw Error("prism::train: " + std::to_string(n) + " workers need " + std::to_string(n) +
                " distinct ranks with " + Describe(resources) + " free each (placement " + strategy +
                "), but only " + std::to_string(chosen.size()) +
                " qualify. Start more ranks (mpirun -n, srun -n) or lower "
                "ScalingConfig::num_workers / resources_per_worker. Ranks now:" + seen.str());
  }
  Placement p;
  p.ranks = chosen;
  std::map<int, std::string> node_of;
  for (const auto& node : nodes) node_of[node.rank] = node.node_id;
  std::map<std::string, int> node_index, per_node;
  for (int r : chosen) {
    if (!node_index.count(node_of[r])) node_index.emplace(node_of[r], static_cast<int>(node_index.size()));
    p.local_rank.push_back(per_node[node_of[r]]++);
    p.node_rank.push_back(node_index[node_of[r]]);
  }
  for (int r : chosen) p.local_world_size.push_back(per_node[node_of[r]]);
  return p;
}

std::string FailureText(const std::exception& e) {
  if (auto* t = dynamic_cast<const TaskError*>(&e)) {
    return t->OriginalType() + ": " + t->OriginalMessage() + " (rank " + std::to_string(t->Rank()) + ")";
  }
  return e.what();
}

std::string FormatMetrics(const Metrics& m) {
  std::ostringstream out;
  bool first = true;
  for (const auto& [k, v] : m) {
    out << (first ? "" : ", ") << k << "=" << v;
    first = false;
  }
  return out.str();
}

/// Reads world rank 0's reports that appeared since the last call.
class ReportReader {
 public:
  ReportReader(std::string prefix, bool verbose) : prefix_(std::move(prefix)), verbose_(verbose) {}
  void Drain() {
    std::vector<std::string> keys = kv::List(prefix_);
    std::sort(keys.begin(), keys.end());
    for (const auto& key : keys) {
      if (!read_.insert(key).second) continue;
      auto value = kv::Get(key);
      if (!value) continue;
      auto record = prism::internal::Deserialize<ReportRecord>(value->data(), value->size());
      if (verbose_) {
        std::fprintf(stderr, "prism.train: report %lld (attempt %d): %s%s\n",
                     static_cast<long long>(record.iteration), record.attempt + 1,
                     FormatMetrics(record.metrics).c_str(),
                     record.checkpoint_path.empty()
                         ? ""
                         : (", checkpoint " + record.checkpoint_path).c_str());
      }
      last_ = record;
    }
  }
  const std::optional<ReportRecord>& last() const { return last_; }
  void Clear() { kv::Delete(prefix_, /*by_prefix=*/true); }

 private:
  std::string prefix_;
  bool verbose_;
  std::set<std::string> read_;
  std::optional<ReportRecord> last_;
};

std::atomic<int> g_next_tag{1 << 12};

/// A task of `fn` pinned to `rank` with no CPU (the rank's worker task holds its CPUs): how
/// the driver probes a worker's rank, and aborts or stops a group there.
template <typename F>
auto PinnedToRank(F fn, int rank) {
  auto task = prism::Task(fn);
  task.SetResource("CPU", 0).SetResource("rank:" + std::to_string(rank), 0.001);
  return task;
}

/// Runs fn(tag) on each of `ranks` (PinnedToRank).
std::vector<ObjectRef<bool>> OnEachRank(const std::vector<int>& ranks, bool (*fn)(int), int tag) {
  std::vector<ObjectRef<bool>> refs;
  for (int r : ranks) refs.push_back(PinnedToRank(fn, r).Remote(tag));
  return refs;
}

/// Checks that every worker's rank sees the storage path as the driver does (a shared file
/// system when they sit on other nodes): the driver and each rank write a probe file, and
/// each side must see the other's.
void CheckStorageShared(const std::string& dir, const std::vector<int>& ranks,
                        const std::string& run_id) {
  struct Cleanup {
    const std::string& dir;
    const std::string& run_id;
    const std::vector<int>& ranks;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove(internal::ProbeFile(dir, run_id, -1), ec);
      for (int r : ranks) std::filesystem::remove(internal::ProbeFile(dir, run_id, r), ec);
    }
  } cleanup{dir, run_id, ranks};
  {
    std::ofstream probe(internal::ProbeFile(dir, run_id, -1));
    probe << "driver\n";
    probe.flush();
    if (!probe) throw Error("prism::train: cannot write a probe file into " + dir);
  }
  std::vector<ObjectRef<std::string>> refs;
  for (int r : ranks) refs.push_back(PinnedToRank(internal::PrismTrainProbeStorage, r).Remote(dir, run_id, r));
  const std::string fix =
      ". Put storage_path on a file system every node mounts (your cluster's scratch or home "
      "file system), through RunConfig::storage_path or PRISM_STORAGE_PATH.";
  for (size_t i = 0; i < refs.size(); ++i) {
    std::string problem = *refs[i].Get(60000);
    if (!problem.empty()) throw Error("prism::train: storage_path is not shared: " + problem + fix);
    if (!std::filesystem::exists(internal::ProbeFile(dir, run_id, ranks[i]))) {
      throw Error("prism::train: storage_path is not shared: the driver cannot see the probe "
                  "file rank " + std::to_string(ranks[i]) + " wrote in " + dir + fix);
    }
  }
}

}  // namespace

TorchTrainer::TorchTrainer(TrainLoop train_loop_per_worker, TorchTrainerOptions options)
    : loop_(train_loop_per_worker), options_(std::move(options)) {}

Result TorchTrainer::Fit() {
  const ScalingConfig& scaling = options_.scaling_config;
  const RunConfig& run = options_.run_config;
  if (scaling.num_workers < 1) {
    throw Error("prism::train: ScalingConfig::num_workers is " + std::to_string(scaling.num_workers) +
                "; it must be at least 1");
  }
  if (loop_ == nullptr) throw Error("prism::train: TorchTrainer was given no training loop");
  std::string loop_name;
  try {
    loop_name = prism::internal::FunctionRegistry::Instance().NameOf(
        prism::internal::FunctionKey(loop_), "TorchTrainer");
  } catch (const std::exception&) {
    throw Error("prism::train: the training loop is not registered: add PRISM_REMOTE(<your loop>) "
                "next to its definition");
  }
  if (scaling.use_gpu && !HaveNccl()) {
    throw Error("prism::train: use_gpu needs the NCCL backend: build Prism with "
                "-DPRISM_WITH_NCCL=ON and a CUDA-enabled LibTorch");
  }
  std::map<std::string, double> resources = scaling.resources_per_worker;
  if (resources.empty()) {
    resources["CPU"] = 1;
    if (scaling.use_gpu) resources["GPU"] = 1;
  }
  const std::string name = run.name.empty() ? DefaultName() : run.name;
  const std::string storage = run.storage_path.empty() ? DefaultStorage() : run.storage_path;
  const std::string trial_dir = storage + "/" + name;
  internal::CheckpointStore store(trial_dir, run.checkpoint_config);  // checks it is writable

  std::string resume;
  if (options_.resume_from_checkpoint) {
    resume = options_.resume_from_checkpoint->path();
  } else if (auto latest = store.Latest()) {
    resume = latest->checkpoint.path();
    if (run.verbose) std::fprintf(stderr, "prism.train: resuming %s from %s\n", name.c_str(), resume.c_str());
  }

  std::random_device rd;
  char id[32];
  std::snprintf(id, sizeof id, "%08x%08x", rd(), static_cast<unsigned>(getpid()));
  const std::string run_id = id;
  ReportReader reports(internal::ReportPrefix(run_id), run.verbose);
  // From here SIGTERM on the driver stops the run after a checkpoint instead of ending it.
  platform::PreemptionGuard preemption_guard;
  auto preempted = [&](const std::string& why) {
    reports.Clear();
    auto latest = store.Latest();
    const std::string path = latest ? latest->checkpoint.path() : "";
    const int sig = PreemptionSignal();
    return TrainingPreemptedError(
        "prism::train: stopped on " + std::string(platform::SignalName(sig)) +
            " (preemption or time limit) " + why +
            (path.empty() ? "; no checkpoint yet" : "; latest checkpoint " + path) +
            ". Run it again with the same name and storage_path to resume (a job script "
            "requeues on exit status " + std::to_string(kExitPreempted) + ")",
        sig, path);
  };

  int failures = 0;
  for (int attempt = 0;; ++attempt) {
    Placement placement = PickRanks(scaling.num_workers, resources, scaling.placement_strategy);
    if (attempt == 0) CheckStorageShared(trial_dir, placement.ranks, run_id);
    if (PreemptionSignal() != 0) throw preempted("before the workers started");
    PlacementGroupCreationOptions pg_options;
    pg_options.strategy = PlacementStrategy::PACK;  // the rank pins below decide
    for (int r : placement.ranks) {
      std::unordered_map<std::string, double> bundle(resources.begin(), resources.end());
      bundle["rank:" + std::to_string(r)] = 0.001;
      pg_options.bundles.push_back(std::move(bundle));
    }
    PlacementGroup pg = CreatePlacementGroup(pg_options);
    if (!pg.Wait(60)) {
      RemovePlacementGroup(pg.GetID());
      throw Error("prism::train: could not reserve " + std::to_string(scaling.num_workers) +
                  " workers with " + Describe(resources) +
                  " within 60 s: other tasks or actors hold those resources");
    }
    const int tag = g_next_tag.fetch_add(16);
    std::vector<ObjectRef<internal::WorkerOutcome>> refs;
    for (int i = 0; i < scaling.num_workers; ++i) {
      WorkerSpec spec;
      spec.run_id = run_id;
      spec.attempt = attempt;
      spec.tag = tag;
      spec.world_ranks = placement.ranks;
      spec.world_rank = i;
      spec.local_rank = placement.local_rank[i];
      spec.local_world_size = placement.local_world_size[i];
      spec.node_rank = placement.node_rank[i];
      spec.experiment_name = name;
      spec.trial_dir = trial_dir;
      spec.loop_name = loop_name;
      spec.config = options_.train_loop_config;
      spec.resume_path = resume;
      spec.checkpoint_config = run.checkpoint_config;
      spec.use_gpu = scaling.use_gpu;
      auto task = prism::Task(internal::PrismTrainRunWorker).SetPlacementGroup(pg, i);
      task.SetName("train_worker_" + std::to_string(i));
      for (const auto& [k, v] : resources) task.SetResource(k, v);
      refs.push_back(task.Remote(spec));
    }

    // Wait for the workers, showing reports as they come; stop at the first failure.
    // On SIGUSR1/SIGTERM, ask the group to stop after its next checkpoint.
    std::string failure;
    std::vector<bool> finished(refs.size(), false);
    size_t done = 0;
    bool stop_asked = false, stopped_early = false;
    while (done < refs.size() && failure.empty()) {
      prism::Wait(refs, static_cast<int>(refs.size()), 200);
      reports.Drain();
      if (!stop_asked && PreemptionSignal() != 0) {
        stop_asked = true;
        OnEachRank(placement.ranks, internal::PrismTrainStopGroup, tag);
      }
      for (size_t i = 0; i < refs.size() && failure.empty(); ++i) {
        if (finished[i] || prism::Wait(std::vector{refs[i]}, 1, 0).ready.empty()) continue;
        finished[i] = true;
        ++done;
        try {
          stopped_early |= refs[i].Get(1000)->stopped;
        } catch (const std::exception& e) {
          failure = "worker " + std::to_string(i) + ": " + FailureText(e);
        }
      }
    }
    if (failure.empty()) {
      reports.Drain();
      RemovePlacementGroup(pg.GetID());
      if (stopped_early) throw preempted("after its checkpointed report");
      break;
    }

    // A worker failed: abort the others' collectives, wait for them to stop, start over.
    if (run.verbose) std::fprintf(stderr, "prism.train: %s\n", failure.c_str());
    std::vector<ObjectRef<bool>> aborts = OnEachRank(placement.ranks, internal::PrismTrainAbortGroup, tag);
    prism::Wait(aborts, static_cast<int>(aborts.size()), 30000);
    auto stopped = prism::Wait(refs, static_cast<int>(refs.size()), 120000);
    reports.Drain();
    RemovePlacementGroup(pg.GetID());
    if (stopped.ready.size() < refs.size()) {
      throw TrainingFailedError("prism::train: " + failure +
                                "; the other workers did not stop within 120 s of the abort "
                                "(a loop that never reaches a collective or Report cannot be "
                                "stopped)");
    }
    if (PreemptionSignal() != 0) throw preempted("while handling a failure (" + failure + ")");
    ++failures;
    if (run.failure_config.max_failures >= 0 && failures > run.failure_config.max_failures) {
      reports.Clear();
      throw TrainingFailedError("prism::train: training failed (" + std::to_string(failures) +
                                " failure(s), max_failures=" +
                                std::to_string(run.failure_config.max_failures) + "): " + failure);
    }
    if (auto latest = store.Latest()) resume = latest->checkpoint.path();
    if (run.verbose) {
      std::fprintf(stderr, "prism.train: restarting the group (failure %d of %s)%s%s\n", failures,
                   run.failure_config.max_failures < 0
                       ? "unlimited"
                       : std::to_string(run.failure_config.max_failures).c_str(),
                   resume.empty() ? "" : " from ", resume.c_str());
    }
  }
  reports.Clear();

  Result result;
  result.path = trial_dir;
  if (reports.last()) result.metrics = reports.last()->metrics;
  if (auto latest = store.Latest()) result.checkpoint = latest->checkpoint;
  for (const auto& kept : store.Best()) result.best_checkpoints.push_back({kept.checkpoint, kept.metrics});
  result.metrics_history = internal::ReadHistory(trial_dir);
  return result;
}

}  // namespace prism::train
