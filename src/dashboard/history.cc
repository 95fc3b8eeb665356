// The bounded history (history.h): thinning by halves keeps the points evenly spaced in time
// without a ring of rings, and costs one pass over `capacity` points once per doubling.
#include "dashboard/history.h"

#include <utility>

namespace prism::dashboard {

History::History(size_t capacity, int64_t period_ns) : capacity_(capacity < 2 ? 2 : capacity), period_ns_(period_ns) {}

void History::Add(HistoryPoint point) {
  if (!points_.empty() && point.time_ns - points_.back().time_ns < period_ns_) return;
  if (points_.size() == capacity_) {
    // Keep the even positions (the first point stays: the job's start).
    size_t kept = 0;
    for (size_t i = 0; i < points_.size(); i += 2, ++kept) {
      if (i != kept) points_[kept] = std::move(points_[i]);
    }
    points_.resize(kept);
    period_ns_ *= 2;
    if (point.time_ns - points_.back().time_ns < period_ns_) return;
  }
  points_.push_back(std::move(point));
}

}  // namespace prism::dashboard
