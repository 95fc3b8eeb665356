// PPOConfig and DQNConfig (prism/rl/algorithm.h, prism/rl/dqn.h): their Training and
// RLModule builder calls, checks and JSON. What the two share is written once here:
// AlgorithmConfig's settings and the training ones both have (lr, gamma, train_batch_size,
// grad_clip, hidden) are one list of JSON fields (VisitFields, read by ToJson and FromJson
// alike, each config's own fields after them), and their checks are CheckShared.

#include "rl/config.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

#include "prism/api.h"
#include "prism/errors.h"

namespace prism::rl {
namespace {

template <class C>
constexpr const char* kConfigName = std::is_same_v<C, PPOConfig> ? "PPOConfig" : "DQNConfig";
template <class C>
constexpr const char* kAlgorithmName = std::is_same_v<C, PPOConfig> ? "PPO" : "DQN";

template <class C>
[[noreturn]] void Bad(const std::string& what) {
  throw Error(std::string("prism::rl: ") + kConfigName<C> + ": " + what);
}

/// Calls visit(key, field) for every setting of `c` (a PPOConfig or DQNConfig, const or
/// not) that its JSON holds: the shared ones, then the algorithm's own.
template <class C, class Visit>
void VisitFields(C& c, Visit&& visit) {
  visit("env", c.env);
  visit("env_config", c.env_config);
  visit("num_env_runners", c.num_env_runners);
  visit("num_envs_per_env_runner", c.num_envs_per_env_runner);
  visit("rollout_fragment_length", c.rollout_fragment_length);
  visit("env_runner_placement", c.env_runner_placement);
  visit("sample_timeout_s", c.sample_timeout_s);
  visit("seed", c.seed);
  visit("lr", c.lr);
  visit("gamma", c.gamma);
  visit("train_batch_size", c.train_batch_size);
  visit("grad_clip", c.grad_clip);
  visit("hidden", c.hidden);
  if constexpr (std::is_same_v<std::remove_const_t<C>, PPOConfig>) {
    visit("num_learners", c.num_learners);
    visit("lambda_", c.lambda_);
    visit("minibatch_size", c.minibatch_size);
    visit("num_epochs", c.num_epochs);
    visit("clip_param", c.clip_param);
    visit("vf_clip_param", c.vf_clip_param);
    visit("vf_loss_coeff", c.vf_loss_coeff);
    visit("entropy_coeff", c.entropy_coeff);
    visit("use_kl_loss", c.use_kl_loss);
    visit("kl_coeff", c.kl_coeff);
    visit("kl_target", c.kl_target);
  } else {
    visit("replay_buffer_capacity", c.replay_buffer_capacity);
    visit("target_network_update_freq", c.target_network_update_freq);
    visit("num_steps_sampled_before_learning_starts", c.num_steps_sampled_before_learning_starts);
    visit("epsilon", c.epsilon);
    visit("double_q", c.double_q);
    visit("dueling", c.dueling);
    visit("n_step", c.n_step);
    visit("tau", c.tau);
    visit("training_intensity", c.training_intensity);
    visit("head_hiddens", c.head_hiddens);
  }
}

std::string PlacementName(RunnerPlacement p) {
  return p == RunnerPlacement::kAnyFreeCpu ? "any_free_cpu" : "one_per_worker_rank";
}

template <class C>
std::string ConfigToJson(const C& c) {
  nlohmann::json j;
  j["algorithm"] = kAlgorithmName<C>;
  VisitFields(c, [&j](const char* key, const auto& field) {
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, RunnerPlacement>) {
      j[key] = PlacementName(field);
    } else if constexpr (std::is_same_v<T, std::optional<double>>) {
      j[key] = field ? nlohmann::json(*field) : nlohmann::json(nullptr);
    } else {
      j[key] = field;
    }
  });
  return j.dump();
}

/// The config in `text`; a field it lacks keeps its default.
template <class C>
C ConfigFromJson(const std::string& text) {
  const std::string caller = std::string("prism::rl: ") + kConfigName<C> + "::FromJson: ";
  C c;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.contains("algorithm") && j.at("algorithm") != kAlgorithmName<C>) {
      throw Error(caller + "the config is for " + j.at("algorithm").dump() + ", not " +
                  kAlgorithmName<C>);
    }
    VisitFields(c, [&](const char* key, auto& field) {
      if (!j.contains(key)) return;
      const nlohmann::json& value = j.at(key);
      using T = std::decay_t<decltype(field)>;
      if constexpr (std::is_same_v<T, RunnerPlacement>) {
        const auto name = value.get<std::string>();
        if (name == PlacementName(RunnerPlacement::kAnyFreeCpu)) {
          field = RunnerPlacement::kAnyFreeCpu;
        } else if (name == PlacementName(RunnerPlacement::kOnePerWorkerRank)) {
          field = RunnerPlacement::kOnePerWorkerRank;
        } else {
          throw Error(caller + "env_runner_placement is \"" + name +
                      "\"; use \"one_per_worker_rank\" or \"any_free_cpu\"");
        }
      } else if constexpr (std::is_same_v<T, std::optional<double>>) {
        field = value.is_null() ? std::nullopt : std::optional<double>(value.get<double>());
      } else {
        value.get_to(field);
      }
    });
  } catch (const nlohmann::json::exception& e) {
    throw Error(caller + e.what());
  }
  return c;
}

