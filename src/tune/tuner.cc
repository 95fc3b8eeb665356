// The Tuner: the driver-side control loop of an experiment. One thread (the caller of
// Fit) owns every trial; trials run as tasks anywhere in the job and talk back on one
// channel (reports, then an end), and each trial task's completion is posted to the same
// channel from an OnReady callback, so the loop blocks in one place and never polls.
//
//   FillSlots: while fewer trials run than fit in the cluster (or max_concurrent_trials),
//              ask the scheduler which pending/paused trial runs next, else the searcher
//              for a new one; launch it as a task with the trial's resources.
//   OnResult:  record (journal, result.json, progress.csv), tell the searcher, check
//              RunConfig::stopper and RunConfig::stop, ask the scheduler: continue, pause or
//              stop (a stop or pause cancels the task; its next Report commits and ends it).
//   StopAll:   each turn of the loop the stopper may end the experiment: every trial stops.
//   OnEnd:     the trial's last message: finished, stopped (-> paused or terminated, as
//              asked) or failed (-> retried from its checkpoint, or an error).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "prism/api.h"
#include "prism/checkpoint_store.h"
#include "prism/internal/json.h"
#include "prism/platform/channel.h"
#include "prism/platform/invoke.h"
#include "prism/platform/panel.h"
#include "prism/platform/preemption.h"
#include "prism/platform/storage.h"
#include "prism/runtime_context.h"
#include "prism/tune/tuner.h"
#include "tune/journal.h"
#include "tune/metric_mode.h"
#include "tune/status_table.h"
#include "tune/trial_protocol.h"

namespace prism::tune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using internal::TrialMessage;
using internal::TrialSpec;

constexpr const char* kJournalFile = "experiment_state.jsonl";
constexpr int kJournalVersion = 1;
/// How long a finished trial task may precede its end message before the trial counts as
/// lost (it failed outside the trial, before it could say how it ended).
constexpr auto kEndGrace = std::chrono::seconds(3);
/// The same when the task's process died (its rank was lost, or it exited): no end message
/// can follow but one already in flight, so the trial is retried almost at once.
constexpr auto kProcessDiedGrace = std::chrono::milliseconds(200);
/// A trial's end message after the driver cancelled it for preemption: how long to wait.
constexpr auto kPreemptWait = std::chrono::seconds(120);

json ToJson(const Config& c) {
  json j = json::object();
  for (const auto& [k, v] : c.Values()) j[k] = v;
  return j;
}

Config ConfigOf(const json& j) {
  Config c;
  for (const auto& [k, v] : j.items()) c.Set(k, v.get<std::string>());
  return c;
}

// Metrics follow Prism's JSON convention (prism/internal/json.h): a NaN or an infinity is
// written as null and read back as NaN.
json ToJson(const Metrics& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

Metrics MetricsOf(const json& j) {
  Metrics m;
  for (const auto& [k, v] : j.items()) {
    // A journal written before the convention holds such numbers as text ("nan", "inf").
    m[k] = v.is_string() ? std::strtod(v.get<std::string>().c_str(), nullptr)
                         : prism::internal::JsonDouble(v);
  }
  return m;
}

TrialStatus StatusOf(const std::string& name) {
  for (TrialStatus s : {TrialStatus::kPending, TrialStatus::kRunning, TrialStatus::kPaused,
                        TrialStatus::kTerminated, TrialStatus::kError}) {
    if (name == StatusName(s)) return s;
  }
  throw Error("prism::tune: the experiment journal names an unknown trial status \"" + name + "\"");
}

/// A searcher's or scheduler's kind, for the journal's header and Restore's messages.
std::string KindOf(const Searcher& s) {
  if (dynamic_cast<const BasicVariantGenerator*>(&s)) return "BasicVariantGenerator";
  if (dynamic_cast<const TPESearch*>(&s)) return "TPESearch";
  if (dynamic_cast<const ConcurrencyLimiter*>(&s)) return "ConcurrencyLimiter";
  return "CustomSearcher";
}

std::string KindOf(const TrialScheduler& s) {
  if (dynamic_cast<const FIFOScheduler*>(&s)) return "FIFOScheduler";
  if (dynamic_cast<const AsyncHyperBandScheduler*>(&s)) return "AsyncHyperBandScheduler";
  if (dynamic_cast<const HyperBandScheduler*>(&s)) return "HyperBandScheduler";
  if (dynamic_cast<const MedianStoppingRule*>(&s)) return "MedianStoppingRule";
  if (dynamic_cast<const PopulationBasedTraining*>(&s)) return "PopulationBasedTraining";
  return "CustomScheduler";
}

/// Per-trial bookkeeping on top of what schedulers see.
struct TrialState : Trial {
  size_t index = 0;
  std::string dir;
  int attempt = -1;              // runs started, minus one
  int failures = 0;
  std::optional<ObjectRef<std::string>> ref;
  bool stop_requested = false;
  TrialStatus after_stop = TrialStatus::kTerminated;
  std::optional<Clock::time_point> task_done;  // the task finished; its end message is due
  std::string task_error;                      // how the task ended, if it threw
  bool process_died = false;                   // ... as a crashed worker (a lost rank)
  std::vector<Metrics> history;
  std::string error;
  bool restart_fresh = false;   // restart_errored: ignore the checkpoint once
  std::string decisions;        // the running attempt's answer channel ("" = none)
  int64_t checkpoint_iteration = 0;  // the report that committed `checkpoint`
  double checkpoint_time_s = 0;
  std::vector<std::string> csv_columns;
  bool files_written = false;  // since the last FlushResultFiles
  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, CloseFile> result_file, progress_file;  // open while it runs
};

/// Writes a file whole (params.json).
void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw Error("prism::tune: cannot write " + path);
}

std::string CsvCell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string NumberText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

}  // namespace

// ---- The experiment ----------------------------------------------------------------------

struct Tuner::Impl : TrialRunner {
  Trainable trainable;
  std::string trainable_name;
  ParamSpace space;
  TuneConfig config;
  RunConfig run;
  std::string path;
  std::shared_ptr<Searcher> searcher;
  std::shared_ptr<TrialScheduler> scheduler;
  std::vector<std::unique_ptr<TrialState>> trials;
  std::unordered_map<std::string, TrialState*> by_id;
  std::unique_ptr<internal::Journal> journal;

  // Restore
  bool restored = false;
  bool fitted = false;               // Fit returned: the histories went to its ResultGrid
  std::string searcher_state;        // the last saved, to restore at Fit
  std::string scheduler_state;
  size_t scheduler_known = 0;        // trials the saved scheduler state had seen
  double elapsed_before = 0;         // seconds the experiment ran before a restore

