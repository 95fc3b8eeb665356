#pragma once
// Ray Serve's autoscaling rule, as pure logic driven by the caller's clock (the controller
// passes steady-clock seconds; the unit tests a fake one).
//
//   desired = ceil(current * (avg_ongoing / current) / target_ongoing_requests)
//           = ceil(avg_ongoing / target_ongoing_requests),
// clamped to [min_replicas, max_replicas], where avg_ongoing is the deployment's total of
// requests in flight and queued, averaged over look_back_period_s. A desired count above
// the current one is applied once it has been above for upscale_delay_s (Ray's decision
// counter, in seconds instead of control-loop ticks); below, after downscale_delay_s; a
// wish that changes direction restarts its delay. A current count outside [min, max] (a
// new config) is clamped at once.

#include <deque>
#include <utility>

#include "prism/serve/config.h"

namespace prism::serve::internal {

/// The desired replica count for `avg_ongoing` requests, before the delays.
int DesiredReplicas(const AutoscalingConfig& config, double avg_ongoing);

/// Samples of the total ongoing requests; averages the last look_back_period_s.
class LoadWindow {
 public:
  /// Adds a sample taken at `now` (times must not decrease).
  void Record(double now, double ongoing);
  /// The mean of the samples in (now - window, now]; 0 without any.
  double Average(double now, double window);

 private:
  std::deque<std::pair<double, double>> samples_;
};

/// The delays: remembers since when a higher or lower count has been wanted.
class AutoscalingDecider {
 public:
  explicit AutoscalingDecider(AutoscalingConfig config) : config_(std::move(config)) {}
  /// The replica count to have now, given `current` and the averaged load.
  int Decide(int current, double avg_ongoing, double now);
  const AutoscalingConfig& config() const { return config_; }

 private:
  AutoscalingConfig config_;
  double up_since_ = -1;    // when desired > current began, or -1
  double down_since_ = -1;  // when desired < current began, or -1
};

}  // namespace prism::serve::internal
