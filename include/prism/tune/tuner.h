#pragma once
// Tuner: hyperparameter search on the job's ranks (Ray Tune's Tuner), preemption-proof.
//
//   void Objective(tune::Config config) {                 // a trial, on some rank
//     double lr = config.Get<double>("lr", 0.01);
//     int start = 0;
//     if (auto ckpt = tune::GetCheckpoint()) start = ReadStep(ckpt->path());  // resumed
//     for (int step = start; step < 100; ++step) {
//       double acc = TrainOneEpoch(lr);
//       std::string dir = prism::MakeTempCheckpointDir();  // optional
//       WriteStep(dir, step + 1);
//       tune::Report({{"mean_accuracy", acc}}, Checkpoint::FromDirectory(dir));  // may end it here
//     }
//   }
//   PRISM_REMOTE(Objective);
//
//   tune::Tuner tuner(Objective,
//       {{"lr", tune::Choice({0.001, 0.01, 0.1})}, {"momentum", tune::Uniform(0.1, 0.9)}},
//       {.metric = "mean_accuracy", .mode = "max", .num_samples = 30,
//        .scheduler = std::make_shared<tune::ASHAScheduler>()},
//       {.name = "mnist_asha"});
//   tune::ResultGrid results = tuner.Fit();
//   std::cout << results.GetBestResult().config.Get<double>("lr", 0);
//
// Each trial runs as a task with the trial's resources (default {CPU: 1}, so as many trials
// at once as the job has CPUs), its reports stream to the driver, where the searcher and
// scheduler decide. A trial that stops, pauses or finishes frees its resources at once.
//
// Storage: storage_path/name/ holds experiment_state.jsonl (the journal: every trial, its
// config, results, checkpoints and status changes, with the searcher's and scheduler's
// state, appended line by line so that a kill -9 at any moment leaves a usable prefix),
// and one directory per trial with params.json, result.json (one JSON line per report),
// progress.csv and its checkpoint_NNNNNN/ directories (committed atomically, as in
// prism::train).
//
// With a scheduler that decides on results (ASHA, HyperBand, median stopping, PBT) or a
// RunConfig::stopper, Report waits for the driver's answer, as Ray's does, so a trial the
// scheduler or stopper stops does not train another iteration; otherwise it returns at once.
//
// Preemption: on SIGUSR1/SIGTERM (a Slurm time-limit warning, see prism/preemption.h)
// every running trial stops at its next Report, keeping the checkpoint it passes there;
// the journal is committed and Fit throws TunePreemptedError. Exit with
// prism::kExitPreempted: the requeued job calls Tuner::Restore and goes on, with no trial
// repeated or lost.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/api.h"
#include "prism/checkpoint.h"
#include "prism/errors.h"
#include "prism/tune/schedulers.h"
#include "prism/tune/searcher.h"
#include "prism/tune/search_space.h"
#include "prism/tune/stopper.h"

