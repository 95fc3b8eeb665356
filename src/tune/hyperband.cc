// Synchronous HyperBand, as Ray Tune's HyperBandScheduler.
//
// Trials go into brackets, brackets into bands. A band holds s_max + 1 brackets with
// s_max + 1 = round(log(max_t) / log(rf)) + 1; bracket s takes n = ceil((s_max + 1) /
// (s + 1) * rf^s) trials that first run to r = int(max_t * rf^-s) (a bracket with r = 0 is
// skipped). New trials fill the current bracket; when it is full the next one opens, s = 0
// first, and when the band is full a new band starts.
//
// A trial that reports time_attr >= the bracket's milestone pauses. When every live trial of
// the bracket has reached the milestone, the bracket halves: n = ceil(n / rf), the milestone
// becomes int(min(r * rf, max_t)); the n best (by their latest result) go on and the rest
// stop. The trial whose result triggered it gets the decision as its return value; paused
// winners are unpaused through ChooseTrialToRun, paused losers are stopped through
// TrialRunner::StopTrial. After the last halving (s halvings in bracket s), the bracket is
// finished once all reach max_t: every trial left is stopped (stop_last_trials).
//
// Differences from Ray, where Ray would hang or lose a decision: the "being processed" flag
// only guards against re-entry (Ray sets it once and never clears it, so a trial leaving a
// bracket after its first halving never triggers the next one); a loser that is running but
// is not the trial being decided on is stopped through StopTrial (Ray drops that decision).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
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

constexpr const char* kHyperBandWho = "HyperBandScheduler";

// A live trial's latest result, as far as HyperBand needs it.
struct Progress {
  double time = 0;
  double score = 0;  // the metric, oriented so that higher is better
};

struct SyncBracket {
  int s = 0;
  double rf = 3, max_t = 81;
  bool stop_last_trials = true;
  int64_t n = 0, n0 = 0;
  double r = 0, r0 = 0, cumul_r = 0;
  int halves = 0;
  double total_work = 0, completed_progress = 0;
  bool being_processed = false;
  // Live trials in the order they joined, with their latest result (none yet: nullopt).
  std::vector<std::pair<std::string, std::optional<Progress>>> live;
  std::vector<std::string> all;
  std::set<std::string> to_unpause;

  static double TotalWork(int64_t n, double r, int s, double rf, double max_t) {
    // Ray's _calculate_total_work, which caps with max_t - r0 (only a progress estimate).
    double work = 0, cumulative_r = r;
    double nn = static_cast<double>(n);
    for (int i = 0; i <= s; ++i) {
      work += std::trunc(nn) * std::trunc(r);
      nn = std::ceil(nn / rf);
      r = std::trunc(std::min(r * rf, max_t - cumulative_r));
    }
    return work;
  }

  auto Find(const std::string& id) {
    return std::find_if(live.begin(), live.end(), [&](const auto& p) { return p.first == id; });
  }
  bool IsLive(const std::string& id) { return Find(id) != live.end(); }
  static double TimeOf(const std::optional<Progress>& p) { return p ? p->time : 0; }

  bool Filled() const { return static_cast<int64_t>(live.size()) == n; }
  bool CurIterDone() const {
    return std::all_of(live.begin(), live.end(), [&](const auto& p) { return TimeOf(p.second) >= cumul_r; });
  }
  bool Finished() const { return stop_last_trials && halves == 0 && CurIterDone(); }
  bool ContinueTrial(const std::string& id) {
    if (!stop_last_trials && halves == 0) return true;
    return TimeOf(Find(id)->second) < cumul_r;
  }
  void Update(const std::string& id, const Progress& p) {
    auto it = Find(id);
    completed_progress += p.time - TimeOf(it->second);
    it->second = p;
    to_unpause.erase(id);
  }
  void Cleanup(const std::string& id) {
    auto it = Find(id);
    if (it != live.end()) live.erase(it);
  }
  double CompletionPercentage() const {
    if (Finished()) return 1.0;
    return std::min(completed_progress / total_work, 1.0);
  }
  // Ray's successive_halving: the new n and milestone, then (good, bad) by latest score.
  std::pair<std::vector<std::string>, std::vector<std::string>> Halve() {
    std::vector<std::string> order;
    for (const auto& [id, p] : live) order.push_back(id);
    if (halves == 0 && !stop_last_trials) return {order, {}};
    --halves;
    n = static_cast<int64_t>(std::ceil(static_cast<double>(n) / rf));
    r = std::trunc(std::min(r * rf, max_t));
    cumul_r = r;
    std::vector<std::pair<std::string, double>> scored;
    for (const auto& [id, p] : live) scored.emplace_back(id, p->score);
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& a, const auto& b) { return a.second < b.second; });
    size_t keep = std::min(static_cast<size_t>(n), scored.size());
    std::vector<std::string> good, bad;
    for (size_t i = 0; i < scored.size(); ++i) {
      (i < scored.size() - keep ? bad : good).push_back(scored[i].first);
    }
    return {good, bad};
  }
};

}  // namespace

