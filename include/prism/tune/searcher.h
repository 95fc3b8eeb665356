#pragma once
// Searchers: where trials' configs come from (Ray Tune's search_alg), behind one ask/tell
// interface so that a third-party algorithm plugs in the same way as ours.
//
//   BasicVariantGenerator   random and grid search (the default): the cross product of the
//                           grids, each combination num_samples times, the other
//                           parameters drawn from their distributions.
//   TPESearch               Tree-structured Parzen Estimator (Optuna's default sampler),
//                           model-based: after n_startup_trials random ones it proposes
//                           where good results are dense relative to bad ones.
//   ConcurrencyLimiter      wraps another searcher: at most max_concurrent of its trials
//                           running at once (a model-based searcher learns more this way).
//
// The Tuner calls, on the driver, in this order: Setup once; Suggest for each new trial;
// OnTrialResult for each report; OnTrialComplete once per trial. A searcher is used by one
// Tuner from one thread. A call that throws ends the experiment: Setup's exception leaves Fit
// as it is; a later one (a Python searcher's, say) stops the running trials first, then Fit
// throws TuneError with its message.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/tune/search_space.h"

namespace prism::tune {

/// What Suggest returns: a config for the new trial, nothing for now (try again after a
/// trial completes), or nothing ever again (the search is over).
struct Suggestion {
  enum Kind { kConfig, kWait, kFinished };
  Kind kind = kFinished;
  Config config;  // kConfig

  static Suggestion Of(Config c) { return {kConfig, std::move(c)}; }
  static Suggestion Wait() { return {kWait, {}}; }
  static Suggestion Finished() { return {kFinished, {}}; }
};

class Searcher {
 public:
  virtual ~Searcher() = default;
  /// Called once before the first Suggest. `metric` and `mode` ("max"/"min") come from
  /// TuneConfig (a searcher given its own must agree, else prism::Error). num_samples is
  /// TuneConfig's (-1: unlimited). `seed` makes the sequence of suggestions reproducible.
  /// Throws prism::Error if the space does not suit the searcher (a grid for TPESearch).
  virtual void Setup(const ParamSpace& space, const std::string& metric, const std::string& mode,
                     int num_samples, uint64_t seed) = 0;
  /// A config for the trial `trial_id` (unique, never reused).
  virtual Suggestion Suggest(const std::string& trial_id) = 0;
  /// An intermediate result of a trial this searcher suggested.
  virtual void OnTrialResult(const std::string& trial_id, const Metrics& result) {}
  /// A trial ended: `result` is its last result (nullptr if it reported none), `error`
  /// true if it failed. Also called, on Restore, for trials that ended before the restore,
  /// with their config (a model-based searcher rebuilds its history from these calls).
  virtual void OnTrialComplete(const std::string& trial_id, const Config& config,
                               const Metrics* result, bool error) = 0;
  /// The searcher's own state that its trials' configs and results do not give back
  /// (counters, random generator), as text; restored with RestoreState before the
  /// OnTrialComplete replay of a Restore.
  virtual std::string SaveState() const = 0;
  /// Throws prism::Error if `state` is not what SaveState of this kind of searcher wrote.
  virtual void RestoreState(const std::string& state) = 0;
  /// Total trials it will suggest if known (for the status table), else -1.
  virtual int64_t TotalTrials() const { return -1; }
};

/// Random and grid search (Ray's BasicVariantGenerator). Trials run the grids' cross
/// product, the first grid key (in key order) varying fastest as in Ray, once per sample:
/// num_samples * product(grid sizes) trials, or forever, cycling the grid, for -1. The other
/// parameters are drawn per trial from a generator seeded with (seed, trial index), then
/// the SampleFrom functions run in key order. State: the trial counter and the seed.
class BasicVariantGenerator : public Searcher {
 public:
  BasicVariantGenerator();
  ~BasicVariantGenerator() override;
  void Setup(const ParamSpace& space, const std::string& metric, const std::string& mode,
             int num_samples, uint64_t seed) override;
  Suggestion Suggest(const std::string& trial_id) override;
  void OnTrialComplete(const std::string& trial_id, const Config& config, const Metrics* result,
                       bool error) override;
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;
  int64_t TotalTrials() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct TPEOptions {
  /// Random suggestions before the model is used (Optuna: 10).
  int n_startup_trials = 10;
  /// Candidates drawn from the good-results density per suggestion (Optuna: 24).
  int n_ei_candidates = 24;
  /// The fraction of results counted as good (Optuna's default gamma: min(ceil(0.1 n), 25)).
  double gamma = 0.1;
  int max_good = 25;
  /// The metric and mode ("max"/"min") to optimize; empty: TuneConfig's (where both are
  /// set they must agree).
  std::string metric;
  std::string mode;
};

/// Tree-structured Parzen Estimator (Bergstra et al. 2011; Optuna's TPESampler, without
/// its multivariate and constant-liar options). Works on Uniform/LogUniform/RandInt/
/// LogRandInt (and their quantized forms), Randn, Choice and constants; throws prism::Error
/// at Setup for a GridSearch or SampleFrom parameter. Failed trials and trials that never
/// reported the metric are not observations. Suggests num_samples configs, then Finished.
class TPESearch : public Searcher {
 public:
  explicit TPESearch(TPEOptions options = {});
  ~TPESearch() override;
  void Setup(const ParamSpace& space, const std::string& metric, const std::string& mode,
             int num_samples, uint64_t seed) override;
  Suggestion Suggest(const std::string& trial_id) override;
  void OnTrialComplete(const std::string& trial_id, const Config& config, const Metrics* result,
                       bool error) override;
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;
  int64_t TotalTrials() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// At most `max_concurrent` of the wrapped searcher's trials running at once.
class ConcurrencyLimiter : public Searcher {
 public:
  /// Throws prism::Error if max_concurrent < 1 or `searcher` is null.
  ConcurrencyLimiter(std::shared_ptr<Searcher> searcher, int max_concurrent);
  void Setup(const ParamSpace& space, const std::string& metric, const std::string& mode,
             int num_samples, uint64_t seed) override;
  Suggestion Suggest(const std::string& trial_id) override;
  void OnTrialResult(const std::string& trial_id, const Metrics& result) override;
  void OnTrialComplete(const std::string& trial_id, const Config& config, const Metrics* result,
                       bool error) override;
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;
  int64_t TotalTrials() const override { return searcher_->TotalTrials(); }

 private:
  std::shared_ptr<Searcher> searcher_;
  int max_concurrent_;
  std::vector<std::string> live_;
};

}  // namespace prism::tune
