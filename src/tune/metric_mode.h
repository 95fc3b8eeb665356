#pragma once
// The metric and mode a searcher or scheduler optimizes: checks shared by all of them.

#include <string>

namespace prism::tune::internal {

/// Throws prism::Error unless `mode` is "max" or "min" (naming `who` and what to pass).
void CheckMode(const std::string& mode, const std::string& who);

/// A component's own metric/mode (possibly empty) merged with TuneConfig's: a component
/// that has its own must agree with TuneConfig's where both are set. On return `metric`
/// and `mode` hold the values to use. Throws prism::Error on a disagreement, a bad mode,
/// or (when `required`) if either is still missing, saying where to set it.
void MergeMetricMode(std::string& metric, std::string& mode, const std::string& tune_metric,
                     const std::string& tune_mode, const std::string& who, bool required = true);

/// `value` oriented so that higher is better: value for "max", -value for "min".
inline double Score(double value, const std::string& mode) { return mode == "min" ? -value : value; }

}  // namespace prism::tune::internal
