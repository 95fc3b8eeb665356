#pragma once
// PPO on Prism (RLlib's new API stack): env runners are actors on the worker ranks, each
// with a VectorEnv and an RLModule copy; the driver learns. Library target prism::rl
// (LibTorch, HDF5).
//
//   auto algo = prism::rl::PPOConfig()
//                   .Environment("CartPole-v1")
//                   .EnvRunners(/*num_env_runners=*/2, /*num_envs_per_env_runner=*/1)
//                   .Training({.lr = 3e-4, .num_epochs = 6, .vf_loss_coeff = 0.01})
//                   .Build();
//   for (int i = 0; i < 100; ++i) {
//     prism::rl::TrainResult r = algo.Train();
//     if (r.episode_return_mean >= 450) break;
//   }
//   algo.Save("/scratch/ppo");
//   auto again = prism::rl::Algorithm::FromCheckpoint("/scratch/ppo");
//   prism::rl::Action a = again.ComputeSingleAction(obs);
//
// One Train() iteration: the driver Puts the module's weights once and passes the ref to
// every runner; each samples at least rollout_fragment_length steps per env copy and
// returns its transitions and finished episodes; the learner computes GAE and runs
// num_epochs of minibatch SGD (Adam) on the PPO loss. A runner actor that dies is
// restarted (max_restarts -1) and the iteration goes on with the others' samples; so does
// one whose sample is later than sample_timeout_s (PPOConfig::Fault).
//
// Resources: each runner and each learner holds 1 CPU on its rank (RLlib's
// num_cpus_per_env_runner / num_cpus_per_learner), pinned to rank 1 + index; they set
// LibTorch's intra-op threads to 1 on their ranks (the MLPs are small). Two algorithms
// alive at once need those CPUs twice. Differences from RLlib: ComputeSingleAction is
// greedy unless asked to explore; Box actions are the Gaussian's raw samples (the
// environment clips them; no action normalization); the value function has its own MLP
// (vf_share_layers false, RLlib's PPO default).
//
// Measured (apps/rl_cartpole, 3 ranks on 2 loaded cores, RLlib's tuned CartPole settings
// lr 3e-4, num_epochs 6, vf_loss_coeff 0.01): a mean return of 450 after 104k-132k env
// steps (seeds 0-3), 10-16 s; sampling about 27k env steps/s over 2 runners.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/rl/env.h"

