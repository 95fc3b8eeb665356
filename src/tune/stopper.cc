// Ray Tune's stoppers, rule for rule (python/ray/tune/stopper/ in Ray 2.x):
//
//   MaximumIterationStopper   counts each trial's results; stops it at the max_iter-th.
//   TrialPlateauStopper       per trial, a window of its last num_results values; once it
//                             has reported grace_period results and the window is full (and
//                             the latest value is past metric_threshold, if one is set), it
//                             stops when the window's population standard deviation is
//                             below std_dev (numpy's np.std, ddof = 0).
//   ExperimentPlateauStopper  keeps the `top` best values reported by any trial; a result
//                             after which they are `top` and their deviation is <= std_dev
//                             extends a run of plateaued results (any other resets it to 0);
//                             the experiment ends once that run reaches `patience`.
//   TimeoutStopper            a budget in seconds, reduced at each StopAll by the time since
//                             the previous one (the first only starts the clock).
//   CombinedStopper           OR, asked in order and short-circuited, as Python's any().
//
// Differences from Ray, all where Ray would misbehave: TrialPlateauStopper checks `mode`
// whenever it is given and requires it with any metric_threshold (Ray tests the threshold's
// truth, so 0.0 went unchecked) and refuses num_results < 1 (Ray never stopped);
// ExperimentPlateauStopper skips values that are not numbers (Ray sorted NaN into its top
// list, where it breaks the ordering) and accepts an integral std (Ray wants a float).
//
// State (SaveState) is JSON naming the stopper: {"stopper": "TrialPlateauStopper", ...}.
// Values that are not numbers are written as null and read back as NaN (prism/internal/json.h).

#include "prism/tune/stopper.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "prism/errors.h"
#include "prism/internal/json.h"
#include "tune/metric_mode.h"
#include "tune/numbers.h"

