// TPESearch: the Tree-structured Parzen Estimator (Bergstra et al. 2011) as Optuna's
// TPESampler runs it by default (univariate, prior on, magic clip on, endpoints off).
//
// Each suggestion after n_startup_trials completed trials:
//   1. Rank the completed trials by the metric (mode decides the direction) and split them:
//      the best gamma(n) = min(ceil(0.1 n), 25) are "good", the rest "bad"; each group keeps
//      its chronological order, as its kernels' weights depend on age.
//   2. For each parameter on its own, fit two Parzen estimators, l (good) and g (bad): one
//      truncated-normal kernel per observation plus a prior kernel (mean at the middle of the
//      range, sigma the whole range, weight 1). Kernel weights: 1 each for up to 25
//      observations; beyond that the 25 newest weigh 1 and the older ones ramp from 1/n up.
//      A kernel's sigma is the larger gap to its sorted neighbours (the range's ends count
//      as neighbours except for the outermost kernels), clipped to
//      [range / min(100, n + 2), range].
//   3. Draw n_ei_candidates from l and keep the one with the largest log l(x) - log g(x).
// Coordinates: log domains work in log space; integer and quantized domains are discrete
// (the range padded by half a step, a candidate's likelihood is its kernel mass over
// [x - step/2, x + step/2]); Randn works in the normal CDF's space, where its prior is
// uniform. Choice uses per-category weights: each observation adds 1 to its category on
// top of prior_weight / (n + 1) spread over all categories, and the prior kernel is uniform.
//
// Suggestion i draws from a generator seeded with (seed, i), so the saved state is the
// counter and seed; the observations come back through the OnTrialComplete replay.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "prism/errors.h"
#include "prism/tune/searcher.h"
#include "tune/metric_mode.h"
#include "tune/numbers.h"

