// DqnSampler (sampler.h): epsilon-greedy stepping into n-step replay rows.

#include "rl/dqn/sampler.h"

#include <torch/torch.h>

namespace prism::rl::dqn {

void DqnRows::Clear() {
  obs.clear();
  next_obs.clear();
  actions.clear();
  returns.clear();
  terminated.clear();
  n.clear();
  episode_returns.clear();
  episode_lens.clear();
  env_steps = 0;
}

DqnSampler::DqnSampler(const std::string& env, int num_envs, const EnvConfig& env_config, uint64_t seed,
                       double gamma, int n_step)
    : env_(env, num_envs, env_config, seed), gamma_(gamma), n_step_(n_step) {
  obs_ = env_.Reset();
  reset_next_.assign(num_envs, 0);
  episode_return_.assign(num_envs, 0);
  episode_len_.assign(num_envs, 0);
  pending_.assign(num_envs, {});
}

void DqnSampler::EmitRow(Pending& p, const float* next_obs, bool terminated, DqnRows& out) const {
  double ret = 0, discount = 1;
  for (double r : p.rewards) {
    ret += discount * r;
    discount *= gamma_;
  }
  const auto& o = p.obs.front();
  out.obs.insert(out.obs.end(), o.begin(), o.end());
  out.next_obs.insert(out.next_obs.end(), next_obs, next_obs + o.size());
  out.actions.push_back(p.actions.front());
  out.returns.push_back(ret);
  out.terminated.push_back(terminated ? 1 : 0);
  out.n.push_back(static_cast<float>(p.rewards.size()));
  p.obs.pop_front();
  p.actions.pop_front();
  p.rewards.pop_front();
}

int64_t DqnSampler::Sample(QModuleImpl& m, const PiecewiseSchedule& epsilon, int64_t lifetime_steps,
                           int64_t min_transitions, std::mt19937_64& rng, DqnRows& out) {
  torch::NoGradGuard no_grad;
  const int n = env_.num_envs();
  const int64_t os = m.obs_size();
  out.obs_size = os;
  int64_t collected = 0;
  while (collected < min_transitions) {
    actions_ = m.EpsilonGreedyActions(obs_.data(), n, epsilon.Value(lifetime_steps + collected), rng);
    before_ = obs_;
    env_.StepAll(actions_, step_);
    const std::vector<float>& next = *step_.observations;
    for (int i = 0; i < n; ++i) {
      if (reset_next_[i]) {  // the autoreset step: no transition
        reset_next_[i] = 0;
        continue;
      }
      const bool terminated = step_.terminated[i] != 0;
      const bool ended = terminated || step_.truncated[i];
      Pending& p = pending_[i];
      p.obs.emplace_back(before_.begin() + i * os, before_.begin() + (i + 1) * os);
      p.actions.push_back(actions_[i]);
      p.rewards.push_back(step_.rewards[i]);
      // n steps pending: the oldest one's row is complete. An episode's end: every pending
      // step's row ends here (with k <= n steps).
      if (static_cast<int>(p.rewards.size()) == n_step_ && !ended) EmitRow(p, next.data() + i * os, false, out);
      while (ended && !p.rewards.empty()) EmitRow(p, next.data() + i * os, terminated, out);
      ++collected;
      episode_return_[i] += step_.rewards[i];
      ++episode_len_[i];
      if (ended) {
        out.episode_returns.push_back(episode_return_[i]);
        out.episode_lens.push_back(episode_len_[i]);
        episode_return_[i] = 0;
        episode_len_[i] = 0;
        reset_next_[i] = 1;
      }
    }
    obs_ = next;
  }
  out.env_steps += collected;
  return collected;
}

}  // namespace prism::rl::dqn