  // Fit
  std::unique_ptr<platform::Channel> channel;
  Clock::time_point started;
  size_t running = 0;
  size_t capacity = 1;
  bool searcher_done = false;
  std::string fatal;                 // ends the experiment (fail_fast, a metric never reported)
  bool stopper_failed = false;       // the stopper threw: `fatal` says how, Fit throws TuneError
  bool searcher_failed = false;      // the searcher threw: `fatal` says how, Fit throws TuneError
  bool stopped_all = false;          // the stopper's StopAll ended the experiment
  std::string last_stopper_save;
  bool stopper_save_warned = false;
  std::string last_scheduler_save;
  Clock::time_point last_scheduler_save_at;
  Clock::time_point last_status;
  Clock::time_point last_panel;      // the dashboard's Tune panel, every 2 s while it is on
  std::vector<TrialState*> written;  // result files written since the last flush

  // TrialRunner
  std::vector<Trial*> Trials() override {
    std::vector<Trial*> out;
    out.reserve(trials.size());
    for (auto& t : trials) out.push_back(t.get());
    return out;
  }
  void StopTrial(Trial& trial) override;
  double Now() const override {
    return elapsed_before + std::chrono::duration<double>(Clock::now() - started).count();
  }

  void Validate();
  void OpenJournal();
  void JournalStatus(TrialState& t, bool sync);
  void SaveSchedulerState(bool force);
  void SaveStopperState();
  /// Asks RunConfig::stopper's StopAll; if true, ends every trial (Ray's stop_all).
  void AskStopAll();
  void StopperFailed(const std::string& where, const std::exception& e);
  /// Runs `call` (a searcher call made while trials may run). If it throws (a Python
  /// searcher's exception, say), the experiment ends as on a stopper's: no new trials, running
  /// ones stop, Fit throws TuneError; false then.
  template <typename F>
  bool AskSearcher(const char* what, F&& call) {
    try {
      call();
      return true;
    } catch (const std::exception& e) {
      searcher_done = true;
      if (fatal.empty()) {
        searcher_failed = true;
        fatal = std::string("the searcher raised in ") + what + ", which ends the experiment: " + e.what();
      }
      return false;
    }
  }
  size_t Capacity() const;
  int64_t TrialLimit() const;
  TrialState* NewTrial(Config config);
  bool AddTrial();
  void FillSlots();
  void Launch(TrialState& t);
  void RequestStop(TrialState& t, TrialStatus after);
  void OnMessage(const TrialMessage& m);
  void OnResult(TrialState& t, const TrialMessage& m);
  /// Records a result and decides on it; false if RunConfig::stop ended the trial (which
  /// the trial saw too, so it waits for no answer).
  bool Decide(TrialState& t, const TrialMessage& m);
  void OnEnd(TrialState& t, TrialMessage::Outcome outcome, const std::string& error);
  void Complete(TrialState& t);
  void WriteResultFiles(TrialState& t, const Metrics& result);
  /// Handles one channel message (a batch of one trial's results, maybe its end): the
  /// batch's journal events go out in one write, its result files are flushed once.
  void OnBatch(const std::string& bytes);
  void FlushResultFiles();
  void CheckLostTrials();
  void PrintStatus(bool final);
  internal::StatusView MakeStatusView(bool final);
  /// The trials on the job's dashboard (platform::PublishPanel), if it is on; never throws.
  void PublishPanel(bool final);
  /// The experiment's progress (metrics) and its trials' curves (series), on `panel`.
  void AddPanelMetrics(platform::Panel& panel);
  /// The results, each trial's history moved into them (copying 9,600 reports cost
  /// milliseconds at Fit's return): Fit's last step.
  ResultGrid TakeResults();
  ResultGrid Fit();
};

void Tuner::Impl::Validate() {
  if (!trainable.fn) throw Error("prism::tune::Tuner: the trainable is null");
  trainable_name = platform::RegisteredName(trainable.fn, "prism::tune::Tuner");
  ValidateParamSpace(space);
  if (!config.mode.empty()) internal::CheckMode(config.mode, "TuneConfig");
  if (!config.metric.empty() && config.mode.empty()) {
    throw Error("prism::tune::Tuner: TuneConfig has metric \"" + config.metric +
                "\" but no mode; set mode to \"max\" or \"min\"");
  }
  if (config.metric.empty() && !config.mode.empty()) {
    throw Error("prism::tune::Tuner: TuneConfig has mode \"" + config.mode +
                "\" but no metric; name the reported metric to optimize");
  }
  if (config.num_samples == 0 || config.num_samples < -1) {
    throw Error("prism::tune::Tuner: num_samples is " + std::to_string(config.num_samples) +
                "; pass a positive count, or -1 for no limit");
  }
  if (config.max_concurrent_trials < 0) {
    throw Error("prism::tune::Tuner: max_concurrent_trials is negative; pass 0 (as many as fit) or more");
  }
  if (config.time_budget_s < 0) throw Error("prism::tune::Tuner: time_budget_s is negative");
  for (const auto& [name, amount] : trainable.resources) {
    if (amount < 0) {
      throw Error("prism::tune: WithResources got " + name + " = " + NumberText(amount) +
                  "; amounts must be >= 0");
    }
  }
  if (run.failure_config.max_failures < -1) {
    throw Error("prism::tune: FailureConfig::max_failures must be -1 (no limit) or >= 0");
  }
  if (!searcher) searcher = config.search_alg;
  if (!scheduler) scheduler = config.scheduler;
  if (!searcher) searcher = std::make_shared<BasicVariantGenerator>();
  if (!scheduler) scheduler = std::make_shared<FIFOScheduler>();
  if (run.name.empty()) run.name = DefaultRunName("tune");
  if (run.storage_path.empty()) run.storage_path = DefaultStoragePath();
  if (path.empty()) path = run.storage_path + "/" + run.name;
}

void Tuner::Impl::OpenJournal() {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    throw Error("prism::tune: cannot create the experiment directory " + path + ": " + ec.message() +
                "; set RunConfig::storage_path (or PRISM_STORAGE_PATH) to a writable directory");
  }
  // Trials run on every rank and write their results and checkpoints here, which the
  // driver reads: a node-local directory fails only at the end (issue 46). Checked before
  // the journal is written, so that a fixed path starts afresh.
  platform::CheckStorageShared(
      path, {"prism::tune", "storage_path", "RunConfig::storage_path or PRISM_STORAGE_PATH"});
  const std::string file = path + "/" + kJournalFile;
  const bool fresh = !fs::exists(file) || fs::file_size(file, ec) == 0;
  if (!restored && !fresh) {
    throw Error("prism::tune: " + path + " already holds an experiment; resume it with "
                "Tuner::Restore(\"" + path + "\", ...), or give RunConfig::name a new name");
  }
  journal = std::make_unique<internal::Journal>(file);
  if (fresh) {
    json stop = json::object();
    for (const auto& [k, v] : run.stop) stop[k] = v;
    json space_text = json::object();  // what Restore compares its param_space with
    for (const auto& [name, domain] : space) space_text[name] = domain.ToString();
    journal->Append({{"e", "experiment"},
                     {"v", kJournalVersion},
                     {"trainable", trainable_name},
                     {"metric", config.metric},
                     {"mode", config.mode},
                     {"num_samples", config.num_samples},
                     {"max_concurrent_trials", config.max_concurrent_trials},
                     {"time_budget_s", config.time_budget_s},
                     {"seed", config.seed},
                     {"searcher", KindOf(*searcher)},
                     {"scheduler", KindOf(*scheduler)},
                     {"resources", trainable.resources},
                     {"stop", stop},
                     {"stopper", run.stopper != nullptr},
                     {"max_failures", run.failure_config.max_failures},
                     {"fail_fast", run.failure_config.fail_fast},
                     {"num_to_keep", run.checkpoint_config.num_to_keep},
                     {"checkpoint_score_attribute", run.checkpoint_config.checkpoint_score_attribute},
                     {"checkpoint_score_order", run.checkpoint_config.checkpoint_score_order},
                     {"name", run.name},
                     {"storage_path", run.storage_path},
                     {"verbose", run.verbose},
                     {"status_interval_s", run.status_interval_s},
                     {"param_space", space_text}});
  } else {
    journal->Append({{"e", "restore"}, {"elapsed_s", elapsed_before}});
  }
  journal->Sync(true);
}