namespace prism::tune {
namespace {

using internal::FormatNumber;
using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// numpy's np.std (population, ddof = 0); NaN if any value is NaN.
double StdDev(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  double mean = 0;
  for (double v : values) mean += v;
  mean /= static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return std::sqrt(squares / static_cast<double>(values.size()));
}

json StateOf(const char* who) { return json{{"stopper", who}}; }

/// Parses `state` (nothing to do if empty), checks that `who` saved it and runs `body`;
/// any failure becomes prism::Error naming `who`.
template <typename F>
void RestoreJson(const std::string& state, const char* who, F&& body) {
  if (state.empty()) return;
  try {
    json j = json::parse(state);
    if (j.at("stopper") != who) {
      throw Error("the state was saved by " + j.at("stopper").get<std::string>());
    }
    body(j);
  } catch (const json::exception& e) {
    throw Error(std::string("prism::tune: ") + who + " cannot restore its state (" + e.what() +
                "); was the experiment journal written by another version?");
  } catch (const Error& e) {
    throw Error(std::string("prism::tune: ") + who + " cannot restore its state: " + e.what() +
                "; restore with the stopper the experiment was started with");
  }
}

}  // namespace

// ---- MaximumIterationStopper ----------------------------------------------------------------

MaximumIterationStopper::MaximumIterationStopper(int64_t max_iter) : max_iter_(max_iter) {}

bool MaximumIterationStopper::ShouldStop(const std::string& trial_id, const Metrics&) {
  return ++iterations_[trial_id] >= max_iter_;
}

std::string MaximumIterationStopper::SaveState() const {
  json j = StateOf("MaximumIterationStopper");
  j["iterations"] = iterations_;
  return j.dump();
}

void MaximumIterationStopper::RestoreState(const std::string& state) {
  RestoreJson(state, "MaximumIterationStopper", [&](const json& j) {
    iterations_ = j.at("iterations").get<std::map<std::string, int64_t>>();
  });
}

// ---- TrialPlateauStopper --------------------------------------------------------------------

TrialPlateauStopper::TrialPlateauStopper(TrialPlateauOptions options) : options_(std::move(options)) {
  const char* who = "TrialPlateauStopper";
  if (options_.metric.empty()) throw Error("prism::tune::TrialPlateauStopper: name the metric to watch");
  if (!options_.mode.empty()) internal::CheckMode(options_.mode, who);
  if (options_.metric_threshold && options_.mode.empty()) {
    throw Error("prism::tune::TrialPlateauStopper: metric_threshold " + FormatNumber(*options_.metric_threshold) +
                " needs a mode: \"max\" (the metric must reach it from below) or \"min\"");
  }
  if (options_.num_results < 1) {
    throw Error("prism::tune::TrialPlateauStopper: num_results is " + std::to_string(options_.num_results) +
                "; the deviation needs at least 1 result (Ray's default is 4)");
  }
  if (options_.grace_period < 0) throw Error("prism::tune::TrialPlateauStopper: grace_period is negative");
}

bool TrialPlateauStopper::ShouldStop(const std::string& trial_id, const Metrics& result) {
  auto it = result.find(options_.metric);
  const double value = it == result.end() ? kNaN : it->second;
  Window& w = windows_[trial_id];
  w.values.push_back(value);
  if (w.values.size() > static_cast<size_t>(options_.num_results)) w.values.erase(w.values.begin());
  ++w.count;
  if (w.count < options_.grace_period) return false;
  if (w.values.size() < static_cast<size_t>(options_.num_results)) return false;
  if (options_.metric_threshold) {
    if (options_.mode == "min" && value > *options_.metric_threshold) return false;
    if (options_.mode == "max" && value < *options_.metric_threshold) return false;
  }
  return StdDev(w.values) < options_.std_dev;  // false with a NaN in the window
}

std::string TrialPlateauStopper::SaveState() const {
  json j = StateOf("TrialPlateauStopper");
  json trials = json::object();
  for (const auto& [id, w] : windows_) trials[id] = {{"count", w.count}, {"values", w.values}};
  j["trials"] = trials;
  return j.dump();
}

void TrialPlateauStopper::RestoreState(const std::string& state) {
  RestoreJson(state, "TrialPlateauStopper", [&](const json& j) {
    std::map<std::string, Window> windows;
    for (const auto& [id, t] : j.at("trials").items()) {
      Window w;
      w.count = t.at("count").get<int64_t>();
      for (const json& v : t.at("values")) w.values.push_back(prism::internal::JsonDouble(v));
      windows[id] = std::move(w);
    }
    windows_ = std::move(windows);
  });
}

// ---- ExperimentPlateauStopper ---------------------------------------------------------------

ExperimentPlateauStopper::ExperimentPlateauStopper(ExperimentPlateauOptions options)
    : options_(std::move(options)) {
  const std::string who = "prism::tune::ExperimentPlateauStopper: ";
  if (options_.metric.empty()) throw Error(who + "name the metric to watch");
  if (options_.mode != "min" && options_.mode != "max") {
    throw Error(who + "mode is \"" + options_.mode + "\"; pass \"min\" or \"max\"");
  }
  if (options_.top <= 1) {
    throw Error(who + "top is " + std::to_string(options_.top) +
                "; the deviation needs the best 2 results or more (Ray's default is 10)");
  }
  if (options_.patience < 0) throw Error(who + "patience is negative; pass 0 or more results");
  if (!(options_.std_dev > 0)) {
    throw Error(who + "std is " + FormatNumber(options_.std_dev) + "; pass a deviation > 0");
  }
}

bool ExperimentPlateauStopper::ShouldStop(const std::string& trial_id, const Metrics& result) {
  auto it = result.find(options_.metric);
  if (it == result.end()) {
    std::string have;
    for (const auto& [k, v] : result) have += (have.empty() ? "" : ", ") + k;
    throw Error("prism::tune::ExperimentPlateauStopper: trial " + trial_id + " reported a result without \"" +
                options_.metric + "\" (it reported: " + have + "); report it in every result, or watch a "
                "metric every trial reports");
  }
  const double value = it->second;
  if (!std::isnan(value)) {
    top_values_.insert(std::upper_bound(top_values_.begin(), top_values_.end(), value), value);
    if (top_values_.size() > static_cast<size_t>(options_.top)) {
      // Keep the best: the smallest for "min", the largest for "max".
      if (options_.mode == "min") {
        top_values_.pop_back();
      } else {
        top_values_.erase(top_values_.begin());
      }
    }
  }
  iterations_ = HasPlateaued() ? iterations_ + 1 : 0;
  return StopAll();
}

bool ExperimentPlateauStopper::HasPlateaued() const {
  return top_values_.size() == static_cast<size_t>(options_.top) && StdDev(top_values_) <= options_.std_dev;
}

bool ExperimentPlateauStopper::StopAll() { return HasPlateaued() && iterations_ >= options_.patience; }

std::string ExperimentPlateauStopper::SaveState() const {
  json j = StateOf("ExperimentPlateauStopper");
  j["top_values"] = top_values_;
  j["iterations"] = iterations_;
  return j.dump();
}

void ExperimentPlateauStopper::RestoreState(const std::string& state) {
  RestoreJson(state, "ExperimentPlateauStopper", [&](const json& j) {
    std::vector<double> top;
    for (const json& v : j.at("top_values")) top.push_back(prism::internal::JsonDouble(v));
    if (top.size() > static_cast<size_t>(options_.top) || !std::is_sorted(top.begin(), top.end())) {
      throw Error("the saved top values do not fit top = " + std::to_string(options_.top));
    }
    top_values_ = std::move(top);
    iterations_ = j.at("iterations").get<int64_t>();
  });
}

// ---- TimeoutStopper -------------------------------------------------------------------------

TimeoutStopper::TimeoutStopper(double timeout_s, std::function<double()> now)
    : timeout_s_(timeout_s), budget_(timeout_s), now_(std::move(now)) {
  if (std::isnan(timeout_s)) throw Error("prism::tune::TimeoutStopper: the timeout is not a number");
  if (!now_) {
    now_ = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  }
}

bool TimeoutStopper::StopAll() {
  const double now = now_();
  if (last_check_) budget_ -= now - *last_check_;
  last_check_ = now;
  return budget_ <= 0;
}

std::string TimeoutStopper::SaveState() const {
  json j = StateOf("TimeoutStopper");
  j["budget_s"] = budget_;
  j["timeout_s"] = timeout_s_;
  return j.dump();
}

void TimeoutStopper::RestoreState(const std::string& state) {
  RestoreJson(state, "TimeoutStopper", [&](const json& j) {
    budget_ = j.at("budget_s").get<double>();
    last_check_.reset();  // the time the experiment was not running is not counted (Ray's too)
  });
}

// ---- FunctionStopper, CombinedStopper -------------------------------------------------------

FunctionStopper::FunctionStopper(Fn fn) : fn_(std::move(fn)) {
  if (!fn_) throw Error("prism::tune::FunctionStopper: the function is empty");
}

CombinedStopper::CombinedStopper(std::vector<std::shared_ptr<Stopper>> stoppers) : stoppers_(std::move(stoppers)) {
  for (size_t i = 0; i < stoppers_.size(); ++i) {
    if (!stoppers_[i]) throw Error("prism::tune::CombinedStopper: stopper " + std::to_string(i) + " is null");
  }
}

bool CombinedStopper::ShouldStop(const std::string& trial_id, const Metrics& result) {
  return std::any_of(stoppers_.begin(), stoppers_.end(),
                     [&](const auto& s) { return s->ShouldStop(trial_id, result); });
}

bool CombinedStopper::StopAll() {
  return std::any_of(stoppers_.begin(), stoppers_.end(), [](const auto& s) { return s->StopAll(); });
}

std::string CombinedStopper::SaveState() const {
  json j = StateOf("CombinedStopper");
  json parts = json::array();
  for (const auto& s : stoppers_) parts.push_back(s->SaveState());
  j["parts"] = parts;
  return j.dump();
}

void CombinedStopper::RestoreState(const std::string& state) {
  std::vector<std::string> parts;
  RestoreJson(state, "CombinedStopper", [&](const json& j) {
    parts = j.at("parts").get<std::vector<std::string>>();
    if (parts.size() != stoppers_.size()) {
      throw Error("it was saved with " + std::to_string(parts.size()) + " stoppers, not " +
                  std::to_string(stoppers_.size()));
    }
  });
  for (size_t i = 0; i < parts.size(); ++i) stoppers_[i]->RestoreState(parts[i]);
}

}  // namespace prism::tune
