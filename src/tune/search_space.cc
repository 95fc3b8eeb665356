// Search-space domains (Ray Tune's tune/search/sample.py): what each kind draws, which
// values it accepts, and how a searcher's own number is clipped back into it.
//
// Bounds, as in Ray's docs: Uniform, LogUniform, RandInt and LogRandInt draw from
// [lower, upper); a quantized kind draws a multiple of q in [lower, upper] (upper inclusive).
// Quantized floats follow Ray's Quantized sampler: a float drawn between the first and last
// multiples of q in [lower, upper], rounded to the nearest multiple (np.round(x / q) * q).
// QRandInt draws each multiple of q in [lower, upper] with equal probability. The log kinds
// draw uniformly in log space (the base, as in Ray, does not change the distribution).
//
// Random numbers come from the caller's std::mt19937_64 through our own transforms (53-bit
// uniforms, rejection-sampled integers, Box-Muller normals), not <random>'s distributions,
// whose outputs differ between standard libraries: the same seed draws the same configs.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "prism/errors.h"
#include "prism/tune/search_space.h"
#include "tune/numbers.h"

namespace prism::tune {

namespace {

using internal::Uniform01;

// Slack for "is this a multiple of q" and for bounds computed by division (0.7 / 0.1 is
// 6.999999999999999).
constexpr double kQuantTolerance = 1e-9;

std::string Num(double x) { return ToText(Value(x)); }

/// Uniform integer in [0, n), n >= 1, without modulo bias.
uint64_t Below(std::mt19937_64& rng, uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % n;
  uint64_t r;
  do {
    r = rng();
  } while (r >= limit);
  return r % n;
}

/// Standard normal (Box-Muller, one of the pair).
double StdNormal(std::mt19937_64& rng) {
  double u1 = Uniform01(rng);
  while (u1 <= 0) u1 = Uniform01(rng);
  const double u2 = Uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

/// Smallest and largest k with k * q in [lower, upper].
int64_t FirstMultiple(double lower, double q) {
  return static_cast<int64_t>(std::ceil(lower / q - kQuantTolerance));
}
int64_t LastMultiple(double upper, double q) {
  return static_cast<int64_t>(std::floor(upper / q + kQuantTolerance));
}
/// FirstMultiple, but at least 1 for the log kinds (whose values must stay above 0).
int64_t FirstK(const Domain& d) {
  const int64_t k = FirstMultiple(d.lower(), d.q());
  const bool log = d.kind() == Domain::Kind::kLogUniform || d.kind() == Domain::Kind::kLogRandInt;
  return log ? std::max<int64_t>(k, 1) : k;
}

/// k * q, computed as k / (1 / q) when 1 / q is a whole number so that the text is short
/// (3 / 10 prints "0.3", 3 * 0.1 prints "0.30000000000000004").
double Multiple(int64_t k, double q) {
  const double inv = std::round(1.0 / q);
  if (inv >= 1 && std::fabs(inv * q - 1.0) < 1e-12) return static_cast<double>(k) / inv;
  return static_cast<double>(k) * q;
}

/// The nearest multiple of q to x (np.round: halves to even).
double Quantize(double x, double q) {
  return Multiple(static_cast<int64_t>(std::nearbyint(x / q)), q);
}

bool IsMultiple(double x, double q) {
  const double k = x / q;
  return std::fabs(k - std::nearbyint(k)) <= kQuantTolerance * std::max(1.0, std::fabs(k));
}

/// The number a Value holds, if it holds one (bools and strings do not).
bool AsNumber(const Value& v, double& out) {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    out = static_cast<double>(*i);
    return true;
  }
  if (const auto* d = std::get_if<double>(&v)) {
    out = *d;
    return true;
  }
  return false;
}

/// Values equal as numbers (2 == 2.0), or as the same bool or string.
bool SameValue(const Value& a, const Value& b) {
  double x, y;
  if (AsNumber(a, x) && AsNumber(b, y)) return x == y;
  return a == b;
}

std::string ListText(const std::vector<Value>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += ", ";
    s += ToText(values[i]);
  }
  return s + "]";
}

void RequireFinite(const std::string& call, std::initializer_list<double> xs) {
  for (double x : xs) {
    if (!std::isfinite(x)) {
      throw Error("prism::tune::" + call + ": bounds must be finite numbers; got " + Num(x));
    }
  }
}

void RequireBelow(const std::string& call, double lower, double upper, const char* hint) {
  if (!(lower < upper)) {
    throw Error("prism::tune::" + call + ": lower (" + Num(lower) + ") must be below upper (" +
                Num(upper) + "); " + hint);
  }
}

void RequirePositiveLog(const std::string& call, double lower, double base) {
  if (!(lower > 0)) {
    throw Error("prism::tune::" + call + ": bounds must be > 0 (it samples in log space), got lower " +
                Num(lower) + "; pass 0 < lower < upper, e.g. LogUniform(1e-4, 1e-1), or use " +
                "Uniform for a range that includes 0");
  }
  if (!(base > 0) || base == 1 || !std::isfinite(base)) {
    throw Error("prism::tune::" + call + ": base " + Num(base) +
                " is not a log base; pass a base > 0 other than 1 (default 10)");
  }
}

void RequirePositiveQ(const std::string& call, double q) {
  if (!(q > 0) || !std::isfinite(q)) {
    throw Error("prism::tune::" + call + ": q is " + Num(q) +
                "; pass a quantization step q > 0 (e.g. 0.1 to draw 0.1, 0.2, ...)");
  }
}

void RequireSomeMultiple(const std::string& call, double lower, double upper, double q,
                         bool log = false) {
  int64_t first = FirstMultiple(lower, q);
  if (log) first = std::max<int64_t>(first, 1);
  if (first > LastMultiple(upper, q)) {
    throw Error("prism::tune::" + call + ": no multiple of q = " + Num(q) + " lies in [" +
                Num(lower) + ", " + Num(upper) + "]; pass a smaller q or wider bounds");
  }
}

std::string Call(const char* name, std::initializer_list<double> args) {
  std::string s = std::string(name) + "(";
  bool first = true;
  for (double a : args) {
    if (!first) s += ", ";
    s += Num(a);
    first = false;
  }
  return s + ")";
}

}  // namespace