struct HyperBandScheduler::Impl {
  HyperBandOptions options;
  int s_max_1 = 0;
  std::vector<SyncBracket> brackets;
  std::vector<std::vector<int>> bands{{}};  // bracket index, or -1 for a skipped bracket
  int current = -1;                         // the bracket new trials join
  size_t band_idx = 0;
  std::map<std::string, int> trial_bracket;
  int64_t num_stopped = 0;

  int64_t N0(int s) const {
    return static_cast<int64_t>(std::ceil(static_cast<double>(s_max_1) / (s + 1) * std::pow(options.reduction_factor, s)));
  }
  double R0(int s) const { return std::trunc(options.max_t * std::pow(options.reduction_factor, -s)); }

  void CheckReady() const {
    if (options.metric.empty() || options.mode.empty()) {
      throw Error(std::string("prism::tune: ") + kHyperBandWho +
                  " has no metric or mode: pass them to it or to TuneConfig (metric, mode)");
    }
  }

  int Add(const std::string& id) {
    if (current < 0 || brackets[current].Filled()) {
      while (true) {
        if (static_cast<int>(bands[band_idx].size()) == s_max_1) {
          bands.emplace_back();
          ++band_idx;
        }
        int s = static_cast<int>(bands[band_idx].size());
        if (R0(s) == 0) {
          bands[band_idx].push_back(-1);
          current = -1;
          continue;
        }
        SyncBracket b;
        b.s = s;
        b.rf = options.reduction_factor;
        b.max_t = options.max_t;
        b.stop_last_trials = options.stop_last_trials;
        b.n = b.n0 = N0(s);
        b.r = b.r0 = b.cumul_r = R0(s);
        b.halves = s;
        b.total_work = SyncBracket::TotalWork(b.n0, b.r0, s, b.rf, b.max_t);
        brackets.push_back(std::move(b));
        current = static_cast<int>(brackets.size()) - 1;
        bands[band_idx].push_back(current);
        break;
      }
    }
    brackets[current].live.emplace_back(id, std::nullopt);
    brackets[current].all.push_back(id);
    trial_bracket[id] = current;
    return current;
  }

  static std::map<std::string, Trial*> ById(TrialRunner& runner) {
    std::map<std::string, Trial*> out;
    for (Trial* t : runner.Trials()) out[t->id] = t;
    return out;
  }

  // Stops a trial other than the one being decided on; it leaves the bracket first, so a
  // Tuner that reports the stop back (OnTrialComplete) finds nothing left to do.
  void StopOther(TrialRunner& runner, SyncBracket& b, const std::string& id,
                 const std::map<std::string, Trial*>& trials) {
    b.Cleanup(id);
    auto it = trials.find(id);
    if (it != trials.end()) runner.StopTrial(*it->second);
  }

  Decision Process(TrialRunner& runner, int index, const Trial* current_trial) {
    SyncBracket& b = brackets[index];
    Decision action = Decision::kPause;
    if (!b.CurIterDone()) return action;
    auto is_current = [&](const std::string& id) { return current_trial && current_trial->id == id; };
    std::map<std::string, Trial*> trials = ById(runner);
    if (b.Finished()) {
      std::vector<std::string> rest;
      for (const auto& [id, p] : b.live) {
        if (!is_current(id)) rest.push_back(id);
      }
      for (const std::string& id : rest) StopOther(runner, b, id, trials);
      return Decision::kStop;
    }
    b.being_processed = true;
    auto [good, bad] = b.Halve();
    num_stopped += static_cast<int64_t>(bad.size());
    for (const std::string& id : bad) {
      if (is_current(id)) {
        b.Cleanup(id);
        action = Decision::kStop;
      } else {
        StopOther(runner, b, id, trials);
      }
    }
    for (const std::string& id : good) {
      if (!b.IsLive(id)) continue;  // left during a StopTrial callback
      if (b.ContinueTrial(id)) {
        if (is_current(id)) {
          action = Decision::kContinue;
        } else {
          // Paused, or still pausing (the Tuner pauses a trial when its task ends; Ray's
          // is_saving case): ChooseTrialToRun resumes it. A pending one runs anyway.
          auto it = trials.find(id);
          if (it != trials.end() && it->second->status != TrialStatus::kPending) b.to_unpause.insert(id);
        }
      } else if (b.Finished() && b.stop_last_trials) {
        if (is_current(id)) {
          b.Cleanup(id);
          action = Decision::kStop;
        } else {
          StopOther(runner, b, id, trials);
        }
      }
    }
    b.being_processed = false;
    return action;
  }

