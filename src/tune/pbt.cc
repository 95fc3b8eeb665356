// Population Based Training, as Ray Tune's PopulationBasedTraining (asynchronous mode).
//
// On a result at time t = result[time_attr] with t >= burn_in_period and at least
// perturbation_interval since the trial's last perturbation, the trial's score (the metric,
// negated for "min") and time are recorded and the population is ranked: the trials with a
// score that have not finished, sorted by score (ties in the order they were added). With
// N >= 2 of them, q = ceil(N * quantile_fraction), at most floor(N / 2); the bottom q are
// the lower quantile, the top q the upper one (all of them when q = 0, as Ray's slice
// trials[-0:]). A trial in the upper quantile has its latest checkpoint recorded as the one
// others copy. A trial in the lower quantile picks a random upper trial; if that one has a
// recorded checkpoint, the trial exploits it: its config becomes explore(source's config),
// its restore_from the source's checkpoint, its perturbation time the source's, and it
// pauses (the Tuner restarts it from restore_from). Otherwise it pauses if another trial is
// waiting for a slot (time sharing) and else continues.
//
// explore (Ray's _explore), per mutated key: for a Choice, with probability
// resample_probability (or if the value is not one of its values) a random value, else one
// index left or right, clamped; for a numeric domain, with probability resample_probability
// a fresh sample, else the value times one of perturbation_factors (no clipping, as Ray),
// truncated to an integer for RandInt/LogRandInt (Ray: when the value was an int).
//
// All random draws come from one std::mt19937_64 seeded with PBTOptions::seed, turned into
// numbers by the same arithmetic everywhere, so a run is reproducible; its state is part of
// SaveState.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
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
using internal::Uniform01;

constexpr const char* kPbtWho = "PopulationBasedTraining";

size_t Index(std::mt19937_64& rng, size_t n) {
  return std::min(static_cast<size_t>(Uniform01(rng) * static_cast<double>(n)), n - 1);
}