void Tuner::Impl::SaveStopperState() {
  if (!run.stopper) return;
  std::string state;
  try {
    state = run.stopper->SaveState();
  } catch (const std::exception& e) {  // a Python stopper that does not pickle
    if (!stopper_save_warned) {
      std::fprintf(stderr, "prism.tune: the stopper's state cannot be saved (%s); Restore will start it over\n",
                   e.what());
    }
    stopper_save_warned = true;
    return;
  }
  if (state == last_stopper_save) return;
  last_stopper_save = state;
  journal->Append({{"e", "stopper"}, {"state", state}});
}

void Tuner::Impl::StopperFailed(const std::string& where, const std::exception& e) {
  if (!fatal.empty()) return;
  stopper_failed = true;
  fatal = "the stopper raised " + where + ", which ends the experiment: " + e.what();
}

void Tuner::Impl::AskStopAll() {
  bool stop = false;
  try {
    stop = run.stopper->StopAll();
  } catch (const std::exception& e) {
    StopperFailed("in StopAll", e);
    return;
  }
  if (!stop) return;
  stopped_all = true;
  searcher_done = true;
  if (run.verbose > 0) {
    std::printf("prism.tune: the stopper ended the experiment: every trial stops\n");
    std::fflush(stdout);
  }
  for (auto& t : trials) StopTrial(*t);  // running ones at their next report, the others now
}

void Tuner::Impl::JournalStatus(TrialState& t, bool sync) {
  json e = {{"e", "status"}, {"id", t.id}, {"status", StatusName(t.status)},
            {"attempt", t.attempt}, {"failures", t.failures}, {"time_total_s", t.time_total_s}};
  if (!t.error.empty()) e["error"] = t.error;
  if (!t.restore_from.empty()) e["restore_from"] = t.restore_from;
  e["config"] = ToJson(t.config);  // PBT may have changed it
  journal->Append(e);
  if (sync) journal->Sync(true);
}

void Tuner::Impl::SaveSchedulerState(bool force) {
  last_scheduler_save_at = Clock::now();
  std::string state = scheduler->SaveState();
  if (state == last_scheduler_save && !force) return;
  last_scheduler_save = state;
  journal->Append({{"e", "scheduler"}, {"state", state}, {"known", trials.size()}});
}

size_t Tuner::Impl::Capacity() const {
  std::map<std::string, double> demand = trainable.resources;
  if (demand.empty()) demand["CPU"] = 1;
  const std::map<std::string, double> cluster = ClusterResources();
  double fit = 1e18;
  for (const auto& [name, amount] : demand) {
    if (amount <= 0) continue;
    auto it = cluster.find(name);
    const double have = it == cluster.end() ? 0 : it->second;
    if (have + 1e-9 < amount) {
      std::ostringstream c;
      for (const auto& [k, v] : cluster) c << " " << k << "=" << v;
      throw Error("prism::tune: a trial needs " + name + " = " + NumberText(amount) +
                  " but the whole cluster has " + NumberText(have) + " (cluster:" + c.str() +
                  "); lower WithResources or run on more ranks");
    }
    fit = std::min(fit, std::floor(have / amount + 1e-9));
  }
  size_t n = fit >= 1e17 ? 1024 : static_cast<size_t>(fit);
  if (config.max_concurrent_trials > 0) n = std::min(n, static_cast<size_t>(config.max_concurrent_trials));
  return std::max<size_t>(n, 1);
}

int64_t Tuner::Impl::TrialLimit() const {
  const int64_t total = searcher->TotalTrials();
  if (total >= 0) return total;
  return config.num_samples;  // -1: none
}

TrialState* Tuner::Impl::NewTrial(Config cfg) {
  auto t = std::make_unique<TrialState>();
  t->index = trials.size();
  char id[32];
  std::snprintf(id, sizeof id, "_%05zu", t->index);
  t->id = run.name + id;
  t->config = std::move(cfg);
  t->dir = path + "/" + t->id;
  std::error_code ec;
  fs::create_directories(t->dir, ec);
  if (ec) throw Error("prism::tune: cannot create the trial directory " + t->dir + ": " + ec.message());
  WriteFile(t->dir + "/params.json", ToJson(t->config).dump(2) + "\n");
  TrialState* raw = t.get();
  by_id[raw->id] = raw;
  trials.push_back(std::move(t));
  return raw;
}

bool Tuner::Impl::AddTrial() {
  if (searcher_done) return false;
  const int64_t limit = TrialLimit();
  if (limit >= 0 && static_cast<int64_t>(trials.size()) >= limit) {
    searcher_done = true;
    return false;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "_%05zu", trials.size());
  Suggestion s;
  if (!AskSearcher("Suggest", [&] { s = searcher->Suggest(run.name + buf); })) return false;
  if (s.kind == Suggestion::kFinished) searcher_done = true;
  if (s.kind != Suggestion::kConfig) return false;
  TrialState* t = NewTrial(std::move(s.config));
  scheduler->OnTrialAdd(*this, *t);
  std::string state;
  AskSearcher("SaveState", [&] { state = searcher->SaveState(); });
  journal->Append({{"e", "trial"}, {"id", t->id}, {"config", ToJson(t->config)}, {"searcher_state", state}});
  return true;
}

