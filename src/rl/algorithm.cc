// The Algorithm (prism/rl/algorithm.h): PPO's env runner actors and iteration loop on the
// driver, with the local learner or a learner group (learner_group.h). DQNConfig
// (prism/rl/dqn.h) builds the same Algorithm around a dqn::DqnTrainer on the driver
// (Impl::dqn set; the PPO members unused). The configs' checks and JSON are in config.cc.
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
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "prism/actor.h"
#include "prism/api.h"
#include "prism/errors.h"
#include "prism/platform/storage.h"
#include "prism/runtime_context.h"
#include "prism/rl/dqn.h"
#include "rl/config.h"
#include "rl/dqn/dqn_trainer.h"
#include "rl/dqn/module_bytes.h"
#include "rl/dqn/sampler.h"
#include "rl/learner_group.h"
#include "rl/ppo/learner.h"
#include "rl/ppo/rl_module.h"
#include "rl/ppo/sampler.h"

namespace prism::rl::internal {

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

}  // namespace prism::rl::internal

PRISM_REMOTE(prism::rl::internal::PpoEnvRunner::Create, &prism::rl::internal::PpoEnvRunner::Sample,
             prism::rl::internal::DqnEnvRunner::Create, &prism::rl::internal::DqnEnvRunner::Sample);

