#include "serve/request_metrics.h"

#include <algorithm>

namespace prism::serve::internal {

const std::vector<double>& LatencyBucketsMs() {
  static const std::vector<double> kBuckets = {1,    2,    5,    10,   20,    50,    100,   200,  300,
                                               400,  500,  1000, 2000, 5000,  10000, 60000, 120000,
                                               300000, 600000};
  return kBuckets;
}

void LatencyHistogram::Observe(double ms) {
  const std::vector<double>& bounds = LatencyBucketsMs();
  if (buckets_.empty()) buckets_.assign(bounds.size(), 0);
  const auto at = std::lower_bound(bounds.begin(), bounds.end(), ms);  // le: the first bound >= ms
  if (at != bounds.end()) ++buckets_[static_cast<size_t>(at - bounds.begin())];
  ++count_;
  sum_ += ms;
}

platform::PanelMetric LatencyHistogram::ToMetric(std::string name, std::string help,
                                                 std::vector<std::pair<std::string, std::string>> labels) const {
  platform::PanelMetric m;
  m.name = std::move(name);
  m.type = "histogram";
  m.help = std::move(help);
  m.labels = std::move(labels);
  m.bounds = LatencyBucketsMs();
  uint64_t total = 0;
  for (size_t i = 0; i < m.bounds.size(); ++i) {
    total += i < buckets_.size() ? buckets_[i] : 0;
    m.buckets.push_back(total);
  }
  m.count = count_;
  m.sum = sum_;
  return m;
}

void RequestMetrics::HttpStarted() {
  std::lock_guard<std::mutex> lock(mu_);
  ++ongoing_http_;
}

void RequestMetrics::HttpEnded(const std::string& route, const std::string& method, const std::string& application,
                               int status, double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  --ongoing_http_;
  http_[{route, method, application, status}].Observe(ms);
}

void RequestMetrics::CallEnded(const std::string& deployment, const std::string& replica, bool failed, double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Calls& c = calls_[{deployment, replica}];
  c.latency.Observe(ms);
  if (failed) ++c.errors;
}

RequestMetrics::Totals RequestMetrics::DeploymentTotals(const std::string& deployment) const {
  Totals t;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = calls_.lower_bound({deployment, ""}); it != calls_.end() && it->first.first == deployment; ++it) {
    t.calls += it->second.latency.count();
    t.errors += it->second.errors;
    t.sum_ms += it->second.latency.sum();
  }
  return t;
}

std::vector<platform::PanelMetric> RequestMetrics::Metrics(
    const std::map<std::string, std::string>& application_of) const {
  using Labels = std::vector<std::pair<std::string, std::string>>;
  std::vector<platform::PanelMetric> out;
  auto scalar = [&out](const char* name, const char* type, const char* help, Labels labels, double value) {
    platform::PanelMetric m;
    m.name = name;
    m.type = type;
    m.help = help;
    m.labels = std::move(labels);
    m.value = value;
    out.push_back(std::move(m));
  };
  auto http_labels = [](const auto& key) {
    const auto& [route, method, application, status] = key;
    return Labels{{"route", route}, {"method", method}, {"application", application},
                  {"status_code", std::to_string(status)}};
  };
  auto call_labels = [&](const std::pair<std::string, std::string>& key) {
    auto app = application_of.find(key.first);
    return Labels{{"deployment", key.first}, {"replica", key.second},
                  {"application", app == application_of.end() ? "" : app->second}};
  };
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, histogram] : http_) {
    scalar("ray_serve_num_http_requests", "counter",
           "HTTP requests the ingress answered, by route, method, application and status.", http_labels(key),
           static_cast<double>(histogram.count()));
  }
  for (const auto& [key, histogram] : http_) {
    out.push_back(histogram.ToMetric("ray_serve_http_request_latency_ms",
                                     "HTTP requests' time from arrival to answer at the ingress, ms.",
                                     http_labels(key)));
  }
  scalar("ray_serve_num_ongoing_http_requests", "gauge", "HTTP requests the ingress is handling now.", {},
         static_cast<double>(ongoing_http_));
  for (const auto& [key, calls] : calls_) {
    scalar("ray_serve_deployment_request_counter", "counter",
           "Calls rank 0's routers sent to each replica and heard back from.", call_labels(key),
           static_cast<double>(calls.latency.count()));
  }
  for (const auto& [key, calls] : calls_) {
    scalar("ray_serve_deployment_error_counter", "counter", "Calls to each replica that ended in an exception.",
           call_labels(key), static_cast<double>(calls.errors));
  }
  for (const auto& [key, calls] : calls_) {
    out.push_back(calls.latency.ToMetric("ray_serve_deployment_processing_latency_ms",
                                         "Calls' time from rank 0's router to the reply, ms.", call_labels(key)));
  }
  return out;
}

}  // namespace prism::serve::internal