void Tuner::Impl::FillSlots() {
  // Trials are created ahead of the slots, as Ray does (up to max(16, slots) pending for
  // the basic generator, one for a model-based searcher, which learns from each result):
  // a scheduler that compares trials (HyperBand's brackets) sees them before they run.
  const size_t max_pending = dynamic_cast<BasicVariantGenerator*>(searcher.get()) != nullptr
                                 ? std::max<size_t>(16, capacity) : 1;
  size_t pending = static_cast<size_t>(std::count_if(trials.begin(), trials.end(), [](const auto& t) {
    return t->status == TrialStatus::kPending;
  }));
  while (pending < max_pending && AddTrial()) ++pending;
  if (!fatal.empty()) return;  // the searcher failed
  while (running < capacity) {
    std::vector<Trial*> candidates;
    bool any_pending = false;
    for (auto& t : trials) {
      if ((t->status == TrialStatus::kPending || t->status == TrialStatus::kPaused) && !t->ref) {
        candidates.push_back(t.get());
        any_pending |= t->status == TrialStatus::kPending;
      }
    }
    Trial* next = candidates.empty() ? nullptr : scheduler->ChooseTrialToRun(*this, candidates);
    if (next == nullptr) {
      if (any_pending || !AddTrial()) return;
      continue;
    }
    Launch(*static_cast<TrialState*>(next));
  }
}

void Tuner::Impl::Launch(TrialState& t) {
  TrialSpec spec;
  spec.trainable = trainable_name;
  spec.trial_id = t.id;
  spec.trial_dir = t.dir;
  spec.channel = channel->name();
  spec.config = t.config;
  spec.attempt = ++t.attempt;
  spec.iteration = t.iterations;
  spec.time_total_s = t.time_total_s;
  spec.checkpoint_config = run.checkpoint_config;
  if (!t.restore_from.empty()) {
    // PBT: start from a copy of another trial's checkpoint (whose own retention may
    // delete the original at any time).
    const std::string copy = t.dir + "/exploited_" + std::to_string(t.attempt);
    std::error_code ec;
    fs::remove_all(copy, ec);
    fs::copy(t.restore_from, copy, fs::copy_options::recursive, ec);
    if (ec) {
      std::fprintf(stderr, "prism.tune: trial %s: cannot copy checkpoint %s (%s); it goes on from its own\n",
                   t.id.c_str(), t.restore_from.c_str(), ec.message().c_str());
      spec.restore = t.checkpoint;
    } else {
      spec.restore = copy;
    }
    t.restore_from.clear();
  } else if (!t.restart_fresh && !t.checkpoint.empty()) {
    // Resumed from its checkpoint, the trial repeats the reports made after it: count
    // from the checkpoint's iteration.
    spec.restore = t.checkpoint;
    spec.iteration = t.checkpoint_iteration;
    spec.time_total_s = t.checkpoint_time_s;
  } else {
    spec.iteration = 0;
    spec.time_total_s = 0;
  }
  t.restart_fresh = false;
  // The attempt reports every iteration after the one it starts from again: the history
  // keeps only the reports before it, so it matches the trial's state (a resume from an
  // older checkpoint made metrics_history read 1, 2, 2, 3).
  std::erase_if(t.history, [&](const Metrics& r) {
    auto it = r.find("training_iteration");
    return it != r.end() && it->second > static_cast<double>(spec.iteration);
  });
  spec.args = trainable.args;
  spec.stop = run.stop;
  spec.driver_rank = GetRuntimeContext().GetRank();
  t.decisions.clear();
  if (dynamic_cast<FIFOScheduler*>(scheduler.get()) == nullptr || run.stopper) {
    t.decisions = channel->name() + "/" + t.id + "/" + std::to_string(t.attempt);
    spec.decisions = t.decisions;
  }
  std::map<std::string, double> resources = trainable.task_resources.value_or(trainable.resources);
  if (resources.empty()) resources["CPU"] = 1;
  std::vector<ObjectRef<std::string>> parameters;
  for (const auto& [name, ref] : trainable.parameters) {
    spec.parameter_names.push_back(name);
    parameters.push_back(ref);
  }
  // No retries by the core: a failed trial (its rank lost, say) is retried here, within
  // FailureConfig::max_failures, as a new attempt from its latest checkpoint (Ray Tune's
  // trial actors have max_restarts 0 too). The core would rerun this attempt from the
  // checkpoint it started from, its reports counted again from there, and no failure seen.
  t.ref = prism::Task(internal::RunTrial).SetName("tune trial " + t.id).SetResources(resources)
              .SetMaxRetries(0).Remote(platform::ToBytes(spec), parameters);
  t.status = TrialStatus::kRunning;
  t.stop_requested = false;
  t.task_done.reset();
  t.task_error.clear();
  t.process_died = false;
  ++running;
  JournalStatus(t, false);
  // The task's completion joins the reports on the channel: a rank that died before the
  // trial could send its end is noticed without polling.
  TrialMessage done;
  done.kind = TrialMessage::kTaskDone;
  done.trial_id = t.id;
  done.attempt = t.attempt;
  ObjectRef<std::string> ref = *t.ref;
  const std::string name = channel->name();
  ref.OnReady([ref, name, done]() mutable {
    try {
      ref.Get(0);
    } catch (...) {
      done.error = platform::DescribeException(std::current_exception());
      done.outcome = TrialMessage::kFailed;
      try {
        throw;
      } catch (const TaskError& e) {
        done.process_died = e.OriginalType() == "WorkerCrashed";
      } catch (...) {
      }
    }
    try {
      platform::Publish(name, platform::ToBytes(internal::TrialBatch{done}));
    } catch (const std::exception&) {  // Shutdown under way: nobody is listening
    }
  });
}

void Tuner::Impl::RequestStop(TrialState& t, TrialStatus after) {
  if (!t.ref) return;
  if (t.stop_requested) {  // a pause under way becomes a stop (HyperBand's losers)
    if (after == TrialStatus::kTerminated) t.after_stop = after;
    return;
  }
  t.stop_requested = true;
  t.after_stop = after;
  prism::Cancel(*t.ref);
}

void Tuner::Impl::StopTrial(Trial& trial) {
  auto& t = static_cast<TrialState&>(trial);
  if (t.status == TrialStatus::kRunning) {
    RequestStop(t, TrialStatus::kTerminated);
  } else if (t.status == TrialStatus::kPending || t.status == TrialStatus::kPaused) {
    t.status = TrialStatus::kTerminated;
    Complete(t);
    JournalStatus(t, false);
  }
}

void Tuner::Impl::OnMessage(const TrialMessage& m) {
  auto it = by_id.find(m.trial_id);
  if (it == by_id.end()) return;
  TrialState& t = *it->second;
  if (m.attempt != t.attempt || t.status != TrialStatus::kRunning) return;  // an older run's
  if (m.kind == TrialMessage::kResult) {
    OnResult(t, m);
  } else if (m.kind == TrialMessage::kEnd) {
    OnEnd(t, static_cast<TrialMessage::Outcome>(m.outcome), m.error);
  } else if (!t.task_done) {  // the task finished; its end message should be on its way
    t.task_done = Clock::now();
    t.task_error = m.error;
    t.process_died = m.process_died;
  }
}

