#pragma once
// Serve's request counts and latencies for the job's dashboard (/metrics, under Ray Serve's
// names), kept on rank 0 where the ingress and the driver's routers run:
//
//   ray_serve_num_http_requests{route,method,application,status_code}     counter
//   ray_serve_http_request_latency_ms{route,method,application,status_code} histogram
//   ray_serve_num_ongoing_http_requests                                   gauge
//       each HTTP request the ingress answered (404s too: route ""), from its arrival to
//       its answer
//   ray_serve_deployment_request_counter{deployment,replica,application}  counter
//   ray_serve_deployment_error_counter{deployment,replica,application}    counter
//   ray_serve_deployment_processing_latency_ms{deployment,replica,application} histogram
//       each call rank 0's routers sent (the ingress's and the driver's handles), from its
//       send to its reply; Ray measures at the replica, so this includes the trip there
//       and back (tens of microseconds). Calls from other ranks' handles are not counted.
//
// The controller's thread publishes them with the Serve panel (every 2 s). Thread-safe:
// one mutex, taken once per request or call.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "prism/platform/panel.h"

namespace prism::serve::internal {

/// Ray Serve's default latency buckets, ms (RAY_SERVE_REQUEST_LATENCY_BUCKETS_MS).
const std::vector<double>& LatencyBucketsMs();

/// Counts observations into LatencyBucketsMs().
class LatencyHistogram {
 public:
  void Observe(double ms);
  /// As a PanelMetric of type histogram (cumulative buckets).
  platform::PanelMetric ToMetric(std::string name, std::string help,
                                 std::vector<std::pair<std::string, std::string>> labels) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<uint64_t> buckets_;  // per bound, not cumulative; sized at the first Observe
  uint64_t count_ = 0;
  double sum_ = 0;
};

class RequestMetrics {
 public:
  void HttpStarted();
  /// `route`: the matched route prefix ("" for none), `application` its application.
  void HttpEnded(const std::string& route, const std::string& method, const std::string& application, int status,
                 double ms);
  void CallEnded(const std::string& deployment, const std::string& replica, bool failed, double ms);
  struct Totals {
    uint64_t calls = 0;
    uint64_t errors = 0;
    double sum_ms = 0;
  };
  /// The calls to `deployment`'s replicas so far, over every replica.
  Totals DeploymentTotals(const std::string& deployment) const;
  /// Every series, the deployment calls labelled with `application_of` their deployment.
  std::vector<platform::PanelMetric> Metrics(const std::map<std::string, std::string>& application_of) const;

 private:
  struct Calls {
    uint64_t errors = 0;
    LatencyHistogram latency;
  };
  mutable std::mutex mu_;
  int64_t ongoing_http_ = 0;
  std::map<std::tuple<std::string, std::string, std::string, int>, LatencyHistogram> http_;
  std::map<std::pair<std::string, std::string>, Calls> calls_;  // (deployment, replica)
};

}  // namespace prism::serve::internal
