// The environments against hand-computed steps (Gymnasium's cartpole.py and pendulum.py),
// their ends, seeding, VectorEnv's autoreset and fast path, and the registry's errors.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <thread>

#include "prism/errors.h"
#include "rl_test_util.h"
#include "prism/rl/env.h"
#include "rl/env/cartpole.h"
#include "rl/env/pendulum.h"

namespace prism::rl {
namespace {

using internal::CartPoleEnv;
using internal::PendulumEnv;

// What the error thrown by `f` says ("" if none was thrown).
using prism_test::ErrorOf;

// ---- CartPole-v1 ----

TEST(CartPole, OneEulerStepFromRestPushingRight) {
  CartPoleEnv env({});
  env.SetState({0, 0, 0, 0});
  StepResult r = env.Step(Action::Discrete(1));  // force +10
  // cos 0 = 1, sin 0 = 0:
  //   temp     = (10 + 0) / 1.1                                  = 100/11
  //   thetaacc = (9.8 * 0 - 1 * 100/11) / (0.5 * (4/3 - 0.1/1.1)) = -(100/11) / (41/66) = -600/41
  //   xacc     = 100/11 - 0.05 * (-600/41) * 1 / 1.1            = 400/41
  // Euler: x += 0.02 * 0, x_dot += 0.02 * 400/41 = 8/41, theta += 0, theta_dot += -12/41.
  const auto& s = env.state();
  EXPECT_DOUBLE_EQ(s[0], 0.0);
  EXPECT_DOUBLE_EQ(s[1], 8.0 / 41);   // 0.19512195
  EXPECT_DOUBLE_EQ(s[2], 0.0);
  EXPECT_DOUBLE_EQ(s[3], -12.0 / 41); // -0.29268293
  ASSERT_EQ(r.observation.size(), 4u);
  EXPECT_EQ(r.observation[1], static_cast<float>(8.0 / 41));
  EXPECT_EQ(r.observation[3], static_cast<float>(-12.0 / 41));
  EXPECT_EQ(r.reward, 1.0);
  EXPECT_FALSE(r.terminated);
  EXPECT_FALSE(r.truncated);
}

TEST(CartPole, OneEulerStepFromATiltedStatePushingLeft) {
  CartPoleEnv env({});
  env.SetState({0.1, 0.2, 0.05, -0.3});
  env.Step(Action::Discrete(0));  // force -10
  // cos 0.05 = 0.99875026, sin 0.05 = 0.04997917:
  //   temp     = (-10 + 0.05 * 0.09 * 0.04997917) / 1.1                  = -9.09070463
  //   thetaacc = (9.8 * 0.04997917 + 0.99875026 * 9.09070463)
  //              / (0.5 * (4/3 - 0.1 * 0.99750177 / 1.1))                = 15.40116568
  //   xacc     = -9.09070463 - 0.05 * 15.40116568 * 0.99875026 / 1.1     = -9.78988273
  // Euler: x = 0.1 + 0.02 * 0.2, x_dot = 0.2 + 0.02 * xacc, theta = 0.05 + 0.02 * -0.3,
  //        theta_dot = -0.3 + 0.02 * thetaacc.
  const auto& s = env.state();
  EXPECT_NEAR(s[0], 0.104, 1e-15);
  EXPECT_NEAR(s[1], 0.2 + 0.02 * -9.78988273219813, 1e-12);   // 0.00420235
  EXPECT_NEAR(s[2], 0.044, 1e-15);
  EXPECT_NEAR(s[3], -0.3 + 0.02 * 15.401165680307574, 1e-12); // 0.00802331
}

TEST(CartPole, TerminatesPastTwelveDegreesWithRewardOne) {
  const double limit = 12 * 2 * std::numbers::pi / 360;  // 0.20943951 rad
  for (double sign : {1.0, -1.0}) {
    CartPoleEnv env({});
    env.SetState({0, 0, sign * 0.2, sign * 0.4});  // theta -> 0.2 + 0.02 * 0.4 = 0.208: inside
    StepResult r = env.Step(Action::Discrete(1));
    EXPECT_LT(std::abs(env.state()[2]), limit);
    EXPECT_FALSE(r.terminated);
    env.SetState({0, 0, sign * 0.2094, sign * 0.1});  // theta -> 0.2114: past 12 degrees
    r = env.Step(Action::Discrete(1));
    EXPECT_GT(std::abs(env.state()[2]), limit);
    EXPECT_TRUE(r.terminated) << "sign " << sign;
    EXPECT_FALSE(r.truncated);
    EXPECT_EQ(r.reward, 1.0);  // the terminating step is rewarded too
    EXPECT_ERROR_HAS(env.Step(Action::Discrete(0)), "call Reset()");
    EXPECT_ERROR_HAS(env.Step(Action::Discrete(0)), "terminated");
  }
}

TEST(CartPole, TerminatesPastXOf2Point4) {
  for (double sign : {1.0, -1.0}) {
    CartPoleEnv env({});
    env.SetState({sign * 2.38, sign * 0.5, 0, 0});  // x -> 2.39: inside
    EXPECT_FALSE(env.Step(Action::Discrete(0)).terminated);
    env.SetState({sign * 2.39, sign * 1.0, 0, 0});  // x -> 2.41: outside
    StepResult r = env.Step(Action::Discrete(0));
    EXPECT_NEAR(env.state()[0], sign * 2.41, 1e-12);
    EXPECT_TRUE(r.terminated) << "sign " << sign;
    EXPECT_EQ(r.reward, 1.0);
  }
}

TEST(CartPole, TruncatesAt500Steps) {
  CartPoleEnv env({});
  env.SetState({0, 0, 0, 0}, 498);
  StepResult r = env.Step(Action::Discrete(1));  // step 499
  EXPECT_FALSE(r.truncated);
  r = env.Step(Action::Discrete(0));  // step 500
  EXPECT_TRUE(r.truncated);
  EXPECT_FALSE(r.terminated);
  EXPECT_ERROR_HAS(env.Step(Action::Discrete(0)), "truncated");

  // A whole episode under a balancing policy (push towards where the pole is going) lasts
  // exactly 500 steps.
  auto env2 = MakeEnv("CartPole-v1");
  std::vector<float> obs = env2->Reset(3);
  int steps = 0;
  double total = 0;
  for (;;) {
    StepResult s = env2->Step(Action::Discrete(obs[2] + 0.5f * obs[3] > 0 ? 1 : 0));
    ++steps;
    total += s.reward;
    obs = s.observation;
    ASSERT_FALSE(s.terminated) << "the balancing policy dropped the pole at step " << steps;
    if (s.truncated) break;
  }
  EXPECT_EQ(steps, 500);
  EXPECT_EQ(total, 500.0);
}

TEST(CartPole, MaxEpisodeStepsFromEnvConfig) {
  auto env = MakeEnv("CartPole-v1", {{"max_episode_steps", 10}});
  env->Reset(0);
  for (int i = 1; i <= 10; ++i) {
    StepResult r = env->Step(Action::Discrete(i % 2));  // alternating: stays up
    EXPECT_EQ(r.truncated, i == 10) << "step " << i;
  }
  EXPECT_ERROR_HAS(MakeEnv("CartPole-v1", {{"max_episode_steps", 0}}), "whole number >= 1");
  EXPECT_ERROR_HAS(MakeEnv("CartPole-v1", {{"gravity", 9.81}}), "unknown env_config key 'gravity'");
}

TEST(CartPole, ResetIsUniformInPlusMinus0Point05AndSeeded) {
  auto a = MakeEnv("CartPole-v1");
  auto b = MakeEnv("CartPole-v1");
  std::vector<float> first = a->Reset(42);
  EXPECT_EQ(b->Reset(42), first);
  EXPECT_NE(b->Reset(43), first);
  for (int i = 0; i < 200; ++i)
    for (float v : a->Reset()) {
      EXPECT_GT(v, -0.05f);
      EXPECT_LT(v, 0.05f);
    }
  // The same seed and actions give the same episode, step for step.
  a->Reset(7);
  b->Reset(7);
  for (int i = 0; i < 50; ++i) {
    StepResult ra = a->Step(Action::Discrete(i % 3 == 0));
    StepResult rb = b->Step(Action::Discrete(i % 3 == 0));
    ASSERT_EQ(ra.observation, rb.observation);
    if (ra.terminated) break;
  }
}

TEST(CartPole, RefusesActionsOutsideItsSpace) {
  auto env = MakeEnv("CartPole-v1");
  EXPECT_ERROR_HAS(env->Step(Action::Discrete(0)), "before the first Reset");
  env->Reset(1);
  EXPECT_ERROR_HAS(env->Step(Action::Discrete(2)), "action 2 is outside the action space Discrete(2)");
  EXPECT_ERROR_HAS(env->Step(Action::Discrete(-1)), "0..1");
  EXPECT_ERROR_HAS(env->Step(Action::Box({1.0f})), "takes Action::Discrete(i)");
  EXPECT_NO_THROW(env->Step(Action::Discrete(1)));  // a refused action did not end the episode
}

TEST(CartPole, Spaces) {
  auto env = MakeEnv("CartPole-v1");
  EXPECT_EQ(env->action_space().ToString(), "Discrete(2)");
  EXPECT_EQ(env->observation_space().ToString(),
            "Box([-4.8, -3.4028235e+38, -0.41887903, -3.4028235e+38], "
            "[4.8, 3.4028235e+38, 0.41887903, 3.4028235e+38], (4,), float32)");
  EXPECT_EQ(env->observation_space().size(), 4);
}

// ---- Pendulum-v1 ----

TEST(Pendulum, RewardAndDynamicsOnAGivenState) {
  PendulumEnv env({});
  env.SetState(1.0, -2.0);
  StepResult r = env.Step(Action::Box({-0.5f}));
  // costs = 1^2 + 0.1 * 4 + 0.001 * 0.25 = 1.40025
  EXPECT_DOUBLE_EQ(r.reward, -1.40025);
  // newthdot = -2 + (3 * 10 / 2 * sin 1 + 3 * -0.5) * 0.05 = -2 + (12.62206 - 1.5) * 0.05
  const double newthdot = -2 + (15 * std::sin(1.0) - 1.5) * 0.05;  // -1.44389676
  EXPECT_DOUBLE_EQ(env.thdot(), newthdot);
  EXPECT_DOUBLE_EQ(env.th(), 1.0 + newthdot * 0.05);  // 0.92780516
  EXPECT_EQ(r.observation, (std::vector<float>{static_cast<float>(std::cos(env.th())),
                                               static_cast<float>(std::sin(env.th())),
                                               static_cast<float>(newthdot)}));
  EXPECT_FALSE(r.terminated);
}

TEST(Pendulum, NormalisesTheAngleInTheCost) {
  PendulumEnv env({});
  env.SetState(3.5, 7.9);  // 3.5 rad is -2.78318531 rad from upright
  StepResult r = env.Step(Action::Box({2.0f}));
  // costs = (3.5 - 2 pi)^2 + 0.1 * 7.9^2 + 0.001 * 4 = 7.74612 + 6.241 + 0.004 = 13.99112045
  EXPECT_NEAR(r.reward, -13.991120454100328, 1e-12);
  EXPECT_NEAR(internal::AngleNormalize(3.5), 3.5 - 2 * std::numbers::pi, 1e-15);
  EXPECT_NEAR(internal::AngleNormalize(-3.5), -3.5 + 2 * std::numbers::pi, 1e-15);
  EXPECT_NEAR(internal::AngleNormalize(7 * std::numbers::pi), -std::numbers::pi, 1e-12);
}

TEST(Pendulum, ClipsTheTorqueAndTheSpeed) {
  PendulumEnv env({});
  env.SetState(std::numbers::pi / 2, 7.9);
  StepResult r = env.Step(Action::Box({5.0f}));  // clipped to 2
  // costs with u = 2: (pi/2)^2 + 0.1 * 7.9^2 + 0.001 * 2^2 = 2.4674011 + 6.241 + 0.004
  EXPECT_NEAR(r.reward, -(std::pow(std::numbers::pi / 2, 2) + 6.241 + 0.004), 1e-12);
  // newthdot = 7.9 + (15 * 1 + 3 * 2) * 0.05 = 8.95, clipped to 8
  EXPECT_EQ(env.thdot(), 8.0);
  EXPECT_DOUBLE_EQ(env.th(), std::numbers::pi / 2 + 8 * 0.05);

  env.SetState(-std::numbers::pi / 2, -7.9);
  r = env.Step(Action::Box({-100.0f}));  // clipped to -2
  EXPECT_NEAR(r.reward, -(std::pow(std::numbers::pi / 2, 2) + 6.241 + 0.004), 1e-12);
  EXPECT_EQ(env.thdot(), -8.0);
}

TEST(Pendulum, GravityFromEnvConfig) {
  PendulumEnv env({{"g", 9.81}});
  env.SetState(1.0, 0.0);
  env.Step(Action::Box({0.0f}));
  EXPECT_DOUBLE_EQ(env.thdot(), 3 * 9.81 / 2 * std::sin(1.0) * 0.05);
  EXPECT_ERROR_HAS(MakeEnv("Pendulum-v1", {{"gravity", 9.81}}), "it takes: g, max_episode_steps");
  EXPECT_ERROR_HAS(MakeEnv("Pendulum-v1", {{"g", NAN}}), "finite");
}

TEST(Pendulum, TruncatesAt200AndResetsInRange) {
  auto env = MakeEnv("Pendulum-v1");
  for (int episode = 0; episode < 20; ++episode) {
    std::vector<float> obs = env->Reset();
    // (cos th, sin th) with th uniform in (-pi, pi); thdot uniform in (-1, 1).
    EXPECT_NEAR(obs[0] * obs[0] + obs[1] * obs[1], 1.0f, 1e-6f);
    EXPECT_GT(obs[2], -1.0f);
    EXPECT_LT(obs[2], 1.0f);
    for (int i = 1; i <= 200; ++i) {
      StepResult r = env->Step(Action::Box({1.0f}));
      ASSERT_FALSE(r.terminated);
      ASSERT_EQ(r.truncated, i == 200) << "step " << i;
      ASSERT_LE(r.reward, 0.0);
      ASSERT_LE(std::abs(r.observation[2]), 8.0f);
    }
  }
  EXPECT_ERROR_HAS(env->Step(Action::Box({0.0f})), "truncated");
}

TEST(Pendulum, RefusesActionsOutsideItsSpace) {
  auto env = MakeEnv("Pendulum-v1");
  env->Reset(0);
  EXPECT_EQ(env->action_space().ToString(), "Box(-2.0, 2.0, (1,), float32)");
  EXPECT_ERROR_HAS(env->Step(Action::Box({0.5f, 0.5f})),
                   "Pendulum-v1: action [0.5, 0.5] is outside the action space Box(-2.0, 2.0, (1,), "
                   "float32): it has 2 values and the space needs 1");
  EXPECT_ERROR_HAS(env->Step(Action::Box({NAN})), "element 0 is nan");
  EXPECT_ERROR_HAS(env->Step(Action::Box({INFINITY})), "element 0 is inf");
  EXPECT_ERROR_HAS(env->Step(Action::Discrete(1)), "use Action::Box(values)");
}

// ---- Spaces ----

TEST(Space, BuildsChecksAndPrints) {
  EXPECT_ERROR_HAS(Space::Discrete(0), "n >= 1");
  EXPECT_ERROR_HAS(Space::Box({0}, {1, 2}, {2}), "give one bound per element");
  EXPECT_ERROR_HAS(Space::Box({2}, {1}, {1}), "low <= high");
  Space box = Space::Box({-1, -1, -1, -1, -1, -1}, {1, 1, 1, 1, 1, 1}, {2, 3});
  EXPECT_EQ(box.size(), 6);
  EXPECT_EQ(box.ToString(), "Box(-1.0, 1.0, (2, 3), float32)");
  Space b1 = Space::Box({-2}, {2}, {1});
  EXPECT_TRUE(b1.Contains(Action::Box({2.0f})));
  EXPECT_FALSE(b1.Contains(Action::Box({2.5f})));  // Contains is strict; CheckAction lets the env clip
  EXPECT_NO_THROW(b1.CheckAction(Action::Box({2.5f}), "test"));
  EXPECT_FALSE(b1.Contains(Action::Box({NAN})));
  Space d = Space::Discrete(3);
  EXPECT_TRUE(d.Contains(Action::Discrete(2)));
  EXPECT_FALSE(d.Contains(Action::Discrete(3)));
  EXPECT_EQ(ToString(Action::Discrete(2)), "2");
  EXPECT_EQ(ToString(Action::Box({0.5f, -2.0f})), "[0.5, -2.0]");
}

// ---- The registry, and a user's environment ----

// A corridor of `length` cells: action 1 walks right, 0 left; reaching the end terminates
// with reward 1. Its config takes "length".
class Corridor : public Env {
 public:
  explicit Corridor(const EnvConfig& c)
      : length_(c.count("length") ? static_cast<int>(c.at("length")) : 5),
        obs_(Space::Box({0}, {static_cast<float>(length_)}, {1})),
        act_(Space::Discrete(2)) {}
  const Space& observation_space() const override { return obs_; }
  const Space& action_space() const override { return act_; }
  std::vector<float> Reset(std::optional<uint64_t>) override {
    pos_ = 0;
    return {0.0f};
  }
  StepResult Step(const Action& a) override {
    act_.CheckAction(a, "Corridor-v0");
    pos_ = std::max(0, pos_ + (a.index == 1 ? 1 : -1));
    bool end = pos_ == length_;
    return {{static_cast<float>(pos_)}, end ? 1.0 : 0.0, end, false};
  }