namespace prism::rl {
namespace {

constexpr const char* kCheckpointFile = "algorithm.h5";
constexpr const char* kDqnConfigFile = "dqn_config.json";
constexpr const char* kFormat = "prism-rl-ppo-1";
constexpr size_t kSmoothingWindow = 100;
/// How long the driver waits for the learner group's update (or Adam's state): a learner
/// group has no restarts, and its collectives give up after as long.
constexpr int64_t kLearnerTimeoutMs = 10 * 60 * 1000;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

// ---- TrainResult --------------------------------------------------------------------------

std::map<std::string, double> TrainResult::ToMap() const {
  std::map<std::string, double> m{{"total_loss", total_loss},
                                  {"policy_loss", policy_loss},
                                  {"vf_loss", vf_loss},
                                  {"entropy", entropy},
                                  {"mean_kl", mean_kl},
                                  {"curr_kl_coeff", curr_kl_coeff},
                                  {"mean_q", mean_q},
                                  {"sample_s", sample_s},
                                  {"learn_s", learn_s},
                                  {"num_healthy_env_runners", static_cast<double>(num_healthy_env_runners)}};
  VisitMetrics([&m](const char* name, double value) { m[name] = value; });
  return m;
}

std::map<std::string, double> TrainResult::ToRllibMap(const std::string& algorithm) const {
  const bool dqn = algorithm == "DQN";
  const std::string runners = "env_runners/", module = "learners/default_policy/";
  std::map<std::string, double> m{
      {runners + "episode_return_mean", episode_return_mean},
      {runners + "episode_return_min", episode_return_min},
      {runners + "episode_return_max", episode_return_max},
      {runners + "episode_len_mean", episode_len_mean},
      {runners + "num_episodes", static_cast<double>(num_episodes)},
      {runners + "num_env_steps_sampled", static_cast<double>(num_env_steps_sampled)},
      {runners + "num_env_steps_sampled_lifetime", static_cast<double>(num_env_steps_sampled_lifetime)},
      {module + "total_loss", total_loss},
      {"learners/__all_modules__/num_env_steps_trained",
       static_cast<double>(dqn ? num_env_steps_trained : num_env_steps_sampled)},
      {"fault_tolerance/num_healthy_workers", static_cast<double>(num_healthy_env_runners)},
      {"timers/env_runner_sampling_timer", sample_s},
      {"timers/learner_update_timer", learn_s},
      {"num_env_steps_sampled_lifetime", static_cast<double>(num_env_steps_sampled_lifetime)},
      {"training_iteration", static_cast<double>(training_iteration)}};
  if (dqn) {
    m[runners + "epsilon"] = epsilon;
    m[module + "qf_loss"] = total_loss;
    m[module + "qf_mean"] = mean_q;
    m[module + "td_error_mean"] = td_error_mean;
    m["replay_buffer/num_env_steps_stored"] = static_cast<double>(replay_buffer_size);
  } else {
    m[module + "policy_loss"] = policy_loss;
    m[module + "vf_loss"] = vf_loss;
    m[module + "entropy"] = entropy;
    m[module + "mean_kl_loss"] = mean_kl;  // RLlib's name for PPO's KL
    m[module + "curr_kl_coeff"] = curr_kl_coeff;
  }
  return m;
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
  std::unique_ptr<internal::LearnerGroup> learners;  // num_learners > 1, made at the first Train
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
  impl_->learners.reset();
  KillAll(impl_->dqn_runners);
}

Algorithm PPOConfig::Build() const {
  Validate();
  if (num_env_runners > 0) internal::CheckRunnersFit("PPOConfig", num_env_runners, env_runner_placement);
  if (num_learners > 1) internal::CheckLearnersFit(*this);
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

/// num_learners > 1: GAE on the driver, a shard per learner, the group's result (learner
/// 0's weights become the driver's module). The group is made at the first update with the
/// module's weights then (after a restore, the restored ones) and the driver's Adam state
/// (restored from a checkpoint, or fresh).
ppo::LearnerStats Algorithm::Impl::UpdateLearnerGroup(const ppo::SampleBatch& batch) {
  const PPOConfig& c = config;
  if (!learners) {
    learners = std::make_unique<internal::LearnerGroup>(c, ppo::GetWeights(*module), learner->kl_coeff(),
                                                        internal::OptimizerBytes(learner->optimizer()));
  }
  std::vector<uint8_t> weights;
  ppo::LearnerStats st = learners->Update(ppo::Postprocess(batch, c.gamma, c.lambda_, c.num_learners), weights,
                                          kLearnerTimeoutMs);
  ppo::SetWeights(*module, weights.data(), weights.size());
  learner->set_kl_coeff(st.kl_coeff);
  return st;
}

TrainResult Algorithm::Train() {
  Impl& s = *impl_;
  if (s.dqn) {
    s.dqn_healthy_runners = static_cast<int>(s.dqn_runners.size());
    const dqn::DqnMetrics m = s.dqn->TrainIteration();
    TrainResult r;
    static_cast<IterationMetrics&>(r) = m;
    r.num_healthy_env_runners = s.dqn_healthy_runners;
    r.total_loss = m.loss;
    r.mean_q = m.q_mean;
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

namespace {

/// A checkpoint saved on a rank other than the driver's (an Algorithm inside a task or
/// actor) is for the driver to read: its directory must be one the driver sees (issue 46).
/// Checked once per parent directory per process; MakeTempCheckpointDir's scratch is
/// exempt, as a Tune or Train session moves it into their (checked) storage path. `dir`
/// must exist.
void CheckDriverSeesCheckpoint(const std::string& dir) {
  if (!IsInitialized() || GetRuntimeContext().GetRank() == 0) return;  // local use, or the driver
  const char* tmp = std::getenv("TMPDIR");
  const std::string scratch = std::string(tmp && *tmp ? tmp : "/tmp") + "/prism-checkpoints-";
  const std::filesystem::path path = std::filesystem::absolute(dir).lexically_normal();
  if (path.string().rfind(scratch, 0) == 0) return;
  static std::mutex mu;
  static std::set<std::string> checked;
  const std::string parent = path.parent_path().string();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (checked.count(parent) != 0) return;
  }
  platform::CheckStorageShared(path.string(), {"prism::rl: Algorithm::Save", "the checkpoint directory", ""},
                               {0});
  std::lock_guard<std::mutex> lock(mu);
  checked.insert(parent);
}

}  // namespace

void Algorithm::Save(const std::string& dir) const {
  const Impl& s = *impl_;
  if (s.dqn) {
    s.dqn->Save(dir);  // creates dir
    CheckDriverSeesCheckpoint(dir);
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
  CheckDriverSeesCheckpoint(dir);
  if (s.learners) {
    // A learner group holds Adam's state: bring it to the driver's optimizer (over the same
    // parameters, in the same order) so the checkpoint carries it.
    internal::LoadOptimizerBytes(s.learner->optimizer(), s.learners->OptimizerState(kLearnerTimeoutMs));
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
  s.learners.reset();  // a learner group (num_learners > 1) is made anew from these weights
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

// ---- DQNConfig::Build ----------------------------------------------------------------------

Algorithm DQNConfig::Build() const {
  Validate();
  if (num_env_runners > 0) internal::CheckRunnersFit("DQNConfig", num_env_runners, env_runner_placement);
  auto impl = std::make_unique<Algorithm::Impl>();
  impl->dqn_config = *this;
  impl->dqn = std::make_unique<dqn::DqnTrainer>(internal::ToDqnConfig(*this));
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

}  // namespace prism::rl
