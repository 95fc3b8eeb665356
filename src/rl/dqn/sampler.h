#pragma once
// DqnSampler: DQN's env runner loop, without MPI. It steps a VectorEnv with epsilon-greedy
// actions of a Q-module and turns the steps into replay rows (n-step returns as
// dqn_trainer.h describes), with the episodes that ended. The DqnTrainer runs one on the
// driver; an env runner actor (src/rl/algorithm.cc) runs one on its rank and returns its
// rows to the driver, which adds them to the replay buffer in runner order.

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "prism/rl/env.h"
#include "rl/dqn/q_module.h"
#include "rl/dqn/schedule.h"

namespace prism::rl::dqn {

/// Replay rows in flat arrays (row r's observation is obs[r * obs_size ...]) and the
/// episodes that ended while they were sampled. Serializable: a runner returns one.
struct DqnRows {
  int64_t obs_size = 0;
  std::vector<float> obs, next_obs;
  std::vector<int64_t> actions;
  std::vector<double> returns;      // the n-step discounted sum of rewards
  std::vector<uint8_t> terminated;
  std::vector<float> n;             // the row's n (< n_step where an episode ended)
  std::vector<double> episode_returns;
  std::vector<int64_t> episode_lens;
  int64_t env_steps = 0;            // transitions stepped (rows lag them by up to n_step - 1)

  int64_t size() const { return static_cast<int64_t>(actions.size()); }
  void Clear();

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& obs_size& obs& next_obs& actions& returns& terminated& n& episode_returns& episode_lens& env_steps;
  }
};

/// Not thread-safe.
class DqnSampler {
 public:
  /// The env copies (copy i seeded seed + i) and their first observations. prism::Error for
  /// an unregistered environment.
  DqnSampler(const std::string& env, int num_envs, const EnvConfig& env_config, uint64_t seed, double gamma,
             int n_step);

  /// Steps every copy until at least `min_transitions` transitions were made, acting with
  /// `module` at epsilon.Value(lifetime_steps + transitions so far); appends the rows and
  /// ended episodes to `out`. Returns the transitions made.
  int64_t Sample(QModuleImpl& module, const PiecewiseSchedule& epsilon, int64_t lifetime_steps,
                 int64_t min_transitions, std::mt19937_64& rng, DqnRows& out);

  const VectorEnv& env() const { return env_; }

 private:
  // One copy's steps whose n-step row is not out yet.
  struct Pending {
    std::deque<std::vector<float>> obs;
    std::deque<int64_t> actions;
    std::deque<double> rewards;
  };
  void EmitRow(Pending& p, const float* next_obs, bool terminated, DqnRows& out) const;

  VectorEnv env_;
  double gamma_;
  int n_step_;
  std::vector<float> obs_, before_;
  std::vector<Pending> pending_;
  std::vector<int64_t> actions_;
  std::vector<uint8_t> reset_next_;
  std::vector<double> episode_return_;
  std::vector<int64_t> episode_len_;
  VectorEnv::Step step_;
};

}  // namespace prism::rl::dqn
