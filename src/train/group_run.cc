// RunGroup: the driver's side of a training run (group_run.h says what it does). A resume
// starts from the newest checkpoint whose files still match their commit's checksums;
// newer ones that do not are named on stderr and skipped, and a run whose checkpoints all
// fail stops.
//
// A lost rank (mpirun --enable-recovery, issue 44): the driver watches the workers' ranks
// in prism::state::ListNodes (at most every kLostRankPollMs while it waits for events) and
// treats a DEAD one as its worker's failure. It aborts the other workers (their
// collectives with the lost one throw CollectiveAborted) and waits for those only, since a
// worker whose process is gone never tells the group it ended. A lost rank never comes
// back into an MPI job, so the restart does not wait for one: it reserves a new group of as
// many of num_workers as the live ranks can hold, if that is at least min_workers, or
// fails at once saying what was lost and what to do. The new group's workers create a
// fresh communicator over their own ranks only (its key names the attempt), so the lost
// rank takes part in nothing again.
#include "train/group_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "prism/api.h"
#include "prism/checkpoint_store.h"
#include "prism/placement_group.h"
#include "prism/platform/invoke.h"
#include "prism/platform/panel.h"
#include "prism/platform/preemption.h"
#include "prism/platform/storage.h"
#include "prism/remote.h"
#include "prism/state.h"
#include "train/worker.h"

