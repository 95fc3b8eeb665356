// DqnTrainer (dqn_trainer.h): RLlib's DQN training step in one process.

#include "rl/dqn/dqn_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>

#include "prism/errors.h"
#include "prism/train/checkpoint.h"

namespace prism::rl::dqn {
namespace {

[[noreturn]] void Bad(const std::string& what) { throw Error("prism::rl: DQNConfig: " + what); }

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t IntAttribute(const std::map<std::string, prism::train::Attribute>& attrs, const std::string& key,
                     const std::string& file) {
  auto it = attrs.find(key);
  if (it == attrs.end() || !std::holds_alternative<int64_t>(it->second)) {
    throw Error("prism::rl: " + file + " is not a DQN checkpoint: no integer attribute '" + key + "'");
  }
  return std::get<int64_t>(it->second);
}

}  // namespace

void DqnConfig::Validate() const {
  if (num_envs < 1) Bad("num_envs is " + std::to_string(num_envs) + "; it must be >= 1");
  if (!(gamma >= 0.0 && gamma <= 1.0)) Bad("gamma is " + std::to_string(gamma) + "; it must lie in [0, 1]");
  if (!(lr > 0)) Bad("lr is " + std::to_string(lr) + "; it must be > 0");
  if (!(adam_epsilon > 0)) Bad("adam_epsilon must be > 0");
  if (train_batch_size < 1) Bad("train_batch_size is " + std::to_string(train_batch_size) + "; it must be >= 1");
  if (replay_capacity < 1) Bad("replay_buffer_config capacity must be >= 1");
  if (target_network_update_freq < 0) Bad("target_network_update_freq must be >= 0");
  if (!(tau > 0.0 && tau <= 1.0)) Bad("tau is " + std::to_string(tau) + "; it must lie in (0, 1]");
  if (num_steps_sampled_before_learning_starts < 0) Bad("num_steps_sampled_before_learning_starts must be >= 0");
  if (n_step < 1) Bad("n_step is " + std::to_string(n_step) + "; it must be >= 1");
  if (num_env_runners < 0) Bad("num_env_runners must be >= 0, got " + std::to_string(num_env_runners));
  if (rollout_fragment_length < 0) {
    Bad("rollout_fragment_length must be >= 1 (or 0 for auto), got " + std::to_string(rollout_fragment_length));
  }
  if (training_intensity && !(*training_intensity > 0)) Bad("training_intensity must be > 0");
  if (td_error_loss_fn != "huber" && td_error_loss_fn != "mse") {
    Bad("td_error_loss_fn must be 'huber' or 'mse', got '" + td_error_loss_fn + "'");
  }
  if (min_sample_timesteps_per_iteration < 1) Bad("min_sample_timesteps_per_iteration must be >= 1");
  if (metrics_num_episodes_for_smoothing < 1) Bad("metrics_num_episodes_for_smoothing must be >= 1");
  for (const auto& [t, e] : epsilon) {
    if (!(e >= 0.0 && e <= 1.0)) Bad("epsilon " + std::to_string(e) + " at step " + std::to_string(t) + " lies outside [0, 1]");
  }
  PiecewiseSchedule check(epsilon);  // throws for a malformed schedule
  (void)check;
}

int64_t DqnConfig::ResolvedRolloutFragmentLength() const {
  return rollout_fragment_length > 0 ? rollout_fragment_length : n_step;
}

std::pair<int64_t, int64_t> DqnConfig::RoundRobinWeights() const {
  if (!training_intensity) return {1, 1};
  const double native_ratio = static_cast<double>(train_batch_size) /
                              (static_cast<double>(ResolvedRolloutFragmentLength()) * num_envs *
                               std::max(num_env_runners, 1));
  const double w = *training_intensity / native_ratio;
  if (w < 1) return {static_cast<int64_t>(std::nearbyint(1.0 / w)), 1};
  return {1, static_cast<int64_t>(std::nearbyint(w))};
}

std::map<std::string, double> DqnMetrics::ToMap() const {
  std::map<std::string, double> m{{"num_episodes_lifetime", static_cast<double>(num_episodes_lifetime)},
                                  {"num_env_steps_trained_lifetime", static_cast<double>(num_env_steps_trained_lifetime)},
                                  {"num_updates", static_cast<double>(num_updates)},
                                  {"num_target_updates_lifetime", static_cast<double>(num_target_updates_lifetime)},
                                  {"loss", loss},
                                  {"q_mean", q_mean},
                                  {"time_this_iter_s", time_this_iter_s}};
  VisitMetrics([&m](const char* name, double value) { m[name] = value; });
  return m;
}

DqnTrainer::DqnTrainer(DqnConfig config)
    : config_((config.Validate(), std::move(config))),
      sampler_(config_.env, config_.num_envs, config_.env_config, config_.seed, config_.gamma, config_.n_step),
      epsilon_(config_.epsilon),
      buffer_(config_.replay_capacity, sampler_.env().observation_space().size(), sampler_.env().action_space(),
              config_.seed + 1),
      rng_(config_.seed + 2) {
  // Module initialisation draws from torch's global generator: seed it for reproducible runs.
  torch::manual_seed(config_.seed);
  const VectorEnv& env = sampler_.env();
  QModule online(env.observation_space(), env.action_space(), config_.model);
  LearnerOptions lo;
  lo.lr = config_.lr;
  lo.adam_epsilon = config_.adam_epsilon;
  lo.grad_clip = config_.grad_clip;
  lo.target_network_update_freq = config_.target_network_update_freq;
  lo.tau = config_.tau;
  lo.loss.gamma = config_.gamma;
  lo.loss.double_q = config_.double_q;
  lo.loss.td_error_loss_fn = config_.td_error_loss_fn;
  learner_ = std::make_unique<Learner>(std::move(online), env.observation_space(), env.action_space(), lo);
  n_of_slot_.assign(config_.replay_capacity, 1.0f);
}

double DqnTrainer::epsilon() const { return epsilon_.Value(lifetime_steps_); }

int64_t DqnTrainer::AddRows(const DqnRows& rows) {
  const int64_t os = rows.obs_size;
  for (int64_t r = 0; r < rows.size(); ++r) {
    n_of_slot_[buffer_.num_added() % config_.replay_capacity] = rows.n[r];
    buffer_.Add(rows.obs.data() + r * os, Action::Discrete(rows.actions[r]), rows.returns[r],
                rows.next_obs.data() + r * os, rows.terminated[r] != 0);
  }
  for (size_t e = 0; e < rows.episode_returns.size(); ++e) {
    recent_episodes_.emplace_back(rows.episode_returns[e], rows.episode_lens[e]);
    while (static_cast<int64_t>(recent_episodes_.size()) > config_.metrics_num_episodes_for_smoothing) {
      recent_episodes_.pop_front();
    }
    ++lifetime_episodes_;
    ++iteration_episodes_;
  }
  lifetime_steps_ += rows.env_steps;
  return rows.env_steps;
}

DqnMetrics DqnTrainer::TrainIteration() {
  const auto start = std::chrono::steady_clock::now();
  const auto [store_weight, train_weight] = config_.RoundRobinWeights();
  const int64_t fragment = config_.ResolvedRolloutFragmentLength() * config_.num_envs;
  DqnMetrics m;
  iteration_episodes_ = 0;
  double loss_sum = 0, q_sum = 0, td_sum = 0;
  while (m.num_env_steps_sampled < config_.min_sample_timesteps_per_iteration) {
    for (int64_t s = 0; s < store_weight; ++s) {
      if (remote_) {
        const int64_t before = m.num_env_steps_sampled;
        for (const DqnRows& rows : remote_(GetWeights(), fragment, lifetime_steps_)) {
          m.num_env_steps_sampled += AddRows(rows);
        }
        if (m.num_env_steps_sampled == before) {
          throw Error("prism::rl: DQN: no env runner returned a sample in this training step");
        }
      } else {
        rows_.Clear();
        sampler_.Sample(*learner_->module(), epsilon_, lifetime_steps_, fragment, rng_, rows_);
        m.num_env_steps_sampled += AddRows(rows_);
      }
    }
    if (lifetime_steps_ < config_.num_steps_sampled_before_learning_starts || buffer_.size() == 0) continue;
    for (int64_t t = 0; t < train_weight; ++t) {
      buffer_.Sample(config_.train_batch_size, batch_);
      batch_n_.resize(batch_.size());
      for (int64_t r = 0; r < batch_.size(); ++r) batch_n_[r] = n_of_slot_[batch_.indices[r]];
      UpdateStats u = learner_->Update(batch_, lifetime_steps_, &batch_n_);
      loss_sum += u.loss;
      q_sum += u.q_mean;
      td_sum += u.td_error_mean;
      ++m.num_updates;
      m.num_env_steps_trained += batch_.size();
    }
  }
  lifetime_trained_ += m.num_env_steps_trained;
  m.training_iteration = ++iteration_;
  m.num_episodes = iteration_episodes_;
  m.num_episodes_lifetime = lifetime_episodes_;
  m.num_env_steps_sampled_lifetime = lifetime_steps_;
  m.num_env_steps_trained_lifetime = lifetime_trained_;
  m.num_target_updates_lifetime = learner_->num_target_updates();
  const double k = static_cast<double>(m.num_updates);
  m.loss = m.num_updates ? loss_sum / k : kNaN;
  m.q_mean = m.num_updates ? q_sum / k : kNaN;
  m.td_error_mean = m.num_updates ? td_sum / k : kNaN;
  m.epsilon = epsilon();
  m.replay_buffer_size = buffer_.size();
  if (recent_episodes_.empty()) {
    m.episode_return_mean = m.episode_return_min = m.episode_return_max = m.episode_len_mean = kNaN;
  } else {
    double sum = 0, len = 0, lo = recent_episodes_.front().first, hi = lo;
    for (const auto& [r, l] : recent_episodes_) {
      sum += r;
      len += static_cast<double>(l);
      lo = std::min(lo, r);
      hi = std::max(hi, r);
    }
    const double count = static_cast<double>(recent_episodes_.size());
    m.episode_return_mean = sum / count;
    m.episode_return_min = lo;
    m.episode_return_max = hi;
    m.episode_len_mean = len / count;
  }
  m.time_this_iter_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

Action DqnTrainer::ComputeSingleAction(const std::vector<float>& obs, bool explore) {
  return learner_->module()->ComputeSingleAction(obs, explore, epsilon(), rng_);
}

std::vector<uint8_t> DqnTrainer::GetWeights() const { return dqn::GetWeights(*learner_->module()); }

void DqnTrainer::SetWeights(const std::vector<uint8_t>& weights) {
  dqn::SetWeights(*learner_->module(), weights.data(), weights.size());
}

void DqnTrainer::Save(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("prism::rl: DQN Save: cannot create " + dir + ": " + ec.message());
  torch::nn::Module holder;
  holder.register_module("online", learner_->module().ptr());
  holder.register_module("target", learner_->target().ptr());
  std::ostringstream window;
  window.precision(17);
  for (const auto& [r, l] : recent_episodes_) window << r << ':' << l << ';';
  prism::train::SaveStateDict(dir + "/" + kCheckpointFile, holder, &learner_->optimizer(),
                              {{"algorithm", std::string("DQN")},
                               {"env", config_.env},
                               {"num_env_steps_sampled_lifetime", lifetime_steps_},
                               {"num_env_steps_trained_lifetime", lifetime_trained_},
                               {"num_episodes_lifetime", lifetime_episodes_},
                               {"training_iteration", iteration_},
                               {"last_target_update_ts", learner_->last_target_update_ts()},
                               {"num_target_updates", learner_->num_target_updates()},
                               {"num_updates", learner_->num_updates()},
                               {"episode_window", window.str()}});
}

void DqnTrainer::Load(const std::string& dir) {
  const std::string file = dir + "/" + kCheckpointFile;
  if (!std::filesystem::exists(file)) {
    throw Error("prism::rl: DQN Load: no " + file + " (write one with DqnTrainer::Save)");
  }
  const auto attrs = prism::train::ReadAttributes(file);
  auto algo = attrs.find("algorithm");
  if (algo == attrs.end() || !std::holds_alternative<std::string>(algo->second) ||
      std::get<std::string>(algo->second) != "DQN") {
    throw Error("prism::rl: DQN Load: " + file + " is not a DQN checkpoint");
  }
  const int64_t steps = IntAttribute(attrs, "num_env_steps_sampled_lifetime", file);
  const int64_t trained = IntAttribute(attrs, "num_env_steps_trained_lifetime", file);
  const int64_t episodes = IntAttribute(attrs, "num_episodes_lifetime", file);
  const int64_t iteration = IntAttribute(attrs, "training_iteration", file);
  const int64_t last_ts = IntAttribute(attrs, "last_target_update_ts", file);
  const int64_t targets = IntAttribute(attrs, "num_target_updates", file);
  const int64_t updates = IntAttribute(attrs, "num_updates", file);
  std::deque<std::pair<double, int64_t>> window;
  if (auto w = attrs.find("episode_window"); w != attrs.end() && std::holds_alternative<std::string>(w->second)) {
    std::istringstream in(std::get<std::string>(w->second));
    std::string item;
    while (std::getline(in, item, ';')) {
      const size_t colon = item.find(':');
      if (colon == std::string::npos) continue;
      window.emplace_back(std::stod(item.substr(0, colon)), std::stoll(item.substr(colon + 1)));
    }
  }
  torch::nn::Module holder;
  holder.register_module("online", learner_->module().ptr());
  holder.register_module("target", learner_->target().ptr());
  prism::train::LoadStateDict(file, holder, &learner_->optimizer());  // throws before any counter changes
  lifetime_steps_ = steps;
  lifetime_trained_ = trained;
  lifetime_episodes_ = episodes;
  iteration_ = iteration;
  learner_->RestoreCounters(last_ts, targets, updates);
  recent_episodes_ = std::move(window);
}

}  // namespace prism::rl::dqn