void Tuner::Impl::WriteResultFiles(TrialState& t, const Metrics& result) {
  // The files stay open while the trial runs (an open and close per report was most of
  // the driver's time at tens of thousands of results a second); flushed per report.
  if (!t.result_file) t.result_file.reset(std::fopen((t.dir + "/result.json").c_str(), "a"));
  if (!t.progress_file) t.progress_file.reset(std::fopen((t.dir + "/progress.csv").c_str(), "a"));
  if (!t.result_file || !t.progress_file) {
    throw Error("prism::tune: cannot append to the result files in " + t.dir + "; is the disk full?");
  }
  json line = ToJson(result);
  line["trial_id"] = t.id;
  line["config"] = ToJson(t.config);
  const std::string text = line.dump() + "\n";
  std::fwrite(text.data(), 1, text.size(), t.result_file.get());
  std::string row;
  if (t.csv_columns.empty()) {
    for (const auto& [k, v] : result) t.csv_columns.push_back(k);
    std::fseek(t.progress_file.get(), 0, SEEK_END);
    if (std::ftell(t.progress_file.get()) == 0) {
      for (size_t i = 0; i < t.csv_columns.size(); ++i) row += (i ? "," : "") + CsvCell(t.csv_columns[i]);
      row += "\n";
    }
  }
  for (size_t i = 0; i < t.csv_columns.size(); ++i) {
    auto v = result.find(t.csv_columns[i]);
    if (i) row += ',';
    if (v != result.end()) row += NumberText(v->second);
  }
  row += "\n";
  std::fwrite(row.data(), 1, row.size(), t.progress_file.get());
  if (!t.files_written) written.push_back(&t);
  t.files_written = true;  // flushed after the batch (FlushResultFiles)
}

void Tuner::Impl::FlushResultFiles() {
  for (TrialState* t : written) {
    if (t->result_file) std::fflush(t->result_file.get());
    if (t->progress_file) std::fflush(t->progress_file.get());
    t->files_written = false;
  }
  written.clear();
}

void Tuner::Impl::OnBatch(const std::string& bytes) {
  struct Release {  // even if a result's handling throws
    Impl& impl;
    ~Release() {
      impl.FlushResultFiles();
      try {
        impl.journal->Release();
      } catch (const Error&) {  // a full disk: the next Append or Sync reports it
      }
    }
  } release{*this};
  journal->Hold();
  for (const auto& m : platform::FromBytes<internal::TrialBatch>(bytes)) OnMessage(m);
}

void Tuner::Impl::OnResult(TrialState& t, const TrialMessage& m) {
  // The trial waits for this answer unless RunConfig::stop ended it on its own.
  if (Decide(t, m) && !t.decisions.empty()) {
    internal::TrialDecision d;
    d.iteration = m.iteration;
    d.stop = t.stop_requested || !fatal.empty();
    platform::Publish(t.decisions, platform::ToBytes(d));
  }
}

bool Tuner::Impl::Decide(TrialState& t, const TrialMessage& m) {
  Metrics result = m.metrics;
  result["training_iteration"] = static_cast<double>(m.iteration);
  result["time_this_iter_s"] = m.time_this_iter_s;
  result["time_total_s"] = m.time_total_s;
  t.last_result = result;
  t.iterations = m.iteration;
  t.time_total_s = m.time_total_s;
  if (!m.checkpoint.empty()) {
    t.checkpoint = m.checkpoint;
    t.checkpoint_iteration = m.iteration;
    t.checkpoint_time_s = m.time_total_s;
  }
  t.history.push_back(result);
  WriteResultFiles(t, result);
  json e = {{"e", "result"}, {"id", t.id}, {"attempt", t.attempt}, {"metrics", ToJson(m.metrics)},
            {"iteration", m.iteration}, {"time_total_s", m.time_total_s},
            {"time_this_iter_s", m.time_this_iter_s}};
  if (!m.checkpoint.empty()) e["checkpoint"] = m.checkpoint;
  journal->Append(e);
  if (t.stop_requested) return true;  // a report that crossed the stop: recorded, not decided on
  if (!config.metric.empty() && result.find(config.metric) == result.end()) {
    std::string have;
    for (const auto& [k, v] : m.metrics) have += (have.empty() ? "" : ", ") + k;
    fatal = "trial " + t.id + " reported a result without the metric \"" + config.metric +
            "\" that TuneConfig optimizes (it reported: " + (have.empty() ? "nothing" : have) +
            "); report it in every tune::Report, or set TuneConfig::metric to one it reports";
    return true;
  }
  // The stopper sees every result (Ray asks it first), even one RunConfig::stop ends.
  bool stopper_stops = false;
  if (run.stopper) {
    try {
      stopper_stops = run.stopper->ShouldStop(t.id, result);
    } catch (const std::exception& e) {
      StopperFailed("on trial " + t.id + "'s result", e);
      return true;
    }
  }
  for (const auto& [key, bound] : run.stop) {
    auto v = result.find(key);
    if (v != result.end() && v->second >= bound) {
      AskSearcher("OnTrialResult", [&] { searcher->OnTrialResult(t.id, result); });
      RequestStop(t, TrialStatus::kTerminated);
      return false;
    }
  }
  if (stopper_stops) {  // the trial waits for this answer
    AskSearcher("OnTrialResult", [&] { searcher->OnTrialResult(t.id, result); });
    RequestStop(t, TrialStatus::kTerminated);
    return true;
  }
  Decision decision = Decision::kContinue;
  try {
    AskSearcher("OnTrialResult", [&] { searcher->OnTrialResult(t.id, result); });
    decision = scheduler->OnTrialResult(*this, t, result);
  } catch (const std::exception& e) {  // a result the scheduler cannot use (no time_attr)
    fatal = "trial " + t.id + "'s result was refused: " + e.what();
    return true;
  }
  switch (decision) {
    case Decision::kContinue: break;
    case Decision::kPause: RequestStop(t, TrialStatus::kPaused); break;
    case Decision::kStop: RequestStop(t, TrialStatus::kTerminated); break;
  }
  return true;
}

void Tuner::Impl::Complete(TrialState& t) {
  scheduler->OnTrialComplete(*this, t, t.last_result);
  AskSearcher("OnTrialComplete", [&] {
    searcher->OnTrialComplete(t.id, t.config, t.history.empty() ? nullptr : &t.last_result, false);
  });
}

