// ASHA: asynchronous successive halving, as Ray Tune's AsyncHyperBandScheduler.
//
// A bracket s has rungs at grace_period * rf^(k + s) for k = 0 .. K_s - 1, where
// K_s = int(log(max_t / grace_period) / log(rf) - s + 1); they are kept highest first. On a
// result at time t, the bracket walks its rungs from the top and acts on the first rung
// with milestone <= t that has no value of this trial yet: if the rung already holds values
// and the trial's value is below their (1 - 1/rf) quantile (numpy's nanpercentile, linear
// interpolation), the trial stops; either way its value is recorded there. Values are
// oriented so that higher is better (negated for mode "min"). A result at t >= max_t stops
// the trial outright (stop_last_trials). A trial joins bracket i with probability
// proportional to e^(rungs_i - max rungs) (Ray's softmax), drawn from a seeded generator.
//
// Ray's example (rf 2, one rung at 1): values 2, 4, 1 arrive: continue (no values yet),
// continue (4 >= 2), stop (1 < percentile([2, 4], 50) = 3).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "prism/errors.h"
#include "prism/tune/schedulers.h"
#include "tune/metric_mode.h"
#include "tune/scheduler_state.h"
#include "tune/numbers.h"

namespace prism::tune {

namespace {

using internal::FormatNumber;
using internal::Uniform01;

constexpr const char* kAsyncHyperBandWho = "AsyncHyperBandScheduler";

// numpy.nanpercentile(values, q) with the default "linear" method (NaNs ignored; NaN if all
// are NaN), including numpy's two-sided lerp.
double NanPercentile(std::vector<double> values, double q) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }),
               values.end());
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  auto lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, values.size() - 1);
  double t = rank - static_cast<double>(lo);
  double a = values[lo], b = values[hi];
  double diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

struct Rung {
  double milestone = 0;
  std::map<std::string, double> recorded;  // trial id -> oriented value
};

struct Bracket {
  double rf = 4;
  bool stop_last_trials = true;
  std::vector<Rung> rungs;  // highest milestone first

  Bracket(double min_t, double max_t, double reduction_factor, int s, bool stop_last)
      : rf(reduction_factor), stop_last_trials(stop_last) {
    int max_rungs = static_cast<int>(std::log(max_t / min_t) / std::log(rf) - s + 1);
    for (int k = max_rungs - 1; k >= 0; --k) rungs.push_back({min_t * std::pow(rf, k + s), {}});
  }

  // The value a trial must reach at a rung: nullopt while the rung is empty.
  std::optional<double> Cutoff(const Rung& rung) const {
    if (rung.recorded.empty()) return std::nullopt;
    std::vector<double> values;
    values.reserve(rung.recorded.size());
    for (const auto& [id, v] : rung.recorded) values.push_back(v);
    return NanPercentile(std::move(values), (1 - 1 / rf) * 100);
  }

  Decision OnResult(const std::string& trial, double t, double value) {
    Decision action = Decision::kContinue;
    for (Rung& rung : rungs) {
      bool seen = rung.recorded.count(trial) > 0;
      // Without stop_last_trials a trial past max_t keeps going once it has been recorded.
      if (t >= rung.milestone && seen && !stop_last_trials) break;
      if (t < rung.milestone || seen) continue;
      std::optional<double> cutoff = Cutoff(rung);
      if (cutoff && value < *cutoff) action = Decision::kStop;
      rung.recorded[trial] = value;
      break;
    }
    return action;
  }
};

}  // namespace

struct AsyncHyperBandScheduler::Impl {
  AsyncHyperBandOptions options;
  std::vector<Bracket> brackets;
  std::map<std::string, size_t> trial_bracket;  // trial id -> index into brackets
  int64_t num_stopped = 0;
  std::mt19937_64 rng;

  void CheckReady() const {
    if (options.metric.empty() || options.mode.empty()) {
      throw Error(std::string("prism::tune: ") + kAsyncHyperBandWho +
                  " has no metric or mode: pass them to it or to TuneConfig (metric, mode)");
    }
  }