std::string ToText(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  // The shortest text that reads back as the same double ("0.1", not 0.10000000000000001),
  // as train::Config::Set writes it.
  return train::detail::ShortestText(std::get<double>(v));
}

Domain::Domain(Value constant) : kind_(Kind::kConstant), values_{std::move(constant)} {}

Domain Uniform(double lower, double upper) {
  const std::string call = Call("Uniform", {lower, upper});
  RequireFinite(call, {lower, upper});
  RequireBelow(call, lower, upper, "pass Uniform(lower, upper) with lower < upper");
  Domain d;
  d.kind_ = Domain::Kind::kUniform;
  d.lower_ = lower;
  d.upper_ = upper;
  return d;
}

Domain QUniform(double lower, double upper, double q) {
  const std::string call = Call("QUniform", {lower, upper, q});
  RequireFinite(call, {lower, upper});
  RequireBelow(call, lower, upper, "pass QUniform(lower, upper, q) with lower < upper");
  RequirePositiveQ(call, q);
  RequireSomeMultiple(call, lower, upper, q);
  Domain d = Uniform(lower, upper);
  d.q_ = q;
  return d;
}

Domain LogUniform(double lower, double upper, double base) {
  const std::string call = Call("LogUniform", {lower, upper});
  RequireFinite(call, {lower, upper});
  RequirePositiveLog(call, lower, base);
  RequireBelow(call, lower, upper, "pass LogUniform(lower, upper) with 0 < lower < upper");
  Domain d;
  d.kind_ = Domain::Kind::kLogUniform;
  d.lower_ = lower;
  d.upper_ = upper;
  d.base_ = base;
  return d;
}

Domain QLogUniform(double lower, double upper, double q, double base) {
  const std::string call = Call("QLogUniform", {lower, upper, q});
  RequireFinite(call, {lower, upper});
  RequirePositiveLog(call, lower, base);
  RequireBelow(call, lower, upper, "pass QLogUniform(lower, upper, q) with 0 < lower < upper");
  RequirePositiveQ(call, q);
  RequireSomeMultiple(call, lower, upper, q, /*log=*/true);
  Domain d = LogUniform(lower, upper, base);
  d.q_ = q;
  return d;
}