namespace prism::tune {

namespace {

using internal::Uniform01;
using internal::TrialSeed;

constexpr const char* kTpeKind = "TPESearch";
constexpr double kPriorWeight = 1.0;
constexpr int kFlatWeights = 25;  // Optuna's default_weights: the newest 25 weigh 1

/// Standard normal CDF.
double Phi(double z) { return 0.5 * std::erfc(-z * M_SQRT1_2); }

/// Phi(z1) - Phi(z0) for z0 <= z1, accurate in both tails.
double PhiMass(double z0, double z1) {
  if (z0 > 0) return 0.5 * (std::erfc(z0 * M_SQRT1_2) - std::erfc(z1 * M_SQRT1_2));
  return 0.5 * (std::erfc(-z1 * M_SQRT1_2) - std::erfc(-z0 * M_SQRT1_2));
}

/// Inverse of Phi: Acklam's rational approximation, then one Halley step to full precision.
double InvPhi(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  p = std::clamp(p, 1e-300, 1.0 - 1e-16);
  constexpr double p_low = 0.02425;
  double x;
  if (p < p_low) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - p_low) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double e = Phi(x) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(0.5 * x * x);
  return x - u / (1 + 0.5 * x * u);
}

bool ParseNumber(const std::string& text, double& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && std::isfinite(out);
}

double AsDouble(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

/// Optuna's default_weights(n).
std::vector<double> DefaultWeights(size_t n) {
  std::vector<double> w(n, 1.0);
  if (n <= static_cast<size_t>(kFlatWeights)) return w;
  const size_t ramp = n - kFlatWeights;  // np.linspace(1 / n, 1.0, ramp)
  const double first = 1.0 / static_cast<double>(n);
  for (size_t i = 0; i < ramp; ++i) {
    w[i] = ramp == 1 ? first
                     : first + (1.0 - first) * static_cast<double>(i) / static_cast<double>(ramp - 1);
  }
  return w;
}

/// One hyperparameter as TPE sees it.
struct Param {
  std::string name;
  const Domain* domain = nullptr;  // points into Impl::space
  bool categorical = false;
  bool log = false;
  bool normal = false;  // Randn: works on Phi((x - mean) / sd)
  double step = 0;      // 0: continuous
  double lo = 0, hi = 0;  // bounds in internal coordinates (padded by step / 2 if discrete)

  double ToInternal(double x) const {
    if (normal) return std::clamp(Phi((x - domain->lower()) / domain->upper()), 0.0, 1.0);
    return log ? std::log(x) : x;
  }
  double FromInternal(double y) const {
    if (normal) return domain->lower() + domain->upper() * InvPhi(std::clamp(y, 1e-300, 1.0));
    return log ? std::exp(y) : y;
  }
};

/// A Parzen estimator over one numeric parameter: truncated normals on [lo, hi].
class NumericEstimator {
 public:
  NumericEstimator(const std::vector<double>& mus, double lo, double hi) : lo_(lo), hi_(hi) {
    const size_t n = mus.size();
    const double range = hi - lo;
    std::vector<double> weights = DefaultWeights(n);
    mu_ = mus;
    sigma_.resize(n);
    if (n > 0) {
      // Sigmas from the sorted kernel centres, the prior's among them.
      std::vector<size_t> order(n + 1);
      std::iota(order.begin(), order.end(), 0);
      std::vector<double> centres = mus;
      centres.push_back(0.5 * (lo + hi));
      std::sort(order.begin(), order.end(),
                [&](size_t a, size_t b) { return centres[a] < centres[b]; });
      std::vector<double> sorted(n + 3);
      sorted[0] = lo;
      for (size_t i = 0; i <= n; ++i) sorted[i + 1] = centres[order[i]];
      sorted[n + 2] = hi;
      const double min_sigma = range / std::min(100.0, 1.0 + static_cast<double>(n + 1));
      for (size_t i = 0; i <= n; ++i) {
        double s = std::max(sorted[i + 1] - sorted[i], sorted[i + 2] - sorted[i + 1]);
        if (i == 0) s = sorted[2] - sorted[1];          // consider_endpoints = False
        if (i == n) s = sorted[n + 1] - sorted[n];
        if (order[i] < n) sigma_[order[i]] = std::clamp(s, min_sigma, range);
      }
    }
    mu_.push_back(0.5 * (lo + hi));
    sigma_.push_back(range);
    weights.push_back(n == 0 ? 1.0 : kPriorWeight);
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    const size_t k = mu_.size();
    weight_.resize(k);
    cdf_lo_.resize(k);
    mass_.resize(k);
    scale_.resize(k);
    inv_sigma_.resize(k);
    for (size_t i = 0; i < k; ++i) {
      weight_[i] = weights[i] / total;
      inv_sigma_[i] = 1.0 / sigma_[i];
      const double zl = (lo - mu_[i]) * inv_sigma_[i], zh = (hi - mu_[i]) * inv_sigma_[i];
      cdf_lo_[i] = Phi(zl);
      mass_[i] = std::max(PhiMass(zl, zh), 1e-300);
      scale_[i] = weight_[i] / mass_[i];
    }
    cumulative_.resize(k);
    std::partial_sum(weight_.begin(), weight_.end(), cumulative_.begin());
  }

  /// A draw in internal coordinates: a kernel by weight, then its truncated normal.
  double Sample(std::mt19937_64& rng) const {
    const double u = Uniform01(rng) * cumulative_.back();
    size_t i = std::upper_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin();
    i = std::min(i, mu_.size() - 1);
    const double p = cdf_lo_[i] + mass_[i] * Uniform01(rng);
    return std::clamp(mu_[i] + sigma_[i] * InvPhi(p), lo_, hi_);
  }

  // Kernels further than kFar sigmas from the point are skipped: each would add under
  // 1e-16 of what the prior kernel (never further than half a sigma) adds, times at most
  // the ratio of sigmas (100), so the sum moves by far less than its rounding matters to
  // the comparison of candidates, and a suggestion at 1000 observations costs a fraction.
  static constexpr double kFar = 8.5;

  /// Density at y (continuous), up to a constant factor shared by all estimators.
  double Density(double y) const {
    double sum = 0;
    for (size_t i = 0; i < mu_.size(); ++i) {
      const double z = (y - mu_[i]) * inv_sigma_[i];
      if (z * z > kFar * kFar) continue;
      sum += scale_[i] * inv_sigma_[i] * std::exp(-0.5 * z * z);
    }
    return sum;
  }

  /// Mass of [y0, y1] (discrete parameters).
  double Mass(double y0, double y1) const {
    double sum = 0;
    for (size_t i = 0; i < mu_.size(); ++i) {
      const double z0 = (y0 - mu_[i]) * inv_sigma_[i], z1 = (y1 - mu_[i]) * inv_sigma_[i];
      if (z0 > kFar || z1 < -kFar) continue;
      sum += scale_[i] * PhiMass(z0, z1);
    }
    return sum;
  }

 private:
  double lo_, hi_;
  std::vector<double> mu_, sigma_, weight_, cdf_lo_, mass_, scale_, inv_sigma_, cumulative_;
};

/// A Parzen estimator over a categorical parameter: one probability per category.
std::vector<double> CategoricalProbabilities(const std::vector<double>& observed, size_t n_choices) {
  std::vector<double> p(n_choices, 1.0 / static_cast<double>(n_choices));
  const size_t n = observed.size();
  if (n == 0) return p;
  std::vector<double> w = DefaultWeights(n);
  w.push_back(kPriorWeight);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  const double base = kPriorWeight / static_cast<double>(n + 1);  // per category, per kernel
  const double row = base * static_cast<double>(n_choices) + 1.0;  // an observation row's sum
  double obs_weight = 0;
  std::fill(p.begin(), p.end(), 0.0);
  for (size_t k = 0; k < n; ++k) {
    obs_weight += w[k] / total;
    p[static_cast<size_t>(observed[k])] += w[k] / total / row;
  }
  const double prior = w[n] / total / static_cast<double>(n_choices);
  for (double& x : p) x += obs_weight * base / row + prior;
  return p;
}

struct Observation {
  double score;            // higher is better
  std::vector<double> x;   // per Param: internal coordinate, or category index
};

}  // namespace

struct TPESearch::Impl {
  TPEOptions options;
  std::string metric, mode;
  ParamSpace space;
  std::vector<Param> params;  // non-constant parameters, key order
  int num_samples = -1;
  uint64_t seed = 0;
  int64_t counter = 0;
  bool set_up = false;
  bool restored = false;
  std::vector<Observation> observations;  // chronological
  std::unordered_set<std::string> completed;