namespace prism::tune {

/// The trainable: a function registered with PRISM_REMOTE, taking the trial's config.
using TrainableFn = void (*)(Config);

/// A trainable with its per-trial resources and shared inputs.
struct Trainable {
  Trainable(TrainableFn fn = nullptr) : fn(fn) {}  // NOLINT(google-explicit-constructor)
  TrainableFn fn;
  std::map<std::string, double> resources;  // empty: {CPU: 1}
  /// Shared inputs (WithParameters), by name: each in the object store once, read in a
  /// trial with GetParameter<T>(name).
  std::map<std::string, ObjectRef<std::string>> parameters;
  /// For adapters (prism/tune/torch.h): the trial task's own resources when they differ
  /// from what a trial reserves in all (a TorchTrainer trial's task needs no CPU; its
  /// workers hold them), and bytes the adapter reads back with internal::TrainableArgs().
  std::optional<std::map<std::string, double>> task_resources;
  std::string args;
};

/// `fn` with each trial reserving `resources` (Ray: tune.with_resources), e.g.
/// {{"CPU", 2}} or {{"CPU", 1}, {"GPU", 1}}. Throws prism::Error for a negative amount.
Trainable WithResources(Trainable trainable, std::map<std::string, double> resources);

/// `trainable` with a large input put into the object store once and shared by every
/// trial (Ray: tune.with_parameters): trials read it with GetParameter<T>(name), fetched at
/// most once per rank instead of being copied into each trial's config.
template <typename T>
Trainable WithParameters(Trainable trainable, const std::string& name, const T& value) {
  if (name.empty()) throw Error("prism::tune::WithParameters: the parameter needs a name");
  trainable.parameters.insert_or_assign(name, ObjectRef<std::string>(prism::Put(value).ID()));
  return trainable;
}

struct TuneConfig {
  std::string metric;  // what the searcher and scheduler optimize (and GetBestResult's default)
  std::string mode;    // "max" or "min"
  std::shared_ptr<Searcher> search_alg;        // null: BasicVariantGenerator
  std::shared_ptr<TrialScheduler> scheduler;   // null: FIFOScheduler
  int num_samples = 1;             // -1: until the searcher or time budget ends
  int max_concurrent_trials = 0;   // 0: as many as the resources allow
  double time_budget_s = 0;        // 0: none; then running trials stop and Fit returns
  uint64_t seed = 0;               // searcher's and schedulers' random draws
};

struct FailureConfig {
  int max_failures = 0;  // retries of a failed trial, from its latest checkpoint; -1: no limit
  bool fail_fast = false;  // the first trial error ends the experiment
};

/// Per trial: how many checkpoints to keep, ranked how (prism/checkpoint.h).
using CheckpointConfig = prism::CheckpointConfig;

struct RunConfig {
  /// The experiment's name (a directory under storage_path). Default: "tune_<job id>" under
  /// Slurm (a requeued job keeps its id, so Restore finds it), else "tune_<timestamp>".
  std::string name;
  /// Default: $PRISM_STORAGE_PATH, else ~/prism_results. A shared file system when ranks
  /// sit on several nodes.
  std::string storage_path;
  /// Stop a trial once a metric reaches a value: {"training_iteration", 10} stops at the
  /// 10th report; {"mean_accuracy", 0.95} once it is >= 0.95.
  std::map<std::string, double> stop;
  /// Stops trials, or the experiment, by a rule (prism/tune/stopper.h), beside `stop`:
  /// called on the driver for every result, before the scheduler. Null: none.
  std::shared_ptr<Stopper> stopper;
  FailureConfig failure_config;
  CheckpointConfig checkpoint_config;
  /// Print the status table on the driver's console (every `status_interval_s`).
  int verbose = 1;
  double status_interval_s = 5;
};

/// One trial's outcome.
struct Result {
  std::string trial_id;
  Config config;
  Metrics metrics;                     // the last report
  std::vector<Metrics> metrics_history;  // every report, in order
  std::string checkpoint;              // directory of the latest checkpoint ("" if none)
  std::string path;                    // the trial's directory
  std::string error;                   // "" unless it failed
  TrialStatus status = TrialStatus::kTerminated;
};

class ResultGrid {
 public:
  ResultGrid() = default;
  ResultGrid(std::vector<Result> results, std::string metric, std::string mode,
             std::string experiment_path);
  size_t size() const { return results_.size(); }
  const Result& operator[](size_t i) const { return results_.at(i); }
  std::vector<Result>::const_iterator begin() const { return results_.begin(); }
  std::vector<Result>::const_iterator end() const { return results_.end(); }
  /// The best trial by `metric` in `mode` (default: TuneConfig's). `scope`: "last" (its last
  /// report), "all" (its best report), "avg" (mean of all), "last-5-avg", "last-10-avg".
  /// Trials that never reported the metric are skipped. Throws prism::Error if no trial
  /// reported it, or for a bad mode or scope.
  const Result& GetBestResult(std::string metric = "", std::string mode = "",
                              const std::string& scope = "last") const;
  /// Trials that failed.
  size_t num_errors() const;
  size_t num_terminated() const;
  std::vector<std::string> errors() const;
  /// Every trial, one row each: trial_id, status, the config's parameters (config/<name>),
  /// then the last report's metrics; CSV with a header row.
  std::string ToCsv() const;
  const std::string& experiment_path() const { return path_; }

 private:
  std::vector<Result> results_;
  std::string metric_, mode_, path_;
};

/// Fit stopped because the job got SIGUSR1 or SIGTERM: the running trials stopped with a
/// checkpoint and the journal is committed. Exit with prism::kExitPreempted; the requeued
/// job resumes with Tuner::Restore(ExperimentPath(), ...).
class TunePreemptedError : public Error {
 public:
  TunePreemptedError(const std::string& what, int signal, std::string path)
      : Error(what), signal_(signal), path_(std::move(path)) {}
  int Signal() const { return signal_; }
  const std::string& ExperimentPath() const { return path_; }

 private:
  int signal_;
  std::string path_;
};

class Tuner {
 public:
  /// Checks the arguments (bad ones throw prism::Error saying what to change: an empty
  /// grid, a lower bound above the upper, a mode that is not "max"/"min", a metric without
  /// a mode, an unregistered trainable). Starts nothing.
  Tuner(Trainable trainable, ParamSpace param_space, TuneConfig tune_config = {},
        RunConfig run_config = {});
  ~Tuner();
  Tuner(Tuner&&) noexcept;
  Tuner& operator=(Tuner&&) noexcept;