void Tuner::Impl::OnEnd(TrialState& t, TrialMessage::Outcome outcome, const std::string& error) {
  t.ref.reset();
  t.result_file.reset();
  t.progress_file.reset();
  --running;
  if (outcome == TrialMessage::kFailed && !t.stop_requested) {
    ++t.failures;
    const int max = run.failure_config.max_failures;
    if (max < 0 || t.failures <= max) {
      std::fprintf(stderr, "prism.tune: trial %s failed (%s); retrying from %s (failure %d of %s)\n",
                   t.id.c_str(), error.c_str(),
                   t.checkpoint.empty() ? "the start" : t.checkpoint.c_str(), t.failures,
                   max < 0 ? "unlimited" : std::to_string(max + 1).c_str());
      t.status = TrialStatus::kPending;
      JournalStatus(t, false);
      return;
    }
    t.status = TrialStatus::kError;
    t.error = error;
    std::fprintf(stderr, "prism.tune: trial %s failed: %s\n", t.id.c_str(), error.c_str());
    scheduler->OnTrialError(*this, t);
    AskSearcher("OnTrialComplete", [&] {
      searcher->OnTrialComplete(t.id, t.config, t.history.empty() ? nullptr : &t.last_result, true);
    });
    if (run.failure_config.fail_fast && fatal.empty()) {
      fatal = "trial " + t.id + " failed and FailureConfig::fail_fast is set: " + error;
    }
    JournalStatus(t, false);
    return;
  }
  const bool finished = outcome == TrialMessage::kFinished || !t.stop_requested;
  t.status = finished ? TrialStatus::kTerminated : t.after_stop;
  t.stop_requested = false;
  if (t.status == TrialStatus::kTerminated) Complete(t);
  JournalStatus(t, false);
}

void Tuner::Impl::CheckLostTrials() {
  const auto now = Clock::now();
  for (auto& t : trials) {
    if (!t->ref || !t->task_done || now - *t->task_done < (t->process_died ? kProcessDiedGrace : kEndGrace)) {
      continue;
    }
    // No end message: the task failed outside the trial (its rank died), or was cancelled
    // before it started.
    const bool cancelled = t->task_error.find("TaskCancelledError") != std::string::npos;
    if (cancelled && t->stop_requested) {
      OnEnd(*t, TrialMessage::kStopped, "");
    } else {
      OnEnd(*t, TrialMessage::kFailed,
            t->task_error.empty() ? "the trial's task ended without reporting how" : t->task_error);
    }
  }
}

ResultGrid Tuner::Impl::Fit() {
  if (fitted) {
    throw Error("prism::tune::Tuner::Fit: this Tuner ran its experiment already (its results are in the "
                "ResultGrid that Fit returned); make a new Tuner, or Tuner::Restore(ExperimentPath(), ...) "
                "to read the experiment again");
  }
  started = Clock::now();
  last_status = started;
  OpenJournal();
  searcher->Setup(space, config.metric, config.mode, config.num_samples, config.seed);
  scheduler->SetSearchProperties(config.metric, config.mode);
  if (restored) {
    if (!searcher_state.empty()) searcher->RestoreState(searcher_state);
    if (!scheduler_state.empty()) scheduler->RestoreState(scheduler_state);
    for (auto& t : trials) {
      if (t->index >= scheduler_known) scheduler->OnTrialAdd(*this, *t);
      if (t->status == TrialStatus::kTerminated || t->status == TrialStatus::kError) {
        searcher->OnTrialComplete(t->id, t->config, t->history.empty() ? nullptr : &t->last_result,
                                  t->status == TrialStatus::kError);
      }
    }
  }
  capacity = Capacity();
  static std::atomic<uint64_t> experiments{0};
  channel = std::make_unique<platform::Channel>("prism.tune/" + run.name + "/" +
                                                std::to_string(experiments++));
  std::atomic<int> signal{0};
  platform::PreemptionGuard guard;
  platform::PreemptionHook hook([&signal](int s) { signal.store(s); });
  if (run.verbose > 0) {
    std::printf("prism.tune: experiment %s: %s trials at most %zu at a time, results in %s\n",
                run.name.c_str(), TrialLimit() < 0 ? "unlimited" : std::to_string(TrialLimit()).c_str(),
                capacity, path.c_str());
    std::fflush(stdout);
  }
  std::optional<Clock::time_point> preempt_since;
  bool budget_spent = false;
  while (true) {
    if (signal.load() != 0 && !preempt_since) {
      preempt_since = Clock::now();
      for (auto& t : trials) {
        if (t->status == TrialStatus::kRunning) RequestStop(*t, TrialStatus::kPaused);
      }
    }
    if (config.time_budget_s > 0 && !budget_spent && Now() >= config.time_budget_s) {
      budget_spent = true;
      for (auto& t : trials) {
        if (t->status == TrialStatus::kRunning) RequestStop(*t, TrialStatus::kTerminated);
      }
    }
    if (run.stopper && !stopped_all && !preempt_since && fatal.empty()) AskStopAll();
    if (!fatal.empty()) {
      for (auto& t : trials) {
        if (t->status == TrialStatus::kRunning) RequestStop(*t, TrialStatus::kTerminated);
      }
    }
    const bool draining = preempt_since || budget_spent || stopped_all || !fatal.empty();
    if (!draining) FillSlots();
    if (running == 0) break;
    if (preempt_since && Clock::now() - *preempt_since > kPreemptWait) break;
    if (auto m = channel->Next(200)) {
      OnBatch(m->bytes);
      for (auto& more : channel->Drain()) OnBatch(more.bytes);
    }
    CheckLostTrials();
    journal->Sync(false);
    if (run.verbose > 0 && Clock::now() - last_status >= std::chrono::duration<double>(run.status_interval_s)) {
      PrintStatus(false);
    }
    if (Clock::now() - last_panel >= std::chrono::seconds(2)) PublishPanel(false);
    if (Clock::now() - last_scheduler_save_at >= std::chrono::seconds(1)) {
      SaveSchedulerState(false);
      SaveStopperState();
    }
  }
  SaveSchedulerState(true);
  SaveStopperState();
  journal->Append({{"e", "fit_end"}, {"elapsed_s", Now()}, {"preempted", preempt_since.has_value()}});
  journal->Sync(true);
  if (preempt_since) {
    const int s = signal.load();
    throw TunePreemptedError("prism::tune: " + std::string(platform::SignalName(s)) +
                             " arrived: every running trial stopped at a report with its checkpoint "
                             "and the experiment is saved in " + path + "; exit with "
                             "prism::kExitPreempted and resume with Tuner::Restore",
                             s, path);
  }
  if (run.verbose > 0) PrintStatus(true);
  PublishPanel(true);
  if (!fatal.empty()) {
    if (stopper_failed || searcher_failed || (run.failure_config.fail_fast && fatal.find("fail_fast") != std::string::npos)) {
      throw TuneError("prism::tune: " + fatal);
    }
    throw Error("prism::tune: " + fatal);
  }
  return TakeResults();
}

void Tuner::Impl::PrintStatus(bool final) {
  last_status = Clock::now();
  std::fputs(internal::FormatStatus(MakeStatusView(final)).c_str(), stdout);
  std::fflush(stdout);
}

void Tuner::Impl::PublishPanel(bool final) {
  last_panel = Clock::now();
  if (!platform::DashboardOn()) return;
  try {
    platform::Panel panel = internal::StatusPanel(MakeStatusView(final));
    AddPanelMetrics(panel);
    platform::PublishPanel("tune/" + run.name, panel);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism::tune: the dashboard's Tune panel was not updated: %s\n", e.what());
  }
}