namespace prism::rl {

/// PPOConfig::Training's settings: each one given replaces the config's value; the others
/// stay. Defaults are RLlib's PPOConfig (ray/rllib/algorithms/ppo/ppo.py).
struct PPOTraining {
  std::optional<double> lr;                    // 5e-5
  std::optional<double> gamma;                 // 0.99
  std::optional<double> lambda_;               // 1.0 (GAE)
  std::optional<int64_t> train_batch_size;     // 4000 env steps per iteration
  std::optional<int64_t> minibatch_size;       // 128
  std::optional<int64_t> num_epochs;           // 30
  std::optional<double> clip_param;            // 0.3
  std::optional<double> vf_clip_param;         // 10.0 (clips the squared value error)
  std::optional<double> vf_loss_coeff;         // 1.0
  std::optional<double> entropy_coeff;         // 0.0
  std::optional<bool> use_kl_loss;             // true
  std::optional<double> kl_coeff;              // 0.2 (initial; adapted each iteration)
  std::optional<double> kl_target;             // 0.01
  std::optional<double> grad_clip;             // none (<= 0); else the global norm's cap
};

class Algorithm;
class DQNConfig;  // prism/rl/dqn.h

/// Where PPO's env runner actors go.
enum class RunnerPlacement {
  /// Runner i on worker rank 1 + i (hard affinity): one algorithm owning the job's ranks,
  /// each runner on a rank of its own. Needs num_env_runners <= world size - 1.
  kOnePerWorkerRank,
  /// Wherever the core finds a free CPU (any rank, the driver's too): what a Tune trial
  /// uses (prism/rl/tune.h), where several algorithms share the ranks and the Tuner counts
  /// their CPUs.
  kAnyFreeCpu,
};

/// What PPOConfig and DQNConfig share (RLlib's AlgorithmConfig): the environment, the env
/// runners and where they go, how long a sample may take, the seed. Its builder calls return
/// the derived config, so a chain goes on: PPOConfig().Environment("CartPole-v1").Training(...).
/// A value type: copy it freely. Not thread-safe.
template <class Config>
class AlgorithmConfig {
 public:
  /// The registered environment to learn and its env_config.
  Config& Environment(std::string name, EnvConfig config = {}) {
    env = std::move(name);
    env_config = std::move(config);
    return Self();
  }
  /// Env runner actors (0: sample on the driver), env copies per runner, and steps per copy
  /// per sample (0: "auto", which each config defines).
  Config& EnvRunners(int runners, int envs_per_runner = 1, int64_t fragment = 0) {
    num_env_runners = runners;
    num_envs_per_env_runner = envs_per_runner;
    rollout_fragment_length = fragment;
    return Self();
  }
  /// Where the env runner actors go (default kOnePerWorkerRank: runner i on rank 1 + i).
  Config& Placement(RunnerPlacement placement) {
    env_runner_placement = placement;
    return Self();
  }
  /// How long Train() waits for a runner's sample before going on without it (RLlib's
  /// sample_timeout_s).
  Config& Fault(double timeout_s) {
    sample_timeout_s = timeout_s;
    return Self();
  }
  /// Seeds the module's initial weights, the env copies (runner i's copy j: seed + 1000 (i + 1)
  /// + j) and the generators of sampling and learning.
  Config& Debugging(uint64_t s) {
    seed = s;
    return Self();
  }

  // The settings (read them; change them through the builder calls).
  std::string env;
  EnvConfig env_config;
  int num_env_runners;
  int num_envs_per_env_runner = 1;
  int64_t rollout_fragment_length = 0;
  RunnerPlacement env_runner_placement = RunnerPlacement::kOnePerWorkerRank;
  double sample_timeout_s = 60;
  uint64_t seed = 0;

 protected:
  explicit AlgorithmConfig(int default_env_runners) : num_env_runners(default_env_runners) {}

 private:
  Config& Self() { return static_cast<Config&>(*this); }
};

/// RLlib's PPOConfig as a builder. A value type: copy it freely. Not thread-safe.
/// EnvRunners' rollout_fragment_length is the steps per env copy per iteration (0, RLlib's
/// "auto": train_batch_size / (max(runners, 1) * envs), rounded up); 2 env runners by default.
class PPOConfig : public AlgorithmConfig<PPOConfig> {
 public:
  PPOConfig() : AlgorithmConfig(/*default_env_runners=*/2) {}
  /// Learners: 0 or 1 is the local learner on the driver; n > 1 are a learner group (RLlib's
  /// LearnerGroup) on platform::WorkerGroup, learner i on worker rank 1 + i, each updating on
  /// its 1/n of the train batch with minibatches of minibatch_size / n rows, gradients
  /// averaged over a prism::collective group every step (so the group takes the local
  /// learner's steps). The learners keep Adam's state; Save fetches it from the group, and the
  /// learners of a restored algorithm start from it. A learner group is not restarted: a
  /// learner that fails (or sends no result within 10 minutes) fails that Train() and every
  /// later one, naming it; Restore a checkpoint or build the algorithm again.
  PPOConfig& Learners(int num_learners);
  PPOConfig& Training(const PPOTraining& training);
  /// Hidden layer sizes of the policy and value MLPs (tanh).
  PPOConfig& RLModule(std::vector<int64_t> hidden);