Domain Randn(double mean, double sd) {
  const std::string call = Call("Randn", {mean, sd});
  RequireFinite(call, {mean, sd});
  if (!(sd > 0)) {
    throw Error("prism::tune::" + call + ": the standard deviation must be > 0, got " + Num(sd) +
                "; pass Randn(mean, sd) with sd > 0, or a constant for a fixed value");
  }
  Domain d;
  d.kind_ = Domain::Kind::kRandn;
  d.lower_ = mean;
  d.upper_ = sd;
  return d;
}

Domain QRandn(double mean, double sd, double q) {
  const std::string call = Call("QRandn", {mean, sd, q});
  RequirePositiveQ(call, q);
  Domain d = Randn(mean, sd);
  d.q_ = q;
  return d;
}

Domain RandInt(int64_t lower, int64_t upper) {
  const std::string call = "RandInt(" + std::to_string(lower) + ", " + std::to_string(upper) + ")";
  if (lower >= upper) {
    throw Error("prism::tune::" + call + ": lower must be below upper (upper is excluded); pass " +
                "RandInt(" + std::to_string(lower) + ", " + std::to_string(lower + 1) +
                ") for the single value " + std::to_string(lower) + ", or a constant");
  }
  Domain d;
  d.kind_ = Domain::Kind::kRandInt;
  d.lower_ = static_cast<double>(lower);
  d.upper_ = static_cast<double>(upper);
  return d;
}

Domain QRandInt(int64_t lower, int64_t upper, int64_t q) {
  const std::string call = "QRandInt(" + std::to_string(lower) + ", " + std::to_string(upper) +
                           ", " + std::to_string(q) + ")";
  if (lower >= upper) {
    throw Error("prism::tune::" + call + ": lower must be below upper (both are included); " +
                "pass QRandInt(lower, upper, q) with lower < upper, or a constant");
  }
  RequirePositiveQ(call, static_cast<double>(q));
  RequireSomeMultiple(call, static_cast<double>(lower), static_cast<double>(upper),
                      static_cast<double>(q));
  Domain d;
  d.kind_ = Domain::Kind::kRandInt;
  d.lower_ = static_cast<double>(lower);
  d.upper_ = static_cast<double>(upper);
  d.q_ = static_cast<double>(q);
  return d;
}

Domain LogRandInt(int64_t lower, int64_t upper, double base) {
  const std::string call = "LogRandInt(" + std::to_string(lower) + ", " + std::to_string(upper) + ")";
  RequirePositiveLog(call, static_cast<double>(lower), base);
  if (lower >= upper) {
    throw Error("prism::tune::" + call + ": lower must be below upper (upper is excluded); " +
                "pass LogRandInt(lower, upper) with 0 < lower < upper");
  }
  Domain d;
  d.kind_ = Domain::Kind::kLogRandInt;
  d.lower_ = static_cast<double>(lower);
  d.upper_ = static_cast<double>(upper);
  d.base_ = base;
  return d;
}

Domain QLogRandInt(int64_t lower, int64_t upper, int64_t q, double base) {
  const std::string call = "QLogRandInt(" + std::to_string(lower) + ", " + std::to_string(upper) +
                           ", " + std::to_string(q) + ")";
  RequirePositiveLog(call, static_cast<double>(lower), base);
  if (lower >= upper) {
    throw Error("prism::tune::" + call + ": lower must be below upper (both are included); " +
                "pass QLogRandInt(lower, upper, q) with 0 < lower < upper");
  }
  RequirePositiveQ(call, static_cast<double>(q));
  RequireSomeMultiple(call, static_cast<double>(lower), static_cast<double>(upper),
                      static_cast<double>(q), /*log=*/true);
  Domain d = LogRandInt(lower, upper, base);
  d.q_ = static_cast<double>(q);
  return d;
}

Domain Choice(std::vector<Value> categories) {
  if (categories.empty()) {
    throw Error("prism::tune::Choice([]): the list of categories is empty; pass at least one "
                "value, e.g. Choice({\"sgd\", \"adam\"})");
  }
  Domain d;
  d.kind_ = Domain::Kind::kChoice;
  d.values_ = std::move(categories);
  return d;
}