  void Remove(TrialRunner& runner, const Trial& trial) {
    auto it = trial_bracket.find(trial.id);
    if (it == trial_bracket.end()) return;
    SyncBracket& b = brackets[it->second];
    if (!b.IsLive(trial.id)) return;
    b.Cleanup(trial.id);
    if (!b.Finished() && !b.being_processed) Process(runner, it->second, nullptr);
  }
};

HyperBandScheduler::HyperBandScheduler(HyperBandOptions options) : impl_(std::make_unique<Impl>()) {
  const std::string who = std::string("prism::tune: ") + kHyperBandWho + ": ";
  if (!(options.max_t >= 1)) {
    throw Error(who + "max_t is " + FormatNumber(options.max_t) +
                "; it must be at least 1 (the longest a trial runs, in units of time_attr)");
  }
  if (!(options.reduction_factor > 1)) {
    throw Error(who + "reduction_factor is " + FormatNumber(options.reduction_factor) +
                "; it must be greater than 1 (Ray's default is 3)");
  }
  if (!options.mode.empty()) internal::CheckMode(options.mode, kHyperBandWho);
  impl_->options = std::move(options);
  impl_->s_max_1 = static_cast<int>(std::round(std::log(impl_->options.max_t) /
                                               std::log(impl_->options.reduction_factor))) + 1;
}

HyperBandScheduler::~HyperBandScheduler() = default;

void HyperBandScheduler::SetSearchProperties(const std::string& metric, const std::string& mode) {
  internal::MergeMetricMode(impl_->options.metric, impl_->options.mode, metric, mode, kHyperBandWho);
}

void HyperBandScheduler::OnTrialAdd(TrialRunner&, Trial& trial) {
  impl_->CheckReady();
  if (impl_->trial_bracket.count(trial.id) == 0) impl_->Add(trial.id);
}

Decision HyperBandScheduler::OnTrialResult(TrialRunner& runner, Trial& trial, const Metrics& result) {
  impl_->CheckReady();
  const HyperBandOptions& o = impl_->options;
  auto t = result.find(o.time_attr);
  auto v = result.find(o.metric);
  if (t == result.end() || v == result.end()) {
    throw Error(std::string("prism::tune: ") + kHyperBandWho + ": a result of trial " + trial.id + " has no \"" +
                (t == result.end() ? o.time_attr : o.metric) +
                "\"; HyperBand needs time_attr and the metric in every report");
  }
  auto it = impl_->trial_bracket.find(trial.id);
  int index = it == impl_->trial_bracket.end() ? impl_->Add(trial.id) : it->second;
  SyncBracket& b = impl_->brackets[index];
  if (!b.IsLive(trial.id)) return Decision::kStop;  // already let go of (stopped)
  b.Update(trial.id, Progress{t->second, internal::Score(v->second, o.mode)});
  if (b.ContinueTrial(trial.id)) return Decision::kContinue;
  return impl_->Process(runner, index, &trial);
}

void HyperBandScheduler::OnTrialComplete(TrialRunner& runner, Trial& trial, const Metrics&) {
  impl_->Remove(runner, trial);
}

void HyperBandScheduler::OnTrialError(TrialRunner& runner, Trial& trial) { impl_->Remove(runner, trial); }

Trial* HyperBandScheduler::ChooseTrialToRun(TrialRunner&, const std::vector<Trial*>& candidates) {
  std::map<std::string, Trial*> by_id;
  for (Trial* t : candidates) by_id[t->id] = t;
  for (const std::vector<int>& band : impl_->bands) {
    std::vector<int> order;
    for (int i : band) {
      if (i >= 0) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return impl_->brackets[a].CompletionPercentage() < impl_->brackets[b].CompletionPercentage();
    });
    for (int i : order) {
      SyncBracket& b = impl_->brackets[i];
      for (const auto& [id, p] : b.live) {
        auto it = by_id.find(id);
        if (it == by_id.end()) continue;
        Trial* t = it->second;
        if (t->status == TrialStatus::kPending || (t->status == TrialStatus::kPaused && b.to_unpause.count(id))) {
          return t;
        }
      }
    }
  }
  return nullptr;
}

std::vector<std::pair<int, double>> HyperBandScheduler::BracketSizes() const {
  std::vector<std::pair<int, double>> out;
  for (int s = impl_->s_max_1 - 1; s >= 0; --s) {
    out.emplace_back(static_cast<int>(impl_->N0(s)), impl_->R0(s));
  }
  return out;
}

