// PPO's Algorithm (prism/rl/algorithm.h): the config's checks and JSON, the env runner
// actor, and the iteration loop on the driver. DQNConfig (prism/rl/dqn.h) builds the same
// Algorithm around a dqn::DqnTrainer on the driver (Impl::dqn set; the PPO members unused).
//
// Runner i lives on worker rank 1 + i (hard node affinity, one CPU; with
// RunnerPlacement::kAnyFreeCpu wherever a CPU is free), restarts without limit
// when killed, and samples with the weights the driver Put once per iteration. The runner
// keeps its VectorEnv between calls, so episodes continue across iterations (RLlib's
// truncate_episodes batch mode); the learner sees each runner's copies as segments whose
// cut ends bootstrap from V(s_{t+1}) (ppo/gae.h). Episode metrics are smoothed over the last
// 100 finished episodes, as RLlib's are.

#include "prism/rl/algorithm.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <nlohmann/json.hpp>
#include <random>

#include "prism/actor.h"
#include "prism/api.h"
#include "prism/collective.h"
#include "prism/errors.h"
#include "prism/rl/dqn.h"
#include "rl/dqn/dqn_trainer.h"
#include "rl/dqn/module_bytes.h"
#include "rl/dqn/sampler.h"
#include "rl/ppo/learner.h"
#include "rl/ppo/rl_module.h"
#include "rl/ppo/sampler.h"

namespace prism::rl {
namespace {
dqn::DqnConfig ToDqnConfig(const DQNConfig& c);  // below, with DQNConfig
}  // namespace

namespace internal {

std::string PlacementName(RunnerPlacement p) {
  return p == RunnerPlacement::kAnyFreeCpu ? "any_free_cpu" : "one_per_worker_rank";
}

RunnerPlacement ParsePlacement(const std::string& name, const std::string& config) {
  if (name == "any_free_cpu") return RunnerPlacement::kAnyFreeCpu;
  if (name == "one_per_worker_rank") return RunnerPlacement::kOnePerWorkerRank;
  throw Error("prism::rl: " + config + "::FromJson: env_runner_placement is \"" + name +
              "\"; use \"one_per_worker_rank\" or \"any_free_cpu\"");
}

/// Throws what to change when `runners` env runner actors cannot be made: no runtime, or
/// (one per worker rank) fewer worker ranks than runners.
void CheckRunnersFit(const std::string& config, int runners, RunnerPlacement placement) {
  if (!prism::IsInitialized()) {
    throw Error("prism::rl: " + config + ": num_env_runners " + std::to_string(runners) +
                " needs prism::Init first (or EnvRunners(0) to sample on the driver)");
  }
  const int workers = prism::GetRuntimeContext().GetWorldSize() - 1;
  if (placement == RunnerPlacement::kOnePerWorkerRank && runners > workers) {
    throw Error("prism::rl: " + config + ": num_env_runners " + std::to_string(runners) + " is larger than the " +
                std::to_string(workers) + " worker ranks (one runner per rank 1..N-1): launch at least " +
                std::to_string(runners + 1) + " ranks or use fewer runners");
  }
}

/// Adam's state as bytes (LibTorch's archive), and back into an optimizer over a module of
/// the same shape.
std::vector<uint8_t> OptimizerBytes(torch::optim::Adam& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::vector<uint8_t> bytes;
  archive.save_to([&bytes](const void* data, size_t size) -> size_t {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + size);
    return size;
  });
  return bytes;
}

void LoadOptimizerBytes(torch::optim::Adam& optimizer, const std::vector<uint8_t>& bytes) {
  torch::serialize::InputArchive archive;
  archive.load_from(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  optimizer.load(archive);
}

/// Runner `index`'s actor options: 1 CPU, restarts without limit, on rank 1 + index or
/// wherever a CPU is free.
template <typename F>
auto RunnerCreator(F factory, RunnerPlacement placement, int index) {
  auto creator = prism::Actor(factory).SetResource("CPU", 1).SetMaxRestarts(-1);
  if (placement == RunnerPlacement::kOnePerWorkerRank) {
    creator.SetSchedulingStrategy(NodeAffinitySchedulingStrategy{1 + index, false});
  }
  return creator;
}

/// Gets every runner's sample, in runner order, within `timeout_s` of now for all of them,
/// handing each to `take`; a runner that died (it restarts) or is late is reported and
/// skipped. Returns how many samples arrived.
template <typename T, typename Take>
int GatherSamples(const std::vector<ObjectRef<T>>& samples, double timeout_s, Take&& take) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int arrived = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    try {
      take(prism::Get(samples[i], std::max<int64_t>(left.count(), 1)));
      ++arrived;
    } catch (const ActorError& e) {
      std::fprintf(stderr, "prism::rl: env runner %zu failed this iteration (%s); it restarts\n", i, e.what());
    } catch (const TimeoutError&) {
      std::fprintf(stderr, "prism::rl: env runner %zu sent no sample within sample_timeout_s %g s\n", i, timeout_s);
    }
  }
  return arrived;
}

/// An env runner actor: a Sampler with its own VectorEnv and RLModule copy.
class PpoEnvRunner {
 public:
  static PpoEnvRunner* Create(std::string config_json, int index) {
    // Tiny MLPs: one intra-op thread is fastest, and the rank's other CPUs stay free.
    torch::set_num_threads(1);
    PPOConfig c = PPOConfig::FromJson(config_json);
    return new PpoEnvRunner(c, index);
  }
  ppo::SampleBatch Sample(std::vector<uint8_t> weights, int64_t min_steps) {
    sampler_.SetWeights(weights.data(), weights.size());
    return sampler_.Sample(min_steps);
  }

 private:
  PpoEnvRunner(const PPOConfig& c, int index)
      : sampler_(c.env, c.env_config, c.num_envs_per_env_runner,
                 c.seed + 1000 * static_cast<uint64_t>(index + 1), c.hidden) {}
  ppo::Sampler sampler_;
};

