// CartPole-v1, as Gymnasium 1.x defines it:
//   gymnasium/envs/classic_control/cartpole.py, CartPoleEnv (Barto, Sutton and Anderson's
//   cart-pole; https://github.com/Farama-Foundation/Gymnasium): gravity 9.8, cart mass 1.0,
//   pole mass 0.1, length 0.5 (half the pole), force 10, tau 0.02 s, explicit Euler;
//   terminated when |x| > 2.4 or |theta| > 12 degrees (12 * 2 * pi / 360 rad); reward 1 on
//   every step, the terminating one included; reset to uniform(-0.05, 0.05) in all four;
//   observation Box(-high, high) with high = (4.8, float32 max, 0.4189, float32 max);
//   actions Discrete(2): 0 pushes left, 1 right.
//   gymnasium/envs/__init__.py registers CartPole-v1 with max_episode_steps=500, so gym.make
//   wraps it in TimeLimit: truncated once 500 steps have been taken (env_config
//   "max_episode_steps" changes it).
// The state is float64 and the observation float32, as in Gymnasium; the arithmetic below
// keeps Python's order of operations, so a step matches Gymnasium's to the last bit given the
// same state. The random stream is ours (EnvRng), not NumPy's.
//
// CartPoleBatch steps N copies as a struct of arrays in one loop, for VectorEnv: the same
// PhysicsStep, so its episodes equal N CartPoleEnvs' with the same seeds and actions.

#include "rl/env/cartpole.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "prism/errors.h"

