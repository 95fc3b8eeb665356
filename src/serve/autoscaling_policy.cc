#include "serve/autoscaling_policy.h"

#include <algorithm>
#include <cmath>

namespace prism::serve::internal {

int DesiredReplicas(const AutoscalingConfig& config, double avg_ongoing) {
  // A tiny epsilon keeps 4.0000000001 / 2 from asking for a third replica.
  const double raw = std::ceil(avg_ongoing / config.target_ongoing_requests - 1e-9);
  const int desired = raw > 1e6 ? 1000000 : static_cast<int>(std::max(0.0, raw));
  return std::clamp(desired, config.min_replicas, config.max_replicas);
}

void LoadWindow::Record(double now, double ongoing) { samples_.emplace_back(now, ongoing); }

double LoadWindow::Average(double now, double window) {
  while (!samples_.empty() && samples_.front().first <= now - window) samples_.pop_front();
  if (samples_.empty()) return 0;
  double sum = 0;
  for (const auto& s : samples_) sum += s.second;
  return sum / static_cast<double>(samples_.size());
}

int AutoscalingDecider::Decide(int current, double avg_ongoing, double now) {
  if (current < config_.min_replicas || current > config_.max_replicas) {
    up_since_ = down_since_ = -1;
    return std::clamp(current, config_.min_replicas, config_.max_replicas);
  }
  const int desired = DesiredReplicas(config_, avg_ongoing);
  if (desired > current) {
    down_since_ = -1;
    if (up_since_ < 0) up_since_ = now;
    if (now - up_since_ >= config_.upscale_delay_s) {
      up_since_ = -1;
      return desired;
    }
  } else if (desired < current) {
    up_since_ = -1;
    if (down_since_ < 0) down_since_ = now;
    if (now - down_since_ >= config_.downscale_delay_s) {
      down_since_ = -1;
      return desired;
    }
  } else {
    up_since_ = down_since_ = -1;
  }
  return current;
}

}  // namespace prism::serve::internal