/// The checks both configs make: the environment, the env runners, the hidden sizes, the
/// sample timeout. Returns the environment it made to check (its spaces).
template <class C>
std::unique_ptr<Env> CheckShared(const C& c) {
  if (c.env.empty()) {
    std::string names;
    for (const auto& n : RegisteredEnvs()) names += (names.empty() ? "" : ", ") + n;
    Bad<C>("no environment: call .Environment(name) with a registered one (" + names + ")");
  }
  std::unique_ptr<Env> probe;
  try {
    probe = MakeEnv(c.env, c.env_config);
  } catch (const Error& e) {
    Bad<C>(std::string("Environment(\"") + c.env + "\"): " + e.what());
  }
  if (c.num_env_runners < 0)
    Bad<C>("num_env_runners must be >= 0, got " + std::to_string(c.num_env_runners));
  if (c.num_envs_per_env_runner < 1) {
    Bad<C>("num_envs_per_env_runner must be >= 1, got " +
           std::to_string(c.num_envs_per_env_runner));
  }
  if (c.rollout_fragment_length < 0) {
    Bad<C>("rollout_fragment_length must be >= 1 (or 0 for auto), got " +
           std::to_string(c.rollout_fragment_length));
  }
  if (c.hidden.empty()) Bad<C>("RLModule needs at least one hidden layer size");
  for (int64_t h : c.hidden) {
    if (h < 1) Bad<C>("RLModule hidden sizes must be >= 1, got " + std::to_string(h));
  }
  if (!(c.sample_timeout_s > 0)) Bad<C>("sample_timeout_s must be > 0");
  return probe;
}

}  // namespace

