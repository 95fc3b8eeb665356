#pragma once
// Key/value settings for a training loop (Ray's train_loop_config dict), and the metrics a
// loop reports.

#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>

#include "prism/errors.h"

namespace prism::train {

namespace detail {
/// A floating-point number as the shortest text that reads back as the same number, laid
/// out like Python's repr: fixed for exponents -4..15 ("0.1", "0.0001", "250"), else
/// scientific ("1e-05", "1e+16").
template <typename T>
std::string ShortestText(T value) {
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  const char* e = std::find(buf, sci.ptr, 'e');
  if (e != sci.ptr) {
    int exponent = 0;
    std::from_chars(e + 1 + (e[1] == '+'), sci.ptr, exponent);
    if (exponent < -4 || exponent >= 16) return std::string(buf, sci.ptr);
  }
  auto fixed = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed);
  return std::string(buf, fixed.ptr);
}
}  // namespace detail

/// Metrics reported by a training loop: name -> number.
using Metrics = std::map<std::string, double>;

/// train_loop_config: values are kept as text and parsed on Get.
///   Config c; c.Set("lr", 1e-3).Set("epochs", 2).Set("model", "cnn");
///   double lr = c.Get<double>("lr", 1e-3);
class Config {
 public:
  Config() = default;
  template <typename T>
  Config& Set(const std::string& key, const T& value) {
    std::ostringstream out;
    if constexpr (std::is_same_v<T, bool>) {
      out << (value ? "true" : "false");
    } else if constexpr (std::is_floating_point_v<T>) {
      // The shortest text that reads back as the same number: "0.1", not
      // "0.10000000000000001".
      out << detail::ShortestText(value);
    } else {
      out << value;
    }
    values_[key] = out.str();
    return *this;
  }
  bool Has(const std::string& key) const { return values_.count(key) > 0; }
  /// The value of `key` as T, or `fallback` if unset. Throws prism::Error if the value does
  /// not parse as T.
  template <typename T>
  T Get(const std::string& key, const T& fallback) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    if constexpr (std::is_same_v<T, std::string>) {
      return it->second;
    } else if constexpr (std::is_same_v<T, bool>) {
      if (it->second == "true" || it->second == "1") return true;
      if (it->second == "false" || it->second == "0") return false;
      throw Error("prism::train::Config: \"" + key + "\" is \"" + it->second + "\", not a bool");
    } else {
      std::istringstream in(it->second);
      T v{};
      in >> v;
      if (in.fail() || !in.eof()) {
        throw Error("prism::train::Config: \"" + key + "\" is \"" + it->second +
                    "\", which does not parse as the type asked for");
      }
      return v;
    }
  }
  std::string Get(const std::string& key, const char* fallback) const {
    return Get<std::string>(key, fallback);
  }
  const std::map<std::string, std::string>& Values() const { return values_; }

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& values_;
  }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace prism::train
