#pragma once
// What the built-in environments share inside prism_rl_env: their seeded generator, reading
// an EnvConfig, and the batched stepping interface VectorEnv runs on.

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "prism/rl/env.h"

namespace prism::rl::internal {

/// An environment's seeded generator. std::mt19937_64, not NumPy's PCG64: the same seed
/// gives the same episodes in Prism on every platform, but not Gymnasium's numbers.
class EnvRng {
 public:
  /// Seeded from std::random_device until Seed is called (Gymnasium seeds from the OS too).
  EnvRng();
  void Seed(uint64_t seed) { gen_.seed(seed); }
  /// Uniform in [low, high) from the top 53 bits of one draw (written out, not
  /// std::uniform_real_distribution, whose results differ between standard libraries).
  double Uniform(double low, double high) {
    return low + (high - low) * (static_cast<double>(gen_() >> 11) * 0x1.0p-53);
  }

 private:
  std::mt19937_64 gen_;
};

/// Throws prism::Error if `config` has a key not in `known`, naming the key and the known ones.
void CheckConfigKeys(const std::string& env_name, const EnvConfig& config,
                     const std::vector<std::string>& known);
/// config[key] if present (finite, else prism::Error), else `fallback`.
double ConfigNumber(const std::string& env_name, const EnvConfig& config, const std::string& key,
                    double fallback);
/// config["max_episode_steps"] (a whole number >= 1, else prism::Error), else `fallback`:
/// the TimeLimit wrapper's limit that gym.make adds from the registration.
int64_t ConfigMaxEpisodeSteps(const std::string& env_name, const EnvConfig& config,
                              int64_t fallback);

/// N copies of one environment stepped together with Gymnasium's next-step autoreset, into
/// caller-owned arrays. VectorEnv runs on one; CartPole has a struct-of-arrays one.
class EnvBatch {
 public:
  virtual ~EnvBatch() = default;
  virtual int num_envs() const = 0;
  virtual const Space& observation_space() const = 0;
  virtual const Space& action_space() const = 0;
  /// Resets copy i with seed + i; writes [num_envs * obs_size] observations.
  virtual void Reset(uint64_t seed, float* observations) = 0;
  /// Steps copy i with actions[i], or resets it (reward 0, flags false) if its episode ended
  /// on the previous step. Checks every action before stepping any copy, so a bad action
  /// throws with no copy stepped.
  virtual void Step(const Action* actions, float* observations, double* rewards,
                    uint8_t* terminated, uint8_t* truncated) = 0;
  /// Step with Discrete indices.
  virtual void StepDiscrete(const int64_t* actions, float* observations, double* rewards,
                            uint8_t* terminated, uint8_t* truncated) = 0;
};

/// Makes a batch of `num_envs` copies; nullptr for an environment with no batched form.
using EnvBatchFactory = std::unique_ptr<EnvBatch> (*)(int num_envs, const EnvConfig& config);

/// The batched form registered with a built-in environment (nullptr if none or not built in).
EnvBatchFactory FindBatchFactory(const std::string& name);

/// A batch of `num_envs` environments made by MakeEnv(name, config), stepped one by one.
std::unique_ptr<EnvBatch> MakeGenericBatch(const std::string& name, int num_envs,
                                           const EnvConfig& config);

// The built-in environments (cartpole.cc, pendulum.cc).
std::unique_ptr<Env> MakeCartPole(const EnvConfig& config);
std::unique_ptr<EnvBatch> MakeCartPoleBatch(int num_envs, const EnvConfig& config);
std::unique_ptr<Env> MakePendulum(const EnvConfig& config);

}  // namespace prism::rl::internal
