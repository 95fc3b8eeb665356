// Space and Action: construction checks, Gymnasium-style printing, and the action check every
// environment runs before stepping.

#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>

#include "prism/errors.h"
#include "prism/rl/env.h"

namespace prism::rl {
namespace {

// Shortest round-trip form, as NumPy prints float32: 4.8, -2.0, 3.4028235e+38, inf.
std::string FormatFloat(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string FormatFloats(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + FormatFloat(v[i]);
  return s + "]";
}

bool AllEqual(const std::vector<float>& v) {
  for (float x : v)
    if (!(x == v.front())) return false;
  return true;
}

}  // namespace

Space Space::Discrete(int64_t n) {
  if (n < 1)
    throw Error("prism::rl::Space::Discrete(" + std::to_string(n) +
                "): a Discrete space needs n >= 1 actions");
  Space s;
  s.kind = Kind::kDiscrete;
  s.n = n;
  return s;
}

Space Space::Box(std::vector<float> low, std::vector<float> high, std::vector<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 1) throw Error("prism::rl::Space::Box: every dimension of the shape must be >= 1");
    elements *= d;
  }
  if (static_cast<int64_t>(low.size()) != elements || static_cast<int64_t>(high.size()) != elements)
    throw Error("prism::rl::Space::Box: low has " + std::to_string(low.size()) + " values and high " +
                std::to_string(high.size()) + ", but the shape holds " + std::to_string(elements) +
                " elements: give one bound per element");
  for (size_t i = 0; i < low.size(); ++i)
    if (std::isnan(low[i]) || std::isnan(high[i]) || low[i] > high[i])
      throw Error("prism::rl::Space::Box: element " + std::to_string(i) + " has low " +
                  FormatFloat(low[i]) + " and high " + FormatFloat(high[i]) +
                  ": bounds must be numbers with low <= high");
  Space s;
  s.kind = Kind::kBox;
  s.low = std::move(low);
  s.high = std::move(high);
  s.shape = std::move(shape);
  return s;
}

int64_t Space::size() const {
  if (kind == Kind::kDiscrete) return 1;
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

std::string Space::ToString() const {
  if (kind == Kind::kDiscrete) return "Discrete(" + std::to_string(n) + ")";
  std::string dims = "(";
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  dims += shape.size() == 1 ? ",)" : ")";
  bool uniform = !low.empty() && AllEqual(low) && AllEqual(high);
  std::string lo = uniform ? FormatFloat(low.front()) : FormatFloats(low);
  std::string hi = uniform ? FormatFloat(high.front()) : FormatFloats(high);
  return "Box(" + lo + ", " + hi + ", " + dims + ", float32)";
}

bool Space::Contains(const Action& action) const {
  if (kind == Kind::kDiscrete) return action.values.empty() && action.index >= 0 && action.index < n;
  if (static_cast<int64_t>(action.values.size()) != size()) return false;
  for (size_t i = 0; i < action.values.size(); ++i) {
    float v = action.values[i];
    if (!std::isfinite(v) || v < low[i] || v > high[i]) return false;
  }
  return true;
}

void Space::CheckAction(const Action& action, const std::string& env_name) const {
  auto fail = [&](const std::string& why) {
    throw Error(env_name + ": action " + rl::ToString(action) + " is outside the action space " +
                ToString() + ": " + why);
  };
  if (kind == Kind::kDiscrete) {
    if (!action.values.empty())
      fail("a Discrete space takes Action::Discrete(i), not Box values");
    if (action.index < 0 || action.index >= n)
      fail("the index must be in 0.." + std::to_string(n - 1));
    return;
  }
  if (static_cast<int64_t>(action.values.size()) != size())
    fail("it has " + std::to_string(action.values.size()) + " values and the space needs " +
         std::to_string(size()) + (action.values.empty() ? " (use Action::Box(values))" : ""));
  for (size_t i = 0; i < action.values.size(); ++i)
    if (!std::isfinite(action.values[i]))
      fail("element " + std::to_string(i) + " is " + FormatFloat(action.values[i]) +
           "; actions must be finite (a NaN usually comes from a diverged policy)");
}

std::string ToString(const Action& action) {
  if (action.values.empty()) return std::to_string(action.index);
  return FormatFloats(action.values);
}

}  // namespace prism::rl