  void RequireSetUp(const char* what) const {
    if (!set_up) {
      throw Error(std::string("prism::tune::TPESearch::") + what +
                  " called before Setup; the Tuner calls Setup first");
    }
  }

  /// The observation for a completed trial's config, or false if a value is missing or
  /// outside the space (such a trial is not used).
  bool Observe(const Config& config, Observation& out) const {
    out.x.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const Param& p = params[i];
      auto it = config.Values().find(p.name);
      if (it == config.Values().end()) return false;
      if (p.categorical) {
        const auto& values = p.domain->values();
        size_t j = 0;
        while (j < values.size() && ToText(values[j]) != it->second) ++j;
        if (j == values.size()) return false;
        out.x[i] = static_cast<double>(j);
      } else {
        double v;
        if (!ParseNumber(it->second, v)) return false;
        if (p.log && v <= 0) return false;
        out.x[i] = std::clamp(p.ToInternal(v), p.lo, p.hi);
      }
    }
    return true;
  }

  Value Propose(size_t i, const std::vector<size_t>& good, const std::vector<size_t>& bad,
                std::mt19937_64& rng) const {
    const Param& p = params[i];
    auto column = [&](const std::vector<size_t>& rows) {
      std::vector<double> xs;
      xs.reserve(rows.size());
      for (size_t r : rows) xs.push_back(observations[r].x[i]);
      return xs;
    };
    const int n_candidates = options.n_ei_candidates;
    if (p.categorical) {
      const size_t c = p.domain->values().size();
      const std::vector<double> l = CategoricalProbabilities(column(good), c);
      const std::vector<double> g = CategoricalProbabilities(column(bad), c);
      std::vector<double> cumulative(c);
      std::partial_sum(l.begin(), l.end(), cumulative.begin());
      size_t best = 0;
      double best_score = -std::numeric_limits<double>::infinity();
      for (int k = 0; k < n_candidates; ++k) {
        const double u = Uniform01(rng) * cumulative.back();
        size_t j = std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin();
        j = std::min(j, c - 1);
        const double score = std::log(l[j]) - std::log(std::max(g[j], 1e-300));
        if (score > best_score) best_score = score, best = j;
      }
      return p.domain->values()[best];
    }
    const NumericEstimator l(column(good), p.lo, p.hi);
    const NumericEstimator g(column(bad), p.lo, p.hi);
    Value best_value;
    double best_score = -std::numeric_limits<double>::infinity();
    // Discrete candidates often repeat (the good density is narrow): score each value once.
    std::vector<std::pair<double, double>> scored;
    for (int k = 0; k < n_candidates; ++k) {
      const double y = l.Sample(rng);
      const Value v = p.domain->Clip(p.FromInternal(y));
      double score;
      if (p.step > 0) {
        const double x = AsDouble(v);
        auto seen = std::find_if(scored.begin(), scored.end(),
                                 [&](const auto& e) { return e.first == x; });
        if (seen != scored.end()) continue;  // same score: the first one stands
        // The candidate's bin, [x - step/2, x + step/2], in internal coordinates.
        const double y0 = std::max(p.ToInternal(x - p.step / 2), p.lo);
        const double y1 = std::min(p.ToInternal(x + p.step / 2), p.hi);
        score = std::log(std::max(l.Mass(y0, y1), 1e-300)) -
                std::log(std::max(g.Mass(y0, y1), 1e-300));
        scored.emplace_back(x, score);
      } else {
        score = std::log(std::max(l.Density(y), 1e-300)) -
                std::log(std::max(g.Density(y), 1e-300));
      }
      if (score > best_score) best_score = score, best_value = v;
    }
    return best_value;
  }
};

