#pragma once
// Piecewise-linear schedules of a value over sampled env steps: RLlib's Scheduler for a
// list of (timestep, value) points (rllib/utils/schedules/scheduler.py on a
// PiecewiseSchedule with linear interpolation). DQN's epsilon is one (RLlib's default
// [(0, 1.0), (10000, 0.05)]); a learning-rate schedule is another.

#include <cstdint>
#include <utility>
#include <vector>

namespace prism::rl {

/// A value that moves linearly between (timestep, value) points and stays at the last
/// value after the last point. Immutable, so thread-safe.
class PiecewiseSchedule {
 public:
  /// `points` starts at timestep 0 and its timesteps strictly increase (RLlib's rule);
  /// throws prism::Error naming the offending point otherwise, or for a non-finite value.
  explicit PiecewiseSchedule(std::vector<std::pair<int64_t, double>> points);
  /// The same value at every timestep.
  static PiecewiseSchedule Constant(double value);
  /// The value at `timestep` (env steps sampled so far); throws prism::Error if negative.
  double Value(int64_t timestep) const;
  const std::vector<std::pair<int64_t, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<int64_t, double>> points_;
};

/// Epsilon-greedy exploration's schedule: `start` at step 0, linearly to `end` at
/// `decay_steps`, then `end`. The defaults are RLlib DQN's: [(0, 1.0), (10000, 0.05)].
/// Throws prism::Error for decay_steps < 1 or an epsilon outside [0, 1].
PiecewiseSchedule LinearEpsilonSchedule(int64_t decay_steps = 10000, double start = 1.0,
                                        double end = 0.05);

}  // namespace prism::rl