  size_t ChooseBracket() {
    if (brackets.size() == 1) return 0;
    size_t max_size = 0;
    for (const Bracket& b : brackets) max_size = std::max(max_size, b.rungs.size());
    std::vector<double> weights;
    double total = 0;
    for (const Bracket& b : brackets) {
      weights.push_back(std::exp(static_cast<double>(b.rungs.size()) - static_cast<double>(max_size)));
      total += weights.back();
    }
    double u = Uniform01(rng) * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (u < weights[i]) return i;
      u -= weights[i];
    }
    return weights.size() - 1;
  }

  size_t BracketOf(const std::string& id) {
    auto it = trial_bracket.find(id);
    if (it != trial_bracket.end()) return it->second;
    return trial_bracket[id] = ChooseBracket();
  }
};

AsyncHyperBandScheduler::AsyncHyperBandScheduler(AsyncHyperBandOptions options)
    : impl_(std::make_unique<Impl>()) {
  const std::string who = std::string("prism::tune: ") + kAsyncHyperBandWho + ": ";
  if (!(options.grace_period > 0)) {
    throw Error(who + "grace_period is " + FormatNumber(options.grace_period) +
                "; it must be positive (the first rung, in units of time_attr)");
  }
  if (!(options.max_t >= options.grace_period)) {
    throw Error(who + "max_t (" + FormatNumber(options.max_t) + ") is below grace_period (" +
                FormatNumber(options.grace_period) + "); max_t must be >= grace_period");
  }
  if (!(options.reduction_factor > 1)) {
    throw Error(who + "reduction_factor is " + FormatNumber(options.reduction_factor) +
                "; it must be greater than 1 (Ray's default is 4)");
  }
  if (options.brackets < 1) {
    throw Error(who + "brackets is " + std::to_string(options.brackets) + "; it must be at least 1");
  }
  if (!options.mode.empty()) internal::CheckMode(options.mode, kAsyncHyperBandWho);
  impl_->options = std::move(options);
  const AsyncHyperBandOptions& o = impl_->options;
  for (int s = 0; s < o.brackets; ++s) {
    impl_->brackets.emplace_back(o.grace_period, o.max_t, o.reduction_factor, s, o.stop_last_trials);
  }
  impl_->rng.seed(o.seed);
}

AsyncHyperBandScheduler::~AsyncHyperBandScheduler() = default;

void AsyncHyperBandScheduler::SetSearchProperties(const std::string& metric, const std::string& mode) {
  internal::MergeMetricMode(impl_->options.metric, impl_->options.mode, metric, mode, kAsyncHyperBandWho);
}

void AsyncHyperBandScheduler::OnTrialAdd(TrialRunner&, Trial& trial) {
  impl_->CheckReady();
  impl_->BracketOf(trial.id);
}

Decision AsyncHyperBandScheduler::OnTrialResult(TrialRunner&, Trial& trial, const Metrics& result) {
  impl_->CheckReady();
  const AsyncHyperBandOptions& o = impl_->options;
  auto t = result.find(o.time_attr);
  auto v = result.find(o.metric);
  if (t == result.end() || v == result.end()) return Decision::kContinue;
  Decision action;
  if (t->second >= o.max_t && o.stop_last_trials) {
    action = Decision::kStop;
  } else {
    Bracket& bracket = impl_->brackets[impl_->BracketOf(trial.id)];
    action = bracket.OnResult(trial.id, t->second, internal::Score(v->second, o.mode));
  }
  if (action == Decision::kStop) ++impl_->num_stopped;
  return action;
}

void AsyncHyperBandScheduler::OnTrialComplete(TrialRunner&, Trial& trial, const Metrics& result) {
  const AsyncHyperBandOptions& o = impl_->options;
  auto it = impl_->trial_bracket.find(trial.id);
  if (it == impl_->trial_bracket.end()) return;
  auto t = result.find(o.time_attr);
  auto v = result.find(o.metric);
  if (t == result.end() || v == result.end()) return;
  impl_->brackets[it->second].OnResult(trial.id, t->second, internal::Score(v->second, o.mode));
  impl_->trial_bracket.erase(it);
}

