#pragma once
// Search spaces (Ray Tune's tune.uniform, tune.choice, tune.grid_search, ...): a ParamSpace
// maps each hyperparameter to a Domain, a constant or a distribution to sample from.
//
//   tune::ParamSpace space{
//       {"lr", tune::LogUniform(1e-4, 1e-1)},
//       {"momentum", tune::Uniform(0.1, 0.9)},
//       {"layers", tune::GridSearch({2, 3, 4})},
//       {"optimizer", tune::Choice({"sgd", "adam"})},
//       {"epochs", 10},                                   // a constant
//       {"wd", tune::SampleFrom([](const tune::Config& c) {  // from the others
//          return tune::Value(c.Get<double>("lr", 0) / 10); })},
//   };
//
// Bounds follow Ray: Uniform, LogUniform, RandInt and LogRandInt exclude the upper bound;
// the quantized forms draw multiples of q in [lower, upper], the upper bound included
// (QRandInt, QLogRandInt; QUniform and QLogUniform round to the nearest multiple, as Ray's
// np.round(x / q) * q). Values reach a Config as short text that reads back exactly: "0.1",
// "3", "true", "adam". Sampling is seeded
// (TuneConfig::seed), so a run draws the same configs each time. A constructor given bad
// bounds (lower not below upper, a non-positive log bound, q <= 0, an empty list) throws
// prism::Error saying which and why.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "prism/train/config.h"

namespace prism::tune {

/// A trial's hyperparameters: name -> value, kept as text and parsed on Get<T> (the same
/// type as TorchTrainer's train_loop_config, so a trial's config feeds a trainer as is).
using Config = train::Config;
/// What a trial reports: name -> number.
using Metrics = train::Metrics;

/// One hyperparameter value.
using Value = std::variant<int64_t, double, bool, std::string>;
/// The value as Config stores it ("0.1", "3", "true", "adam").
std::string ToText(const Value& v);

/// A hyperparameter's domain: a constant, a distribution, a categorical choice, a grid
/// (every value, in every combination with the other grids), or a function of the other
/// values (SampleFrom). Cheap to copy.
class Domain {
 public:
  enum class Kind {
    kConstant, kUniform, kLogUniform, kRandn, kRandInt, kLogRandInt, kChoice, kGrid, kSampleFrom
  };
  /// A constant (implicit, so {"epochs", 10} works).
  Domain(Value constant);  // NOLINT(google-explicit-constructor)
  Domain(int v) : Domain(Value(int64_t{v})) {}              // NOLINT
  Domain(int64_t v) : Domain(Value(v)) {}                   // NOLINT
  Domain(double v) : Domain(Value(v)) {}                    // NOLINT
  Domain(bool v) : Domain(Value(v)) {}                      // NOLINT
  Domain(std::string v) : Domain(Value(std::move(v))) {}    // NOLINT
  Domain(const char* v) : Domain(Value(std::string(v))) {}  // NOLINT

  Kind kind() const { return kind_; }
  /// Bounds, for the numeric kinds: [lower, upper) or [lower, upper] as described above.
  double lower() const { return lower_; }
  double upper() const { return upper_; }
  /// Quantization step (0: none).
  double q() const { return q_; }
  /// Log base (kLogUniform, kLogRandInt).
  double base() const { return base_; }
  /// Randn's mean and standard deviation are lower() and upper().
  /// kChoice, kGrid: the values; kConstant: one value.
  const std::vector<Value>& values() const { return values_; }
  /// True for the integer kinds (kRandInt, kLogRandInt).
  bool is_integer() const { return kind_ == Kind::kRandInt || kind_ == Kind::kLogRandInt; }

  /// Draws one value. `partial` holds the values already drawn for this trial (for
  /// SampleFrom). kGrid draws uniformly among its values (grids are expanded by the
  /// searcher, not sampled). Throws prism::Error if a SampleFrom function throws (with the
  /// parameter's name in the message, from the caller).
  Value Sample(std::mt19937_64& rng, const Config& partial) const;
  /// Whether `v` lies in the domain (for a searcher's own proposals, PBT's perturbations).
  bool Contains(const Value& v) const;
  /// Clamps and quantizes a number into the domain (numeric kinds only).
  Value Clip(double x) const;
  /// "uniform(0.1, 0.9)", "choice([sgd, adam])", ... for messages and the status table.
  std::string ToString() const;

  // The factories below build the other kinds.
  friend Domain Uniform(double lower, double upper);
  friend Domain QUniform(double lower, double upper, double q);
  friend Domain LogUniform(double lower, double upper, double base);
  friend Domain QLogUniform(double lower, double upper, double q, double base);
  friend Domain Randn(double mean, double sd);
  friend Domain QRandn(double mean, double sd, double q);
  friend Domain RandInt(int64_t lower, int64_t upper);
  friend Domain QRandInt(int64_t lower, int64_t upper, int64_t q);
  friend Domain LogRandInt(int64_t lower, int64_t upper, double base);
  friend Domain QLogRandInt(int64_t lower, int64_t upper, int64_t q, double base);
  friend Domain Choice(std::vector<Value> categories);
  friend Domain GridSearch(std::vector<Value> values);
  friend Domain SampleFrom(std::function<Value(const Config&)> fn);

  /// SampleFrom's function (empty for the other kinds).
  const std::function<Value(const Config&)>& function() const { return fn_; }

 private:
  Domain() = default;
  Kind kind_ = Kind::kConstant;
  double lower_ = 0, upper_ = 0, q_ = 0, base_ = 10;
  std::vector<Value> values_;
  std::function<Value(const Config&)> fn_;
};

/// Float in [lower, upper).
Domain Uniform(double lower, double upper);
/// Uniform, rounded to a multiple of q.
Domain QUniform(double lower, double upper, double q);
/// Float in [lower, upper), uniform in log space; 0 < lower < upper.
Domain LogUniform(double lower, double upper, double base = 10);
Domain QLogUniform(double lower, double upper, double q, double base = 10);
/// Normal(mean, sd).
Domain Randn(double mean = 0, double sd = 1);
Domain QRandn(double mean, double sd, double q);
/// Integer in [lower, upper).
Domain RandInt(int64_t lower, int64_t upper);
/// Integer in [lower, upper], a multiple of q.
Domain QRandInt(int64_t lower, int64_t upper, int64_t q = 1);
/// Integer in [lower, upper), uniform in log space; 0 < lower < upper.
Domain LogRandInt(int64_t lower, int64_t upper, double base = 10);
/// Integer in [lower, upper], log-uniform, a multiple of q.
Domain QLogRandInt(int64_t lower, int64_t upper, int64_t q, double base = 10);
/// One of `categories`, uniformly.
Domain Choice(std::vector<Value> categories);
/// Every one of `values`: the searcher runs the cross product of all grids, num_samples times.
Domain GridSearch(std::vector<Value> values);
/// A value computed from the trial's other values (which are drawn first).
Domain SampleFrom(std::function<Value(const Config&)> fn);

/// Hyperparameter name -> domain.
using ParamSpace = std::map<std::string, Domain>;

/// Throws prism::Error if `space` cannot be searched (an empty grid or choice list, ...).
void ValidateParamSpace(const ParamSpace& space);

}  // namespace prism::tune