TPESearch::TPESearch(TPEOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.n_startup_trials < 0) {
    throw Error("prism::tune::TPESearch: n_startup_trials is " +
                std::to_string(options.n_startup_trials) + "; pass 0 or more (Optuna: 10)");
  }
  if (options.n_ei_candidates < 1) {
    throw Error("prism::tune::TPESearch: n_ei_candidates is " +
                std::to_string(options.n_ei_candidates) + "; pass 1 or more (Optuna: 24)");
  }
  if (!(options.gamma > 0 && options.gamma <= 1)) {
    throw Error("prism::tune::TPESearch: gamma is " + ToText(Value(options.gamma)) +
                "; pass a fraction in (0, 1] (Optuna: 0.1)");
  }
  if (options.max_good < 1) {
    throw Error("prism::tune::TPESearch: max_good is " + std::to_string(options.max_good) +
                "; pass 1 or more (Optuna: 25)");
  }
  if (!options.mode.empty()) internal::CheckMode(options.mode, "TPESearch");
  impl_->options = std::move(options);
}

TPESearch::~TPESearch() = default;

void TPESearch::Setup(const ParamSpace& space, const std::string& metric, const std::string& mode,
                      int num_samples, uint64_t seed) {
  Impl& m = *impl_;
  ValidateParamSpace(space);
  std::string own_metric = m.options.metric, own_mode = m.options.mode;
  internal::MergeMetricMode(own_metric, own_mode, metric, mode, "TPESearch");
  if (num_samples == 0 || num_samples < -1) {
    throw Error("prism::tune::TPESearch: num_samples is " + std::to_string(num_samples) +
                "; pass TuneConfig::num_samples >= 1, or -1 for no limit");
  }
  for (const auto& [name, domain] : space) {
    if (domain.kind() == Domain::Kind::kGrid || domain.kind() == Domain::Kind::kSampleFrom) {
      throw Error("prism::tune::TPESearch: parameter \"" + name + "\" is " + domain.ToString() +
                  ", which TPE cannot model; use Choice instead of GridSearch, a distribution "
                  "instead of SampleFrom, or BasicVariantGenerator (the default searcher)");
    }
  }
  m.metric = own_metric;
  m.mode = own_mode;
  m.space = space;
  m.params.clear();
  for (const auto& [name, domain] : m.space) {
    Param p;
    p.name = name;
    p.domain = &domain;
    using K = Domain::Kind;
    switch (domain.kind()) {
      case K::kConstant:
        continue;
      case K::kChoice:
        p.categorical = true;
        break;
      case K::kRandn:
        p.normal = true;
        p.lo = 0;
        p.hi = 1;
        break;
      default: {
        p.log = domain.kind() == K::kLogUniform || domain.kind() == K::kLogRandInt;
        p.step = domain.is_integer() ? std::max(domain.q(), 1.0) : domain.q();
        if (p.step > 0) {
          // The lowest and highest values the domain can take, padded by half a step.
          const double first = AsDouble(domain.Clip(domain.lower()));
          const double last = AsDouble(domain.Clip(domain.upper()));
          p.lo = p.ToInternal(first - p.step / 2);
          p.hi = p.ToInternal(last + p.step / 2);
        } else {
          p.lo = p.ToInternal(domain.lower());
          p.hi = p.ToInternal(domain.upper());
        }
      }
    }
    m.params.push_back(std::move(p));
  }
  m.num_samples = num_samples;
  if (!m.restored) {
    m.seed = seed;
    m.counter = 0;
    m.observations.clear();
    m.completed.clear();
  }
  m.set_up = true;
}

