#pragma once
// DqnTrainer: RLlib's DQN (new API stack) without MPI: its own env runner (a DqnSampler
// stepping a VectorEnv with epsilon-greedy actions) or rows from remote ones
// (SetRemoteSampler), a uniform replay buffer (RLlib's default
// is a PrioritizedEpisodeReplayBuffer; priorities are not implemented here), and the local
// Learner. prism::rl::Algorithm built from a DQNConfig runs it on the driver (src/rl/algorithm.cc).
//
//   prism::rl::dqn::DqnConfig config;          // RLlib's defaults
//   config.env = "CartPole-v1";
//   prism::rl::dqn::DqnTrainer trainer(config);
//   for (int i = 0; i < 100; ++i) {
//     prism::rl::dqn::DqnMetrics m = trainer.TrainIteration();
//     if (m.episode_return_mean >= 450) break;
//   }
//   trainer.Save("/tmp/dqn_ckpt");              // dir/dqn.h5
//   prism::rl::Action a = trainer.ComputeSingleAction(obs);   // greedy
//
// One TrainIteration is RLlib's Algorithm.train(): training steps until at least
// min_sample_timesteps_per_iteration (1000) env steps were sampled in it. One training step
// is DQN._training_step_new_api_stack with calculate_rr_weights
// (rllib/algorithms/dqn/dqn.py):
//   native_ratio = train_batch_size / (rollout_fragment_length * num_envs * max(runners, 1)),
//   rollout_fragment_length "auto" = n_step;
//   training_intensity unset: [store 1, train 1]; else w = training_intensity / native_ratio,
//   w < 1: [round(1 / w), 1], else [1, round(w)];
//   store: sample rollout_fragment_length * num_envs env steps into the buffer, store times;
//   train (once lifetime env steps >= num_steps_sampled_before_learning_starts): sample
//   train_batch_size transitions uniformly and make one Learner update, train times.
// So by default every env step (num_envs = 1) is followed by one update of 32 transitions.
//
// Env steps counted are transitions: with VectorEnv's next-step autoreset the step that
// only resets a finished copy is neither a transition nor a counted step. Epsilon follows
// its schedule over lifetime env steps sampled.
//
// n_step > 1 (RLlib's n-step targets, a fixed n; RLlib's random range (lo, hi) is not
// implemented): each copy keeps its last n steps and stores (s_t, a_t, sum_j gamma^j r_{t+j},
// s_{t+n}, terminated) once s_{t+n} is known; at an episode's end the pending steps are
// stored with the returns and n they have (k < n steps to the end, next_obs the last
// observation), as RLlib's episode buffer cuts n at the episode's end. The loss then uses
// gamma^k per row.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "prism/rl/algorithm.h"
#include "prism/rl/env.h"
#include "rl/dqn/learner.h"
#include "rl/dqn/q_module.h"
#include "rl/dqn/replay_buffer.h"
#include "rl/dqn/sampler.h"
#include "rl/dqn/schedule.h"

namespace prism::rl::dqn {

/// RLlib DQNConfig's defaults (rllib/algorithms/dqn/dqn.py, DQNConfig.__init__; gamma 0.99
/// from AlgorithmConfig). Validate() throws prism::Error naming the first bad field.
struct DqnConfig {
  std::string env = "CartPole-v1";
  EnvConfig env_config;
  int num_envs = 1;                 // num_envs_per_env_runner
  int num_env_runners = 0;          // 0: the trainer samples; n: SetRemoteSampler's n runners
  int64_t rollout_fragment_length = 0;  // steps per env copy per store step; 0 ("auto"): n_step
  uint64_t seed = 0;

  double gamma = 0.99;
  double lr = 5e-4;
  double adam_epsilon = 1e-8;
  double grad_clip = 40.0;          // by global norm; <= 0: none
  int64_t train_batch_size = 32;
  int64_t replay_capacity = 50000;  // replay_buffer_config["capacity"]
  int64_t target_network_update_freq = 500;
  double tau = 1.0;
  int64_t num_steps_sampled_before_learning_starts = 1000;
  std::vector<std::pair<int64_t, double>> epsilon{{0, 1.0}, {10000, 0.05}};
  bool double_q = true;
  int n_step = 1;                   // fixed n >= 1 (RLlib's default 1)
  std::optional<double> training_intensity;
  std::string td_error_loss_fn = "huber";
  QModuleOptions model;             // hiddens, activations, dueling (default true)

  int64_t min_sample_timesteps_per_iteration = 1000;
  int64_t metrics_num_episodes_for_smoothing = 100;