  /// Checks the config (prism::Error naming what to change: an unregistered environment
  /// with the registered ones, more runners than worker ranks, minibatch_size larger than
  /// train_batch_size, a non-positive size or rate, ...), creates the runners and returns
  /// the algorithm. Needs prism::Init when num_env_runners > 0. Call from the driver.
  Algorithm Build() const;
  /// Throws what Build would for the settings alone (no runtime needed except for the
  /// runners-versus-ranks check, which Build does).
  void Validate() const;

  /// The config as JSON (what a checkpoint stores), and back (prism::Error if malformed).
  std::string ToJson() const;
  static PPOConfig FromJson(const std::string& json);

  // PPO's settings (read them; change them through the builder calls), beside
  // AlgorithmConfig's.
  int num_learners = 0;
  double lr = 5e-5;
  double gamma = 0.99;
  double lambda_ = 1.0;
  int64_t train_batch_size = 4000;
  int64_t minibatch_size = 128;
  int64_t num_epochs = 30;
  double clip_param = 0.3;
  double vf_clip_param = 10.0;
  double vf_loss_coeff = 1.0;
  double entropy_coeff = 0.0;
  bool use_kl_loss = true;
  double kl_coeff = 0.2;
  double kl_target = 0.01;
  double grad_clip = 0;
  std::vector<int64_t> hidden = {64, 64};

  /// The steps per env copy per iteration rollout_fragment_length resolves to.
  int64_t ResolvedRolloutFragmentLength() const;
};

/// What an iteration of PPO and of DQN both report (RLlib's result dict's shared keys):
/// TrainResult's first part, and DQN's trainer's metrics' (src/rl/dqn/dqn_trainer.h).
struct IterationMetrics {
  int64_t training_iteration = 0;
  // Over the last 100 finished episodes (RLlib's metrics_num_episodes_for_smoothing); NaN
  // before the first episode ends.
  double episode_return_mean = 0, episode_return_min = 0, episode_return_max = 0;
  double episode_len_mean = 0;
  int64_t num_episodes = 0;  // finished in this iteration
  int64_t num_env_steps_sampled = 0;
  int64_t num_env_steps_sampled_lifetime = 0;
  // DQN's (PPO leaves them 0): epsilon at the iteration's end, the mean |TD error| over the
  // iteration's updates (NaN before learning starts), the replayed rows trained on this
  // iteration, and the replay buffer's size.
  double epsilon = 0, td_error_mean = 0;
  int64_t num_env_steps_trained = 0;
  int64_t replay_buffer_size = 0;