bool ParseDouble(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

// Whether a config's text is the choice `v` (as ToText writes it, or the same number).
bool SameValue(const std::string& text, const Value& v) {
  if (text == ToText(v)) return true;
  double x = 0;
  if (const auto* i = std::get_if<int64_t>(&v)) return ParseDouble(text, x) && x == static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return ParseDouble(text, x) && x == *d;
  if (const auto* b = std::get_if<bool>(&v)) return text == (*b ? "1" : "0");
  return false;
}

bool IsNumeric(Domain::Kind kind) {
  switch (kind) {
    case Domain::Kind::kUniform:
    case Domain::Kind::kLogUniform:
    case Domain::Kind::kRandn:
    case Domain::Kind::kRandInt:
    case Domain::Kind::kLogRandInt:
      return true;
    default:
      return false;
  }
}

Config ConfigFromJson(const nlohmann::json& j) {
  Config c;
  for (const auto& [k, v] : j.get<std::map<std::string, std::string>>()) c.Set(k, v);
  return c;
}

nlohmann::json NumberToJson(double v) {
  if (std::isfinite(v)) return v;
  return FormatNumber(v);  // "nan", "inf", "-inf": JSON has no such numbers
}
double NumberFromJson(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  std::string s = j.get<std::string>();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

struct PbtTrial {
  std::optional<double> last_score;
  std::string last_checkpoint;  // "" : none (not in the upper quantile at its last ranking)
  double last_perturbation_time = 0;
  double last_train_time = 0;
};

}  // namespace

struct PopulationBasedTraining::Impl {
  PBTOptions options;
  std::vector<std::string> order;  // trial ids in the order they were added
  std::map<std::string, PbtTrial> states;
  std::set<std::string> finished;
  std::mt19937_64 rng;
  std::vector<PerturbationRecord> log;
  int64_t num_checkpoints = 0;
  int64_t num_perturbations = 0;

  void CheckReady() const {
    if (options.metric.empty() || options.mode.empty()) {
      throw Error(std::string("prism::tune: ") + kPbtWho +
                  " has no metric or mode: pass them to it or to TuneConfig (metric, mode)");
    }
  }

  PbtTrial& State(const std::string& id) {
    auto it = states.find(id);
    if (it != states.end()) return it->second;
    order.push_back(id);
    return states[id];
  }
};

int PopulationBasedTraining::QuantileSize(int n, double quantile_fraction) {
  if (n <= 1) return 0;
  int q = static_cast<int>(std::ceil(n * quantile_fraction));
  if (q > n / 2.0) q = n / 2;
  return q;
}

Config PopulationBasedTraining::Explore(const Config& config, const PBTOptions& options, std::mt19937_64& rng,
                                        std::map<std::string, std::string>* operations) {
  Config out = config;
  auto note = [&](const std::string& key, std::string op) {
    if (operations) (*operations)[key] = std::move(op);
  };
  for (const auto& [key, domain] : options.hyperparam_mutations) {
    if (domain.kind() == Domain::Kind::kChoice) {
      const std::vector<Value>& values = domain.values();
      if (values.empty()) {
        throw Error(std::string("prism::tune: ") + kPbtWho + ": hyperparam_mutations[\"" + key +
                    "\"] is an empty Choice; give it values");
      }
      bool resample = Uniform01(rng) < options.resample_probability;
      std::optional<size_t> old_index;
      if (config.Has(key)) {
        std::string text = config.Get<std::string>(key, "");
        for (size_t i = 0; i < values.size(); ++i) {
          if (SameValue(text, values[i])) {
            old_index = i;
            break;
          }
        }
      }
      if (resample || !old_index) {
        out.Set(key, ToText(values[Index(rng, values.size())]));
        note(key, "resample");
      } else {
        int shift = Uniform01(rng) < 0.5 ? -1 : 1;
        auto last = static_cast<int64_t>(values.size()) - 1;
        size_t new_index = static_cast<size_t>(std::clamp<int64_t>(static_cast<int64_t>(*old_index) + shift, 0, last));
        out.Set(key, ToText(values[new_index]));
        note(key, std::string(shift < 0 ? "shift left" : "shift right") + (new_index == *old_index ? " (noop)" : ""));
      }
    } else if (IsNumeric(domain.kind())) {
      if (!config.Has(key)) {
        throw Error(std::string("prism::tune: ") + kPbtWho + ": the config to perturb has no \"" + key +
                    "\"; every key of hyperparam_mutations must be in the trial's config");
      }
      double x;
      if (Uniform01(rng) < options.resample_probability) {
        Value v = domain.Sample(rng, config);
        if (const auto* i = std::get_if<int64_t>(&v)) {
          x = static_cast<double>(*i);
        } else if (const auto* d = std::get_if<double>(&v)) {
          x = *d;
        } else {
          throw Error(std::string("prism::tune: ") + kPbtWho + ": " + domain.ToString() + " sampled a non-number for \"" +
                      key + "\"");
        }
        note(key, "resample");
      } else {
        double factor = Uniform01(rng) < 0.5 ? options.perturbation_factors.first : options.perturbation_factors.second;
        x = config.Get<double>(key, 0) * factor;
        note(key, "* " + FormatNumber(factor));
      }
      if (domain.is_integer()) {
        out.Set(key, static_cast<int64_t>(std::trunc(x)));
      } else {
        out.Set(key, ToText(Value(x)));
      }
    } else {
      throw Error(std::string("prism::tune: ") + kPbtWho + ": hyperparam_mutations[\"" + key + "\"] is " +
                  domain.ToString() +
                  "; PBT perturbs only Choice lists and numeric domains (Uniform, LogUniform, Randn, RandInt, "
                  "LogRandInt)");
    }
  }
  return out;
}

PopulationBasedTraining::PopulationBasedTraining(PBTOptions options) : impl_(std::make_unique<Impl>()) {
  const std::string who = std::string("prism::tune: ") + kPbtWho + ": ";
  if (options.hyperparam_mutations.empty()) {
    throw Error(who + "hyperparam_mutations is empty; name the hyperparameters to perturb, e.g. "
                      "{{\"lr\", tune::LogUniform(1e-4, 1e-1)}, {\"batch\", tune::Choice({32, 64, 128})}}");
  }
  for (const auto& [key, domain] : options.hyperparam_mutations) {
    if (domain.kind() != Domain::Kind::kChoice && !IsNumeric(domain.kind())) {
      throw Error(who + "hyperparam_mutations[\"" + key + "\"] is " + domain.ToString() +
                  "; use a Choice list or a numeric domain (Uniform, LogUniform, Randn, RandInt, LogRandInt): "
                  "PBT cannot perturb a constant, a grid or a SampleFrom");
    }
    if (domain.kind() == Domain::Kind::kChoice && domain.values().empty()) {
      throw Error(who + "hyperparam_mutations[\"" + key + "\"] is an empty Choice; give it values");
    }
  }
  if (!(options.quantile_fraction >= 0 && options.quantile_fraction <= 0.5)) {
    throw Error(who + "quantile_fraction is " + FormatNumber(options.quantile_fraction) +
                "; it must be between 0 and 0.5 (the share of trials in each of the top and bottom quantiles)");
  }
  if (!(options.resample_probability >= 0 && options.resample_probability <= 1)) {
    throw Error(who + "resample_probability is " + FormatNumber(options.resample_probability) +
                "; it must be between 0 and 1");
  }
  if (!(options.perturbation_interval > 0)) {
    throw Error(who + "perturbation_interval is " + FormatNumber(options.perturbation_interval) +
                "; it must be positive (in units of time_attr)");
  }
  if (!options.mode.empty()) internal::CheckMode(options.mode, kPbtWho);
  impl_->options = std::move(options);
  impl_->rng.seed(impl_->options.seed);
}

PopulationBasedTraining::~PopulationBasedTraining() = default;

void PopulationBasedTraining::SetSearchProperties(const std::string& metric, const std::string& mode) {
  internal::MergeMetricMode(impl_->options.metric, impl_->options.mode, metric, mode, kPbtWho);
}

void PopulationBasedTraining::OnTrialAdd(TrialRunner&, Trial& trial) {
  impl_->CheckReady();
  impl_->State(trial.id);
  // As Ray: a mutated hyperparameter missing from the trial's config is drawn from its domain.
  for (const auto& [key, domain] : impl_->options.hyperparam_mutations) {
    if (!trial.config.Has(key)) trial.config.Set(key, ToText(domain.Sample(impl_->rng, trial.config)));
  }
}

Decision PopulationBasedTraining::OnTrialResult(TrialRunner& runner, Trial& trial, const Metrics& result) {
  impl_->CheckReady();
  const PBTOptions& o = impl_->options;
  for (const std::string* name : {&o.time_attr, &o.metric}) {
    if (result.count(*name) == 0) {
      throw Error(std::string("prism::tune: ") + kPbtWho + ": a result of trial " + trial.id + " has no \"" + *name +
                  "\"; PBT needs time_attr and the metric in every report");
    }
  }
  const double time = result.at(o.time_attr);
  PbtTrial& state = impl_->State(trial.id);
  if (time < o.burn_in_period) return Decision::kContinue;
  if (time - state.last_perturbation_time < o.perturbation_interval) return Decision::kContinue;

  state.last_score = internal::Score(result.at(o.metric), o.mode);
  state.last_train_time = time;
  state.last_perturbation_time = time;

  std::map<std::string, Trial*> trials;
  for (Trial* t : runner.Trials()) trials[t->id] = t;
  auto is_finished = [&](const std::string& id) {
    if (impl_->finished.count(id)) return true;
    auto it = trials.find(id);
    return it != trials.end() &&
           (it->second->status == TrialStatus::kTerminated || it->second->status == TrialStatus::kError);
  };

  // Ray's _quantiles.
  std::vector<std::string> ranked;
  for (const std::string& id : impl_->order) {
    if (impl_->states[id].last_score && !is_finished(id)) ranked.push_back(id);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [&](const std::string& a, const std::string& b) {
    return *impl_->states[a].last_score < *impl_->states[b].last_score;
  });
  std::vector<std::string> lower, upper;
  if (ranked.size() > 1) {
    auto q = static_cast<size_t>(QuantileSize(static_cast<int>(ranked.size()), o.quantile_fraction));
    lower.assign(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(q));
    upper.assign(q == 0 ? ranked.begin() : ranked.end() - static_cast<std::ptrdiff_t>(q), ranked.end());
  }

  Decision decision = Decision::kContinue;
  for (const auto& [id, t] : trials) {
    if (t->status == TrialStatus::kPending || t->status == TrialStatus::kPaused) {
      decision = Decision::kPause;
      break;
    }
  }

  auto contains = [](const std::vector<std::string>& v, const std::string& id) {
    return std::find(v.begin(), v.end(), id) != v.end();
  };
  if (contains(upper, trial.id)) {
    state.last_checkpoint = trial.checkpoint;
    ++impl_->num_checkpoints;
  } else {
    state.last_checkpoint.clear();
  }
  if (!contains(lower, trial.id)) return decision;

  const std::string& source_id = upper[Index(impl_->rng, upper.size())];
  const PbtTrial& source = impl_->states[source_id];
  auto source_trial = trials.find(source_id);
  if (source.last_checkpoint.empty() || source_trial == trials.end()) return decision;  // Ray: skip the exploit

  PerturbationRecord record;
  record.time = time;
  record.trial = trial.id;
  record.source = source_id;
  record.source_checkpoint = source.last_checkpoint;
  record.old_config = source_trial->second->config;
  record.new_config = Explore(source_trial->second->config, o, impl_->rng);
  trial.config = record.new_config;
  trial.restore_from = source.last_checkpoint;
  state.last_perturbation_time = source.last_perturbation_time;
  state.last_train_time = source.last_train_time;
  ++impl_->num_perturbations;
  impl_->log.push_back(std::move(record));
  return Decision::kPause;
}

void PopulationBasedTraining::OnTrialComplete(TrialRunner&, Trial& trial, const Metrics&) {
  impl_->finished.insert(trial.id);
}

Trial* PopulationBasedTraining::ChooseTrialToRun(TrialRunner&, const std::vector<Trial*>& candidates) {
  // Ray: the candidate with the least training time first, so the population advances
  // evenly. A trial that has just exploited another (restore_from set) goes before all.
  Trial* best = nullptr;
  auto key = [&](Trial* t) {
    auto it = impl_->states.find(t->id);
    double time = it == impl_->states.end() ? 0 : it->second.last_train_time;
    return std::make_pair(t->restore_from.empty(), time);
  };
  for (Trial* t : candidates) {
    if (t->status != TrialStatus::kPending && t->status != TrialStatus::kPaused) continue;
    if (!best || key(t) < key(best)) best = t;
  }
  return best;
}

const std::vector<PerturbationRecord>& PopulationBasedTraining::PolicyLog() const { return impl_->log; }

std::string PopulationBasedTraining::DebugString() const {
  return "PopulationBasedTraining: " + std::to_string(impl_->num_checkpoints) + " checkpoints, " +
         std::to_string(impl_->num_perturbations) + " perturbs";
}

std::string PopulationBasedTraining::SaveState() const {
  nlohmann::json j;
  j["scheduler"] = kPbtWho;
  nlohmann::json states = nlohmann::json::array();
  for (const std::string& id : impl_->order) {
    const PbtTrial& s = impl_->states.at(id);
    states.push_back({{"id", id},
                      {"last_score", s.last_score ? NumberToJson(*s.last_score) : nlohmann::json()},
                      {"last_checkpoint", s.last_checkpoint},
                      {"last_perturbation_time", NumberToJson(s.last_perturbation_time)},
                      {"last_train_time", NumberToJson(s.last_train_time)}});
  }
  j["trials"] = states;
  j["finished"] = impl_->finished;
  nlohmann::json log = nlohmann::json::array();
  for (const PerturbationRecord& r : impl_->log) {
    log.push_back({{"time", NumberToJson(r.time)},
                   {"trial", r.trial},
                   {"source", r.source},
                   {"source_checkpoint", r.source_checkpoint},
                   {"old_config", r.old_config.Values()},
                   {"new_config", r.new_config.Values()}});
  }
  j["policy_log"] = log;
  j["num_checkpoints"] = impl_->num_checkpoints;
  j["num_perturbations"] = impl_->num_perturbations;
  j["rng"] = internal::RngText(impl_->rng);
  return j.dump();
}

void PopulationBasedTraining::RestoreState(const std::string& state) {
  internal::RestoreJsonState(state, kPbtWho, [&](const nlohmann::json& j) {
    std::vector<std::string> order;
    std::map<std::string, PbtTrial> states;
    for (const nlohmann::json& js : j.at("trials")) {
      std::string id = js.at("id");
      PbtTrial s;
      if (!js.at("last_score").is_null()) s.last_score = NumberFromJson(js.at("last_score"));
      s.last_checkpoint = js.at("last_checkpoint");
      s.last_perturbation_time = NumberFromJson(js.at("last_perturbation_time"));
      s.last_train_time = NumberFromJson(js.at("last_train_time"));
      if (states.emplace(id, s).second) order.push_back(id);
    }
    std::vector<PerturbationRecord> log;
    for (const nlohmann::json& jr : j.at("policy_log")) {
      PerturbationRecord r;
      r.time = NumberFromJson(jr.at("time"));
      r.trial = jr.at("trial");
      r.source = jr.at("source");
      r.source_checkpoint = jr.at("source_checkpoint");
      r.old_config = ConfigFromJson(jr.at("old_config"));
      r.new_config = ConfigFromJson(jr.at("new_config"));
      log.push_back(std::move(r));
    }
    std::mt19937_64 rng = internal::RngFromText(j.at("rng").get<std::string>());
    impl_->order = std::move(order);
    impl_->states = std::move(states);
    impl_->finished = j.at("finished").get<std::set<std::string>>();
    impl_->log = std::move(log);
    impl_->num_checkpoints = j.at("num_checkpoints");
    impl_->num_perturbations = j.at("num_perturbations");
    impl_->rng = rng;
  });
}

}  // namespace prism::tune
