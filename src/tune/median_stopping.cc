// The median stopping rule (Vizier), as Ray Tune's MedianStoppingRule.
//
// Every result (time t = result[time_attr], value = result[metric]) is kept per trial. Once
// t >= grace_period, the trial is compared with the other trials whose latest result has
// reached t: for each, the running mean of its values reported at times in [grace_period, t];
// the trial stops if its best value so far is strictly worse than the median of those means
// (with hard_stop = false it pauses instead and is never judged again). With fewer than
// min_samples_required other trials, the trial pauses to give pending or paused trials a
// turn, at most once per min_time_slice, else continues.
//
// Difference from Ray: another trial with no result inside [grace_period, t] (it reported
// only before the grace period and after t) is not a sample; Ray takes the mean of nothing
// (NaN), whose median stops every trial compared with it.

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "prism/errors.h"
#include "prism/internal/json.h"
#include "prism/tune/schedulers.h"
#include "tune/metric_mode.h"
#include "tune/scheduler_state.h"
#include "tune/numbers.h"

namespace prism::tune {

namespace {

using internal::FormatNumber;

constexpr const char* kMedianStoppingWho = "MedianStoppingRule";

// Prism's JSON convention (prism/internal/json.h): a NaN or an infinity is written as null
// and read back as NaN. A journal written before it holds them as text ("nan", "inf").
nlohmann::json ToJson(double v) { return v; }
double FromJson(const nlohmann::json& j) {
  if (!j.is_string()) return prism::internal::JsonDouble(j);
  std::string s = j.get<std::string>();
  if (s == "nan" || s == "-nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  throw Error("\"" + s + "\" is not a number");
}

struct Sample {
  double time = 0;
  double value = 0;
};

}  // namespace

struct MedianStoppingRule::Impl {
  MedianStoppingOptions options;
  std::map<std::string, std::vector<Sample>> results;
  std::set<std::string> stopped;
  std::map<std::string, double> last_pause;  // absent: never paused (-inf)

  void CheckReady() const {
    if (options.metric.empty() || options.mode.empty()) {
      throw Error(std::string("prism::tune: ") + kMedianStoppingWho +
                  " has no metric or mode: pass them to it or to TuneConfig (metric, mode)");
    }
  }

  // Mean of the trial's values at times in [grace_period, time]; nullopt if there are none.
  std::optional<double> RunningMean(const std::vector<Sample>& samples, double time) const {
    double sum = 0;
    size_t count = 0;
    for (const Sample& s : samples) {
      if (options.grace_period <= s.time && s.time <= time) {
        sum += s.value;
        ++count;
      }
    }
    if (count == 0) return std::nullopt;
    return sum / static_cast<double>(count);
  }

  // The best value in the mode's sense, ignoring NaN (NaN if all are).
  double Best(const std::vector<Sample>& samples) const {
    double best = std::numeric_limits<double>::quiet_NaN();
    for (const Sample& s : samples) {
      if (std::isnan(s.value)) continue;
      if (std::isnan(best) || internal::Score(s.value, options.mode) > internal::Score(best, options.mode)) {
        best = s.value;
      }
    }
    return best;
  }