Domain GridSearch(std::vector<Value> values) {
  if (values.empty()) {
    throw Error("prism::tune::GridSearch([]): the list of values is empty; pass at least one "
                "value, e.g. GridSearch({2, 3, 4})");
  }
  Domain d;
  d.kind_ = Domain::Kind::kGrid;
  d.values_ = std::move(values);
  return d;
}

Domain SampleFrom(std::function<Value(const Config&)> fn) {
  if (!fn) {
    throw Error("prism::tune::SampleFrom: the function is empty; pass a callable taking the "
                "trial's config drawn so far and returning a tune::Value");
  }
  Domain d;
  d.kind_ = Domain::Kind::kSampleFrom;
  d.fn_ = std::move(fn);
  return d;
}

Value Domain::Sample(std::mt19937_64& rng, const Config& partial) const {
  switch (kind_) {
    case Kind::kConstant:
      return values_.front();
    case Kind::kChoice:
    case Kind::kGrid:
      return values_[Below(rng, values_.size())];
    case Kind::kSampleFrom:
      return fn_(partial);
    case Kind::kUniform: {
      if (q_ > 0) {
        const double lo = Multiple(FirstK(*this), q_);
        const double hi = Multiple(LastMultiple(upper_, q_), q_);
        return Clip(lo + (hi - lo) * Uniform01(rng));
      }
      const double x = lower_ + (upper_ - lower_) * Uniform01(rng);
      return x < upper_ ? x : std::nextafter(upper_, lower_);
    }
    case Kind::kLogUniform: {
      double lo = lower_, hi = upper_;
      if (q_ > 0) {
        lo = Multiple(FirstK(*this), q_);
        hi = Multiple(LastMultiple(upper_, q_), q_);
      }
      const double x = std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * Uniform01(rng));
      if (q_ > 0) return Clip(x);
      return std::clamp(x, lower_, std::nextafter(upper_, lower_));
    }
    case Kind::kRandn: {
      const double x = lower_ + upper_ * StdNormal(rng);
      return q_ > 0 ? Quantize(x, q_) : x;
    }
    case Kind::kRandInt: {
      if (q_ > 0) {
        const int64_t q = static_cast<int64_t>(q_);
        const int64_t k0 = FirstK(*this), k1 = LastMultiple(upper_, q_);
        return static_cast<int64_t>((k0 + static_cast<int64_t>(Below(rng, k1 - k0 + 1))) * q);
      }
      const int64_t lo = static_cast<int64_t>(lower_), hi = static_cast<int64_t>(upper_);
      return static_cast<int64_t>(lo + static_cast<int64_t>(Below(rng, hi - lo)));
    }
    case Kind::kLogRandInt: {
      if (q_ > 0) {
        const double lo = static_cast<double>(FirstK(*this)) * q_;
        const double hi = static_cast<double>(LastMultiple(upper_, q_)) * q_;
        return Clip(std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * Uniform01(rng)));
      }
      // Ray: floor(exp(uniform(log lower, log upper))), so upper is excluded.
      const double x = std::exp(std::log(lower_) + (std::log(upper_) - std::log(lower_)) * Uniform01(rng));
      const int64_t v = static_cast<int64_t>(std::floor(x));
      return std::clamp(v, static_cast<int64_t>(lower_), static_cast<int64_t>(upper_) - 1);
    }
  }
  throw Error("prism::tune::Domain::Sample: unknown domain kind");
}

bool Domain::Contains(const Value& v) const {
  switch (kind_) {
    case Kind::kConstant:
      return SameValue(v, values_.front());
    case Kind::kChoice:
    case Kind::kGrid:
      return std::any_of(values_.begin(), values_.end(),
                         [&](const Value& c) { return SameValue(v, c); });
    case Kind::kSampleFrom:
      return true;  // the function's values are the user's to define
    default:
      break;
  }
  double x;
  if (!AsNumber(v, x) || !std::isfinite(x)) return false;
  if (is_integer()) {
    if (x != std::floor(x)) return false;
    if (q_ > 0) return x >= lower_ && x <= upper_ && IsMultiple(x, q_);
    return x >= lower_ && x < upper_;
  }
  if (kind_ == Kind::kRandn) return q_ <= 0 || IsMultiple(x, q_);
  if (q_ > 0) {
    const double slack = kQuantTolerance * std::max(1.0, std::fabs(x));
    return x >= lower_ - slack && x <= upper_ + slack && IsMultiple(x, q_);
  }
  return x >= lower_ && x < upper_;
}