 private:
  int length_;
  Space obs_, act_;
  int pos_ = 0;
};

PRISM_RL_REGISTER_ENV("Corridor-v0", [](const EnvConfig& c) { return std::make_unique<Corridor>(c); });

TEST(Registry, AUserEnvironmentRegisteredWithTheMacro) {
  auto env = MakeEnv("Corridor-v0", {{"length", 3}});
  env->Reset();
  EXPECT_FALSE(env->Step(Action::Discrete(1)).terminated);
  EXPECT_FALSE(env->Step(Action::Discrete(1)).terminated);
  StepResult r = env->Step(Action::Discrete(1));
  EXPECT_TRUE(r.terminated);
  EXPECT_EQ(r.reward, 1.0);
  std::vector<std::string> names = RegisteredEnvs();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "Corridor-v0"), names.end());
}

TEST(Registry, ErrorsNameWhatIsRegistered) {
  std::string e = ErrorOf([] { MakeEnv("CartPole-v0"); });
  EXPECT_NE(e.find("no environment registered as 'CartPole-v0'"), std::string::npos) << e;
  EXPECT_NE(e.find("CartPole-v1, Corridor-v0"), std::string::npos) << e;
  EXPECT_NE(e.find("Pendulum-v1"), std::string::npos) << e;
  EXPECT_NE(e.find("PRISM_RL_REGISTER_ENV"), std::string::npos) << e;
  auto factory = [](const EnvConfig& c) -> std::unique_ptr<Env> { return std::make_unique<Corridor>(c); };
  EXPECT_ERROR_HAS(RegisterEnv("CartPole-v1", factory), "'CartPole-v1' is already registered");
  EXPECT_ERROR_HAS(RegisterEnv("", factory), "name is empty");
  EXPECT_ERROR_HAS(RegisterEnv("Null-v0", nullptr), "factory is empty");
  RegisterEnv("Nothing-v0", [](const EnvConfig&) { return std::unique_ptr<Env>(); });
  EXPECT_ERROR_HAS(MakeEnv("Nothing-v0"), "returned no environment");
}