namespace internal {

void CheckRunnersFit(const std::string& config, int runners, RunnerPlacement placement) {
  if (!prism::IsInitialized()) {
    throw Error("prism::rl: " + config + ": num_env_runners " + std::to_string(runners) +
                " needs prism::Init first (or EnvRunners(0) to sample on the driver)");
  }
  const int workers = prism::GetRuntimeContext().GetWorldSize() - 1;
  if (placement == RunnerPlacement::kOnePerWorkerRank && runners > workers) {
    throw Error("prism::rl: " + config + ": num_env_runners " + std::to_string(runners) +
                " is larger than the " + std::to_string(workers) +
                " worker ranks (one runner per rank 1..N-1): launch at least " +
                std::to_string(runners + 1) + " ranks or use fewer runners");
  }
}

void CheckLearnersFit(const PPOConfig& c) {
  if (!prism::IsInitialized()) {
    Bad<PPOConfig>("num_learners " + std::to_string(c.num_learners) +
                   " needs prism::Init first (or Learners(1) for the local learner)");
  }
  const int workers = prism::GetRuntimeContext().GetWorldSize() - 1;
  if (c.num_learners > workers) {
    Bad<PPOConfig>("num_learners " + std::to_string(c.num_learners) + " is larger than the " +
                   std::to_string(workers) + " worker ranks (one learner per rank 1..N-1)");
  }
  if (c.minibatch_size < c.num_learners) {
    Bad<PPOConfig>("minibatch_size (" + std::to_string(c.minibatch_size) +
                   ") must be >= num_learners (" + std::to_string(c.num_learners) +
                   "): each learner takes minibatch_size / num_learners rows a step");
  }
}

dqn::DqnConfig ToDqnConfig(const DQNConfig& c) {
  dqn::DqnConfig d;
  d.env = c.env;
  d.env_config = c.env_config;
  d.num_envs = c.num_envs_per_env_runner;
  d.num_env_runners = c.num_env_runners;
  d.rollout_fragment_length = c.rollout_fragment_length;
  d.seed = c.seed;
  d.gamma = c.gamma;
  d.lr = c.lr;
  d.grad_clip = c.grad_clip;
  d.train_batch_size = c.train_batch_size;
  d.replay_capacity = c.replay_buffer_capacity;
  d.target_network_update_freq = c.target_network_update_freq;
  d.tau = c.tau;
  d.num_steps_sampled_before_learning_starts = c.num_steps_sampled_before_learning_starts;
  d.epsilon = c.epsilon;
  d.double_q = c.double_q;
  d.n_step = c.n_step;
  d.training_intensity = c.training_intensity;
  d.model.hiddens = c.hidden;
  d.model.head_hiddens = c.head_hiddens;
  d.model.dueling = c.dueling;
  return d;
}

}  // namespace internal

// ---- PPOConfig ----------------------------------------------------------------------------

PPOConfig& PPOConfig::Learners(int n) {
  num_learners = n;
  return *this;
}

PPOConfig& PPOConfig::Training(const PPOTraining& t) {
  if (t.lr) lr = *t.lr;
  if (t.gamma) gamma = *t.gamma;
  if (t.lambda_) lambda_ = *t.lambda_;
  if (t.train_batch_size) train_batch_size = *t.train_batch_size;
  if (t.minibatch_size) minibatch_size = *t.minibatch_size;
  if (t.num_epochs) num_epochs = *t.num_epochs;
  if (t.clip_param) clip_param = *t.clip_param;
  if (t.vf_clip_param) vf_clip_param = *t.vf_clip_param;
  if (t.vf_loss_coeff) vf_loss_coeff = *t.vf_loss_coeff;
  if (t.entropy_coeff) entropy_coeff = *t.entropy_coeff;
  if (t.use_kl_loss) use_kl_loss = *t.use_kl_loss;
  if (t.kl_coeff) kl_coeff = *t.kl_coeff;
  if (t.kl_target) kl_target = *t.kl_target;
  if (t.grad_clip) grad_clip = *t.grad_clip;
  return *this;
}

PPOConfig& PPOConfig::RLModule(std::vector<int64_t> sizes) {
  hidden = std::move(sizes);
  return *this;
}

int64_t PPOConfig::ResolvedRolloutFragmentLength() const {
  if (rollout_fragment_length > 0) return rollout_fragment_length;
  const int64_t copies =
      static_cast<int64_t>(std::max(num_env_runners, 1)) * num_envs_per_env_runner;
  return (train_batch_size + copies - 1) / copies;
}

