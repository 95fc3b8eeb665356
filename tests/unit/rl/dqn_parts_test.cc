// DQN's pure parts: the uniform replay buffer and the epsilon schedule.

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "prism/errors.h"
#include "rl_test_util.h"
#include "rl/dqn/replay_buffer.h"
#include "rl/dqn/schedule.h"

namespace prism::rl {
namespace {

using prism_test::ErrorOf;

// ---- Schedules ----

TEST(Schedule, RLlibDqnEpsilonIsLinearFromOneTo0Point05Over10kSteps) {
  PiecewiseSchedule eps = LinearEpsilonSchedule();
  ASSERT_EQ(eps.points().size(), 2u);
  EXPECT_EQ(eps.points()[1], (std::pair<int64_t, double>{10000, 0.05}));
  EXPECT_DOUBLE_EQ(eps.Value(0), 1.0);
  EXPECT_DOUBLE_EQ(eps.Value(2500), 1.0 - 0.95 * 0.25);  // 0.7625
  EXPECT_DOUBLE_EQ(eps.Value(5000), 0.525);
  EXPECT_DOUBLE_EQ(eps.Value(9999), 1.0 - 0.95 * 0.9999);
  EXPECT_DOUBLE_EQ(eps.Value(10000), 0.05);
  EXPECT_DOUBLE_EQ(eps.Value(1000000), 0.05);  // the last value after the last point
  PiecewiseSchedule fast = LinearEpsilonSchedule(100, 0.5, 0.0);
  EXPECT_DOUBLE_EQ(fast.Value(50), 0.25);
}

TEST(Schedule, PiecewiseSegmentsAndErrors) {
  PiecewiseSchedule s({{0, 1.0}, {10, 0.0}, {20, 1.0}});
  EXPECT_DOUBLE_EQ(s.Value(5), 0.5);
  EXPECT_DOUBLE_EQ(s.Value(10), 0.0);
  EXPECT_DOUBLE_EQ(s.Value(15), 0.5);
  EXPECT_DOUBLE_EQ(s.Value(25), 1.0);
  EXPECT_DOUBLE_EQ(PiecewiseSchedule::Constant(3e-4).Value(123456), 3e-4);
  EXPECT_ERROR_HAS(PiecewiseSchedule({}), "no points");
  EXPECT_ERROR_HAS(PiecewiseSchedule({{5, 1.0}}), "must be at timestep 0");
  EXPECT_ERROR_HAS(PiecewiseSchedule({{0, 1.0}, {10, 0.5}, {10, 0.1}}), "strictly increase");
  EXPECT_ERROR_HAS(PiecewiseSchedule({{0, NAN}}), "not finite");
  EXPECT_ERROR_HAS(s.Value(-1), "negative");
  EXPECT_ERROR_HAS(LinearEpsilonSchedule(0), "decay_steps is 0");
  EXPECT_ERROR_HAS(LinearEpsilonSchedule(100, 1.5, 0.05), "outside [0, 1]");
}

// ---- The replay buffer ----

// Transition k: obs (k, -k), action k % 2, reward k, next_obs (k + 1, -k - 1), terminated
// when k % 3 == 0: so every sampled row can be checked against its reward.
void AddNumbered(ReplayBuffer& buf, int k) {
  float f = static_cast<float>(k);
  buf.Add({f, -f}, Action::Discrete(k % 2), k, {f + 1, -f - 1}, k % 3 == 0);
}

TEST(ReplayBuffer, SamplesWhatWasAddedRowByRow) {
  ReplayBuffer buf(100, 2, Space::Discrete(2), 1);
  for (int k = 0; k < 50; ++k) AddNumbered(buf, k);
  EXPECT_EQ(buf.size(), 50);
  TransitionBatch b = buf.Sample(64);
  ASSERT_EQ(b.size(), 64);
  ASSERT_EQ(b.observations.size(), 128u);
  EXPECT_TRUE(b.action_values.empty());
  for (int i = 0; i < 64; ++i) {
    const int k = static_cast<int>(b.rewards[i]);
    EXPECT_EQ(b.indices[i], k);  // transition k sits in slot k before the ring wraps
    EXPECT_EQ(b.observations[2 * i], k);
    EXPECT_EQ(b.observations[2 * i + 1], -k);
    EXPECT_EQ(b.next_observations[2 * i], k + 1);
    EXPECT_EQ(b.next_observations[2 * i + 1], -k - 1);
    EXPECT_EQ(b.actions[i], k % 2);
    EXPECT_EQ(b.terminated[i], k % 3 == 0);
  }
}

TEST(ReplayBuffer, OverwritesTheOldestWhenFull) {
  ReplayBuffer buf(3, 2, Space::Discrete(2), 2);
  for (int k = 0; k < 5; ++k) AddNumbered(buf, k);
  EXPECT_EQ(buf.size(), 3);
  EXPECT_EQ(buf.capacity(), 3);
  EXPECT_EQ(buf.num_added(), 5);
  std::map<int, int> seen;
  TransitionBatch b = buf.Sample(300);
  for (float r : b.rewards) ++seen[static_cast<int>(r)];
  EXPECT_EQ(seen.size(), 3u);  // 2, 3 and 4; 0 and 1 were overwritten
  EXPECT_GT(seen[2], 0);
  EXPECT_GT(seen[3], 0);
  EXPECT_GT(seen[4], 0);
}

TEST(ReplayBuffer, SamplesUniformlyWithReplacement) {
  ReplayBuffer buf(10, 2, Space::Discrete(2), 3);
  for (int k = 0; k < 10; ++k) AddNumbered(buf, k);
  std::vector<int> count(10, 0);
  TransitionBatch b;
  const int draws = 100000;
  for (int i = 0; i < draws / 1000; ++i) {
    buf.Sample(1000, b);
    for (int64_t idx : b.indices) ++count[idx];
  }
  // Each slot's share is 0.1; its binomial standard deviation is sqrt(0.1 * 0.9 / 1e5) =
  // 0.00095, so 0.006 is over 6 sigma.
  for (int k = 0; k < 10; ++k) EXPECT_NEAR(count[k] / double(draws), 0.1, 0.006) << "slot " << k;
  // With replacement: a batch larger than the buffer is fine.
  EXPECT_EQ(buf.Sample(50).size(), 50);
}

TEST(ReplayBuffer, SeededSamplingRepeats) {
  ReplayBuffer a(100, 2, Space::Discrete(2), 7), b(100, 2, Space::Discrete(2), 7),
      c(100, 2, Space::Discrete(2), 8);
  for (int k = 0; k < 100; ++k) {
    AddNumbered(a, k);
    AddNumbered(b, k);
    AddNumbered(c, k);
  }
  std::vector<int64_t> first = a.Sample(32).indices;
  EXPECT_EQ(b.Sample(32).indices, first);
  EXPECT_NE(c.Sample(32).indices, first);
  a.Seed(7);
  EXPECT_EQ(a.Sample(32).indices, first);
}

TEST(ReplayBuffer, BoxActions) {
  Space box = Space::Box({-2}, {2}, {1});
  ReplayBuffer buf(10, 3, box, 4);
  buf.Add({1, 2, 3}, Action::Box({1.5f}), -0.5, {4, 5, 6}, false);
  TransitionBatch b = buf.Sample(2);
  EXPECT_TRUE(b.actions.empty());
  EXPECT_EQ(b.action_values, (std::vector<float>{1.5f, 1.5f}));
  EXPECT_EQ(b.rewards[0], -0.5f);
  EXPECT_ERROR_HAS(buf.Add({1, 2, 3}, Action::Box({NAN}), 0, {1, 2, 3}, false), "element 0 is nan");
}

TEST(ReplayBuffer, ErrorsSayWhatWasWrong) {
  EXPECT_ERROR_HAS(ReplayBuffer(0, 4, Space::Discrete(2)), "capacity is 0");
  EXPECT_ERROR_HAS(ReplayBuffer(10, 0, Space::Discrete(2)), "obs_size is 0");
  ReplayBuffer buf(10, 4, Space::Discrete(2));
  EXPECT_ERROR_HAS(buf.Sample(8), "the buffer is empty");
  EXPECT_ERROR_HAS(buf.Add({1, 2, 3}, Action::Discrete(0), 1, {1, 2, 3, 4}, false),
                   "obs has 3 values and next_obs 4; the buffer holds observations of 4");
  EXPECT_ERROR_HAS(buf.Add({1, 2, 3, 4}, Action::Discrete(2), 1, {1, 2, 3, 4}, false),
                   "action 2 is outside the action space Discrete(2)");
  EXPECT_ERROR_HAS(buf.Add({1, 2, 3, 4}, Action::Discrete(1), NAN, {1, 2, 3, 4}, false), "finite");
  buf.Add({1, 2, 3, 4}, Action::Discrete(1), 1, {1, 2, 3, 4}, false);
  EXPECT_ERROR_HAS(buf.Sample(0), "batch_size is 0");
}

}  // namespace
}  // namespace prism::rl