TEST(Registry, RegistersAndMakesFromManyThreads) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) {
        RegisterEnv("Threaded-" + std::to_string(t) + "-" + std::to_string(i),
                    [](const EnvConfig& c) { return std::make_unique<Corridor>(c); });
        MakeEnv("CartPole-v1")->Reset(i);
      }
    });
  for (auto& th : threads) th.join();
  std::vector<std::string> names = RegisteredEnvs();
  EXPECT_EQ(std::count_if(names.begin(), names.end(),
                          [](const std::string& n) { return n.rfind("Threaded-", 0) == 0; }),
            400);
}

// ---- VectorEnv ----

TEST(VectorEnv, CartPoleFastPathEqualsScalarEnvsWithAutoreset) {
  const int n = 16;
  const uint64_t seed = 100;
  VectorEnv vec("CartPole-v1", n, {}, seed);
  std::vector<std::unique_ptr<Env>> envs;
  std::vector<std::vector<float>> obs(n);
  std::vector<bool> ended(n, false);
  for (int i = 0; i < n; ++i) {
    envs.push_back(MakeEnv("CartPole-v1"));
    obs[i] = envs[i]->Reset(seed + i);
  }
  const std::vector<float>& first = vec.Reset();
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(std::vector<float>(first.begin() + 4 * i, first.begin() + 4 * i + 4), obs[i]);
  int resets = 0;
  for (int t = 0; t < 600; ++t) {
    std::vector<Action> actions;
    for (int i = 0; i < n; ++i) actions.push_back(Action::Discrete((t * 7 + i * 3) % 5 < 2));
    VectorEnv::Step step = vec.StepAll(actions);
    for (int i = 0; i < n; ++i) {
      double reward = 0;
      bool term = false, trunc = false;
      if (ended[i]) {  // next-step autoreset: the generator goes on, unseeded
        obs[i] = envs[i]->Reset();
        ended[i] = false;
        ++resets;
      } else {
        StepResult r = envs[i]->Step(actions[i]);
        obs[i] = r.observation;
        reward = r.reward;
        term = r.terminated;
        trunc = r.truncated;
        ended[i] = term || trunc;
      }
      ASSERT_EQ(std::vector<float>(step.observations->begin() + 4 * i,
                                   step.observations->begin() + 4 * i + 4),
                obs[i]) << "copy " << i << " step " << t;
      ASSERT_EQ(step.rewards[i], reward);
      ASSERT_EQ(step.terminated[i], term);
      ASSERT_EQ(step.truncated[i], trunc);
    }
  }
  EXPECT_GT(resets, n);  // the policy drops the pole: autoreset was exercised
}