Suggestion TPESearch::Suggest(const std::string& trial_id) {
  Impl& m = *impl_;
  m.RequireSetUp("Suggest");
  if (m.num_samples >= 0 && m.counter >= m.num_samples) return Suggestion::Finished();
  std::mt19937_64 rng(TrialSeed(m.seed, static_cast<uint64_t>(m.counter)));
  ++m.counter;
  Config config;
  const size_t n = m.observations.size();
  if (n < static_cast<size_t>(m.options.n_startup_trials) || m.params.empty()) {
    for (const auto& [name, domain] : m.space) config.Set(name, ToText(domain.Sample(rng, config)));
    return Suggestion::Of(std::move(config));
  }
  // Split into good and bad, each in chronological order.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return m.observations[a].score > m.observations[b].score;
  });
  const size_t n_good = std::min<size_t>(
      static_cast<size_t>(std::ceil(m.options.gamma * static_cast<double>(n))),
      static_cast<size_t>(m.options.max_good));
  std::vector<size_t> good(order.begin(), order.begin() + static_cast<ptrdiff_t>(n_good));
  std::vector<size_t> bad(order.begin() + static_cast<ptrdiff_t>(n_good), order.end());
  std::sort(good.begin(), good.end());
  std::sort(bad.begin(), bad.end());
  size_t i = 0;
  for (const auto& [name, domain] : m.space) {
    if (domain.kind() == Domain::Kind::kConstant) {
      config.Set(name, ToText(domain.values().front()));
      continue;
    }
    config.Set(name, ToText(m.Propose(i++, good, bad, rng)));
  }
  return Suggestion::Of(std::move(config));
}

void TPESearch::OnTrialComplete(const std::string& trial_id, const Config& config,
                                const Metrics* result, bool error) {
  Impl& m = *impl_;
  m.RequireSetUp("OnTrialComplete");
  if (error || result == nullptr) return;
  auto it = result->find(m.metric);
  if (it == result->end() || !std::isfinite(it->second)) return;
  if (!m.completed.insert(trial_id).second) return;  // already counted
  Observation o;
  if (!m.Observe(config, o)) return;
  o.score = internal::Score(it->second, m.mode);
  m.observations.push_back(std::move(o));
}

std::string TPESearch::SaveState() const {
  nlohmann::json j;
  j["kind"] = kTpeKind;
  j["seed"] = impl_->seed;
  j["counter"] = impl_->counter;
  return j.dump();
}

void TPESearch::RestoreState(const std::string& state) {
  Impl& m = *impl_;
  try {
    const nlohmann::json j = nlohmann::json::parse(state);
    if (j.at("kind").get<std::string>() != kTpeKind) throw std::runtime_error("kind");
    m.seed = j.at("seed").get<uint64_t>();
    m.counter = j.at("counter").get<int64_t>();
  } catch (const std::exception& e) {
    throw Error("prism::tune::TPESearch::RestoreState: the state is not one TPESearch::SaveState "
                "wrote (" + std::string(e.what()) + "): \"" + state.substr(0, 200) +
                "\"; restore with the searcher the experiment ran with");
  }
  if (m.counter < 0) {
    throw Error("prism::tune::TPESearch::RestoreState: negative counter in \"" + state + "\"");
  }
  // The OnTrialComplete replay that follows brings the observations back.
  m.observations.clear();
  m.completed.clear();
  m.restored = true;
}

int64_t TPESearch::TotalTrials() const { return impl_->num_samples; }

}  // namespace prism::tune