  /// Runs the experiment to the end (every trial terminated or errored, the searcher
  /// finished, or the time budget spent) and returns every trial's result. Trial errors
  /// are in the results, not thrown (fail_fast: thrown as TuneError after the others stop).
  /// Throws TunePreemptedError on SIGUSR1/SIGTERM, prism::Error if a metric the scheduler
  /// or searcher needs is never reported by any trial. Once it has returned, a Tuner's Fit
  /// throws prism::Error (the trials' histories moved into the ResultGrid it returned).
  ResultGrid Fit();

  /// Whether `path` (storage_path/name) holds an experiment Restore can resume.
  static bool CanRestore(const std::string& path);
  /// A Tuner that resumes the experiment in `path` (Ray's Tuner.restore), with the same
  /// trainable and param_space (a space holds functions, so it is not stored): finished
  /// trials are kept as they are;
  /// unfinished ones (running or paused when it stopped) resume from their latest
  /// checkpoint if resume_unfinished (else they are marked terminated); errored ones are
  /// resumed from their checkpoint if resume_errored, started over if restart_errored,
  /// else kept as errors. The trainable must be the one the experiment ran (same
  /// registered name); searcher and scheduler state come from the journal. A searcher or
  /// scheduler object given in `tune_config` overrides what the journal names but gets its
  /// saved state. An experiment that ran with a RunConfig::stopper needs `stopper`, built
  /// the same way: it gets the state the journal saved (its progress, a spent time budget).
  /// Throws prism::Error if CanRestore(path) is false, saying why.
  static Tuner Restore(const std::string& path, Trainable trainable, ParamSpace param_space,
                       bool resume_unfinished = true, bool resume_errored = false,
                       bool restart_errored = false, TuneConfig tune_config = {},
                       std::shared_ptr<Stopper> stopper = nullptr);

  /// storage_path/name.
  const std::string& ExperimentPath() const;

 private:
  Tuner();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A trial's whole experiment failed (fail_fast).
class TuneError : public Error {
 public:
  using Error::Error;
};

// ---- Inside a trial ---------------------------------------------------------------------

/// Reports a result (and optionally a checkpoint: its directory is moved into the trial's
/// storage and committed). Increments training_iteration. Returns normally while
/// the trial should go on; when the scheduler stopped or paused the trial, or the job is
/// being preempted, it throws a signal the trial must not catch (TrialStopSignal, not a
/// std::exception), after committing the checkpoint passed here. Throws prism::Error
/// outside a trial. When no scheduler or stopper decides on results (FIFO, no
/// RunConfig::stopper), a result without a checkpoint from a trial on the driver's rank may
/// reach the driver (its files, the journal, the searcher) up to 0.1 s later, with the
/// trial's next results.
void Report(const Metrics& metrics, const std::optional<Checkpoint>& checkpoint = std::nullopt);
/// The checkpoint the trial starts from (after a pause, a retry, a PBT exploit or a
/// restored experiment), or nullopt for a fresh start. Write new checkpoints into
/// prism::MakeTempCheckpointDir().
std::optional<Checkpoint> GetCheckpoint();
/// This trial's id, and its directory (for files of its own).
std::string TrialId();
std::string TrialDir();

namespace internal {
/// The object id of shared input `name` of this trial's trainable; throws prism::Error
/// outside a trial or for a name WithParameters did not give.
ObjectId ParameterId(const std::string& name);
/// The trainable's `args` (for adapters), inside a trial.
const std::string& TrainableArgs();
/// Report for adapters whose checkpoint is already committed in the trial's directory (a
/// TorchTrainer's): records it as is. Returns true when the trial should stop (the Tuner
/// stopped or paused it, or the job is being preempted) instead of throwing.
bool ReportCommitted(const Metrics& metrics, const std::optional<Checkpoint>& committed);
/// Whether Report, called now on this thread with (or without) a checkpoint, may block:
/// committing a checkpoint writes files, and when the driver answers every report (any
/// scheduler but FIFO, or a RunConfig::stopper) the trial waits for the answer.
/// Otherwise Report only holds or publishes the result, which waits for nothing. A front
/// end that holds a lock of its own across the call (Python's GIL) releases it only when
/// this is true. False outside a trial (Report then throws at once). Thread-safe.
bool ReportMayWait(bool with_checkpoint);
}  // namespace internal

/// The shared input WithParameters put under `name` (the trial's rank fetches it once;
/// types that support it are read in place, see prism/array_view.h).
template <typename T>
std::shared_ptr<T> GetParameter(const std::string& name) {
  return ObjectRef<T>(internal::ParameterId(name)).Get();
}

/// Thrown by Report to end a trial the Tuner stopped; caught by the Tuner's trial task.
struct TrialStopSignal {};

}  // namespace prism::tune