void PPOConfig::Validate() const {
  using C = PPOConfig;
  CheckShared(*this);
  if (num_learners < 0) Bad<C>("num_learners must be >= 0, got " + std::to_string(num_learners));
  if (train_batch_size < 1)
    Bad<C>("train_batch_size must be >= 1, got " + std::to_string(train_batch_size));
  if (minibatch_size < 1)
    Bad<C>("minibatch_size must be >= 1, got " + std::to_string(minibatch_size));
  if (minibatch_size > train_batch_size) {
    Bad<C>("minibatch_size (" + std::to_string(minibatch_size) + ") must be <= train_batch_size (" +
           std::to_string(train_batch_size) +
           "): the train batch is split into minibatches of that size");
  }
  if (num_epochs < 1) Bad<C>("num_epochs must be >= 1, got " + std::to_string(num_epochs));
  if (!(lr > 0)) Bad<C>("lr must be > 0, got " + std::to_string(lr));
  if (!(gamma >= 0 && gamma <= 1)) Bad<C>("gamma must be in [0, 1], got " + std::to_string(gamma));
  if (!(lambda_ >= 0 && lambda_ <= 1))
    Bad<C>("lambda_ must be in [0, 1], got " + std::to_string(lambda_));
  if (!(clip_param > 0)) Bad<C>("clip_param must be > 0, got " + std::to_string(clip_param));
  if (!(vf_clip_param > 0))
    Bad<C>("vf_clip_param must be > 0, got " + std::to_string(vf_clip_param));
  if (!(vf_loss_coeff >= 0)) Bad<C>("vf_loss_coeff must be >= 0");
  if (!(entropy_coeff >= 0))
    Bad<C>("entropy_coeff must be >= 0, got " + std::to_string(entropy_coeff));
  if (!(kl_coeff >= 0) || !(kl_target > 0)) Bad<C>("kl_coeff must be >= 0 and kl_target > 0");
}

std::string PPOConfig::ToJson() const { return ConfigToJson(*this); }
PPOConfig PPOConfig::FromJson(const std::string& json) { return ConfigFromJson<PPOConfig>(json); }

// ---- DQNConfig ----------------------------------------------------------------------------

DQNConfig& DQNConfig::Training(const DQNTraining& t) {
  if (t.lr) lr = *t.lr;
  if (t.gamma) gamma = *t.gamma;
  if (t.train_batch_size) train_batch_size = *t.train_batch_size;
  if (t.replay_buffer_capacity) replay_buffer_capacity = *t.replay_buffer_capacity;
  if (t.target_network_update_freq) target_network_update_freq = *t.target_network_update_freq;
  if (t.num_steps_sampled_before_learning_starts) {
    num_steps_sampled_before_learning_starts = *t.num_steps_sampled_before_learning_starts;
  }
  if (t.epsilon) epsilon = *t.epsilon;
  if (t.double_q) double_q = *t.double_q;
  if (t.dueling) dueling = *t.dueling;
  if (t.n_step) n_step = *t.n_step;
  if (t.tau) tau = *t.tau;
  if (t.grad_clip) grad_clip = *t.grad_clip;
  if (t.training_intensity) training_intensity = *t.training_intensity;
  return *this;
}

DQNConfig& DQNConfig::RLModule(std::vector<int64_t> sizes, std::vector<int64_t> head_sizes) {
  hidden = std::move(sizes);
  head_hiddens = std::move(head_sizes);
  return *this;
}

void DQNConfig::Validate() const {
  std::unique_ptr<Env> probe = CheckShared(*this);
  if (probe->action_space().kind != Space::Kind::kDiscrete) {
    Bad<DQNConfig>("Environment(\"" + env + "\") has action space " +
                   probe->action_space().ToString() +
                   "; DQN needs a Discrete action space (use PPOConfig for continuous actions)");
  }
  for (int64_t h : head_hiddens) {
    if (h < 1) Bad<DQNConfig>("RLModule head_hiddens sizes must be >= 1, got " + std::to_string(h));
  }
  internal::ToDqnConfig(*this).Validate();  // the training values (its errors name the field)
}

std::string DQNConfig::ToJson() const { return ConfigToJson(*this); }
DQNConfig DQNConfig::FromJson(const std::string& json) { return ConfigFromJson<DQNConfig>(json); }

}  // namespace prism::rl