// Progress for /metrics (Ray Tune exports none of its own: Prism's names) and each trial's
// metric by iteration for the dashboard's plots (the first kMaxPanelSeries trials, the
// dashboard thins each to 500 points).
void Tuner::Impl::AddPanelMetrics(platform::Panel& panel) {
  std::map<std::string, int> by_status;
  for (const char* status : {"PENDING", "RUNNING", "PAUSED", "TERMINATED", "ERROR"}) by_status[status] = 0;
  uint64_t results = 0;
  for (const auto& t : trials) {
    ++by_status[StatusName(t->status)];
    results += t->history.size();
  }
  for (const auto& [status, n] : by_status) {
    platform::PanelMetric m;
    m.name = "prism_tune_trials";
    m.type = "gauge";
    m.help = "Trials of each Tune experiment, by status.";
    m.labels = {{"experiment", run.name}, {"state", status}};
    m.value = n;
    panel.metrics.push_back(std::move(m));
  }
  platform::PanelMetric reported;
  reported.name = "prism_tune_results";
  reported.type = "counter";
  reported.help = "Results (tune::Report calls) the experiment's trials made.";
  reported.labels = {{"experiment", run.name}};
  reported.value = static_cast<double>(results);
  panel.metrics.push_back(std::move(reported));
  if (config.metric.empty()) return;
  const std::string plot = config.metric + " by training_iteration";
  constexpr size_t kMaxTrialCurves = 32;
  for (const auto& t : trials) {
    if (panel.series.size() == kMaxTrialCurves) break;
    platform::PanelSeries curve;
    curve.name = t->id;
    curve.plot = plot;
    for (const Metrics& result : t->history) {
      auto x = result.find("training_iteration");
      auto y = result.find(config.metric);
      if (x != result.end() && y != result.end()) curve.points.emplace_back(x->second, y->second);
    }
    if (!curve.points.empty()) panel.series.push_back(std::move(curve));
  }
}

internal::StatusView Tuner::Impl::MakeStatusView(bool final) {
  internal::StatusView view;
  view.experiment = run.name;
  view.path = path;
  view.elapsed_s = Now();
  view.metric = config.metric;
  view.mode = config.mode;
  view.scheduler_line = scheduler->DebugString();
  view.capacity = capacity;
  view.running = running;
  view.total = TrialLimit();
  view.final = final;
  for (auto& t : trials) view.trials.push_back(t.get());
  for (const auto& [name, domain] : space) {
    if (domain.kind() != Domain::Kind::kConstant) view.params.push_back(name);
  }
  return view;
}

ResultGrid Tuner::Impl::TakeResults() {
  fitted = true;
  std::vector<Result> out;
  out.reserve(trials.size());
  for (const auto& t : trials) {
    Result r;
    r.trial_id = t->id;
    r.config = t->config;
    r.metrics = t->last_result;
    r.metrics_history = std::move(t->history);
    r.checkpoint = t->checkpoint;
    r.path = t->dir;
    r.error = t->error;
    r.status = t->status;
    out.push_back(std::move(r));
  }
  return ResultGrid(std::move(out), config.metric, config.mode, path);
}

// ---- Public --------------------------------------------------------------------------------

Trainable WithResources(Trainable trainable, std::map<std::string, double> resources) {
  for (const auto& [name, amount] : resources) {
    if (amount < 0 || !std::isfinite(amount)) {
      throw Error("prism::tune::WithResources: " + name + " = " + NumberText(amount) +
                  "; amounts must be finite and >= 0");
    }
  }
  trainable.resources = std::move(resources);
  return trainable;
}

Tuner::Tuner() : impl_(std::make_unique<Impl>()) {}

Tuner::Tuner(Trainable trainable, ParamSpace param_space, TuneConfig tune_config, RunConfig run_config)
    : impl_(std::make_unique<Impl>()) {
  impl_->trainable = std::move(trainable);
  impl_->space = std::move(param_space);
  impl_->config = std::move(tune_config);
  impl_->run = std::move(run_config);
  impl_->Validate();
}

Tuner::~Tuner() = default;
Tuner::Tuner(Tuner&&) noexcept = default;
Tuner& Tuner::operator=(Tuner&&) noexcept = default;

ResultGrid Tuner::Fit() {
  if (!impl_) throw Error("prism::tune::Tuner: Fit on a moved-from Tuner");
  return impl_->Fit();
}

const std::string& Tuner::ExperimentPath() const { return impl_->path; }

bool Tuner::CanRestore(const std::string& path) {
  std::error_code ec;
  const std::string file = path + "/" + kJournalFile;
  if (!fs::exists(file, ec)) return false;
  try {
    auto events = internal::Journal::Read(file);
    return !events.empty() && events[0].value("e", "") == "experiment";
  } catch (const std::exception&) {
    return false;
  }
}