std::string HyperBandScheduler::DebugString() const {
  // Ray's layout; the per-status counts Ray prints come from the Tuner's own table, so a
  // bracket shows how many of its trials are still in it.
  std::ostringstream out;
  size_t total = 0;
  for (const auto& band : impl_->bands) total += band.size();
  out << "Using HyperBand: num_stopped=" << impl_->num_stopped << " total_brackets=" << total;
  for (size_t i = 0; i < impl_->bands.size(); ++i) {
    out << "\nRound #" << i << ":";
    for (int index : impl_->bands[i]) {
      if (index < 0) continue;
      const SyncBracket& b = impl_->brackets[index];
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.1f%%", 100 * b.CompletionPercentage());
      out << "\n  Bracket(Max Size (n)=" << b.n << ", Milestone (r)=" << FormatNumber(b.cumul_r)
          << ", completed=" << pct << "): {live: " << b.live.size() << ", added: " << b.all.size() << "}";
    }
  }
  return out.str();
}

std::string HyperBandScheduler::SaveState() const {
  nlohmann::json j;
  j["scheduler"] = kHyperBandWho;
  j["s_max_1"] = impl_->s_max_1;
  j["bands"] = impl_->bands;
  j["current"] = impl_->current;
  j["band_idx"] = impl_->band_idx;
  j["trial_bracket"] = impl_->trial_bracket;
  j["num_stopped"] = impl_->num_stopped;
  nlohmann::json brackets = nlohmann::json::array();
  for (const SyncBracket& b : impl_->brackets) {
    nlohmann::json live = nlohmann::json::array();
    for (const auto& [id, p] : b.live) {
      live.push_back(p ? nlohmann::json{{"id", id}, {"time", p->time}, {"score", p->score}}
                       : nlohmann::json{{"id", id}});
    }
    brackets.push_back({{"s", b.s},
                        {"n", b.n},
                        {"n0", b.n0},
                        {"r", b.r},
                        {"r0", b.r0},
                        {"cumul_r", b.cumul_r},
                        {"halves", b.halves},
                        {"total_work", b.total_work},
                        {"completed_progress", b.completed_progress},
                        {"live", live},
                        {"all", b.all},
                        {"to_unpause", b.to_unpause}});
  }
  j["brackets"] = brackets;
  return j.dump();
}

void HyperBandScheduler::RestoreState(const std::string& state) {
  internal::RestoreJsonState(state, kHyperBandWho, [&](const nlohmann::json& j) {
    if (j.at("s_max_1").get<int>() != impl_->s_max_1) {
      throw Error("the state has " + std::to_string(j.at("s_max_1").get<int>()) +
                  " brackets per band, this scheduler " + std::to_string(impl_->s_max_1));
    }
    std::vector<SyncBracket> brackets;
    for (const nlohmann::json& jb : j.at("brackets")) {
      SyncBracket b;
      b.rf = impl_->options.reduction_factor;
      b.max_t = impl_->options.max_t;
      b.stop_last_trials = impl_->options.stop_last_trials;
      b.s = jb.at("s");
      b.n = jb.at("n");
      b.n0 = jb.at("n0");
      b.r = jb.at("r");
      b.r0 = jb.at("r0");
      b.cumul_r = jb.at("cumul_r");
      b.halves = jb.at("halves");
      b.total_work = jb.at("total_work");
      b.completed_progress = jb.at("completed_progress");
      for (const nlohmann::json& jl : jb.at("live")) {
        std::optional<Progress> p;
        if (jl.contains("time")) p = Progress{jl.at("time"), jl.at("score")};
        b.live.emplace_back(jl.at("id").get<std::string>(), p);
      }
      b.all = jb.at("all").get<std::vector<std::string>>();
      b.to_unpause = jb.at("to_unpause").get<std::set<std::string>>();
      brackets.push_back(std::move(b));
    }
    auto bands = j.at("bands").get<std::vector<std::vector<int>>>();
    auto trial_bracket = j.at("trial_bracket").get<std::map<std::string, int>>();
    int current = j.at("current");
    auto valid = [&](int i) { return i >= -1 && i < static_cast<int>(brackets.size()); };
    for (const auto& band : bands) {
      for (int i : band) {
        if (!valid(i)) throw Error("a band names a bracket that does not exist");
      }
    }
    for (const auto& [id, i] : trial_bracket) {
      if (!valid(i) || i < 0) throw Error("trial " + id + " is in a bracket that does not exist");
    }
    size_t band_idx = j.at("band_idx");
    if (!valid(current) || bands.empty() || band_idx >= bands.size()) throw Error("the current bracket is invalid");
    impl_->brackets = std::move(brackets);
    impl_->bands = std::move(bands);
    impl_->trial_bracket = std::move(trial_bracket);
    impl_->current = current;
    impl_->band_idx = band_idx;
    impl_->num_stopped = j.at("num_stopped");
  });
}

}  // namespace prism::tune
