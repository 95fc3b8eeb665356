#pragma once
// Prism's one JSON convention, for every file it reads or writes with nlohmann-json
// (checkpoint metadata, Tune's journal and results, perf reports, status JSON): a number
// that is not finite (NaN, +/-Infinity: a diverged loss) is written as null, which nlohmann
// does by itself, and reads back as NaN where a number is expected. The files stay standard
// JSON, so a browser, jq and Python's json module read them.

#include <limits>
#include <nlohmann/json.hpp>

namespace prism::internal {

/// `j` as a double; null (how a NaN or an infinity was written) is NaN. Throws
/// nlohmann::json::type_error if `j` is neither a number nor null.
inline double JsonDouble(const nlohmann::json& j) {
  if (j.is_null()) return std::numeric_limits<double>::quiet_NaN();
  return j.get<double>();
}

}  // namespace prism::internal
