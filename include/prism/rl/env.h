#pragma once
// Prism RL's environments: the Env interface users implement in C++, a registry by name,
// spaces, and vectorised stepping. CONTRACT written before the implementations (the
// environments and the algorithms are built on separate branches against this header).
//
//   class MyEnv : public prism::rl::Env { ... };
//   PRISM_RL_REGISTER_ENV("MyEnv-v0", [](const prism::rl::EnvConfig& c) { return std::make_unique<MyEnv>(c); });
//   auto env = prism::rl::MakeEnv("CartPole-v1", {});
//   auto [obs, info] = env->Reset(seed);
//   prism::rl::StepResult s = env->Step(prism::rl::Action::Discrete(1));

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace prism::rl {

struct Action;

/// A space (Gymnasium's): Discrete(n) (actions 0..n-1) or Box(low, high, shape) of float32.
struct Space {
  enum class Kind { kDiscrete, kBox };
  Kind kind = Kind::kDiscrete;
  int64_t n = 0;                // Discrete
  std::vector<int64_t> shape;   // Box
  std::vector<float> low, high; // Box, one per element (may be +-inf)

  static Space Discrete(int64_t n);
  static Space Box(std::vector<float> low, std::vector<float> high, std::vector<int64_t> shape);
  /// Elements of one observation or action (1 for Discrete).
  int64_t size() const;
  /// "Discrete(2)", "Box(-2.0, 2.0, (1,), float32)".
  std::string ToString() const;
  /// Whether `action` lies in the space (Gymnasium's Space.contains): an index in [0, n) for
  /// Discrete; size() finite values within [low, high] for a Box.
  bool Contains(const Action& action) const;
  /// Throws prism::Error naming `env_name`, the action and the space if `action` cannot be
  /// taken: a Discrete index outside [0, n), Box values of the wrong count or with a NaN or
  /// infinity, or the wrong kind of action. Finite Box values outside [low, high] pass: the
  /// environment clips them, as Gymnasium's Pendulum does. Thread-safe (const).
  void CheckAction(const Action& action, const std::string& env_name) const;
};

/// An action: an index for a Discrete space, float values for a Box.
struct Action {
  int64_t index = 0;
  std::vector<float> values;
  static Action Discrete(int64_t i) { return {i, {}}; }
  static Action Box(std::vector<float> v) { return {0, std::move(v)}; }
};

/// "1" for a Discrete action, "[0.5, -2.0]" for Box values (for error messages and logs).
std::string ToString(const Action& action);

/// Free-form numeric settings of an environment (RLlib's env_config).
using EnvConfig = std::map<std::string, double>;

struct StepResult {
  std::vector<float> observation;
  double reward = 0;
  bool terminated = false;  // the MDP ended (the pole fell)
  bool truncated = false;   // cut short (the step limit)
};

/// An environment. Not thread-safe: one thread steps it.
class Env {
 public:
  virtual ~Env() = default;
  virtual const Space& observation_space() const = 0;
  virtual const Space& action_space() const = 0;
  /// Starts an episode; a seed reseeds the environment's generator (Gymnasium's reset(seed)).
  virtual std::vector<float> Reset(std::optional<uint64_t> seed = std::nullopt) = 0;
  /// One step. Throws prism::Error for an action outside action_space() (naming it and the
  /// space) or a Step after the episode ended without a Reset.
  virtual StepResult Step(const Action& action) = 0;
};

using EnvFactory = std::function<std::unique_ptr<Env>(const EnvConfig&)>;

/// Registers `factory` under `name` (every rank registers the same names: one binary).
/// Throws prism::Error if the name is taken. Thread-safe.
void RegisterEnv(const std::string& name, EnvFactory factory);
/// A new environment by name. Throws prism::Error naming the registered environments for an
/// unknown name. Built in: "CartPole-v1", "Pendulum-v1".
std::unique_ptr<Env> MakeEnv(const std::string& name, const EnvConfig& config = {});
/// The registered names, sorted.
std::vector<std::string> RegisteredEnvs();

/// N copies of one environment stepped together, auto-resetting an ended episode on its
/// next step (Gymnasium's SyncVectorEnv, next-step autoreset). Observations are row-major
/// [num_envs, obs_size].
class VectorEnv {
 public:
  /// Makes `num_envs` copies of the registered environment `name` (CartPole-v1 steps all its
  /// copies in one struct-of-arrays loop). Throws prism::Error for an unknown name, a bad
  /// config or num_envs < 1. Not thread-safe: one thread steps it.
  VectorEnv(const std::string& name, int num_envs, const EnvConfig& config = {}, uint64_t seed = 0);
  int num_envs() const;
  const Space& observation_space() const;
  const Space& action_space() const;
  /// Resets every copy (copy i seeded with seed + i); returns [num_envs * obs_size]. A
  /// second Reset reseeds the same way, so it starts the same episodes again.
  const std::vector<float>& Reset();
  struct Step {
    const std::vector<float>* observations = nullptr;  // [num_envs * obs_size], after the step
    std::vector<double> rewards;
    std::vector<uint8_t> terminated, truncated;
  };
  /// Steps every copy with its action; a copy whose episode ended on the previous step is
  /// reset instead (reward 0, not terminated), as Gymnasium's next-step autoreset.
  Step StepAll(const std::vector<Action>& actions);
  /// StepAll for a Discrete action space from plain indices, writing into `out` (its vectors
  /// are reused from call to call, so a sampler's loop does not allocate). Same autoreset and
  /// errors as StepAll.
  void StepAll(const std::vector<int64_t>& actions, Step& out);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace prism::rl

/// Registers an environment factory at static initialisation: PRISM_RL_REGISTER_ENV("Name-v0", factory).
#define PRISM_RL_REGISTER_ENV(name, ...)                                                     \
  static const bool PRISM_RL_ENV_CONCAT(prism_rl_env_registered_, __LINE__) =               \
      (::prism::rl::RegisterEnv(name, __VA_ARGS__), true)
#define PRISM_RL_ENV_CONCAT2(a, b) a##b
#define PRISM_RL_ENV_CONCAT(a, b) PRISM_RL_ENV_CONCAT2(a, b)