Value Domain::Clip(double x) const {
  if (std::isnan(x)) {
    throw Error("prism::tune::Domain::Clip: got NaN for " + ToString() + "; pass a number");
  }
  switch (kind_) {
    case Kind::kUniform:
    case Kind::kLogUniform:
      if (q_ > 0) {
        const int64_t k = static_cast<int64_t>(
            std::clamp(std::nearbyint(x / q_), static_cast<double>(FirstK(*this)),
                       static_cast<double>(LastMultiple(upper_, q_))));
        return Multiple(k, q_);
      }
      return std::clamp(x, lower_, std::nextafter(upper_, lower_));
    case Kind::kRandn:
      return q_ > 0 ? Quantize(x, q_) : x;
    case Kind::kRandInt:
    case Kind::kLogRandInt: {
      if (q_ > 0) {
        const double k =
            std::clamp(std::nearbyint(x / q_), static_cast<double>(FirstK(*this)),
                       static_cast<double>(LastMultiple(upper_, q_)));
        return static_cast<int64_t>(k) * static_cast<int64_t>(q_);
      }
      return static_cast<int64_t>(std::clamp(std::nearbyint(x), lower_, upper_ - 1));
    }
    default:
      throw Error("prism::tune::Domain::Clip: " + ToString() +
                  " is not a numeric range; Clip applies to Uniform, LogUniform, Randn, RandInt "
                  "and LogRandInt (and their quantized forms)");
  }
}

std::string Domain::ToString() const {
  auto with_base = [&](std::string s) {
    if (base_ != 10) s.insert(s.size() - 1, ", base=" + Num(base_));
    return s;
  };
  const bool q = q_ > 0;
  switch (kind_) {
    case Kind::kConstant:
      return ToText(values_.front());
    case Kind::kUniform:
      return q ? Call("quniform", {lower_, upper_, q_}) : Call("uniform", {lower_, upper_});
    case Kind::kLogUniform:
      return with_base(q ? Call("qloguniform", {lower_, upper_, q_})
                         : Call("loguniform", {lower_, upper_}));
    case Kind::kRandn:
      return q ? Call("qrandn", {lower_, upper_, q_}) : Call("randn", {lower_, upper_});
    case Kind::kRandInt:
      return q ? Call("qrandint", {lower_, upper_, q_}) : Call("randint", {lower_, upper_});
    case Kind::kLogRandInt:
      return with_base(q ? Call("qlograndint", {lower_, upper_, q_})
                         : Call("lograndint", {lower_, upper_}));
    case Kind::kChoice:
      return "choice(" + ListText(values_) + ")";
    case Kind::kGrid:
      return "grid_search(" + ListText(values_) + ")";
    case Kind::kSampleFrom:
      return "sample_from(<function>)";
  }
  return "unknown";
}

void ValidateParamSpace(const ParamSpace& space) {
  for (const auto& [name, domain] : space) {
    if (name.empty()) {
      throw Error("prism::tune: a parameter in the search space has an empty name; give every "
                  "hyperparameter a name");
    }
    switch (domain.kind()) {
      case Domain::Kind::kConstant:
        if (domain.values().size() != 1) {
          throw Error("prism::tune: parameter \"" + name + "\" is a constant without a value");
        }
        break;
      case Domain::Kind::kChoice:
      case Domain::Kind::kGrid:
        if (domain.values().empty()) {
          throw Error("prism::tune: parameter \"" + name + "\" (" + domain.ToString() +
                      ") has no values; pass at least one");
        }
        break;
      case Domain::Kind::kSampleFrom:
        if (!domain.function()) {
          throw Error("prism::tune: parameter \"" + name +
                      "\" is a SampleFrom without a function; pass a callable");
        }
        break;
      default:
        break;  // the factories checked the bounds
    }
  }
}

}  // namespace prism::tune