  /// Calls visit(name, value) for each value above, by its name, as a double: the part of
  /// every ToMap these metrics share.
  template <class Visit>
  void VisitMetrics(Visit&& visit) const {
    visit("training_iteration", static_cast<double>(training_iteration));
    visit("episode_return_mean", episode_return_mean);
    visit("episode_return_min", episode_return_min);
    visit("episode_return_max", episode_return_max);
    visit("episode_len_mean", episode_len_mean);
    visit("num_episodes", static_cast<double>(num_episodes));
    visit("num_env_steps_sampled", static_cast<double>(num_env_steps_sampled));
    visit("num_env_steps_sampled_lifetime", static_cast<double>(num_env_steps_sampled_lifetime));
    visit("epsilon", epsilon);
    visit("td_error_mean", td_error_mean);
    visit("num_env_steps_trained", static_cast<double>(num_env_steps_trained));
    visit("replay_buffer_size", static_cast<double>(replay_buffer_size));
  }
};

/// One Train() iteration's metrics (RLlib's result dict, flattened): IterationMetrics and
/// these.
struct TrainResult : IterationMetrics {
  // The learner's means over the iteration's minibatches.
  double total_loss = 0, policy_loss = 0, vf_loss = 0, entropy = 0, mean_kl = 0;
  double curr_kl_coeff = 0;  // after this iteration's adaptation
  // DQN's (PPO leaves it 0): the mean of Q(s, a) over the iteration's updates (NaN before
  // learning starts). total_loss is DQN's qf_loss.
  double mean_q = 0;
  // Timers (seconds). DQN interleaves sampling and learning: its sample_s is 0 and learn_s
  // the whole iteration.
  double sample_s = 0, learn_s = 0;
  int num_healthy_env_runners = 0;  // runners whose sample arrived this iteration (DQN: the fewest in a training step)
  /// Every value by its RLlib-style name.
  std::map<std::string, double> ToMap() const;
  /// Every value by its path in RLlib's result dict (new API stack) for `algorithm`, "PPO" or
  /// "DQN", the nesting joined by "/" as Ray Tune flattens a result:
  /// "env_runners/episode_return_mean", "learners/default_policy/total_loss" (DQN: also
  /// qf_loss, qf_mean, td_error_mean), "learners/__all_modules__/num_env_steps_trained",
  /// "fault_tolerance/num_healthy_workers", "timers/env_runner_sampling_timer",
  /// "num_env_steps_sampled_lifetime", "training_iteration", DQN's "env_runners/epsilon" and
  /// "replay_buffer/num_env_steps_stored". What prism.rllib's train() returns (nested).
  std::map<std::string, double> ToRllibMap(const std::string& algorithm) const;
};

/// A built algorithm: PPO (PPOConfig::Build) or DQN (DQNConfig::Build, prism/rl/dqn.h).
/// Move-only; the runners end with it. Not thread-safe: call from
/// the driver's thread.
class Algorithm {
 public:
  Algorithm(Algorithm&&) noexcept;
  Algorithm& operator=(Algorithm&&) noexcept;
  ~Algorithm();

  /// One iteration: sample (runners in parallel), learn, report. Throws prism::Error if no
  /// runner returned a sample, or what a runner's environment threw.
  TrainResult Train();
  /// Writes the weights, the optimizer's state, the config and the counters to
  /// `dir`/algorithm.h5 (PPO) or `dir`/dqn.h5 and `dir`/dqn_config.json (DQN; the replay
  /// buffer is not saved) (directories created). prism::Error on an I/O failure, and,
  /// saved on a rank other than the driver's (inside a task or actor), when the driver
  /// cannot see `dir` (a node-local disk: platform::CheckStorageShared).
  void Save(const std::string& dir) const;
  /// A new algorithm from Save's directory (its runners created anew; PPO or DQN by the
  /// file there). prism::Error if the directory holds no checkpoint, a damaged one, or both
  /// a PPO and a DQN one.
  static Algorithm FromCheckpoint(const std::string& dir);
  /// Loads Save's state (weights, optimizer moments, counters, episode window) from `dir`
  /// into this algorithm, keeping this algorithm's config: its learning rate and the other
  /// training settings stay as built (Ray's Algorithm.restore, how a Tune trial resumes with
  /// a new config, e.g. PBT's). prism::Error if `dir` holds no checkpoint, one of the other
  /// algorithm, or a module of another shape (a different environment or hidden sizes).
  void Restore(const std::string& dir);
  /// The policy's action for one observation: its mode (explore false) or a sample.
  /// prism::Error for an observation of the wrong size.
  Action ComputeSingleAction(const std::vector<float>& obs, bool explore = false);

  /// "PPO" or "DQN".
  std::string algorithm_name() const;
  /// The PPO config; prism::Error for a DQN algorithm (use dqn_config()).
  const PPOConfig& config() const;
  /// The DQN config; prism::Error for a PPO algorithm (use config()).
  const DQNConfig& dqn_config() const;
  int64_t iteration() const;
  int64_t num_env_steps_sampled_lifetime() const;
  /// Fault injection (tests): kills env runner `index` as ray.kill(actor, no_restart=False)
  /// does; it restarts and takes part again from a later iteration.
  void KillEnvRunner(int index);

 private:
  friend class PPOConfig;
  friend class DQNConfig;
  struct Impl;
  explicit Algorithm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism::rl