std::vector<std::vector<double>> AsyncHyperBandScheduler::Rungs() const {
  std::vector<std::vector<double>> out;
  for (const Bracket& b : impl_->brackets) {
    std::vector<double> milestones;
    for (const Rung& r : b.rungs) milestones.push_back(r.milestone);
    out.push_back(std::move(milestones));
  }
  return out;
}

std::string AsyncHyperBandScheduler::DebugString() const {
  // As Ray's, except that cutoffs are shown in the metric's own units (Ray shows them
  // negated for mode "min").
  std::ostringstream out;
  out << "Using AsyncHyperBand: num_stopped=" << impl_->num_stopped;
  for (const Bracket& b : impl_->brackets) {
    out << "\nBracket: ";
    for (size_t i = 0; i < b.rungs.size(); ++i) {
      if (i > 0) out << " | ";
      char milestone[64];
      std::snprintf(milestone, sizeof milestone, "%.3f", b.rungs[i].milestone);
      out << "Iter " << milestone << ": ";
      std::optional<double> cutoff = b.Cutoff(b.rungs[i]);
      if (cutoff) {
        out << FormatNumber(internal::Score(*cutoff, impl_->options.mode));
      } else {
        out << "None";
      }
    }
  }
  return out.str();
}

std::string AsyncHyperBandScheduler::SaveState() const {
  nlohmann::json j;
  j["scheduler"] = kAsyncHyperBandWho;
  j["num_stopped"] = impl_->num_stopped;
  j["trial_bracket"] = impl_->trial_bracket;
  nlohmann::json brackets = nlohmann::json::array();
  for (const Bracket& b : impl_->brackets) {
    nlohmann::json rungs = nlohmann::json::array();
    for (const Rung& r : b.rungs) {
      // JSON has no NaN: store values as text so a NaN metric survives the round trip.
      std::map<std::string, std::string> recorded;
      for (const auto& [id, v] : r.recorded) {
        std::ostringstream text;
        text.precision(17);
        text << v;
        recorded[id] = text.str();
      }
      rungs.push_back({{"milestone", r.milestone}, {"recorded", recorded}});
    }
    brackets.push_back(rungs);
  }
  j["brackets"] = brackets;
  j["rng"] = internal::RngText(impl_->rng);
  return j.dump();
}

void AsyncHyperBandScheduler::RestoreState(const std::string& state) {
  internal::RestoreJsonState(state, kAsyncHyperBandWho, [&](const nlohmann::json& j) {
    const nlohmann::json& brackets = j.at("brackets");
    if (brackets.size() != impl_->brackets.size()) {
      throw Error("the state has " + std::to_string(brackets.size()) + " brackets, this scheduler " +
                  std::to_string(impl_->brackets.size()));
    }
    for (size_t i = 0; i < brackets.size(); ++i) {
      Bracket& b = impl_->brackets[i];
      if (brackets[i].size() != b.rungs.size()) {
        throw Error("bracket " + std::to_string(i) + " has a different number of rungs");
      }
      for (size_t k = 0; k < b.rungs.size(); ++k) {
        b.rungs[k].recorded.clear();
        auto recorded = brackets[i][k].at("recorded").get<std::map<std::string, std::string>>();
        for (const auto& [id, text] : recorded) b.rungs[k].recorded[id] = std::stod(text);
      }
    }
    impl_->trial_bracket = j.at("trial_bracket").get<std::map<std::string, size_t>>();
    for (const auto& [id, index] : impl_->trial_bracket) {
      if (index >= impl_->brackets.size()) throw Error("trial " + id + " is in a bracket that does not exist");
    }
    impl_->num_stopped = j.at("num_stopped").get<int64_t>();
    impl_->rng = internal::RngFromText(j.at("rng").get<std::string>());
  });
}

}  // namespace prism::tune
