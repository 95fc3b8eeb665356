// GAE: one backward pass over the rows. A row whose episode or segment ends starts a new
// recursion (A_{t+1} = 0) with the next value taken from the row's own bootstrap (0 when
// terminated); any other row continues from row t+1, which is the same env's next step
// because a runner lays out each env copy's segment contiguously.

#include "rl/ppo/gae.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "prism/errors.h"

namespace prism::rl::ppo {

void SampleBatch::Append(const SampleBatch& other) {
  if (size() == 0 && episode_returns.empty()) {
    obs_size = other.obs_size;
    action_size = other.action_size;
    dist_size = other.dist_size;
  } else if (other.obs_size != obs_size || other.action_size != action_size ||
             other.dist_size != dist_size) {
    throw Error("prism::rl: cannot append a batch with other sizes (obs " +
                std::to_string(other.obs_size) + " vs " + std::to_string(obs_size) + ")");
  }
  auto cat = [](auto& a, const auto& b) { a.insert(a.end(), b.begin(), b.end()); };
  cat(obs, other.obs);
  cat(actions, other.actions);
  cat(logp, other.logp);
  cat(dist_inputs, other.dist_inputs);
  cat(values, other.values);
  cat(rewards, other.rewards);
  cat(terminated, other.terminated);
  cat(truncated, other.truncated);
  cat(segment_end, other.segment_end);
  cat(bootstrap_values, other.bootstrap_values);
  cat(episode_returns, other.episode_returns);
  cat(episode_lens, other.episode_lens);
}

GaeResult ComputeGae(const SampleBatch& b, double gamma, double lambda) {
  const size_t n = b.rewards.size();
  if (b.values.size() != n || b.terminated.size() != n || b.truncated.size() != n ||
      b.segment_end.size() != n || b.bootstrap_values.size() != n) {
    throw Error("prism::rl: GAE needs rewards, values, terminated, truncated, segment_end and "
                "bootstrap_values of one size (" + std::to_string(n) + " rewards)");
  }
  GaeResult out;
  out.advantages.resize(n);
  out.value_targets.resize(n);
  if (n == 0) return out;
  if (!b.terminated[n - 1] && !b.truncated[n - 1] && !b.segment_end[n - 1]) {
    throw Error("prism::rl: GAE: the batch's last row ends neither an episode nor a segment");
  }
  double next_advantage = 0;
  for (size_t i = n; i-- > 0;) {
    const bool cut = b.terminated[i] || b.truncated[i] || b.segment_end[i];
    double next_value;
    if (b.terminated[i]) {
      next_value = 0;
    } else if (cut) {
      next_value = b.bootstrap_values[i];
    } else {
      next_value = b.values[i + 1];
    }
    const double delta = b.rewards[i] + gamma * next_value - b.values[i];
    const double advantage = delta + (cut ? 0.0 : gamma * lambda * next_advantage);
    out.advantages[i] = static_cast<float>(advantage);
    out.value_targets[i] = static_cast<float>(advantage + b.values[i]);
    next_advantage = advantage;
  }
  return out;
}

void Standardize(std::vector<float>& x) {
  if (x.empty()) return;
  double mean = 0;
  for (float v : x) mean += v;
  mean /= static_cast<double>(x.size());
  double var = 0;
  for (float v : x) var += (v - mean) * (v - mean);
  const double std = std::sqrt(var / static_cast<double>(x.size()));
  const double scale = 1.0 / std::max(std, 1e-4);
  for (float& v : x) v = static_cast<float>((v - mean) * scale);
}

}  // namespace prism::rl::ppo
