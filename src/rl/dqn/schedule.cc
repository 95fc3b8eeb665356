// Piecewise-linear schedules (schedule.h).

#include "rl/dqn/schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "prism/errors.h"

namespace prism::rl {

PiecewiseSchedule::PiecewiseSchedule(std::vector<std::pair<int64_t, double>> points)
    : points_(std::move(points)) {
  if (points_.empty()) throw Error("prism::rl::PiecewiseSchedule: no points; give at least (0, value)");
  if (points_.front().first != 0)
    throw Error("prism::rl::PiecewiseSchedule: the first point is at timestep " +
                std::to_string(points_.front().first) + "; it must be at timestep 0");
  for (size_t i = 0; i < points_.size(); ++i) {
    if (!std::isfinite(points_[i].second))
      throw Error("prism::rl::PiecewiseSchedule: point " + std::to_string(i) + " has a value that is not finite");
    if (i > 0 && points_[i].first <= points_[i - 1].first)
      throw Error("prism::rl::PiecewiseSchedule: point " + std::to_string(i) + " is at timestep " +
                  std::to_string(points_[i].first) + ", not after the previous point's " +
                  std::to_string(points_[i - 1].first) + "; timesteps must strictly increase");
  }
}

PiecewiseSchedule PiecewiseSchedule::Constant(double value) { return PiecewiseSchedule({{0, value}}); }

double PiecewiseSchedule::Value(int64_t timestep) const {
  if (timestep < 0)
    throw Error("prism::rl::PiecewiseSchedule::Value: timestep " + std::to_string(timestep) +
                " is negative");
  // The first point after `timestep`; the segment ends there.
  auto after = std::upper_bound(points_.begin(), points_.end(), timestep,
                                [](int64_t t, const auto& p) { return t < p.first; });
  if (after == points_.end()) return points_.back().second;
  const auto& [t1, v1] = *after;
  const auto& [t0, v0] = *(after - 1);
  const double alpha = static_cast<double>(timestep - t0) / static_cast<double>(t1 - t0);
  return v0 + alpha * (v1 - v0);
}

PiecewiseSchedule LinearEpsilonSchedule(int64_t decay_steps, double start, double end) {
  if (decay_steps < 1)
    throw Error("prism::rl::LinearEpsilonSchedule: decay_steps is " + std::to_string(decay_steps) +
                "; it must be >= 1");
  for (double e : {start, end})
    if (!(e >= 0 && e <= 1))
      throw Error("prism::rl::LinearEpsilonSchedule: epsilon " + std::to_string(e) +
                  " is outside [0, 1]");
  return PiecewiseSchedule({{0, start}, {decay_steps, end}});
}

}  // namespace prism::rl