Tuner Tuner::Restore(const std::string& path, Trainable trainable, ParamSpace param_space,
                     bool resume_unfinished, bool resume_errored, bool restart_errored,
                     TuneConfig tune_config, std::shared_ptr<Stopper> stopper) {
  const std::string file = path + "/" + kJournalFile;
  if (!fs::exists(file)) {
    throw Error("prism::tune::Tuner::Restore: " + path + " holds no experiment (no " + kJournalFile +
                "); pass the directory Fit printed (storage_path/name)");
  }
  auto events = internal::Journal::Read(file);
  if (events.empty() || events[0].value("e", "") != "experiment") {
    throw Error("prism::tune::Tuner::Restore: " + file + " does not start with an experiment header; "
                "it was not written by prism::tune or is damaged");
  }
  const json& h = events[0];
  Tuner tuner;
  Impl& impl = *tuner.impl_;
  impl.restored = true;
  impl.path = path;
  impl.trainable = std::move(trainable);
  impl.space = std::move(param_space);
  impl.config = std::move(tune_config);
  impl.config.metric = h.value("metric", "");
  impl.config.mode = h.value("mode", "");
  impl.config.num_samples = h.value("num_samples", 1);
  impl.config.max_concurrent_trials = h.value("max_concurrent_trials", 0);
  impl.config.time_budget_s = h.value("time_budget_s", 0.0);
  impl.config.seed = h.value("seed", uint64_t{0});
  impl.run.name = h.value("name", "");
  impl.run.storage_path = h.value("storage_path", "");
  impl.run.verbose = h.value("verbose", 1);
  impl.run.status_interval_s = h.value("status_interval_s", 5.0);
  const json stop = h.value("stop", json::object());  // items() below must not outlive it
  for (const auto& [k, v] : stop.items()) {
    impl.run.stop[k] = prism::internal::JsonDouble(v);
  }
  if (h.value("stopper", false) && !stopper) {
    throw Error("prism::tune::Tuner::Restore: the experiment ran with a RunConfig::stopper; pass one built "
                "the same way as Restore's `stopper` (its state comes from the journal)");
  }
  impl.run.stopper = std::move(stopper);
  impl.run.failure_config.max_failures = h.value("max_failures", 0);
  impl.run.failure_config.fail_fast = h.value("fail_fast", false);
  impl.run.checkpoint_config.num_to_keep = h.value("num_to_keep", 0);
  impl.run.checkpoint_config.checkpoint_score_attribute = h.value("checkpoint_score_attribute", "");
  impl.run.checkpoint_config.checkpoint_score_order = h.value("checkpoint_score_order", "max");
  if (impl.trainable.resources.empty()) {
    impl.trainable.resources = h.value("resources", std::map<std::string, double>{});
  }
  const std::string searcher_kind = h.value("searcher", "BasicVariantGenerator");
  const std::string scheduler_kind = h.value("scheduler", "FIFOScheduler");
  if (!impl.config.search_alg) {
    if (searcher_kind == "BasicVariantGenerator") {
      impl.config.search_alg = std::make_shared<BasicVariantGenerator>();
    } else {
      throw Error("prism::tune::Tuner::Restore: the experiment used searcher " + searcher_kind +
                  "; pass one configured the same way in tune_config.search_alg (its state comes "
                  "from the journal)");
    }
  }
  if (!impl.config.scheduler) {
    if (scheduler_kind == "FIFOScheduler") {
      impl.config.scheduler = std::make_shared<FIFOScheduler>();
    } else {
      throw Error("prism::tune::Tuner::Restore: the experiment used scheduler " + scheduler_kind +
                  "; pass one configured the same way in tune_config.scheduler (its state comes "
                  "from the journal)");
    }
  }
  impl.searcher = impl.config.search_alg;
  impl.scheduler = impl.config.scheduler;
  impl.Validate();
  if (impl.trainable_name != h.value("trainable", "")) {
    throw Error("prism::tune::Tuner::Restore: the experiment ran trainable \"" + h.value("trainable", "") +
                "\", not \"" + impl.trainable_name + "\"; pass the same function");
  }
  // The experiment's trials were drawn from its param_space: another one would add or
  // change trials silently (a 4-point grid restored with 6 points ran 2 more).
  if (h.contains("param_space")) {
    std::string changes;
    const json& was = h["param_space"];
    for (const auto& [name, text] : was.items()) {
      auto it = impl.space.find(name);
      const std::string now = it == impl.space.end() ? "missing" : it->second.ToString();
      if (now != text.get<std::string>()) {
        changes += "; " + name + " was " + text.get<std::string>() + ", now " + now;
      }
    }
    for (const auto& [name, domain] : impl.space) {
      if (!was.contains(name)) changes += "; " + name + " is new (" + domain.ToString() + ")";
    }
    if (!changes.empty()) {
      throw Error("prism::tune::Tuner::Restore: the param_space differs from the experiment's (" +
                  changes.substr(2) + "); restore with the param_space it was started with, or "
                  "start a new experiment");
    }
  }
  // Replay the journal.
  std::string stopper_state;
  for (size_t i = 1; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string kind = e.value("e", "");
    if (kind == "trial") {
      TrialState* t = impl.NewTrial(ConfigOf(e.at("config")));
      if (t->id != e.value("id", "")) {
        throw Error("prism::tune::Tuner::Restore: the journal's trials are out of order at " +
                    e.value("id", std::string("?")));
      }
      impl.searcher_state = e.value("searcher_state", "");
    } else if (kind == "result" || kind == "status") {
      auto it = impl.by_id.find(e.value("id", ""));
      if (it == impl.by_id.end()) continue;
      TrialState& t = *it->second;
      if (kind == "result") {
        Metrics result = MetricsOf(e.at("metrics"));
        result["training_iteration"] = e.value("iteration", 0.0);
        result["time_total_s"] = e.value("time_total_s", 0.0);
        result["time_this_iter_s"] = e.value("time_this_iter_s", 0.0);
        t.last_result = result;
        t.history.push_back(result);
        t.iterations = e.value("iteration", int64_t{0});
        t.time_total_s = e.value("time_total_s", 0.0);
        if (e.contains("checkpoint")) {
          t.checkpoint = e.value("checkpoint", "");
          t.checkpoint_iteration = t.iterations;
          t.checkpoint_time_s = t.time_total_s;
        }
      } else {
        t.status = StatusOf(e.value("status", "PENDING"));
        t.attempt = e.value("attempt", -1);
        t.failures = e.value("failures", 0);
        t.error = e.value("error", "");
        t.restore_from = e.value("restore_from", "");
        if (e.contains("config")) t.config = ConfigOf(e.at("config"));
      }
    } else if (kind == "stopper") {
      stopper_state = e.value("state", "");
    } else if (kind == "scheduler") {
      impl.scheduler_state = e.value("state", "");
      impl.scheduler_known = e.value("known", size_t{0});
    } else if (kind == "fit_end" || kind == "restore") {
      impl.elapsed_before = std::max(impl.elapsed_before, e.value("elapsed_s", 0.0));
    }
  }
  if (impl.run.stopper) impl.run.stopper->RestoreState(stopper_state);
  for (auto& t : impl.trials) {
    // The journal names a trial's checkpoint after the trial committed it, and retention
    // may delete the one before first: after a kill in between, the newest intact one in
    // the trial's directory is used.
    if (!t->checkpoint.empty() && !fs::exists(t->checkpoint + "/" + kCheckpointRecordFile)) {
      CheckpointStore store(t->dir, impl.run.checkpoint_config);
      ResumePoint point = store.NewestValid();
      std::fprintf(stderr, "prism.tune: trial %s: its checkpoint %s is gone; %s\n", t->id.c_str(),
                   t->checkpoint.c_str(),
                   point.checkpoint ? ("resuming from " + point.checkpoint->checkpoint.path()).c_str()
                                    : "no intact one is left, it starts over");
      t->checkpoint.clear();
      t->checkpoint_iteration = 0;
      t->checkpoint_time_s = 0;
      if (point.checkpoint) {
        t->checkpoint = point.checkpoint->checkpoint.path();
        auto it = point.checkpoint->metrics.find("training_iteration");
        t->checkpoint_iteration = it == point.checkpoint->metrics.end() ? 0 : static_cast<int64_t>(it->second);
      }
    }
    const bool unfinished = t->status == TrialStatus::kRunning || t->status == TrialStatus::kPending ||
                            t->status == TrialStatus::kPaused;
    if (unfinished) {
      t->status = resume_unfinished ? (t->status == TrialStatus::kPaused ? TrialStatus::kPaused
                                                                          : TrialStatus::kPending)
                                    : TrialStatus::kTerminated;
    } else if (t->status == TrialStatus::kError && (resume_errored || restart_errored)) {
      t->status = TrialStatus::kPending;
      t->error.clear();
      t->failures = 0;
      if (restart_errored) {
        t->restart_fresh = true;
        t->checkpoint.clear();
        t->iterations = 0;
        t->time_total_s = 0;
        t->history.clear();
        t->last_result.clear();
      }
    }
  }
  return tuner;
}

}  // namespace prism::tune
