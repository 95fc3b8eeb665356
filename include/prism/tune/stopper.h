#pragma once
// Stoppers (Ray Tune's ray.tune.stopper): rules that end a trial, or the whole experiment,
// from the results the trials report.
//
//   std::vector<std::shared_ptr<tune::Stopper>> rules{
//       std::make_shared<tune::MaximumIterationStopper>(20),
//       std::make_shared<tune::TrialPlateauStopper>(tune::TrialPlateauOptions{.metric = "loss"})};
//   auto stopper = std::make_shared<tune::CombinedStopper>(rules);
//   tune::Tuner tuner(Objective, space, {.metric = "loss", .mode = "min"},
//                     {.name = "plateau", .stopper = stopper});
//
// The Tuner calls ShouldStop on the driver for every result of a running trial (before the
// scheduler, which does not see a result that stopped its trial; RunConfig::stop is checked
// beside it) and StopAll after every batch of messages and at least every 200 ms. When
// ShouldStop is true the trial ends (TERMINATED) without training another iteration: with a
// stopper, Report waits for the driver's answer as it does with a deciding scheduler. When
// StopAll is true the experiment ends as in Ray: no new trials, running ones stop at their
// next report, pending and paused ones end as TERMINATED, and Fit returns every result.
//
// A stopper that throws ends the experiment: running trials stop and Fit throws TuneError
// with the exception's message (a Python stopper's traceback).
//
// Restore: unlike a searcher's config, a stopper's progress is state that results alone do
// not give back (a TimeoutStopper's spent budget, a plateau's window), so the Tuner journals
// SaveState() (at most once a second, when it changed, and at the end) and Tuner::Restore
// hands it to the stopper it is given, as Ray restores its pickled stopper. A TimeoutStopper
// keeps the budget it had left: the time between the crash and the restore is not counted.
//
// Thread-safety: the Tuner calls a stopper from one thread (Fit's); none of these lock.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/tune/search_space.h"

namespace prism::tune {

class Stopper {
 public:
  virtual ~Stopper() = default;
  /// A running trial's result (with training_iteration, time_total_s and time_this_iter_s):
  /// true ends the trial (Ray's __call__).
  virtual bool ShouldStop(const std::string& trial_id, const Metrics& result) = 0;
  /// True ends the experiment (Ray's stop_all).
  virtual bool StopAll() = 0;
  /// Progress that results do not give back, as text, for Restore ("": none).
  virtual std::string SaveState() const { return ""; }
  /// Takes back what SaveState returned (nothing to do for ""). Throws prism::Error if the
  /// text is not this stopper's state.
  virtual void RestoreState(const std::string& state) {}
};

/// Stops a trial at its max_iter-th result (Ray counts results per trial, not
/// training_iteration: a trial resumed from an older checkpoint counts its repeats too).
class MaximumIterationStopper : public Stopper {
 public:
  explicit MaximumIterationStopper(int64_t max_iter);
  bool ShouldStop(const std::string& trial_id, const Metrics& result) override;
  bool StopAll() override { return false; }
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;

 private:
  int64_t max_iter_;
  std::map<std::string, int64_t> iterations_;
};

struct TrialPlateauOptions {
  std::string metric;
  /// The trial plateaued when the (population) standard deviation of its last num_results
  /// values is below this (Ray's `std`).
  double std_dev = 0.01;
  int num_results = 4;
  /// Results a trial reports before it can be stopped.
  int grace_period = 4;
  /// If set, the trial must also have reached it (>= for "max", <= for "min").
  std::optional<double> metric_threshold;
  std::string mode;  // "max" or "min"; required with metric_threshold
};

/// Stops a trial whose metric stopped moving. A result without the metric counts as a value
/// that is not a number: no plateau while it is in the window (Ray's None, an infinite
/// deviation).
class TrialPlateauStopper : public Stopper {
 public:
  /// Throws prism::Error for an empty metric, a mode other than "", "max" or "min", a
  /// metric_threshold without a mode, num_results < 1 or grace_period < 0.
  explicit TrialPlateauStopper(TrialPlateauOptions options);
  bool ShouldStop(const std::string& trial_id, const Metrics& result) override;
  bool StopAll() override { return false; }
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;

 private:
  TrialPlateauOptions options_;
  struct Window {
    int64_t count = 0;           // results seen
    std::vector<double> values;  // the last num_results, oldest first
  };
  std::map<std::string, Window> windows_;
};

struct ExperimentPlateauOptions {
  std::string metric;
  /// The experiment plateaued when the standard deviation of the `top` best values ever
  /// reported is at most this (Ray's `std`).
  double std_dev = 0.001;
  int top = 10;
  std::string mode = "min";
  /// Results in a row the plateau must last before the experiment ends.
  int patience = 0;
};

/// Ends the experiment when the best `top` values of the metric, over all trials, agree
/// (Ray's ExperimentPlateauStopper; the result that completes the plateau also stops its
/// trial). A result without the metric is an error, as in Ray (a KeyError there); a value
/// that is not a number is skipped.
class ExperimentPlateauStopper : public Stopper {
 public:
  /// Throws prism::Error (Ray's checks) for a mode other than "max"/"min", top <= 1,
  /// patience < 0, std_dev <= 0, or an empty metric.
  explicit ExperimentPlateauStopper(ExperimentPlateauOptions options);
  /// Throws prism::Error if `result` lacks the metric.
  bool ShouldStop(const std::string& trial_id, const Metrics& result) override;
  bool StopAll() override;
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;

 private:
  bool HasPlateaued() const;
  ExperimentPlateauOptions options_;
  std::vector<double> top_values_;  // sorted ascending, at most `top`
  int64_t iterations_ = 0;          // consecutive results with a plateau
};

/// Ends the experiment once `timeout_s` seconds have passed since its first StopAll (Ray's:
/// the budget shrinks by the time between StopAll calls, so setup is not counted).
class TimeoutStopper : public Stopper {
 public:
  /// `now`: seconds on a monotonic clock (default steady_clock); tests pass a fake one.
  /// Throws prism::Error if timeout_s is not a number.
  explicit TimeoutStopper(double timeout_s, std::function<double()> now = {});
  bool ShouldStop(const std::string&, const Metrics&) override { return false; }
  bool StopAll() override;
  /// The budget left; RestoreState keeps it and starts counting again at the next StopAll.
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;
  double BudgetLeft() const { return budget_; }

 private:
  double timeout_s_;
  double budget_;
  std::optional<double> last_check_;
  std::function<double()> now_;
};

/// Stops a trial when `fn(trial_id, result)` is true; never the experiment.
class FunctionStopper : public Stopper {
 public:
  using Fn = std::function<bool(const std::string& trial_id, const Metrics& result)>;
  /// Throws prism::Error for an empty function.
  explicit FunctionStopper(Fn fn);
  bool ShouldStop(const std::string& trial_id, const Metrics& result) override { return fn_(trial_id, result); }
  bool StopAll() override { return false; }

 private:
  Fn fn_;
};

/// Any of `stoppers` (Ray's CombinedStopper: OR, asked in order, stopping at the first that
/// says yes, so a later one does not see that result).
class CombinedStopper : public Stopper {
 public:
  /// Throws prism::Error for a null stopper.
  explicit CombinedStopper(std::vector<std::shared_ptr<Stopper>> stoppers);
  bool ShouldStop(const std::string& trial_id, const Metrics& result) override;
  bool StopAll() override;
  /// Each part's state, in order.
  std::string SaveState() const override;
  void RestoreState(const std::string& state) override;

 private:
  std::vector<std::shared_ptr<Stopper>> stoppers_;
};

}  // namespace prism::tune
