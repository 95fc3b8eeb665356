// Pendulum-v1, as Gymnasium 1.x defines it:
//   gymnasium/envs/classic_control/pendulum.py, PendulumEnv
//   (https://github.com/Farama-Foundation/Gymnasium): max_speed 8, max_torque 2, dt 0.05,
//   g 10.0 (env_config "g", Gymnasium's g argument), m 1, l 1. A step clips the torque u to
//   [-2, 2], costs angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2 of the state before the
//   step (reward = -costs), then
//     newthdot = clip(thdot + (3 g / (2 l) sin(th) + 3 / (m l^2) u) dt, -8, 8)
//     newth = th + newthdot dt
//   and never terminates. Observation (cos th, sin th, thdot) in Box([-1, -1, -8], [1, 1, 8]);
//   action Box(-2, 2, (1,)). Reset: th uniform(-pi, pi), thdot uniform(-1, 1).
//   gymnasium/envs/__init__.py registers Pendulum-v1 with max_episode_steps=200 (TimeLimit:
//   truncated once 200 steps have been taken; env_config "max_episode_steps" changes it).
// Finite actions outside [-2, 2] are clipped, not refused, as Gymnasium does. The state is
// float64 and u the float32 action, as in Gymnasium (whose 0.001 u^2 may be computed in
// float32 under NumPy 2: a difference below 1e-7 in the reward). Our own random stream.

#include "rl/env/pendulum.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "prism/errors.h"

namespace prism::rl::internal {
namespace {

constexpr const char* kPendulum = "Pendulum-v1";
constexpr double kMaxSpeed = 8;
constexpr double kMaxTorque = 2.0;
constexpr double kDt = 0.05;
constexpr double kDefaultG = 10.0;
constexpr double kM = 1.0;
constexpr double kL = 1.0;
constexpr double kResetTh = std::numbers::pi;  // DEFAULT_X
constexpr double kResetThdot = 1.0;            // DEFAULT_Y
constexpr int64_t kPendulumMaxSteps = 200;

double ReadG(const EnvConfig& config) {
  CheckConfigKeys(kPendulum, config, {"g", "max_episode_steps"});
  return ConfigNumber(kPendulum, config, "g", kDefaultG);
}

}  // namespace

double AngleNormalize(double x) {
  constexpr double kTwoPi = 2 * std::numbers::pi;
  double r = std::fmod(x + std::numbers::pi, kTwoPi);
  if (r < 0) r += kTwoPi;  // Python's % takes the divisor's sign
  if (r >= kTwoPi) r = 0;  // -tiny + 2 pi rounding up to 2 pi
  return r - std::numbers::pi;
}

PendulumEnv::PendulumEnv(const EnvConfig& config)
    : observation_space_(Space::Box({-1.0f, -1.0f, static_cast<float>(-kMaxSpeed)},
                                    {1.0f, 1.0f, static_cast<float>(kMaxSpeed)}, {3})),
      action_space_(Space::Box({static_cast<float>(-kMaxTorque)}, {static_cast<float>(kMaxTorque)}, {1})),
      g_(ReadG(config)),
      max_episode_steps_(ConfigMaxEpisodeSteps(kPendulum, config, kPendulumMaxSteps)) {}

std::vector<float> PendulumEnv::Reset(std::optional<uint64_t> seed) {
  if (seed) rng_.Seed(*seed);
  th_ = rng_.Uniform(-kResetTh, kResetTh);
  thdot_ = rng_.Uniform(-kResetThdot, kResetThdot);
  elapsed_steps_ = 0;
  running_ = ever_reset_ = true;
  return Observe();
}

StepResult PendulumEnv::Step(const Action& action) {
  if (!running_)
    throw Error(std::string(kPendulum) + ": Step " +
                (ever_reset_ ? "after the episode was truncated (step " +
                                   std::to_string(elapsed_steps_) + ")"
                             : std::string("before the first Reset")) +
                "; call Reset() to start an episode");
  action_space_.CheckAction(action, kPendulum);
  const double u = std::clamp(static_cast<double>(action.values[0]), -kMaxTorque, kMaxTorque);
  const double an = AngleNormalize(th_);
  const double costs = an * an + 0.1 * (thdot_ * thdot_) + 0.001 * (u * u);
  double newthdot = thdot_ + (3 * g_ / (2 * kL) * std::sin(th_) + 3.0 / (kM * (kL * kL)) * u) * kDt;
  newthdot = std::clamp(newthdot, -kMaxSpeed, kMaxSpeed);
  th_ = th_ + newthdot * kDt;
  thdot_ = newthdot;
  ++elapsed_steps_;
  StepResult r;
  r.observation = Observe();
  r.reward = -costs;
  r.terminated = false;
  r.truncated = elapsed_steps_ >= max_episode_steps_;
  if (r.truncated) running_ = false;
  return r;
}

void PendulumEnv::SetState(double th, double thdot, int64_t elapsed_steps) {
  th_ = th;
  thdot_ = thdot;
  elapsed_steps_ = elapsed_steps;
  running_ = ever_reset_ = true;
}

std::vector<float> PendulumEnv::Observe() const {
  return {static_cast<float>(std::cos(th_)), static_cast<float>(std::sin(th_)),
          static_cast<float>(thdot_)};
}

std::unique_ptr<Env> MakePendulum(const EnvConfig& config) {
  return std::make_unique<PendulumEnv>(config);
}

}  // namespace prism::rl::internal