namespace prism::train::internal {
namespace {

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

/// The placement strategy named in ScalingConfig.
PlacementStrategy StrategyOf(const std::string& name) {
  static const std::map<std::string, PlacementStrategy> kStrategies = {
      {"PACK", PlacementStrategy::PACK}, {"SPREAD", PlacementStrategy::SPREAD},
      {"STRICT_PACK", PlacementStrategy::STRICT_PACK}, {"STRICT_SPREAD", PlacementStrategy::STRICT_SPREAD}};
  auto it = kStrategies.find(name);
  if (it == kStrategies.end()) {
    throw Error("prism::train: placement_strategy \"" + name +
                "\" is not one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD");
  }
  return it->second;
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

/// Prints a report as the driver receives it.
void ShowReport(const ReportRecord& record) {
  std::fprintf(stderr, "prism.train: report %lld (attempt %d): %s%s\n",
               static_cast<long long>(record.iteration), record.attempt + 1,
               FormatMetrics(record.metrics).c_str(),
               record.checkpoint_path.empty() ? "" : (", checkpoint " + record.checkpoint_path).c_str());
}

/// The run on the job's dashboard (platform::PublishPanel "train/<name>"): its workers, its
/// attempts and the latest reports, at most every 2 s (and at each change of state) while
/// the dashboard is on. Never throws.
class TrainPanel {
 public:
  TrainPanel(std::string kind, std::string name) : kind_(std::move(kind)), name_(std::move(name)) {}
  void Workers(const std::vector<int>& ranks) {
    ranks_.clear();
    for (int r : ranks) ranks_ += (ranks_.empty() ? "" : ",") + std::to_string(r);
  }
  void Report(const ReportRecord& record) {
    reports_.push_back(record);
    if (reports_.size() > kRows) reports_.pop_front();
    ++num_reports_;
    if (!record.checkpoint_path.empty()) {
      checkpoint_ = record.checkpoint_path;
      ++num_checkpoints_;
    }
    for (const auto& [k, v] : record.metrics) {
      auto it = curves_.find(k);
      if (it == curves_.end()) {
        if (curves_.size() == kMaxCurves) continue;
        it = curves_.emplace(k, std::vector<std::pair<double, double>>{}).first;
      }
      auto& points = it->second;
      points.emplace_back(static_cast<double>(record.iteration), v);
      if (points.size() > 2 * kCurvePoints) {  // every other point: the whole run, evenly
        size_t kept = 0;
        for (size_t i = 0; i < points.size(); i += 2) points[kept++] = points[i];
        points.resize(kept);
      }
    }
    Publish(false);
  }
  void State(const std::string& state, int failures) {
    state_ = state;
    failures_ = failures;
    Publish(true);
  }

 private:
  static constexpr size_t kRows = 20;
  void Publish(bool now) {
    const auto t = std::chrono::steady_clock::now();
    if (!now && t - last_ < std::chrono::seconds(2)) return;
    last_ = t;
    if (!platform::DashboardOn()) return;
    try {
      platform::Panel p;
      p.title = "Train: " + name_ + " (" + kind_ + ", " + state_ + ")";
      p.lines.push_back("Workers on ranks " + ranks_ + "; failures so far: " + std::to_string(failures_));
      if (!checkpoint_.empty()) p.lines.push_back("Latest checkpoint: " + checkpoint_);
      p.columns = {"report", "attempt"};
      std::vector<std::string> keys;
      for (const auto& r : reports_) {
        for (const auto& [k, v] : r.metrics) {
          if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
        }
      }
      p.columns.insert(p.columns.end(), keys.begin(), keys.end());
      p.columns.push_back("checkpoint");
      for (const auto& r : reports_) {
        std::vector<std::string> row = {std::to_string(r.iteration), std::to_string(r.attempt + 1)};
        for (const auto& k : keys) {
          auto it = r.metrics.find(k);
          std::ostringstream v;
          if (it != r.metrics.end()) v << it->second;
          row.push_back(v.str());
        }
        row.push_back(r.checkpoint_path.empty() ? "" : "yes");
        p.rows.push_back(std::move(row));
      }
      AddMetrics(p);
      platform::PublishPanel("train/" + name_, p);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism.train: the dashboard's Train panel was not updated: %s\n", e.what());
    }
  }
  /// Progress for /metrics (Ray Train exports none: Prism's names) and each metric's curve
  /// by report for the dashboard's plots.
  void AddMetrics(platform::Panel& p) const {
    auto add = [&](const char* name, const char* type, const char* help, double value) {
      platform::PanelMetric m;
      m.name = name;
      m.type = type;
      m.help = help;
      m.labels = {{"run", name_}};
      m.value = value;
      p.metrics.push_back(std::move(m));
    };
    add("prism_train_reports", "counter", "Reports (train::Report calls) the run's driver received.",
        static_cast<double>(num_reports_));
    add("prism_train_checkpoints", "counter", "Reports that carried a checkpoint.", static_cast<double>(num_checkpoints_));
    add("prism_train_failures", "gauge", "Worker group failures the run has restarted from so far.", failures_);
    for (const auto& [k, v] : reports_.empty() ? Metrics{} : reports_.back().metrics) {
      platform::PanelMetric m;
      m.name = "prism_train_metric";
      m.type = "gauge";
      m.help = "The latest report's metrics, by name.";
      m.labels = {{"run", name_}, {"metric", k}};
      m.value = v;
      p.metrics.push_back(std::move(m));
    }
    for (const auto& [k, points] : curves_) p.series.push_back({k, "metrics by report", points});
  }

  static constexpr size_t kMaxCurves = 16;
  static constexpr size_t kCurvePoints = 500;
  std::string kind_, name_, ranks_, state_ = "starting", checkpoint_;
  int failures_ = 0;
  uint64_t num_reports_ = 0, num_checkpoints_ = 0;
  std::map<std::string, std::vector<std::pair<double, double>>> curves_;
  std::deque<ReportRecord> reports_;
  std::chrono::steady_clock::time_point last_{};
};

/// The checkpoint a run resumes from ("" for none): the newest of `store` that verifies.
/// Says on stderr which newer ones are corrupt and why, and then which one it resumes from
/// (also without them if `announce`). Throws TrainingFailedError, listing what was tried,
/// when the run has checkpoints and none verifies: starting over would silently throw the
/// run's work away.
std::string NewestValidCheckpoint(const CheckpointStore& store, const std::string& name,
                                  bool announce) {
  ResumePoint point = store.NewestValid();
  for (const auto& bad : point.rejected) {
    std::fprintf(stderr, "prism.train: checkpoint %s is corrupt, not resuming from it: %s\n",
                 bad.path.c_str(), bad.problem.c_str());
  }
  if (!point.checkpoint) {
    if (point.rejected.empty()) return "";
    std::string tried;
    for (const auto& bad : point.rejected) tried += "\n  " + bad.path + ": " + bad.problem;
    throw TrainingFailedError(
        "prism::train: run " + name + " has no intact checkpoint to resume from; tried, newest "
        "first:" + tried + "\nMove the damaged checkpoint directories out of " + store.run_dir() +
        " (a run without checkpoints starts from scratch), or restore them from a copy");
  }
  const std::string path = point.checkpoint->checkpoint.path();
  if (!point.rejected.empty()) {
    std::fprintf(stderr,
                 "prism.train: resuming %s from %s instead, the newest intact checkpoint (%zu "
                 "newer one%s corrupt)\n",
                 name.c_str(), path.c_str(), point.rejected.size(),
                 point.rejected.size() == 1 ? " is" : "s are");
  } else if (announce) {
    std::fprintf(stderr, "prism.train: resuming %s from %s\n", name.c_str(), path.c_str());
  }
  if (!point.verified) {
    std::fprintf(stderr,
                 "prism.train: checkpoint %s has no checksums (committed by an older Prism), so "
                 "it cannot be verified\n",
                 path.c_str());
  }
  return path;
}

/// Checks a checkpoint given as TorchTrainerOptions::resume_from_checkpoint, if it was
/// committed (a directory of the user's own has no record to check against).
void CheckChosenCheckpoint(const Checkpoint& checkpoint) {
  if (!std::filesystem::exists(checkpoint.path() + "/" + kCheckpointRecordFile)) return;
  CheckpointVerification v = VerifyCheckpoint(checkpoint.path());
  if (!v.problem.empty()) {
    throw TrainingFailedError("prism::train: resume_from_checkpoint " + checkpoint.path() +
                              " is corrupt: " + v.problem + ". Pick another checkpoint");
  }
}

/// The run directory (storage_path/name) of a Fit that may fail: made by the store if it
/// was not there, it goes again, with a storage path made for it, when the Fit ends in an
/// exception having written nothing into it, so a failed start leaves no empty directory
/// behind. One with results or checkpoints stays, and WhatIsLeft names it for the error.
class RunDirectoryGuard {
 public:
  RunDirectoryGuard(std::string storage, std::string trial_dir)
      : storage_(std::move(storage)), trial_dir_(std::move(trial_dir)) {
    std::error_code ec;
    made_storage_ = !std::filesystem::exists(storage_, ec);
    made_trial_dir_ = !std::filesystem::exists(trial_dir_, ec);
  }
  RunDirectoryGuard(const RunDirectoryGuard&) = delete;
  RunDirectoryGuard& operator=(const RunDirectoryGuard&) = delete;
  ~RunDirectoryGuard() {
    if (kept_ || !made_trial_dir_) return;
    // rmdir removes only an empty directory: never anything a worker wrote meanwhile.
    if (::rmdir(trial_dir_.c_str()) == 0 && made_storage_) ::rmdir(storage_.c_str());
  }
  /// The Fit ended well: the directory is its result.
  void Keep() { kept_ = true; }
  /// For a failure's message: where the run's results and checkpoints are, if it has any.
  std::string WhatIsLeft() const {
    std::error_code ec;
    if (std::filesystem::is_empty(trial_dir_, ec) || ec) return "";
    return ". The run's results and checkpoints so far are in " + trial_dir_ +
           " (a Fit with the same name and storage_path resumes from them)";
  }

 private:
  std::string storage_, trial_dir_;
  bool made_storage_ = false, made_trial_dir_ = false, kept_ = false;
};

/// How often the driver looks for lost ranks while it waits for its workers' events.
constexpr int64_t kLostRankPollMs = 200;

/// The ranks of `ranks` the job has lost (DEAD in the state API: only in recovery mode,
/// otherwise a lost rank ends the job), and how many workers with `per_worker` each the
/// live ranks could hold, one per rank. Never throws (a state call that fails sees none).
struct RankCensus {
  std::vector<int> lost;
  int live_capacity = 0;
};
RankCensus TakeCensus(const std::vector<int>& ranks, const std::map<std::string, double>& per_worker) {
  RankCensus census;
  try {
    for (const auto& node : state::ListNodes()) {
      if (node.state == "DEAD") {
        if (std::find(ranks.begin(), ranks.end(), node.rank) != ranks.end()) census.lost.push_back(node.rank);
        continue;
      }
      bool fits = true;
      for (const auto& [k, v] : per_worker) {
        auto it = node.resources_total.find(k);
        fits &= it != node.resources_total.end() && it->second >= v;
      }
      census.live_capacity += fits ? 1 : 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism.train: could not read the ranks' states: %s\n", e.what());
  }
  return census;
}

}  // namespace

Result RunGroup(const GroupRun& spec) {
  const ScalingConfig& scaling = spec.scaling;
  const RunConfig& run = spec.run;
  const int min_workers = scaling.min_workers == 0 ? scaling.num_workers : scaling.min_workers;
  if (min_workers < 1 || min_workers > scaling.num_workers) {
    throw Error("prism::train: ScalingConfig::min_workers is " + std::to_string(scaling.min_workers) +
                "; it must be 0 (= num_workers) or between 1 and num_workers (" +
                std::to_string(scaling.num_workers) + ")");
  }
  std::map<std::string, double> resources = scaling.resources_per_worker;
  if (resources.empty()) {
    resources["CPU"] = 1;
    if (scaling.use_gpu) resources["GPU"] = 1;
  }
  const std::string name = run.name.empty() ? DefaultRunName(spec.kind) : run.name;
  const std::string storage = run.storage_path.empty() ? DefaultStoragePath() : run.storage_path;
  const std::string trial_dir = storage + "/" + name;
  RunDirectoryGuard run_dir_guard(storage, trial_dir);
  CheckpointStore store(trial_dir, run.checkpoint_config);  // checks it is writable

  std::string resume;
  if (spec.resume_from_checkpoint) {
    CheckChosenCheckpoint(*spec.resume_from_checkpoint);
    resume = spec.resume_from_checkpoint->path();
  } else {
    resume = NewestValidCheckpoint(store, name, run.verbose);
  }

  std::random_device rd;
  char id[32];
  std::snprintf(id, sizeof id, "%08x%08x", rd(), static_cast<unsigned>(getpid()));
  const std::string run_id = id;
  // From here SIGTERM on the driver stops the run after a checkpoint instead of ending it,
  // and either signal arrives as a kPreempted event.
  platform::PreemptionGuard preemption_guard;
  std::optional<ReportRecord> last_report;
  auto preempted = [&](const std::string& why) {
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

  // One worker per rank: the workers of a run join one MPI communicator. The first group
  // has num_workers; one made again after a lost rank has what the ranks left can hold.
  platform::WorkerGroupOptions group_options;
  group_options.num_workers = scaling.num_workers;
  group_options.resources_per_worker = resources;
  group_options.strategy = StrategyOf(scaling.placement_strategy);
  group_options.one_worker_per_rank = true;
  group_options.name = "train_" + name;
  group_options.preemption_events = true;
  std::unique_ptr<platform::WorkerGroup> group;
  std::vector<int> ranks;
  TrainPanel panel(spec.kind, name);
  auto make_group = [&](int num_workers) {
    group_options.num_workers = num_workers;
    try {
      group = std::make_unique<platform::WorkerGroup>(group_options);
    } catch (const ResourceError& e) {
      throw Error("prism::train: " + std::to_string(num_workers) + " workers need " +
                  std::to_string(num_workers) + " distinct ranks with " + Describe(resources) +
                  " each (placement " + scaling.placement_strategy + "), which this cluster can never "
                  "hold. Start more ranks (mpirun -n, srun -n) or lower ScalingConfig::num_workers / "
                  "resources_per_worker. (" + e.what() + ")");
    }
    ranks.clear();
    for (const auto& w : group->workers()) ranks.push_back(w.rank);
    panel.Workers(ranks);
    // Every worker's rank must see the run's directory as the driver does (a shared file
    // system when they sit on other nodes).
    platform::CheckStorageShared(trial_dir,
                                 {"prism::train", "storage_path", "RunConfig::storage_path or PRISM_STORAGE_PATH"},
                                 ranks);
    if (spec.check_workers) spec.check_workers(group->workers());
  };
  make_group(scaling.num_workers);

  int failures = 0;
  std::vector<std::string> failure_list;
  for (;;) {
    if (PreemptionSignal() != 0) throw preempted("before the workers started");
    AttemptInfo info;
    info.run_id = run_id;
    info.attempt = failures;
    info.name = name;
    info.trial_dir = trial_dir;
    info.resume = resume;
    info.workers = &group->workers();
    group->Start(spec.loop_entry, spec.make_config(info));
    panel.State("running attempt " + std::to_string(failures + 1), failures);

    // Reports and the workers' ends come as events, in order; stop at the first failure,
    // or at the first worker whose rank the job lost (it never sends its end).
    // A signal before this attempt started, or during it, asks the group to stop after its
    // next checkpoint.
    std::string failure;
    std::vector<int> lost;  // the workers' ranks lost
    std::set<int> ended;    // the workers of this attempt that sent their end
    bool stop_asked = false, stopped_early = false, stopped_by_caller = false;
    auto ask_stop = [&] {
      if (stop_asked) return;
      stop_asked = true;
      group->RequestStop();
    };
    auto look_for_lost_ranks = [&] {
      lost = TakeCensus(ranks, resources).lost;
      for (int r : lost) {
        const size_t worker = static_cast<size_t>(std::find(ranks.begin(), ranks.end(), r) - ranks.begin());
        if (!failure.empty() || ended.count(static_cast<int>(worker))) continue;
        failure = "worker " + std::to_string(worker) + ": its rank " + std::to_string(r) +
                  " was lost (its process ended or stopped answering; DEAD in prism::state::ListNodes)";
      }
    };
    if (PreemptionSignal() != 0) ask_stop();
    auto last_census = std::chrono::steady_clock::now();
    while (group->Running() && failure.empty()) {
      auto e = group->Next(kLostRankPollMs);  // events drive it; the timeout looks for lost ranks
      if (std::chrono::steady_clock::now() - last_census >= std::chrono::milliseconds(kLostRankPollMs)) {
        last_census = std::chrono::steady_clock::now();
        look_for_lost_ranks();
      }
      if (!e) continue;
      switch (e->kind) {
        case platform::WorkerEvent::kReport: {
          auto record = platform::FromBytes<ReportRecord>(e->bytes);
          if (run.verbose) ShowReport(record);
          panel.Report(record);
          if (run.on_report && !stopped_by_caller) {
            std::optional<Checkpoint> ckpt;
            if (!record.checkpoint_path.empty()) ckpt = Checkpoint::FromDirectory(record.checkpoint_path);
            if (!run.on_report(record.metrics, ckpt)) {
              stopped_by_caller = true;
              ask_stop();
            }
          }
          last_report = std::move(record);
          break;
        }
        case platform::WorkerEvent::kPreempted: ask_stop(); break;
        case platform::WorkerEvent::kFinished:
          ended.insert(e->worker);
          stopped_early |= platform::FromBytes<WorkerOutcome>(e->bytes).stopped;
          break;
        case platform::WorkerEvent::kFailed:
          ended.insert(e->worker);
          if (failure.empty()) {
            failure = "worker " + std::to_string(e->worker) + ": " + e->bytes + " (rank " +
                      std::to_string(ranks.at(static_cast<size_t>(e->worker))) + ")";
          }
          break;
      }
    }
    if (failure.empty()) {
      if (stopped_early && !stopped_by_caller) {
        panel.State("preempted", failures);
        throw preempted("after its checkpointed report");
      }
      panel.State("finished", failures);
      break;
    }
    panel.State("failed: " + failure, failures + 1);
    const auto failed_at = std::chrono::steady_clock::now();

    // A worker failed: abort the others' collectives, wait for them to stop, start over.
    // Workers on lost ranks never send their end: wait for the others only.
    if (run.verbose) std::fprintf(stderr, "prism.train: %s\n", failure.c_str());
    look_for_lost_ranks();
    std::set<int> waited;  // the workers whose end must come
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (std::find(lost.begin(), lost.end(), ranks[i]) == lost.end()) waited.insert(static_cast<int>(i));
    }
    for (int i : ended) waited.erase(i);
    group->Abort(0);  // sends the aborts; the events come below
    const auto abort_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!waited.empty() && group->Running() && std::chrono::steady_clock::now() < abort_deadline) {
      auto e = group->Next(kLostRankPollMs);
      if (!e) {
        look_for_lost_ranks();  // a second rank lost meanwhile: stop waiting for its worker
        for (int r : lost) waited.erase(static_cast<int>(std::find(ranks.begin(), ranks.end(), r) - ranks.begin()));
        continue;
      }
      if (e->kind == platform::WorkerEvent::kFinished || e->kind == platform::WorkerEvent::kFailed) {
        waited.erase(e->worker);
      } else if (e->kind == platform::WorkerEvent::kReport) {  // what the others reported before they stopped
        auto record = platform::FromBytes<ReportRecord>(e->bytes);
        if (run.verbose) ShowReport(record);
        last_report = std::move(record);
      }
    }
    if (!waited.empty() && group->Running()) {
      throw TrainingFailedError("prism::train: " + failure +
                                "; the other workers did not stop within 120 s of the abort "
                                "(a loop that never reaches a collective or Report cannot be "
                                "stopped)");
    }
    if (run.verbose) {
      std::fprintf(stderr, "prism.train: the other workers stopped %.2f s after the failure was seen\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - failed_at).count());
    }
    failure_list.push_back(failure);
    if (PreemptionSignal() != 0) throw preempted("while handling a failure (" + failure + ")");
    ++failures;
    if (run.failure_config.max_failures >= 0 && failures > run.failure_config.max_failures) {
      throw TrainingFailedError("prism::train: training failed (" + std::to_string(failures) +
                                " failure(s), max_failures=" +
                                std::to_string(run.failure_config.max_failures) + "): " + failure +
                                run_dir_guard.WhatIsLeft());
    }
    if (std::string newest = NewestValidCheckpoint(store, name, false); !newest.empty()) {
      resume = newest;
    }
    if (!lost.empty()) {
      // The group's reservation holds a bundle on a lost rank for good: a new group, on the
      // live ranks, as large as they allow within min_workers..num_workers.
      std::string lost_text;
      for (int r : lost) lost_text += (lost_text.empty() ? "" : ", ") + std::to_string(r);
      const int capacity = TakeCensus(ranks, resources).live_capacity;
      const int n = std::min(scaling.num_workers, capacity);
      if (n < min_workers) {
        throw TrainingFailedError(
            "prism::train: training cannot go on: rank" + std::string(lost.size() > 1 ? "s " : " ") +
            lost_text + " of the workers' ranks " + (lost.size() > 1 ? "were" : "was") +
            " lost, and the live ranks can hold only " + std::to_string(capacity) + " worker(s) with " +
            Describe(resources) + " each, fewer than min_workers=" + std::to_string(min_workers) +
            ". Lost ranks do not come back into a running job: set ScalingConfig::min_workers to at "
            "most " + std::to_string(std::max(capacity, 1)) + " to train on fewer workers, or start the "
            "job again with enough ranks" + run_dir_guard.WhatIsLeft());
      }
      if (run.verbose) {
        std::fprintf(stderr, "prism.train: rank %s lost: making a group of %d worker(s) on the ranks left\n",
                     lost_text.c_str(), n);
      }
      group.reset();  // gives its reservation back
      try {
        make_group(n);  // waits up to reserve_timeout_s for the live ranks' resources
      } catch (const Error& e) {
        throw TrainingFailedError("prism::train: training cannot go on: rank " + lost_text +
                                  " was lost, and a group of " + std::to_string(n) +
                                  " worker(s) on the live ranks could not be reserved: " + e.what() +
                                  run_dir_guard.WhatIsLeft());
      }
    }
    if (run.verbose) {
      std::fprintf(stderr, "prism.train: restarting the group (failure %d of %s)%s%s after %.2f s\n", failures,
                   run.failure_config.max_failures < 0
                       ? "unlimited"
                       : std::to_string(run.failure_config.max_failures).c_str(),
                   resume.empty() ? "" : " from ", resume.c_str(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - failed_at).count());
    }
  }

  run_dir_guard.Keep();
  Result result;
  result.path = trial_dir;
  if (last_report) result.metrics = last_report->metrics;
  if (auto latest = store.Latest()) result.checkpoint = latest->checkpoint;
  for (const auto& kept : store.Best()) result.best_checkpoints.push_back({kept.checkpoint, kept.metrics});
  result.metrics_history = ReadHistory(trial_dir);
  result.failures = std::move(failure_list);
  return result;
}

}  // namespace prism::train::internal
