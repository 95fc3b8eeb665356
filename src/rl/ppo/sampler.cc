// The env runner's sampling loop (sampler.h). Per vector step: one forward pass over every
// copy's observation gives dist inputs and values; actions are drawn from the
// distribution; each copy's row goes to its own buffer so that each copy's transitions
// form one segment, and the buffers are concatenated at the end.

#include "rl/ppo/sampler.h"

#include <string>

#include "prism/errors.h"

namespace prism::rl::ppo {

Sampler::Sampler(const std::string& env, const EnvConfig& env_config, int num_envs, uint64_t seed,
                 const std::vector<int64_t>& hidden)
    : env_(env, num_envs, env_config, seed), rng_(seed) {
  module_ = RLModule(env_.observation_space(), env_.action_space(), hidden);
  obs_ = env_.Reset();
  reset_next_.assign(num_envs, 0);
  episode_return_.assign(num_envs, 0);
  episode_len_.assign(num_envs, 0);
}

SampleBatch Sampler::Sample(int64_t min_steps) {
  torch::NoGradGuard no_grad;
  RLModuleImpl& m = *module_;
  const int n = env_.num_envs();
  const int64_t os = m.obs_size(), as = m.action_size(), ds = m.dist_size();
  std::vector<SampleBatch> per_env(n);
  for (auto& b : per_env) {
    b.obs_size = os;
    b.action_size = as;
    b.dist_size = ds;
  }
  SampleBatch out;
  out.obs_size = os;
  out.action_size = as;
  out.dist_size = ds;

  VectorEnv::Step step;
  std::vector<int64_t> indices(n);
  std::vector<Action> box_actions(n);
  int64_t collected = 0;
  while (collected < min_steps) {
    torch::Tensor x = torch::from_blob(obs_.data(), {n, os}, torch::kFloat);
    torch::Tensor dist = m.DistInputs(x).contiguous();
    torch::Tensor values = m.Values(x).contiguous();
    std::vector<float> actions = SampleActions(dist, m.discrete(), /*explore=*/true, rng_);
    torch::Tensor logp = LogProb(dist, torch::from_blob(actions.data(), m.discrete() ? std::vector<int64_t>{n}
                                                                                      : std::vector<int64_t>{n, as},
                                                         torch::kFloat),
                                 m.discrete()).contiguous();
    const float* d = dist.data_ptr<float>();
    const float* v = values.data_ptr<float>();
    const float* lp = logp.data_ptr<float>();
    // The observations before the step: obs_ is overwritten by it.
    std::vector<float> before = obs_;
    if (m.discrete()) {
      for (int i = 0; i < n; ++i) indices[i] = static_cast<int64_t>(actions[i]);
      env_.StepAll(indices, step);
    } else {
      for (int i = 0; i < n; ++i) {
        box_actions[i] = Action::Box(std::vector<float>(actions.begin() + i * as, actions.begin() + (i + 1) * as));
      }
      step = env_.StepAll(box_actions);
    }
    obs_ = *step.observations;
    for (int i = 0; i < n; ++i) {
      SampleBatch& b = per_env[i];
      if (reset_next_[i]) {
        // The reset step: v[i] is V(final observation) of the episode that ended.
        reset_next_[i] = 0;
        if (b.size() > 0 && b.truncated.back() && !b.terminated.back()) b.bootstrap_values.back() = v[i];
        continue;
      }
      b.obs.insert(b.obs.end(), before.begin() + i * os, before.begin() + (i + 1) * os);
      b.actions.insert(b.actions.end(), actions.begin() + i * as, actions.begin() + (i + 1) * as);
      b.logp.push_back(lp[i]);
      b.dist_inputs.insert(b.dist_inputs.end(), d + i * ds, d + (i + 1) * ds);
      b.values.push_back(v[i]);
      b.rewards.push_back(static_cast<float>(step.rewards[i]));
      b.terminated.push_back(step.terminated[i]);
      b.truncated.push_back(step.truncated[i]);
      b.segment_end.push_back(0);
      b.bootstrap_values.push_back(0);
      ++collected;
      episode_return_[i] += step.rewards[i];
      ++episode_len_[i];
      if (step.terminated[i] || step.truncated[i]) {
        out.episode_returns.push_back(episode_return_[i]);
        out.episode_lens.push_back(episode_len_[i]);
        episode_return_[i] = 0;
        episode_len_[i] = 0;
        reset_next_[i] = 1;
      }
    }
  }
  // Bootstrap each copy's last row: V(s_{t+1}) for a segment stopped mid-episode, and for a
  // truncation whose reset step has not come yet (obs_ is then the final observation).
  torch::Tensor last_values =
      m.Values(torch::from_blob(obs_.data(), {n, os}, torch::kFloat)).contiguous();
  const float* lv = last_values.data_ptr<float>();
  for (int i = 0; i < n; ++i) {
    SampleBatch& b = per_env[i];
    if (b.size() == 0) continue;
    if (!b.terminated.back() && !b.truncated.back()) {
      b.segment_end.back() = 1;
      b.bootstrap_values.back() = lv[i];
    } else if (b.truncated.back() && !b.terminated.back() && reset_next_[i]) {
      b.bootstrap_values.back() = lv[i];
    }
    out.Append(b);
  }
  return out;
}

}  // namespace prism::rl::ppo