namespace prism::rl::internal {
namespace {

constexpr const char* kCartPole = "CartPole-v1";
constexpr double kGravity = 9.8;
constexpr double kMassCart = 1.0;
constexpr double kMassPole = 0.1;
constexpr double kTotalMass = kMassPole + kMassCart;
constexpr double kLength = 0.5;  // half the pole's length
constexpr double kPoleMassLength = kMassPole * kLength;
constexpr double kForceMag = 10.0;
constexpr double kTau = 0.02;  // seconds between state updates
constexpr double kThetaThreshold = 12 * 2 * std::numbers::pi / 360;
constexpr double kXThreshold = 2.4;
constexpr double kResetBound = 0.05;
constexpr int64_t kCartPoleMaxSteps = 500;

Space ObservationSpace() {
  const float fmax = std::numeric_limits<float>::max();
  const float x = static_cast<float>(kXThreshold * 2), th = static_cast<float>(kThetaThreshold * 2);
  return Space::Box({-x, -fmax, -th, -fmax}, {x, fmax, th, fmax}, {4});
}

// One step of cartpole.py's dynamics (see https://coneural.org/florian/papers/05_cart_pole.pdf),
// with Python's evaluation order.
inline void PhysicsStep(double& x, double& x_dot, double& theta, double& theta_dot, bool push_right) {
  const double force = push_right ? kForceMag : -kForceMag;
  const double costheta = std::cos(theta);
  const double sintheta = std::sin(theta);
  const double temp = (force + kPoleMassLength * (theta_dot * theta_dot) * sintheta) / kTotalMass;
  const double thetaacc = (kGravity * sintheta - costheta * temp) /
                          (kLength * (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
  const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
  x = x + kTau * x_dot;  // "euler", the default kinematics_integrator
  x_dot = x_dot + kTau * xacc;
  theta = theta + kTau * theta_dot;
  theta_dot = theta_dot + kTau * thetaacc;
}

inline bool Terminated(double x, double theta) {
  return x < -kXThreshold || x > kXThreshold || theta < -kThetaThreshold || theta > kThetaThreshold;
}

// Every built-in takes max_episode_steps; CartPole nothing else.
int64_t ReadConfig(const EnvConfig& config) {
  CheckConfigKeys(kCartPole, config, {"max_episode_steps"});
  return ConfigMaxEpisodeSteps(kCartPole, config, kCartPoleMaxSteps);
}

}  // namespace

CartPoleEnv::CartPoleEnv(const EnvConfig& config)
    : observation_space_(ObservationSpace()),
      action_space_(Space::Discrete(2)),
      max_episode_steps_(ReadConfig(config)) {}

std::vector<float> CartPoleEnv::Reset(std::optional<uint64_t> seed) {
  if (seed) rng_.Seed(*seed);
  for (double& v : state_) v = rng_.Uniform(-kResetBound, kResetBound);
  elapsed_steps_ = 0;
  phase_ = Phase::kRunning;
  return {static_cast<float>(state_[0]), static_cast<float>(state_[1]),
          static_cast<float>(state_[2]), static_cast<float>(state_[3])};
}

StepResult CartPoleEnv::Step(const Action& action) {
  if (phase_ != Phase::kRunning)
    throw Error(std::string(kCartPole) + ": Step " +
                (phase_ == Phase::kNotReset ? "before the first Reset"
                 : phase_ == Phase::kTerminated ? "after the episode terminated"
                                                : "after the episode was truncated") +
                " (step " + std::to_string(elapsed_steps_) + "); call Reset() to start an episode");
  action_space_.CheckAction(action, kCartPole);
  auto& [x, x_dot, theta, theta_dot] = state_;
  PhysicsStep(x, x_dot, theta, theta_dot, action.index == 1);
  ++elapsed_steps_;
  StepResult r;
  r.observation = {static_cast<float>(x), static_cast<float>(x_dot), static_cast<float>(theta),
                   static_cast<float>(theta_dot)};
  r.reward = 1.0;  // on the terminating step too
  r.terminated = Terminated(x, theta);
  r.truncated = elapsed_steps_ >= max_episode_steps_;
  if (r.terminated) phase_ = Phase::kTerminated;
  else if (r.truncated) phase_ = Phase::kTruncated;
  return r;
}

void CartPoleEnv::SetState(const std::array<double, 4>& state, int64_t elapsed_steps) {
  state_ = state;
  elapsed_steps_ = elapsed_steps;
  phase_ = Phase::kRunning;
}

std::unique_ptr<Env> MakeCartPole(const EnvConfig& config) {
  return std::make_unique<CartPoleEnv>(config);
}

namespace {

class CartPoleBatch : public EnvBatch {
 public:
  CartPoleBatch(int num_envs, const EnvConfig& config)
      : n_(num_envs),
        max_episode_steps_(ReadConfig(config)),
        observation_space_(ObservationSpace()),
        action_space_(Space::Discrete(2)),
        x_(n_), x_dot_(n_), theta_(n_), theta_dot_(n_),
        elapsed_(n_), done_(n_),
        rngs_(n_) {}

  int num_envs() const override { return n_; }
  const Space& observation_space() const override { return observation_space_; }
  const Space& action_space() const override { return action_space_; }

  void Reset(uint64_t seed, float* obs) override {
    for (int i = 0; i < n_; ++i) {
      rngs_[i].Seed(seed + static_cast<uint64_t>(i));
      ResetOne(i, obs + 4 * i);
    }
  }

  void Step(const Action* actions, float* obs, double* rewards, uint8_t* terminated,
            uint8_t* truncated) override {
    for (int i = 0; i < n_; ++i) action_space_.CheckAction(actions[i], kCartPole);
    Run([&](int i) { return actions[i].index == 1; }, obs, rewards, terminated, truncated);
  }

  void StepDiscrete(const int64_t* actions, float* obs, double* rewards, uint8_t* terminated,
                    uint8_t* truncated) override {
    for (int i = 0; i < n_; ++i)
      if (actions[i] < 0 || actions[i] > 1) action_space_.CheckAction(Action::Discrete(actions[i]), kCartPole);
    Run([&](int i) { return actions[i] == 1; }, obs, rewards, terminated, truncated);
  }

 private:
  void ResetOne(int i, float* obs) {
    EnvRng& rng = rngs_[i];
    // The same draws in the same order as CartPoleEnv::Reset.
    x_[i] = rng.Uniform(-kResetBound, kResetBound);
    x_dot_[i] = rng.Uniform(-kResetBound, kResetBound);
    theta_[i] = rng.Uniform(-kResetBound, kResetBound);
    theta_dot_[i] = rng.Uniform(-kResetBound, kResetBound);
    elapsed_[i] = 0;
    done_[i] = 0;
    Observe(i, obs);
  }

  void Observe(int i, float* obs) const {
    obs[0] = static_cast<float>(x_[i]);
    obs[1] = static_cast<float>(x_dot_[i]);
    obs[2] = static_cast<float>(theta_[i]);
    obs[3] = static_cast<float>(theta_dot_[i]);
  }

  template <typename PushRight>
  void Run(PushRight push_right, float* obs, double* rewards, uint8_t* terminated,
           uint8_t* truncated) {
    for (int i = 0; i < n_; ++i) {
      if (done_[i]) {  // next-step autoreset: this step only resets
        ResetOne(i, obs + 4 * i);
        rewards[i] = 0;
        terminated[i] = truncated[i] = 0;
        continue;
      }
      PhysicsStep(x_[i], x_dot_[i], theta_[i], theta_dot_[i], push_right(i));
      const bool term = Terminated(x_[i], theta_[i]);
      const bool trunc = ++elapsed_[i] >= max_episode_steps_;
      Observe(i, obs + 4 * i);
      rewards[i] = 1.0;
      terminated[i] = term;
      truncated[i] = trunc;
      done_[i] = term || trunc;
    }
  }

  int n_;
  int64_t max_episode_steps_;
  Space observation_space_, action_space_;
  std::vector<double> x_, x_dot_, theta_, theta_dot_;
  std::vector<int64_t> elapsed_;
  std::vector<uint8_t> done_;
  std::vector<EnvRng> rngs_;
};

}  // namespace

std::unique_ptr<EnvBatch> MakeCartPoleBatch(int num_envs, const EnvConfig& config) {
  return std::make_unique<CartPoleBatch>(num_envs, config);
}

}  // namespace prism::rl::internal