/// The Learner's options from a config.
ppo::LearnerOptions LearnerOptionsOf(const PPOConfig& c, double kl_coeff);

/// What a learner of a group returns from an update: the group's stats, and (learner 0)
/// the new weights.
struct LearnerResult {
  double total_loss = 0, policy_loss = 0, vf_loss = 0, entropy = 0, mean_kl = 0, kl_coeff = 0;
  int64_t num_minibatches = 0;
  std::vector<uint8_t> weights;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & total_loss & policy_loss & vf_loss & entropy & mean_kl & kl_coeff & num_minibatches & weights;
  }
};

/// A DQN env runner actor: a DqnSampler with its own VectorEnv, Q-module copy, epsilon
/// schedule and generator; returns replay rows for the driver's buffer.
class DqnEnvRunner {
 public:
  static DqnEnvRunner* Create(std::string config_json, int index) {
    torch::set_num_threads(1);  // as PpoEnvRunner: tiny MLPs, one CPU held
    return new DqnEnvRunner(ToDqnConfig(DQNConfig::FromJson(config_json)), index);
  }
  dqn::DqnRows Sample(std::vector<uint8_t> weights, int64_t min_transitions, int64_t lifetime_steps) {
    dqn::SetWeights(*module_, weights.data(), weights.size());
    dqn::DqnRows rows;
    sampler_.Sample(*module_, epsilon_, lifetime_steps, min_transitions, rng_, rows);
    return rows;
  }

 private:
  DqnEnvRunner(const dqn::DqnConfig& c, int index)
      : sampler_(c.env, c.num_envs, c.env_config, c.seed + 1000 * static_cast<uint64_t>(index + 1), c.gamma,
                 c.n_step),
        module_(sampler_.env().observation_space(), sampler_.env().action_space(), c.model),
        epsilon_(c.epsilon),
        rng_(c.seed + 1000 * static_cast<uint64_t>(index + 1) + 2) {}
  dqn::DqnSampler sampler_;
  dqn::QModule module_;
  PiecewiseSchedule epsilon_;
  std::mt19937_64 rng_;
};

/// One learner of a group (num_learners > 1), on world rank ranks[index]: its own module
/// copy and Adam; gradients are averaged over the group's collective::Group every step, so
/// every copy takes the same steps.
class PpoLearner {
 public:
  /// `optimizer`: Adam's state as OptimizerBytes wrote it (the driver's, restored from a
  /// checkpoint or fetched from the group before), or empty for a fresh Adam.
  static PpoLearner* Create(std::string config_json, int index, std::vector<int> ranks, std::string group_key,
                            std::vector<uint8_t> weights, double kl_coeff, std::vector<uint8_t> optimizer) {
    torch::set_num_threads(1);
    auto* l = new PpoLearner(PPOConfig::FromJson(config_json), index, std::move(ranks), std::move(group_key),
                             weights, kl_coeff);
    if (!optimizer.empty()) LoadOptimizerBytes(l->learner_.optimizer(), optimizer);
    return l;
  }
  /// This learner's Adam state (the group's members agree: they take the same averaged steps).
  std::vector<uint8_t> OptimizerState() { return OptimizerBytes(learner_.optimizer()); }
  LearnerResult Update(ppo::LearnerShard shard) {
    if (!group_.valid()) {
      // The first update: every learner is running it, so the group forms.
      group_ = collective::Group::Create(group_key_, ranks_);
    }
    ppo::LearnerStats st = learner_.UpdateShard(
        shard, [this](std::vector<float>& v) { group_.AllReduce(v, collective::ReduceOp::kAverage); },
        static_cast<int>(ranks_.size()));
    LearnerResult r{st.total_loss, st.policy_loss, st.vf_loss, st.entropy, st.mean_kl, st.kl_coeff,
                    st.num_minibatches, {}};
    if (index_ == 0) r.weights = ppo::GetWeights(*learner_.module());
    return r;
  }

 private:
  PpoLearner(const PPOConfig& c, int index, std::vector<int> ranks, std::string group_key,
             const std::vector<uint8_t>& weights, double kl_coeff)
      : index_(index), ranks_(std::move(ranks)), group_key_(std::move(group_key)),
        learner_(MakeModule(c, weights), LearnerOptionsOf(c, kl_coeff)) {}
  static ppo::RLModule MakeModule(const PPOConfig& c, const std::vector<uint8_t>& weights) {
    auto env = MakeEnv(c.env, c.env_config);
    ppo::RLModule m(env->observation_space(), env->action_space(), c.hidden);
    ppo::SetWeights(*m, weights.data(), weights.size());
    return m;
  }

  int index_;
  std::vector<int> ranks_;
  std::string group_key_;
  ppo::Learner learner_;
  collective::Group group_;
};

ppo::LearnerOptions LearnerOptionsOf(const PPOConfig& c, double kl_coeff) {
  ppo::LearnerOptions o;
  o.lr = c.lr;
  o.gamma = c.gamma;
  o.lambda = c.lambda_;
  o.minibatch_size = c.minibatch_size;
  o.num_epochs = c.num_epochs;
  o.grad_clip = c.grad_clip;
  o.kl_target = c.kl_target;
  o.loss = {.clip_param = c.clip_param, .vf_clip_param = c.vf_clip_param, .vf_loss_coeff = c.vf_loss_coeff,
            .entropy_coeff = c.entropy_coeff, .use_kl_loss = c.use_kl_loss, .kl_coeff = kl_coeff};
  o.seed = c.seed;
  return o;
}

}  // namespace internal
}  // namespace prism::rl

PRISM_REMOTE(prism::rl::internal::PpoEnvRunner::Create, &prism::rl::internal::PpoEnvRunner::Sample,
             prism::rl::internal::PpoLearner::Create, &prism::rl::internal::PpoLearner::Update,
             &prism::rl::internal::PpoLearner::OptimizerState,
             prism::rl::internal::DqnEnvRunner::Create, &prism::rl::internal::DqnEnvRunner::Sample);

