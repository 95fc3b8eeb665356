#pragma once
// Trial schedulers (Ray Tune's schedulers): after each result, continue, pause or stop the
// trial; when a slot frees, which pending or paused trial runs next.
//
//   FIFOScheduler              runs every trial to the end, in order (the default).
//   AsyncHyperBandScheduler    ASHA (alias ASHAScheduler): rungs at grace_period * rf^k;
//                              the first time a trial reaches a rung, it stops if its value
//                              is below the (1 - 1/rf) quantile of the values recorded at
//                              that rung (Ray's rule), then its value is recorded.
//   HyperBandScheduler         synchronous HyperBand: trials wait (paused) at a rung until
//                              their bracket's trials all reach it; the top 1/rf go on.
//   MedianStoppingRule         stops a trial whose best result is worse than the median of
//                              the other trials' running averages at the same time.
//   PopulationBasedTraining    every perturbation_interval, a bottom-quantile trial takes a
//                              copy of a top-quantile trial's latest checkpoint and config,
//                              then perturbs the config (explore); logged for replay.
//
// The Tuner calls a scheduler on the driver, from one thread. Metric values are compared
// in the scheduler's mode: "max" (higher is better) or "min".

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "prism/tune/search_space.h"

namespace prism::tune {

enum class TrialStatus { kPending, kRunning, kPaused, kTerminated, kError };
/// "PENDING", "RUNNING", "PAUSED", "TERMINATED", "ERROR".
const char* StatusName(TrialStatus status);

/// A trial as schedulers see it. The Tuner owns it; a scheduler may change `config` and
/// `restore_from` of a trial it pauses (PBT's exploit) and nothing else.
struct Trial {
  std::string id;            // "<experiment>_00000", ... unique in the experiment
  Config config;
  TrialStatus status = TrialStatus::kPending;
  Metrics last_result;       // empty until it reports; includes training_iteration,
                             // time_total_s and time_this_iter_s, which the Tuner adds
  int64_t iterations = 0;    // reports so far (training_iteration of last_result)
  double time_total_s = 0;   // seconds the trial ran, over all its runs
  /// Directory of its latest committed checkpoint ("" if none).
  std::string checkpoint;
  /// Set by a scheduler: the checkpoint directory the trial starts from when it next runs
  /// (PBT: a copy of another trial's). The Tuner clears it once used.
  std::string restore_from;
  /// Free for the scheduler's bookkeeping (HyperBand's bracket, ...); kept across Restore.
  std::map<std::string, std::string> scheduler_data;
};

/// What happens to a trial after a result.
enum class Decision { kContinue, kPause, kStop };

/// What a scheduler may ask of the Tuner beyond its return values.
class TrialRunner {
 public:
  virtual ~TrialRunner() = default;
  /// Every trial of the experiment, in the order they were created.
  virtual std::vector<Trial*> Trials() = 0;
  /// Ends a trial that is not the one being decided on (HyperBand's losers): a pending or
  /// paused one at once, a running one at its next report.
  virtual void StopTrial(Trial& trial) = 0;
  /// Seconds since the experiment started (MedianStoppingRule's grace period).
  virtual double Now() const = 0;
};

class TrialScheduler {
 public:
  virtual ~TrialScheduler() = default;
  /// Called once by the Tuner with TuneConfig's metric and mode. A scheduler constructed
  /// with its own must agree, else prism::Error; one without takes these. Throws
  /// prism::Error if there is neither a metric nor a mode (FIFO needs none).
  virtual void SetSearchProperties(const std::string& metric, const std::string& mode) = 0;
  virtual void OnTrialAdd(TrialRunner& runner, Trial& trial) {}
  /// A result of a running trial (already in trial.last_result).
  virtual Decision OnTrialResult(TrialRunner& runner, Trial& trial, const Metrics& result) = 0;
  /// The trial's function returned (or was stopped): `result` is its last result.
  virtual void OnTrialComplete(TrialRunner& runner, Trial& trial, const Metrics& result) {}
  /// The trial failed for good (no retries left).
  virtual void OnTrialError(TrialRunner& runner, Trial& trial) {}
  /// Which of `candidates` (pending and paused trials, in creation order) runs in the
  /// slot that is free; nullptr: none now. FIFO: the first pending, else the first paused.
  virtual Trial* ChooseTrialToRun(TrialRunner& runner, const std::vector<Trial*>& candidates);
  /// State that the trials' results do not give back, as text (for Restore).
  virtual std::string SaveState() const { return ""; }
  virtual void RestoreState(const std::string& state) {}
  /// One line for the status table ("Bracket: Iter 4.000: 0.81 | Iter 1.000: 0.62").
  virtual std::string DebugString() const { return ""; }
};

class FIFOScheduler : public TrialScheduler {
 public:
  void SetSearchProperties(const std::string& metric, const std::string& mode) override;
  Decision OnTrialResult(TrialRunner&, Trial&, const Metrics&) override { return Decision::kContinue; }
};

struct AsyncHyperBandOptions {
  std::string time_attr = "training_iteration";
  std::string metric;  // "" = TuneConfig's
  std::string mode;    // "" = TuneConfig's
  double max_t = 100;
  double grace_period = 1;
  double reduction_factor = 4;
  int brackets = 1;
  bool stop_last_trials = true;
  /// Seeds the draw of a new trial's bracket (only used with brackets > 1).
  uint64_t seed = 0;
};

/// ASHA (Li et al. 2018), Ray's rule and defaults. With several brackets a new trial joins
/// one at random as in Ray (weighted by the brackets' sizes; seeded, so reproducible).
class AsyncHyperBandScheduler : public TrialScheduler {
 public:
  /// Throws prism::Error for grace_period <= 0, max_t < grace_period, reduction_factor <= 1,
  /// brackets < 1, or a mode other than "max"/"min".
  explicit AsyncHyperBandScheduler(AsyncHyperBandOptions options = {});
  ~AsyncHyperBandScheduler() override;
  void SetSearchProperties(const std::string& metric, const std::string& mode) override;
  void OnTrialAdd(TrialRunner& runner, Trial& trial) override;
  Decision OnTrialResult(TrialRunner& runner, Trial& trial, const Metrics& result) override;
  void OnTrialComplete(TrialRunner& runner, Trial& trial, const Metrics& result) override;
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;
  std::string DebugString() const override;
  /// The rung milestones of each bracket, highest first (for tests and the status table).
  std::vector<std::vector<double>> Rungs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
using ASHAScheduler = AsyncHyperBandScheduler;

struct HyperBandOptions {
  std::string time_attr = "training_iteration";
  std::string metric;
  std::string mode;
  double max_t = 81;
  double reduction_factor = 3;
  bool stop_last_trials = true;
};

/// Synchronous HyperBand (Li et al. 2016), as Ray's HyperBandScheduler: s_max + 1 brackets
/// with s_max = round(log(max_t) / log(rf)) (Ray rounds; max_t 81, rf 3: 5 brackets), bracket
/// s holding n = ceil((s_max + 1) / (s + 1) * rf^s) trials that first run to r = max_t * rf^-s.
/// Trials fill the brackets of a band in Ray's order, s = 0 (fewest trials, no halving)
/// first, then the next band. Paused trials keep a checkpoint, not a slot.
/// Throws prism::Error for max_t <= 0, reduction_factor <= 1 or a bad mode.
class HyperBandScheduler : public TrialScheduler {
 public:
  explicit HyperBandScheduler(HyperBandOptions options = {});
  ~HyperBandScheduler() override;
  void SetSearchProperties(const std::string& metric, const std::string& mode) override;
  void OnTrialAdd(TrialRunner& runner, Trial& trial) override;
  Decision OnTrialResult(TrialRunner& runner, Trial& trial, const Metrics& result) override;
  void OnTrialComplete(TrialRunner& runner, Trial& trial, const Metrics& result) override;
  void OnTrialError(TrialRunner& runner, Trial& trial) override;
  Trial* ChooseTrialToRun(TrialRunner& runner, const std::vector<Trial*>& candidates) override;
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;
  std::string DebugString() const override;
  /// Per bracket s = s_max..0: {trials n, initial budget r} (for tests; r is 0 for a
  /// bracket Ray skips because max_t * rf^-s < 1).
  std::vector<std::pair<int, double>> BracketSizes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct MedianStoppingOptions {
  std::string time_attr = "time_total_s";
  std::string metric;
  std::string mode;
  double grace_period = 60;
  int min_samples_required = 3;
  int min_time_slice = 0;
  bool hard_stop = true;
};

/// Ray's MedianStoppingRule (Vizier): once time_attr >= grace_period, a trial whose best
/// result so far is strictly worse than the median, over the other trials that have reached
/// the same time, of their mean result in [grace_period, time] stops (hard_stop) or pauses.
/// With fewer than min_samples_required such trials it pauses to let waiting trials run
/// (at most once per min_time_slice), else continues.
class MedianStoppingRule : public TrialScheduler {
 public:
  /// Throws prism::Error for grace_period < 0, min_samples_required < 1, min_time_slice < 0
  /// or a bad mode.
  explicit MedianStoppingRule(MedianStoppingOptions options = {});
  ~MedianStoppingRule() override;
  void SetSearchProperties(const std::string& metric, const std::string& mode) override;
  Decision OnTrialResult(TrialRunner& runner, Trial& trial, const Metrics& result) override;
  void OnTrialComplete(TrialRunner& runner, Trial& trial, const Metrics& result) override;
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;
  /// "Using MedianStoppingRule: num_stopped=N."
  std::string DebugString() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct PBTOptions {
  std::string time_attr = "time_total_s";
  std::string metric;
  std::string mode;
  double perturbation_interval = 60;
  /// No perturbation before time_attr reaches this.
  double burn_in_period = 0;
  /// Parameters to perturb, with the domain to resample from (a Choice's values are also
  /// the list to step through).
  ParamSpace hyperparam_mutations;
  double quantile_fraction = 0.25;
  double resample_probability = 0.25;
  std::pair<double, double> perturbation_factors{1.2, 0.8};
  uint64_t seed = 0;
};

/// One exploit/explore step, in order (PopulationBasedTraining::PolicyLog).
struct PerturbationRecord {
  double time = 0;            // time_attr of the trial when it happened
  std::string trial;          // the bottom trial that took over
  std::string source;         // the top trial it copied
  std::string source_checkpoint;
  Config old_config;          // the source's config that was copied (as Ray's policy log)
  Config new_config;          // after explore: the trial's config from now on
};

/// PBT (Jaderberg et al. 2017), Ray's rules: quantile = ceil(N * quantile_fraction), at most
/// floor(N / 2); perturb by resampling (probability resample_probability) or multiplying
/// by one of perturbation_factors (a Choice: one index up or down).
class PopulationBasedTraining : public TrialScheduler {
 public:
  /// Throws prism::Error for no hyperparam_mutations, a SampleFrom, GridSearch or constant
  /// among them, quantile_fraction outside [0, 0.5], resample_probability outside [0, 1],
  /// perturbation_interval <= 0, or a bad mode.
  explicit PopulationBasedTraining(PBTOptions options);
  ~PopulationBasedTraining() override;
  void SetSearchProperties(const std::string& metric, const std::string& mode) override;
  void OnTrialAdd(TrialRunner& runner, Trial& trial) override;
  Decision OnTrialResult(TrialRunner& runner, Trial& trial, const Metrics& result) override;
  void OnTrialComplete(TrialRunner& runner, Trial& trial, const Metrics& result) override;
  Trial* ChooseTrialToRun(TrialRunner& runner, const std::vector<Trial*>& candidates) override;
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;
  /// Every perturbation so far, in order.
  const std::vector<PerturbationRecord>& PolicyLog() const;
  /// "PopulationBasedTraining: N checkpoints, M perturbs"
  std::string DebugString() const override;

  /// PBT's explore step (Ray's _explore) on a copy of `config`, for each key of
  /// options.hyperparam_mutations: a Choice resamples (probability resample_probability, or
  /// if the value is not among its values) or moves one index left or right (clamped); a
  /// numeric domain resamples or multiplies by one of perturbation_factors, truncating to an
  /// integer for RandInt/LogRandInt. `operations` (if given) gets per key "resample",
  /// "shift left", "shift right (noop)", "* 1.2", ... Throws prism::Error if a numeric key
  /// is missing from `config` or not a number.
  static Config Explore(const Config& config, const PBTOptions& options, std::mt19937_64& rng,
                        std::map<std::string, std::string>* operations = nullptr);
  /// How many trials form each of the top and bottom quantiles of a population of `n`
  /// trials with a score: 0 for n <= 1, else ceil(n * fraction), at most floor(n / 2).
  static int QuantileSize(int n, double quantile_fraction);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism::tune