TEST(VectorEnv, NextStepAutoresetOnTruncation) {
  // Three steps per episode; the fourth step resets (reward 0, no flags, action ignored).
  for (const char* name : {"CartPole-v1", "Pendulum-v1"}) {
    SCOPED_TRACE(name);
    VectorEnv vec(name, 2, {{"max_episode_steps", 3}}, 5);
    bool discrete = vec.action_space().kind == Space::Kind::kDiscrete;
    auto actions = [&] {
      return std::vector<Action>(2, discrete ? Action::Discrete(1) : Action::Box({0.0f}));
    };
    vec.Reset();
    auto reference = MakeEnv(name, {{"max_episode_steps", 3}});
    reference->Reset(5);  // copy 0's seed
    for (int t = 1; t <= 3; ++t) {
      VectorEnv::Step s = vec.StepAll(actions());
      EXPECT_EQ(s.truncated[0], t == 3);
      EXPECT_EQ(s.rewards[0], reference->Step(actions()[0]).reward);
    }
    VectorEnv::Step s = vec.StepAll(actions());
    EXPECT_EQ(s.rewards[0], 0.0);
    EXPECT_EQ(s.terminated[0] + s.truncated[0] + s.terminated[1] + s.truncated[1], 0);
    std::vector<float> again = reference->Reset();
    EXPECT_EQ(std::vector<float>(s.observations->begin(), s.observations->begin() + again.size()), again);
    s = vec.StepAll(actions());
    EXPECT_NE(s.rewards[0], 0.0);
    EXPECT_FALSE(s.truncated[0]);
  }
}