namespace prism::rl {
namespace {

constexpr const char* kCheckpointFile = "algorithm.h5";
constexpr const char* kDqnConfigFile = "dqn_config.json";
constexpr const char* kFormat = "prism-rl-ppo-1";
constexpr size_t kSmoothingWindow = 100;

[[noreturn]] void Bad(const std::string& what) { throw Error("prism::rl: PPOConfig: " + what); }

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

// ---- PPOConfig ----------------------------------------------------------------------------

PPOConfig& PPOConfig::Environment(std::string env_name, EnvConfig config) {
  env = std::move(env_name);
  env_config = std::move(config);
  return *this;
}

PPOConfig& PPOConfig::EnvRunners(int runners, int envs, int64_t fragment) {
  num_env_runners = runners;
  num_envs_per_env_runner = envs;
  rollout_fragment_length = fragment;
  return *this;
}

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

PPOConfig& PPOConfig::Debugging(uint64_t s) {
  seed = s;
  return *this;
}

PPOConfig& PPOConfig::Fault(double timeout_s) {
  sample_timeout_s = timeout_s;
  return *this;
}

PPOConfig& PPOConfig::Placement(RunnerPlacement placement) {
  env_runner_placement = placement;
  return *this;
}

int64_t PPOConfig::ResolvedRolloutFragmentLength() const {
  if (rollout_fragment_length > 0) return rollout_fragment_length;
  const int64_t copies = static_cast<int64_t>(std::max(num_env_runners, 1)) * num_envs_per_env_runner;
  return (train_batch_size + copies - 1) / copies;
}

void PPOConfig::Validate() const {
  if (env.empty()) {
    std::string names;
    for (const auto& n : RegisteredEnvs()) names += (names.empty() ? "" : ", ") + n;
    Bad("no environment: call .Environment(name) with a registered one (" + names + ")");
  }
  try {
    MakeEnv(env, env_config);
  } catch (const Error& e) {
    Bad(std::string("Environment(\"") + env + "\"): " + e.what());
  }
  if (num_env_runners < 0) Bad("num_env_runners must be >= 0, got " + std::to_string(num_env_runners));
  if (num_envs_per_env_runner < 1) {
    Bad("num_envs_per_env_runner must be >= 1, got " + std::to_string(num_envs_per_env_runner));
  }
  if (rollout_fragment_length < 0) {
    Bad("rollout_fragment_length must be >= 1 (or 0 for auto), got " + std::to_string(rollout_fragment_length));
  }
  if (num_learners < 0) Bad("num_learners must be >= 0, got " + std::to_string(num_learners));
  if (train_batch_size < 1) Bad("train_batch_size must be >= 1, got " + std::to_string(train_batch_size));
  if (minibatch_size < 1) Bad("minibatch_size must be >= 1, got " + std::to_string(minibatch_size));
  if (minibatch_size > train_batch_size) {
    Bad("minibatch_size (" + std::to_string(minibatch_size) + ") must be <= train_batch_size (" +
        std::to_string(train_batch_size) + "): the train batch is split into minibatches of that size");
  }
  if (num_epochs < 1) Bad("num_epochs must be >= 1, got " + std::to_string(num_epochs));
  if (!(lr > 0)) Bad("lr must be > 0, got " + std::to_string(lr));
  if (!(gamma >= 0 && gamma <= 1)) Bad("gamma must be in [0, 1], got " + std::to_string(gamma));
  if (!(lambda_ >= 0 && lambda_ <= 1)) Bad("lambda_ must be in [0, 1], got " + std::to_string(lambda_));
  if (!(clip_param > 0)) Bad("clip_param must be > 0, got " + std::to_string(clip_param));
  if (!(vf_clip_param > 0)) Bad("vf_clip_param must be > 0, got " + std::to_string(vf_clip_param));
  if (!(vf_loss_coeff >= 0)) Bad("vf_loss_coeff must be >= 0");
  if (!(entropy_coeff >= 0)) Bad("entropy_coeff must be >= 0, got " + std::to_string(entropy_coeff));
  if (!(kl_coeff >= 0) || !(kl_target > 0)) Bad("kl_coeff must be >= 0 and kl_target > 0");
  if (hidden.empty()) Bad("RLModule needs at least one hidden layer size");
  for (int64_t h : hidden) {
    if (h < 1) Bad("RLModule hidden sizes must be >= 1, got " + std::to_string(h));
  }
  if (!(sample_timeout_s > 0)) Bad("sample_timeout_s must be > 0");
}

std::string PPOConfig::ToJson() const {
  nlohmann::json j;
  j["env"] = env;
  j["env_config"] = env_config;
  j["num_env_runners"] = num_env_runners;
  j["num_envs_per_env_runner"] = num_envs_per_env_runner;
  j["rollout_fragment_length"] = rollout_fragment_length;
  j["num_learners"] = num_learners;
  j["lr"] = lr;
  j["gamma"] = gamma;
  j["lambda_"] = lambda_;
  j["train_batch_size"] = train_batch_size;
  j["minibatch_size"] = minibatch_size;
  j["num_epochs"] = num_epochs;
  j["clip_param"] = clip_param;
  j["vf_clip_param"] = vf_clip_param;
  j["vf_loss_coeff"] = vf_loss_coeff;
  j["entropy_coeff"] = entropy_coeff;
  j["use_kl_loss"] = use_kl_loss;
  j["kl_coeff"] = kl_coeff;
  j["kl_target"] = kl_target;
  j["grad_clip"] = grad_clip;
  j["hidden"] = hidden;
  j["seed"] = seed;
  j["sample_timeout_s"] = sample_timeout_s;
  j["env_runner_placement"] = internal::PlacementName(env_runner_placement);
  return j.dump();
}

PPOConfig PPOConfig::FromJson(const std::string& text) {
  PPOConfig c;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    auto get = [&](const char* key, auto& field) {
      if (j.contains(key)) j.at(key).get_to(field);
    };
    get("env", c.env);
    get("env_config", c.env_config);
    get("num_env_runners", c.num_env_runners);
    get("num_envs_per_env_runner", c.num_envs_per_env_runner);
    get("rollout_fragment_length", c.rollout_fragment_length);
    get("num_learners", c.num_learners);
    get("lr", c.lr);
    get("gamma", c.gamma);
    get("lambda_", c.lambda_);
    get("train_batch_size", c.train_batch_size);
    get("minibatch_size", c.minibatch_size);
    get("num_epochs", c.num_epochs);
    get("clip_param", c.clip_param);
    get("vf_clip_param", c.vf_clip_param);
    get("vf_loss_coeff", c.vf_loss_coeff);
    get("entropy_coeff", c.entropy_coeff);
    get("use_kl_loss", c.use_kl_loss);
    get("kl_coeff", c.kl_coeff);
    get("kl_target", c.kl_target);
    get("grad_clip", c.grad_clip);
    get("hidden", c.hidden);
    get("seed", c.seed);
    get("sample_timeout_s", c.sample_timeout_s);
    if (j.contains("env_runner_placement")) {
      c.env_runner_placement = internal::ParsePlacement(j.at("env_runner_placement").get<std::string>(), "PPOConfig");
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("prism::rl: PPOConfig::FromJson: ") + e.what());
  }
  return c;
}

// ---- TrainResult --------------------------------------------------------------------------

std::map<std::string, double> TrainResult::ToMap() const {
  return {{"training_iteration", static_cast<double>(training_iteration)},
          {"episode_return_mean", episode_return_mean},
          {"episode_return_min", episode_return_min},
          {"episode_return_max", episode_return_max},
          {"episode_len_mean", episode_len_mean},
          {"num_episodes", static_cast<double>(num_episodes)},
          {"num_env_steps_sampled", static_cast<double>(num_env_steps_sampled)},
          {"num_env_steps_sampled_lifetime", static_cast<double>(num_env_steps_sampled_lifetime)},
          {"total_loss", total_loss},
          {"policy_loss", policy_loss},
          {"vf_loss", vf_loss},
          {"entropy", entropy},
          {"mean_kl", mean_kl},
          {"curr_kl_coeff", curr_kl_coeff},
          {"epsilon", epsilon},
          {"mean_q", mean_q},
          {"td_error_mean", td_error_mean},
          {"num_env_steps_trained", static_cast<double>(num_env_steps_trained)},
          {"replay_buffer_size", static_cast<double>(replay_buffer_size)},
          {"sample_s", sample_s},
          {"learn_s", learn_s},
          {"num_healthy_env_runners", static_cast<double>(num_healthy_env_runners)}};
}

// ---- Algorithm ----------------------------------------------------------------------------

struct Algorithm::Impl {
  // DQN: the trainer and its config (the PPO members below stay empty).
  std::unique_ptr<dqn::DqnTrainer> dqn;
  DQNConfig dqn_config;
  PPOConfig config;
  ppo::RLModule module{nullptr};
  std::unique_ptr<ppo::Learner> learner;
  std::unique_ptr<ppo::Sampler> local_sampler;  // num_env_runners == 0
  std::vector<ActorHandle<internal::PpoEnvRunner>> runners;
  std::vector<ActorHandle<internal::PpoLearner>> learners;  // num_learners > 1, made at the first Train
  std::vector<ActorHandle<internal::DqnEnvRunner>> dqn_runners;  // DQN with num_env_runners > 0
  int dqn_healthy_runners = 0;  // the fewest runners that answered a store step this iteration
  int64_t iteration = 0;
  int64_t lifetime_steps = 0;
  std::deque<double> recent_returns, recent_lens;
  std::mt19937_64 rng;

