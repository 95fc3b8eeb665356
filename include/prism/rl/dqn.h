#pragma once
// DQN behind prism::rl::Algorithm (RLlib's DQNConfig, new API stack). Env runners (a
// VectorEnv of num_envs_per_env_runner copies each) step with epsilon-greedy actions: on the
// driver (EnvRunners(0), no prism::Init needed) or as actors on the worker ranks, which
// return their replay rows each training step. The rows go into a uniform replay buffer on
// the driver (RLlib's default is prioritized replay; priorities are not implemented), and
// the local learner updates the online Q-network with double-Q, dueling heads and a target
// network. Needs a Discrete action space.
//
//   auto algo = prism::rl::DQNConfig()
//                   .Environment("CartPole-v1")
//                   .EnvRunners(/*num_env_runners=*/0)
//                   .Training({.epsilon = {{{0, 1.0}, {10000, 0.02}}}, .n_step = 3})
//                   .RLModule({256}, /*head_hiddens=*/{256})
//                   .Build();
//   prism::rl::TrainResult r = algo.Train();   // >= 1000 env steps per iteration
//   algo.Save("/scratch/dqn");                 // dir/dqn.h5 + dir/dqn_config.json
//   auto again = prism::rl::Algorithm::FromCheckpoint("/scratch/dqn");
//
// One Train() is RLlib's DQN training iteration (src/rl/dqn/dqn_trainer.h): by default each
// env step is followed by one update of train_batch_size replayed transitions once
// num_steps_sampled_before_learning_starts steps were sampled; training_intensity changes
// that ratio as RLlib's calculate_rr_weights does.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "prism/rl/algorithm.h"
#include "prism/rl/env.h"

namespace prism::rl {

/// DQNConfig::Training's settings: each one given replaces the config's value; the others
/// stay. Defaults are RLlib's DQNConfig (ray/rllib/algorithms/dqn/dqn.py).
struct DQNTraining {
  std::optional<double> lr;                                          // 5e-4
  std::optional<double> gamma;                                       // 0.99
  std::optional<int64_t> train_batch_size;                           // 32 replayed transitions
  std::optional<int64_t> replay_buffer_capacity;                     // 50000
  std::optional<int64_t> target_network_update_freq;                 // 500 env steps
  std::optional<int64_t> num_steps_sampled_before_learning_starts;   // 1000
  /// Piecewise-linear (lifetime env step, epsilon) points; after the last, its value.
  std::optional<std::vector<std::pair<int64_t, double>>> epsilon;    // {{0, 1.0}, {10000, 0.05}}
  std::optional<bool> double_q;                                      // true
  std::optional<bool> dueling;                                       // true
  std::optional<int> n_step;                                         // 1
  std::optional<double> tau;                                         // 1.0 (hard target updates)
  std::optional<double> grad_clip;                                   // 40 (global norm; <= 0: none)
  std::optional<double> training_intensity;                          // unset: 1 update per fragment
};

/// RLlib's DQNConfig as a builder. A value type: copy it freely. Not thread-safe.
/// EnvRunners (none by default: the driver samples): rollout_fragment_length is the steps per
/// env copy per training step (0, "auto": n_step). With runners, every training step Puts the
/// online weights once, each runner samples rollout_fragment_length x num_envs steps with
/// them (epsilon from the lifetime step count), and the driver adds their rows to the replay
/// buffer in runner order and trains (RLlib's synchronous DQN). A round trip per training
/// step: give runners fragments of tens of steps, and training_intensity to keep RLlib's
/// updates per step.
class DQNConfig : public AlgorithmConfig<DQNConfig> {
 public:
  DQNConfig() : AlgorithmConfig(/*default_env_runners=*/0) {}
  DQNConfig& Training(const DQNTraining& training);
  /// The Q-module's encoder layer sizes (RLlib's fcnet_hiddens, tanh) and each head's hidden
  /// layer sizes (head_fcnet_hiddens, relu; empty: a linear head).
  DQNConfig& RLModule(std::vector<int64_t> hidden, std::vector<int64_t> head_hiddens = {});

  /// Throws prism::Error naming what to change: an unregistered environment (with the
  /// registered ones), a non-Discrete action space, a bad value.
  void Validate() const;
  /// Validates and returns the algorithm (its networks on the driver; env runner actors on
  /// the worker ranks when num_env_runners > 0, which needs prism::Init and, placed one per
  /// rank, that many worker ranks).
  Algorithm Build() const;

  /// The config as JSON (what a checkpoint stores beside dqn.h5), and back (prism::Error
  /// if malformed).
  std::string ToJson() const;
  static DQNConfig FromJson(const std::string& json);

  // DQN's settings (read them; change them through the builder calls), beside
  // AlgorithmConfig's (Debugging's seed also seeds the replay buffer and exploration).
  double lr = 5e-4;
  double gamma = 0.99;
  int64_t train_batch_size = 32;
  int64_t replay_buffer_capacity = 50000;
  int64_t target_network_update_freq = 500;
  int64_t num_steps_sampled_before_learning_starts = 1000;
  std::vector<std::pair<int64_t, double>> epsilon{{0, 1.0}, {10000, 0.05}};
  bool double_q = true;
  bool dueling = true;
  int n_step = 1;
  double tau = 1.0;
  double grad_clip = 40.0;
  std::optional<double> training_intensity;
  std::vector<int64_t> hidden = {256, 256};
  std::vector<int64_t> head_hiddens = {};
};

}  // namespace prism::rl