  void Validate() const;
  /// [store weight, sample-and-train weight]: RLlib's calculate_rr_weights (above, with
  /// max(num_env_runners, 1) runners).
  std::pair<int64_t, int64_t> RoundRobinWeights() const;
  /// rollout_fragment_length, "auto" resolved to n_step.
  int64_t ResolvedRolloutFragmentLength() const;
};

/// What TrainIteration reports (RLlib's result keys in comments). Episode figures are over
/// the last metrics_num_episodes_for_smoothing episodes; NaN before the first episode ends.
/// Learner figures are means over the iteration's updates (0 updates: NaN).
struct DqnMetrics : IterationMetrics {
  int64_t num_episodes_lifetime = 0;
  int64_t num_env_steps_trained_lifetime = 0;
  int64_t num_updates = 0;                     // gradient steps this iteration
  int64_t num_target_updates_lifetime = 0;
  double loss = 0;                             // qf_loss
  double q_mean = 0;                           // qf_mean
  double time_this_iter_s = 0;
  /// Every figure by its name (IterationMetrics' and the above), as doubles.
  std::map<std::string, double> ToMap() const;
};

/// Not thread-safe: one thread calls it.
class DqnTrainer {
 public:
  /// Validates `config`, makes the environments, the module, the learner and the buffer.
  /// Throws prism::Error for a bad config or environment.
  explicit DqnTrainer(DqnConfig config);

  /// One RLlib training iteration (above).
  DqnMetrics TrainIteration();

  /// Sampling on env runners elsewhere: called once per store step with the online
  /// weights, the transitions each runner makes (rollout_fragment_length x num_envs) and the
  /// lifetime env steps (the runners' epsilon counts from there); returns the rows of the
  /// runners that answered, added to the buffer in the order given. Unset (the default):
  /// the trainer samples itself.
  using RemoteSampler = std::function<std::vector<DqnRows>(const std::vector<uint8_t>& weights,
                                                           int64_t min_transitions, int64_t lifetime_steps)>;
  void SetRemoteSampler(RemoteSampler sampler) { remote_ = std::move(sampler); }

  /// The greedy action (explore false) or an epsilon-greedy one at the current epsilon.
  /// Throws prism::Error for an observation of the wrong size.
  Action ComputeSingleAction(const std::vector<float>& obs, bool explore = false);

  /// Writes dir/dqn.h5 (created with its directory if need be): the online and target
  /// networks ("online.*", "target.*"), Adam's state, the counters and the episode window
  /// as root attributes. The replay buffer is not saved (RLlib's store_buffer_in_checkpoints
  /// false). Throws prism::Error on I/O failure.
  void Save(const std::string& dir) const;
  /// Reads what Save wrote into this trainer (made from the same model config): weights,
  /// optimizer, counters, episode window. Environments and the replay buffer go on as they
  /// are; learning resumes once the buffer holds a transition. Throws prism::Error for a
  /// missing file or a module of another shape.
  void Load(const std::string& dir);

  /// The online module's weights as bytes (for env runners elsewhere) and back.
  std::vector<uint8_t> GetWeights() const;
  void SetWeights(const std::vector<uint8_t>& weights);

  double epsilon() const;
  int64_t num_env_steps_sampled_lifetime() const { return lifetime_steps_; }
  const DqnConfig& config() const { return config_; }
  ReplayBuffer& replay_buffer() { return buffer_; }
  /// The n of the row in replay buffer slot `slot` (TransitionBatch::indices).
  float row_n_step(int64_t slot) const { return n_of_slot_.at(slot); }
  Learner& learner() { return *learner_; }

  static constexpr const char* kCheckpointFile = "dqn.h5";

 private:
  // Rows into the buffer, their episodes into the window and counters. Returns env steps.
  int64_t AddRows(const DqnRows& rows);

  DqnConfig config_;
  DqnSampler sampler_;  // the trainer's own env runner (its env also gives the spaces)
  PiecewiseSchedule epsilon_;
  ReplayBuffer buffer_;
  std::unique_ptr<Learner> learner_;
  std::mt19937_64 rng_;
  RemoteSampler remote_;
  DqnRows rows_;
  std::vector<float> n_of_slot_;     // each buffer slot's n
  std::vector<float> batch_n_;
  TransitionBatch batch_;
  std::deque<std::pair<double, int64_t>> recent_episodes_;  // (return, length)
  int64_t lifetime_steps_ = 0, lifetime_trained_ = 0, lifetime_episodes_ = 0, iteration_ = 0;
  int64_t iteration_episodes_ = 0;
};

}  // namespace prism::rl::dqn