  ppo::LearnerStats UpdateLearnerGroup(const ppo::SampleBatch& batch);
};

Algorithm::Algorithm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Algorithm::Algorithm(Algorithm&&) noexcept = default;
Algorithm& Algorithm::operator=(Algorithm&&) noexcept = default;
namespace {

/// Kills every actor for good and forgets them.
template <typename Handles>
void KillAll(Handles& actors) {
  for (auto& a : actors) {
    try {
      a.Kill(/*no_restart=*/true);
    } catch (const std::exception&) {
      // The runtime is already down: the actors went with it.
    }
  }
  actors.clear();
}

}  // namespace

Algorithm::~Algorithm() {
  if (!impl_) return;
  KillAll(impl_->runners);
  KillAll(impl_->learners);
  KillAll(impl_->dqn_runners);
}

Algorithm PPOConfig::Build() const {
  Validate();
  if (num_env_runners > 0) internal::CheckRunnersFit("PPOConfig", num_env_runners, env_runner_placement);
  if (num_learners > 1) {
    if (!prism::IsInitialized()) {
      Bad("num_learners " + std::to_string(num_learners) +
          " needs prism::Init first (or Learners(1) for the local learner)");
    }
    const int workers = prism::GetRuntimeContext().GetWorldSize() - 1;
    if (num_learners > workers) {
      Bad("num_learners " + std::to_string(num_learners) + " is larger than the " + std::to_string(workers) +
          " worker ranks (one learner per rank 1..N-1)");
    }
    if (minibatch_size < num_learners) {
      Bad("minibatch_size (" + std::to_string(minibatch_size) + ") must be >= num_learners (" +
          std::to_string(num_learners) + "): each learner takes minibatch_size / num_learners rows a step");
    }
  }
  auto impl = std::make_unique<Algorithm::Impl>();
  impl->config = *this;
  impl->rng.seed(seed);
  auto probe = MakeEnv(env, env_config);
  torch::manual_seed(seed);
  impl->module = ppo::RLModule(probe->observation_space(), probe->action_space(), hidden);
  ppo::LearnerOptions o = internal::LearnerOptionsOf(*this, kl_coeff);
  impl->learner = std::make_unique<ppo::Learner>(impl->module, o);
  if (num_env_runners == 0) {
    impl->local_sampler = std::make_unique<ppo::Sampler>(env, env_config, num_envs_per_env_runner,
                                                         seed + 1000, hidden);
  } else {
    const std::string json = ToJson();
    for (int i = 0; i < num_env_runners; ++i) {
      impl->runners.push_back(
          internal::RunnerCreator(internal::PpoEnvRunner::Create, env_runner_placement, i).Remote(json, i));
    }
  }
  return Algorithm(std::move(impl));
}

/// num_learners > 1: GAE on the driver, a shard per learner actor, the group's result.
/// Learners are made at the first update with the module's weights then (after a restore,
/// the restored ones).
ppo::LearnerStats Algorithm::Impl::UpdateLearnerGroup(const ppo::SampleBatch& batch) {
  Impl& s = *this;
  const PPOConfig& c = s.config;
  if (s.learners.empty()) {
    std::vector<int> ranks;
    for (int i = 0; i < c.num_learners; ++i) ranks.push_back(1 + i);
    std::random_device entropy;
    const std::string key = "prism-rl-ppo-learners-" + std::to_string(entropy()) + std::to_string(entropy());
    const std::string json = c.ToJson();
    const std::vector<uint8_t> weights = ppo::GetWeights(*s.module);
    // The driver's Adam state: restored from a checkpoint, or fresh (then zero moments).
    const std::vector<uint8_t> optimizer = internal::OptimizerBytes(s.learner->optimizer());
    for (int i = 0; i < c.num_learners; ++i) {
      s.learners.push_back(prism::Actor(internal::PpoLearner::Create)
                               .SetResource("CPU", 1)
                               .SetSchedulingStrategy(NodeAffinitySchedulingStrategy{ranks[i], false})
                               .Remote(json, i, ranks, key, weights, s.learner->kl_coeff(), optimizer));
    }
  }
  std::vector<ppo::LearnerShard> shards = ppo::Postprocess(batch, c.gamma, c.lambda_, c.num_learners);
  std::vector<ObjectRef<internal::LearnerResult>> refs;
  for (int i = 0; i < c.num_learners; ++i) {
    refs.push_back(s.learners[i].Task(&internal::PpoLearner::Update).Remote(std::move(shards[i])));
  }
  std::shared_ptr<internal::LearnerResult> first;
  for (int i = 0; i < c.num_learners; ++i) {
    // A learner group has no restarts: its members' states must agree.
    auto result = prism::Get(refs[i], /*timeout_ms=*/10 * 60 * 1000);
    if (i == 0) first = result;
  }
  ppo::SetWeights(*s.module, first->weights.data(), first->weights.size());
  s.learner->set_kl_coeff(first->kl_coeff);
  ppo::LearnerStats st;
  st.total_loss = first->total_loss;
  st.policy_loss = first->policy_loss;
  st.vf_loss = first->vf_loss;
  st.entropy = first->entropy;
  st.mean_kl = first->mean_kl;
  st.kl_coeff = first->kl_coeff;
  st.num_minibatches = first->num_minibatches;
  return st;
}

TrainResult Algorithm::Train() {
  Impl& s = *impl_;
  if (s.dqn) {
    s.dqn_healthy_runners = static_cast<int>(s.dqn_runners.size());
    const dqn::DqnMetrics m = s.dqn->TrainIteration();
    TrainResult r;
    r.num_healthy_env_runners = s.dqn_healthy_runners;
    r.training_iteration = m.training_iteration;
    r.episode_return_mean = m.episode_return_mean;
    r.episode_return_min = m.episode_return_min;
    r.episode_return_max = m.episode_return_max;
    r.episode_len_mean = m.episode_len_mean;
    r.num_episodes = m.num_episodes;
    r.num_env_steps_sampled = m.num_env_steps_sampled;
    r.num_env_steps_sampled_lifetime = m.num_env_steps_sampled_lifetime;
    r.total_loss = m.loss;
    r.epsilon = m.epsilon;
    r.mean_q = m.q_mean;
    r.td_error_mean = m.td_error_mean;
    r.num_env_steps_trained = m.num_env_steps_trained;
    r.replay_buffer_size = m.replay_buffer_size;
    r.learn_s = m.time_this_iter_s;
    s.iteration = m.training_iteration;
    s.lifetime_steps = m.num_env_steps_sampled_lifetime;
    return r;
  }
  const PPOConfig& c = s.config;
  TrainResult r;
  auto start = std::chrono::steady_clock::now();
  const int64_t steps_per_runner = c.ResolvedRolloutFragmentLength() * c.num_envs_per_env_runner;
  std::vector<uint8_t> weights = ppo::GetWeights(*s.module);
  ppo::SampleBatch batch;
  if (s.local_sampler) {
    s.local_sampler->SetWeights(weights.data(), weights.size());
    batch = s.local_sampler->Sample(steps_per_runner);
    r.num_healthy_env_runners = 0;
  } else {
    ObjectRef<std::vector<uint8_t>> weights_ref = prism::Put(std::move(weights));
    std::vector<ObjectRef<ppo::SampleBatch>> samples;
    samples.reserve(s.runners.size());
    for (auto& runner : s.runners) {
      samples.push_back(runner.Task(&internal::PpoEnvRunner::Sample).Remote(weights_ref, steps_per_runner));
    }
    r.num_healthy_env_runners = internal::GatherSamples(
        samples, c.sample_timeout_s, [&](std::shared_ptr<ppo::SampleBatch> b) { batch.Append(*b); });
    if (r.num_healthy_env_runners == 0) {
      throw Error("prism::rl: Train: none of the " + std::to_string(s.runners.size()) +
                  " env runners returned a sample this iteration");
    }
  }
  r.sample_s = Seconds(start);

  for (size_t i = 0; i < batch.episode_returns.size(); ++i) {
    s.recent_returns.push_back(batch.episode_returns[i]);
    s.recent_lens.push_back(static_cast<double>(batch.episode_lens[i]));
    if (s.recent_returns.size() > kSmoothingWindow) {
      s.recent_returns.pop_front();
      s.recent_lens.pop_front();
    }
  }
  r.num_episodes = static_cast<int64_t>(batch.episode_returns.size());
  if (s.recent_returns.empty()) {
    r.episode_return_mean = r.episode_return_min = r.episode_return_max = r.episode_len_mean =
        std::numeric_limits<double>::quiet_NaN();
  } else {
    double sum = 0, len = 0, lo = s.recent_returns.front(), hi = lo;
    for (size_t i = 0; i < s.recent_returns.size(); ++i) {
      sum += s.recent_returns[i];
      len += s.recent_lens[i];
      lo = std::min(lo, s.recent_returns[i]);
      hi = std::max(hi, s.recent_returns[i]);
    }
    const double n = static_cast<double>(s.recent_returns.size());
    r.episode_return_mean = sum / n;
    r.episode_len_mean = len / n;
    r.episode_return_min = lo;
    r.episode_return_max = hi;
  }
  r.num_env_steps_sampled = batch.size();
  s.lifetime_steps += batch.size();
  r.num_env_steps_sampled_lifetime = s.lifetime_steps;

  auto learn_start = std::chrono::steady_clock::now();
  ppo::LearnerStats st;
  if (c.num_learners > 1) {
    st = s.UpdateLearnerGroup(batch);
  } else {
    st = s.learner->Update(batch);
  }
  r.learn_s = Seconds(learn_start);
  r.total_loss = st.total_loss;
  r.policy_loss = st.policy_loss;
  r.vf_loss = st.vf_loss;
  r.entropy = st.entropy;
  r.mean_kl = st.mean_kl;
  r.curr_kl_coeff = st.kl_coeff;
  r.training_iteration = ++s.iteration;
  return r;
}

void Algorithm::Save(const std::string& dir) const {
  const Impl& s = *impl_;
  if (s.dqn) {
    s.dqn->Save(dir);  // creates dir
    const std::string path = dir + "/" + kDqnConfigFile;
    std::ofstream out(path, std::ios::trunc);
    out << s.dqn_config.ToJson();
    out.close();
    if (!out) throw Error("prism::rl: Save: cannot write " + path);
    return;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("prism::rl: Save: cannot create " + dir + ": " + ec.message());
  if (!s.learners.empty()) {
    // A learner group holds Adam's state: bring it to the driver's optimizer (over the same
    // parameters, in the same order) so the checkpoint carries it.
    auto state = prism::Get(s.learners[0].Task(&internal::PpoLearner::OptimizerState).Remote(),
                            /*timeout_ms=*/10 * 60 * 1000);
    internal::LoadOptimizerBytes(s.learner->optimizer(), *state);
  }
  nlohmann::json window = {{"returns", s.recent_returns}, {"lens", s.recent_lens}};
  ppo::SaveModule(dir + "/" + kCheckpointFile, *s.module, &s.learner->optimizer(),
                  {{"rl_format", std::string(kFormat)},
                   {"config", s.config.ToJson()},
                   {"iteration", s.iteration},
                   {"num_env_steps_sampled_lifetime", s.lifetime_steps},
                   {"kl_coeff", s.learner->kl_coeff()},
                   {"episode_window", window.dump()}});
}

namespace {

/// Which algorithm's checkpoint `dir` holds: "PPO" or "DQN". prism::Error (from `caller`)
/// for none, both, or a DQN one without its config.
std::string CheckpointKind(const std::string& dir, const std::string& caller) {
  const bool has_ppo = std::filesystem::exists(dir + "/" + kCheckpointFile);
  const bool has_dqn = std::filesystem::exists(dir + "/" + dqn::DqnTrainer::kCheckpointFile);
  if (has_ppo && has_dqn) {
    throw Error("prism::rl: " + caller + ": " + dir + " holds both a PPO (" + kCheckpointFile + ") and a DQN (" +
                dqn::DqnTrainer::kCheckpointFile + ") checkpoint: save each algorithm to its own directory");
  }
  if (has_dqn) {
    if (!std::filesystem::exists(dir + "/" + kDqnConfigFile)) {
      throw Error("prism::rl: " + caller + ": " + dir + " holds " + dqn::DqnTrainer::kCheckpointFile + " but no " +
                  kDqnConfigFile + " (write both with Algorithm::Save)");
    }
    return "DQN";
  }
  if (!has_ppo) {
    throw Error("prism::rl: " + caller + ": " + dir + " holds no " + kCheckpointFile + " (PPO) or " +
                dqn::DqnTrainer::kCheckpointFile + " (DQN) (write one with Algorithm::Save)");
  }
  return "PPO";
}

/// Every parameter group's learning rate set to `lr` (a loaded Adam state carries the rate
/// it was saved with).
void SetLearningRate(torch::optim::Adam& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
  }
}

}  // namespace

Algorithm Algorithm::FromCheckpoint(const std::string& dir) {
  if (CheckpointKind(dir, "FromCheckpoint") == "DQN") {
    std::ifstream in(dir + "/" + kDqnConfigFile);
    std::stringstream text;
    text << in.rdbuf();
    Algorithm algo = DQNConfig::FromJson(text.str()).Build();
    algo.Restore(dir);
    return algo;
  }
  const std::string file = dir + "/" + kCheckpointFile;
  auto attrs = prism::train::ReadAttributes(file);
  auto it = attrs.find("config");
  if (it == attrs.end() || !std::holds_alternative<std::string>(it->second)) {
    throw Error("prism::rl: FromCheckpoint: " + file + " has no \"config\" attribute");
  }
  Algorithm algo = PPOConfig::FromJson(std::get<std::string>(it->second)).Build();
  algo.Restore(dir);
  return algo;
}

void Algorithm::Restore(const std::string& dir) {
  Impl& s = *impl_;
  const std::string kind = CheckpointKind(dir, "Restore");
  if (kind != algorithm_name()) {
    throw Error("prism::rl: Restore: " + dir + " holds a " + kind + " checkpoint; this algorithm is " +
                algorithm_name() + " (restore it into a " + kind + " algorithm, or use FromCheckpoint)");
  }
  if (s.dqn) {
    const std::string dqn_file = dir + "/" + dqn::DqnTrainer::kCheckpointFile;
    s.dqn->Load(dir);
    SetLearningRate(s.dqn->learner().optimizer(), s.dqn_config.lr);
    s.lifetime_steps = s.dqn->num_env_steps_sampled_lifetime();
    auto attrs = prism::train::ReadAttributes(dqn_file);
    if (auto it = attrs.find("training_iteration"); it != attrs.end() && std::holds_alternative<int64_t>(it->second)) {
      s.iteration = std::get<int64_t>(it->second);
    }
    return;
  }
  const std::string file = dir + "/" + kCheckpointFile;
  auto attrs = prism::train::ReadAttributes(file);
  auto text = [&](const std::string& key) -> std::string {
    auto it = attrs.find(key);
    if (it == attrs.end() || !std::holds_alternative<std::string>(it->second)) {
      throw Error("prism::rl: Restore: " + file + " has no \"" + key + "\" attribute");
    }
    return std::get<std::string>(it->second);
  };
  auto integer = [&](const std::string& key) -> int64_t {
    auto it = attrs.find(key);
    if (it == attrs.end() || !std::holds_alternative<int64_t>(it->second)) {
      throw Error("prism::rl: Restore: " + file + " has no \"" + key + "\" attribute");
    }
    return std::get<int64_t>(it->second);
  };
  if (text("rl_format") != kFormat) {
    throw Error("prism::rl: Restore: " + file + " is format " + text("rl_format") + ", not " + kFormat);
  }
  std::deque<double> returns, lens;
  try {
    nlohmann::json window = nlohmann::json::parse(text("episode_window"));
    for (double v : window.at("returns")) returns.push_back(v);
    for (double v : window.at("lens")) lens.push_back(v);
  } catch (const nlohmann::json::exception& e) {
    throw Error("prism::rl: Restore: " + file + ": bad episode_window: " + e.what());
  }
  try {
    ppo::LoadModule(file, *s.module, &s.learner->optimizer());
  } catch (const Error& e) {
    throw Error(std::string("prism::rl: Restore: ") + e.what() +
                " (a checkpoint restores into an algorithm with the same environment and RLModule sizes)");
  }
  SetLearningRate(s.learner->optimizer(), s.config.lr);
  s.iteration = integer("iteration");
  s.lifetime_steps = integer("num_env_steps_sampled_lifetime");
  if (auto it = attrs.find("kl_coeff"); it != attrs.end() && std::holds_alternative<double>(it->second)) {
    s.learner->set_kl_coeff(std::get<double>(it->second));
  }
  s.recent_returns = std::move(returns);
  s.recent_lens = std::move(lens);
  KillAll(s.learners);  // a learner group (num_learners > 1) is made anew from these weights
}

Action Algorithm::ComputeSingleAction(const std::vector<float>& obs, bool explore) {
  if (impl_->dqn) return impl_->dqn->ComputeSingleAction(obs, explore);
  return impl_->module->ComputeSingleAction(obs, explore, impl_->rng);
}

std::string Algorithm::algorithm_name() const { return impl_->dqn ? "DQN" : "PPO"; }

const PPOConfig& Algorithm::config() const {
  if (impl_->dqn) throw Error("prism::rl: config(): this algorithm is DQN; its config is dqn_config()");
  return impl_->config;
}

const DQNConfig& Algorithm::dqn_config() const {
  if (!impl_->dqn) throw Error("prism::rl: dqn_config(): this algorithm is PPO; its config is config()");
  return impl_->dqn_config;
}
int64_t Algorithm::iteration() const { return impl_->iteration; }
int64_t Algorithm::num_env_steps_sampled_lifetime() const { return impl_->lifetime_steps; }

void Algorithm::KillEnvRunner(int index) {
  const size_t count = impl_->dqn ? impl_->dqn_runners.size() : impl_->runners.size();
  if (index < 0 || index >= static_cast<int>(count)) {
    throw Error("prism::rl: KillEnvRunner: no env runner " + std::to_string(index) + " (there are " +
                std::to_string(count) + ")");
  }
  if (impl_->dqn) {
    impl_->dqn_runners[index].Kill(/*no_restart=*/false);
  } else {
    impl_->runners[index].Kill(/*no_restart=*/false);
  }
}

// ---- DQNConfig ----------------------------------------------------------------------------

namespace {

[[noreturn]] void BadDqn(const std::string& what) { throw Error("prism::rl: DQNConfig: " + what); }

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

}  // namespace

DQNConfig& DQNConfig::Environment(std::string env_name, EnvConfig config) {
  env = std::move(env_name);
  env_config = std::move(config);
  return *this;
}

DQNConfig& DQNConfig::EnvRunners(int runners, int envs, int64_t fragment) {
  num_env_runners = runners;
  num_envs_per_env_runner = envs;
  rollout_fragment_length = fragment;
  return *this;
}

DQNConfig& DQNConfig::Placement(RunnerPlacement placement) {
  env_runner_placement = placement;
  return *this;
}

DQNConfig& DQNConfig::Fault(double timeout_s) {
  sample_timeout_s = timeout_s;
  return *this;
}

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

DQNConfig& DQNConfig::Debugging(uint64_t s) {
  seed = s;
  return *this;
}

void DQNConfig::Validate() const {
  if (env.empty()) {
    std::string names;
    for (const auto& n : RegisteredEnvs()) names += (names.empty() ? "" : ", ") + n;
    BadDqn("no environment: call .Environment(name) with a registered one (" + names + ")");
  }
  std::unique_ptr<Env> probe;
  try {
    probe = MakeEnv(env, env_config);
  } catch (const Error& e) {
    BadDqn(std::string("Environment(\"") + env + "\"): " + e.what());
  }
  if (probe->action_space().kind != Space::Kind::kDiscrete) {
    BadDqn("Environment(\"" + env + "\") has action space " + probe->action_space().ToString() +
           "; DQN needs a Discrete action space (use PPOConfig for continuous actions)");
  }
  if (num_envs_per_env_runner < 1) {
    BadDqn("num_envs_per_env_runner must be >= 1, got " + std::to_string(num_envs_per_env_runner));
  }
  if (hidden.empty()) BadDqn("RLModule needs at least one hidden layer size");
  for (int64_t h : hidden) {
    if (h < 1) BadDqn("RLModule hidden sizes must be >= 1, got " + std::to_string(h));
  }
  for (int64_t h : head_hiddens) {
    if (h < 1) BadDqn("RLModule head_hiddens sizes must be >= 1, got " + std::to_string(h));
  }
  if (!(sample_timeout_s > 0)) BadDqn("sample_timeout_s must be > 0");
  ToDqnConfig(*this).Validate();  // the training values (its errors name the field)
}

Algorithm DQNConfig::Build() const {
  Validate();
  if (num_env_runners > 0) internal::CheckRunnersFit("DQNConfig", num_env_runners, env_runner_placement);
  auto impl = std::make_unique<Algorithm::Impl>();
  impl->dqn_config = *this;
  impl->dqn = std::make_unique<dqn::DqnTrainer>(ToDqnConfig(*this));
  if (num_env_runners == 0) return Algorithm(std::move(impl));
  const std::string json = ToJson();
  for (int i = 0; i < num_env_runners; ++i) {
    impl->dqn_runners.push_back(
        internal::RunnerCreator(internal::DqnEnvRunner::Create, env_runner_placement, i).Remote(json, i));
  }
  // The trainer calls this once per store step; Impl lives on the heap, so the pointer
  // stays valid as the Algorithm moves.
  Algorithm::Impl* s = impl.get();
  impl->dqn->SetRemoteSampler([s](const std::vector<uint8_t>& weights, int64_t min_transitions,
                                  int64_t lifetime_steps) {
    ObjectRef<std::vector<uint8_t>> weights_ref = prism::Put(weights);
    std::vector<ObjectRef<dqn::DqnRows>> refs;
    for (auto& runner : s->dqn_runners) {
      refs.push_back(runner.Task(&internal::DqnEnvRunner::Sample).Remote(weights_ref, min_transitions, lifetime_steps));
    }
    std::vector<dqn::DqnRows> rows;
    const int arrived = internal::GatherSamples(refs, s->dqn_config.sample_timeout_s,
                                                [&](std::shared_ptr<dqn::DqnRows> r) { rows.push_back(std::move(*r)); });
    s->dqn_healthy_runners = std::min(s->dqn_healthy_runners, arrived);
    return rows;
  });
  return Algorithm(std::move(impl));
}

std::string DQNConfig::ToJson() const {
  nlohmann::json j;
  j["algorithm"] = "DQN";
  j["env"] = env;
  j["env_config"] = env_config;
  j["num_env_runners"] = num_env_runners;
  j["num_envs_per_env_runner"] = num_envs_per_env_runner;
  j["rollout_fragment_length"] = rollout_fragment_length;
  j["env_runner_placement"] = internal::PlacementName(env_runner_placement);
  j["sample_timeout_s"] = sample_timeout_s;
  j["lr"] = lr;
  j["gamma"] = gamma;
  j["train_batch_size"] = train_batch_size;
  j["replay_buffer_capacity"] = replay_buffer_capacity;
  j["target_network_update_freq"] = target_network_update_freq;
  j["num_steps_sampled_before_learning_starts"] = num_steps_sampled_before_learning_starts;
  j["epsilon"] = epsilon;
  j["double_q"] = double_q;
  j["dueling"] = dueling;
  j["n_step"] = n_step;
  j["tau"] = tau;
  j["grad_clip"] = grad_clip;
  j["training_intensity"] = training_intensity ? nlohmann::json(*training_intensity) : nlohmann::json(nullptr);
  j["hidden"] = hidden;
  j["head_hiddens"] = head_hiddens;
  j["seed"] = seed;
  return j.dump();
}

DQNConfig DQNConfig::FromJson(const std::string& text) {
  DQNConfig c;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.contains("algorithm") && j.at("algorithm") != "DQN") {
      throw Error("prism::rl: DQNConfig::FromJson: the config is for " + j.at("algorithm").dump() + ", not DQN");
    }
    auto get = [&](const char* key, auto& field) {
      if (j.contains(key)) j.at(key).get_to(field);
    };
    get("env", c.env);
    get("env_config", c.env_config);
    get("num_env_runners", c.num_env_runners);
    get("num_envs_per_env_runner", c.num_envs_per_env_runner);
    get("rollout_fragment_length", c.rollout_fragment_length);
    if (j.contains("env_runner_placement")) {
      c.env_runner_placement = internal::ParsePlacement(j.at("env_runner_placement").get<std::string>(), "DQNConfig");
    }
    get("sample_timeout_s", c.sample_timeout_s);
    get("lr", c.lr);
    get("gamma", c.gamma);
    get("train_batch_size", c.train_batch_size);
    get("replay_buffer_capacity", c.replay_buffer_capacity);
    get("target_network_update_freq", c.target_network_update_freq);
    get("num_steps_sampled_before_learning_starts", c.num_steps_sampled_before_learning_starts);
    get("epsilon", c.epsilon);
    get("double_q", c.double_q);
    get("dueling", c.dueling);
    get("n_step", c.n_step);
    get("tau", c.tau);
    get("grad_clip", c.grad_clip);
    if (j.contains("training_intensity") && !j.at("training_intensity").is_null()) {
      c.training_intensity = j.at("training_intensity").get<double>();
    }
    get("hidden", c.hidden);
    get("head_hiddens", c.head_hiddens);
    get("seed", c.seed);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("prism::rl: DQNConfig::FromJson: ") + e.what());
  }
  return c;
}

}  // namespace prism::rl
