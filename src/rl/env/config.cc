// Reading an EnvConfig for the built-in environments, and their generator's default seed.

#include <cmath>

#include "prism/errors.h"
#include "rl/env/internal.h"

namespace prism::rl::internal {

EnvRng::EnvRng() {
  std::random_device device;
  gen_.seed((static_cast<uint64_t>(device()) << 32) ^ device());
}

void CheckConfigKeys(const std::string& env_name, const EnvConfig& config,
                     const std::vector<std::string>& known) {
  for (const auto& [key, value] : config) {
    bool found = false;
    for (const auto& k : known) found = found || k == key;
    if (found) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw Error(env_name + ": unknown env_config key '" + key + "'; it takes: " +
                (list.empty() ? "no keys" : list));
  }
}

double ConfigNumber(const std::string& env_name, const EnvConfig& config, const std::string& key,
                    double fallback) {
  auto it = config.find(key);
  if (it == config.end()) return fallback;
  if (!std::isfinite(it->second))
    throw Error(env_name + ": env_config '" + key + "' is " + std::to_string(it->second) +
                "; it must be a finite number");
  return it->second;
}

int64_t ConfigMaxEpisodeSteps(const std::string& env_name, const EnvConfig& config,
                              int64_t fallback) {
  double v = ConfigNumber(env_name, config, "max_episode_steps", static_cast<double>(fallback));
  if (v < 1 || v != std::floor(v) || v > 1e15)
    throw Error(env_name + ": env_config 'max_episode_steps' is " + std::to_string(v) +
                "; it must be a whole number >= 1");
  return static_cast<int64_t>(v);
}

}  // namespace prism::rl::internal