  static double Median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
};

MedianStoppingRule::MedianStoppingRule(MedianStoppingOptions options) : impl_(std::make_unique<Impl>()) {
  const std::string who = std::string("prism::tune: ") + kMedianStoppingWho + ": ";
  if (!(options.grace_period >= 0)) {
    throw Error(who + "grace_period is " + FormatNumber(options.grace_period) + "; it must be >= 0");
  }
  if (options.min_samples_required < 1) {
    throw Error(who + "min_samples_required is " + std::to_string(options.min_samples_required) +
                "; it must be at least 1 (other trials to take the median over)");
  }
  if (options.min_time_slice < 0) {
    throw Error(who + "min_time_slice is " + std::to_string(options.min_time_slice) + "; it must be >= 0");
  }
  if (!options.mode.empty()) internal::CheckMode(options.mode, kMedianStoppingWho);
  impl_->options = std::move(options);
}

MedianStoppingRule::~MedianStoppingRule() = default;

void MedianStoppingRule::SetSearchProperties(const std::string& metric, const std::string& mode) {
  internal::MergeMetricMode(impl_->options.metric, impl_->options.mode, metric, mode, kMedianStoppingWho);
}

Decision MedianStoppingRule::OnTrialResult(TrialRunner& runner, Trial& trial, const Metrics& result) {
  impl_->CheckReady();
  const MedianStoppingOptions& o = impl_->options;
  auto t = result.find(o.time_attr);
  auto v = result.find(o.metric);
  if (t == result.end() || v == result.end()) return Decision::kContinue;
  if (impl_->stopped.count(trial.id)) return Decision::kContinue;  // paused once (soft stop): FIFO now

  const double time = t->second;
  impl_->results[trial.id].push_back({time, v->second});
  if (time < o.grace_period) return Decision::kContinue;

  std::vector<double> means;
  for (const auto& [id, samples] : impl_->results) {
    if (id == trial.id || samples.back().time < time) continue;
    if (std::optional<double> mean = impl_->RunningMean(samples, time)) means.push_back(*mean);
  }

  if (static_cast<int>(means.size()) < o.min_samples_required) {
    auto last = impl_->last_pause.find(trial.id);
    double since = last == impl_->last_pause.end() ? std::numeric_limits<double>::infinity() : time - last->second;
    bool others_waiting = false;
    for (Trial* other : runner.Trials()) {
      if (other->id != trial.id &&
          (other->status == TrialStatus::kPending || other->status == TrialStatus::kPaused)) {
        others_waiting = true;
        break;
      }
    }
    if (since > o.min_time_slice && others_waiting) {
      impl_->last_pause[trial.id] = time;
      return Decision::kPause;
    }
    return Decision::kContinue;
  }

  double median = Impl::Median(std::move(means));
  double best = impl_->Best(impl_->results[trial.id]);
  bool worse = std::isnan(median) || std::isnan(best) ||
               internal::Score(median, o.mode) > internal::Score(best, o.mode);
  if (!worse) return Decision::kContinue;
  impl_->stopped.insert(trial.id);
  return o.hard_stop ? Decision::kStop : Decision::kPause;
}

void MedianStoppingRule::OnTrialComplete(TrialRunner&, Trial& trial, const Metrics& result) {
  const MedianStoppingOptions& o = impl_->options;
  auto t = result.find(o.time_attr);
  auto v = result.find(o.metric);
  if (t == result.end() || v == result.end()) return;
  impl_->results[trial.id].push_back({t->second, v->second});
}

std::string MedianStoppingRule::DebugString() const {
  return "Using MedianStoppingRule: num_stopped=" + std::to_string(impl_->stopped.size()) + ".";
}

std::string MedianStoppingRule::SaveState() const {
  nlohmann::json j;
  j["scheduler"] = kMedianStoppingWho;
  nlohmann::json results = nlohmann::json::object();
  for (const auto& [id, samples] : impl_->results) {
    nlohmann::json list = nlohmann::json::array();
    for (const Sample& s : samples) list.push_back({ToJson(s.time), ToJson(s.value)});
    results[id] = list;
  }
  j["results"] = results;
  j["stopped"] = impl_->stopped;
  nlohmann::json last_pause = nlohmann::json::object();
  for (const auto& [id, time] : impl_->last_pause) last_pause[id] = ToJson(time);
  j["last_pause"] = last_pause;
  return j.dump();
}

void MedianStoppingRule::RestoreState(const std::string& state) {
  internal::RestoreJsonState(state, kMedianStoppingWho, [&](const nlohmann::json& j) {
    std::map<std::string, std::vector<Sample>> results;
    for (const auto& [id, list] : j.at("results").items()) {
      for (const nlohmann::json& s : list) results[id].push_back({FromJson(s.at(0)), FromJson(s.at(1))});
      if (results[id].empty()) results.erase(id);
    }
    std::map<std::string, double> last_pause;
    for (const auto& [id, time] : j.at("last_pause").items()) last_pause[id] = FromJson(time);
    impl_->stopped = j.at("stopped").get<std::set<std::string>>();
    impl_->results = std::move(results);
    impl_->last_pause = std::move(last_pause);
  });
}

}  // namespace prism::tune
