#pragma once
// The job's history for the dashboard's plots (tasks/s, memory per rank): rank 0 adds a
// HistoryPoint once a period; a long job keeps a bounded number of them. When `capacity`
// points are kept, every other one is dropped and the period doubles, so the history always
// spans the whole job, at 1 s resolution for the first `capacity` seconds, 2 s for the next
// `capacity`, and so on (600 points: 10 minutes at 1 s, a day at 2.4 min).
//
// Pure logic, not thread-safe (the feed holds its lock).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dashboard/snapshot.h"

namespace prism::dashboard {

class History {
 public:
  explicit History(size_t capacity = 600, int64_t period_ns = 1'000'000'000);
  /// Keeps `point` unless the last kept one is less than a period older.
  void Add(HistoryPoint point);
  const std::vector<HistoryPoint>& points() const { return points_; }
  int64_t period_ns() const { return period_ns_; }

 private:
  size_t capacity_;
  int64_t period_ns_;
  std::vector<HistoryPoint> points_;
};

}  // namespace prism::dashboard
