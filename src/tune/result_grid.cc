// ResultGrid: every trial's outcome, the best by a metric and scope, and the CSV table.

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <set>

#include "prism/tune/tuner.h"
#include "tune/metric_mode.h"

namespace prism::tune {
namespace {

/// The value of `metric` for a trial under `scope`, if it reported it.
std::optional<double> ScopedValue(const Result& r, const std::string& metric, const std::string& mode,
                                  const std::string& scope) {
  std::vector<double> values;
  for (const auto& m : r.metrics_history) {
    auto it = m.find(metric);
    if (it != m.end()) values.push_back(it->second);
  }
  if (values.empty()) {
    auto it = r.metrics.find(metric);
    if (it == r.metrics.end()) return std::nullopt;
    values.push_back(it->second);
  }
  if (scope == "last") return values.back();
  if (scope == "all") {
    return mode == "max" ? *std::max_element(values.begin(), values.end())
                         : *std::min_element(values.begin(), values.end());
  }
  size_t n = values.size();
  if (scope == "last-5-avg") n = std::min<size_t>(n, 5);
  if (scope == "last-10-avg") n = std::min<size_t>(n, 10);
  return std::accumulate(values.end() - static_cast<long>(n), values.end(), 0.0) / static_cast<double>(n);
}

std::string Cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

ResultGrid::ResultGrid(std::vector<Result> results, std::string metric, std::string mode,
                       std::string experiment_path)
    : results_(std::move(results)), metric_(std::move(metric)), mode_(std::move(mode)),
      path_(std::move(experiment_path)) {}

const Result& ResultGrid::GetBestResult(std::string metric, std::string mode, const std::string& scope) const {
  if (metric.empty()) metric = metric_;
  if (mode.empty()) mode = mode_;
  if (metric.empty()) {
    throw Error("prism::tune::ResultGrid::GetBestResult: no metric: pass one, or set TuneConfig::metric");
  }
  internal::CheckMode(mode, "GetBestResult");
  static const std::set<std::string> kScopes = {"last", "all", "avg", "last-5-avg", "last-10-avg"};
  if (kScopes.count(scope) == 0) {
    throw Error("prism::tune::ResultGrid::GetBestResult: scope \"" + scope +
                "\" is not one of last, all, avg, last-5-avg, last-10-avg");
  }
  const Result* best = nullptr;
  double best_score = 0;
  for (const auto& r : results_) {
    auto v = ScopedValue(r, metric, mode, scope);
    if (!v) continue;
    const double score = internal::Score(*v, mode);
    if (best == nullptr || score > best_score) {
      best = &r;
      best_score = score;
    }
  }
  if (best == nullptr) {
    throw Error("prism::tune::ResultGrid::GetBestResult: no trial reported \"" + metric + "\" (" +
                std::to_string(results_.size()) + " trials, " + std::to_string(num_errors()) +
                " failed); check the metric's name in tune::Report");
  }
  return *best;
}

size_t ResultGrid::num_errors() const {
  return static_cast<size_t>(std::count_if(results_.begin(), results_.end(),
                                           [](const Result& r) { return r.status == TrialStatus::kError; }));
}

size_t ResultGrid::num_terminated() const {
  return static_cast<size_t>(std::count_if(results_.begin(), results_.end(),
                                           [](const Result& r) { return r.status == TrialStatus::kTerminated; }));
}

std::vector<std::string> ResultGrid::errors() const {
  std::vector<std::string> out;
  for (const auto& r : results_) {
    if (r.status == TrialStatus::kError) out.push_back(r.trial_id + ": " + r.error);
  }
  return out;
}

std::string ResultGrid::ToCsv() const {
  std::set<std::string> params, metrics;
  for (const auto& r : results_) {
    for (const auto& [k, v] : r.config.Values()) params.insert(k);
    for (const auto& [k, v] : r.metrics) metrics.insert(k);
  }
  std::string out = "trial_id,status";
  for (const auto& p : params) out += "," + Cell("config/" + p);
  for (const auto& m : metrics) out += "," + Cell(m);
  out += ",error\n";
  for (const auto& r : results_) {
    out += Cell(r.trial_id) + "," + StatusName(r.status);
    for (const auto& p : params) out += "," + Cell(r.config.Get(p, ""));
    for (const auto& m : metrics) {
      auto it = r.metrics.find(m);
      char buf[32] = "";
      if (it != r.metrics.end()) std::snprintf(buf, sizeof buf, "%.10g", it->second);
      out += std::string(",") + buf;
    }
    out += "," + Cell(r.error) + "\n";
  }
  return out;
}

}  // namespace prism::tune