TEST(VectorEnv, IndexStepMatchesActionStepAndReusesItsBuffers) {
  VectorEnv a("CartPole-v1", 8, {}, 9), b("CartPole-v1", 8, {}, 9);
  a.Reset();
  b.Reset();
  VectorEnv::Step out;
  for (int t = 0; t < 100; ++t) {
    std::vector<int64_t> idx(8);
    std::vector<Action> act(8);
    for (int i = 0; i < 8; ++i) act[i] = Action::Discrete(idx[i] = (t + i) % 2);
    VectorEnv::Step s = a.StepAll(act);
    b.StepAll(idx, out);
    ASSERT_EQ(*s.observations, *out.observations);
    ASSERT_EQ(s.rewards, out.rewards);
    ASSERT_EQ(s.terminated, out.terminated);
  }
  // A user environment on the generic path.
  VectorEnv c("Corridor-v0", 3, {{"length", 2}});
  c.Reset();
  c.StepAll({1, 1, 0}, out);
  c.StepAll({1, 0, 0}, out);
  EXPECT_EQ(out.terminated, (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(out.rewards, (std::vector<double>{1, 0, 0}));
}

TEST(VectorEnv, ResetReseedsAndErrorsSayWhatToDo) {
  VectorEnv vec("CartPole-v1", 4, {}, 11);
  VectorEnv::Step out;
  EXPECT_ERROR_HAS(vec.StepAll(std::vector<int64_t>(4, 0), out), "StepAll before Reset; call Reset() first");
  std::vector<float> first = vec.Reset();
  vec.StepAll(std::vector<int64_t>(4, 1), out);
  EXPECT_EQ(vec.Reset(), first);
  EXPECT_ERROR_HAS(vec.StepAll(std::vector<int64_t>(3, 0), out), "got 3 actions for 4 environments");
  EXPECT_ERROR_HAS(vec.StepAll({0, 1, 5, 0}, out), "action 5 is outside the action space Discrete(2)");
  EXPECT_ERROR_HAS(VectorEnv("CartPole-v1", 0), "num_envs is 0");
  EXPECT_ERROR_HAS(VectorEnv("Nope-v0", 2), "registered: CartPole-v1");
  VectorEnv pend("Pendulum-v1", 2);
  pend.Reset();
  EXPECT_ERROR_HAS(pend.StepAll({0, 1}, out), "needs a Discrete action space");
  EXPECT_ERROR_HAS(pend.StepAll({Action::Box({0.0f}), Action::Box({NAN})}), "element 0 is nan");
}

}  // namespace
}  // namespace prism::rl
