// DQN (src/rl/dqn/): the Q-module, the loss against hand-computed cases, target updates,
// the trainer's RLlib bookkeeping, checkpoints, and a short CartPole learning check.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "prism/errors.h"
#include "rl_test_util.h"
#include "rl/dqn/dqn_trainer.h"
#include "rl/dqn/learner.h"
#include "rl/dqn/q_module.h"

namespace prism::rl::dqn {
namespace {

using prism_test::ErrorOf;

const Space kObs2 = Space::Box({-10, -10}, {10, 10}, {2});
const Space kTwoActions = Space::Discrete(2);

// A linear Q-module: no encoder, no dueling, Q(s) = W s + b.
QModuleOptions Linear() {
  QModuleOptions o;
  o.hiddens = {};
  o.head_hiddens = {};
  o.dueling = false;
  return o;
}

void SetParam(QModuleImpl& m, const std::string& name, std::vector<float> values) {
  torch::NoGradGuard no_grad;
  torch::Tensor p = m.named_parameters()[name];
  ASSERT_EQ(p.numel(), static_cast<int64_t>(values.size())) << name;
  p.copy_(torch::tensor(values).reshape(p.sizes()));
}

torch::Tensor T(std::vector<float> v, std::vector<int64_t> shape) { return torch::tensor(v).reshape(shape); }

// ---- The Q-module ----

TEST(DqnQModule, DuelingCombinesValueAndCenteredAdvantages) {
  QModuleOptions o = Linear();
  o.dueling = true;
  QModule m(kObs2, kTwoActions, o);
  SetParam(*m, "af.0.weight", {1, 0, 0, 1});
  SetParam(*m, "af.0.bias", {0, 0});
  SetParam(*m, "vf.0.weight", {1, 1});
  SetParam(*m, "vf.0.bias", {0.5});
  // s = (1, 3): A = (1, 3), mean 2, V = 4.5: Q = (3.5, 5.5).
  torch::Tensor q = m->QValues(T({1, 3}, {1, 2}));
  EXPECT_FLOAT_EQ(q[0][0].item<float>(), 3.5f);
  EXPECT_FLOAT_EQ(q[0][1].item<float>(), 5.5f);
  std::vector<float> obs{1, 3, 3, 1};
  EXPECT_EQ(m->GreedyActions(obs.data(), 2), (std::vector<int64_t>{1, 0}));
}

TEST(DqnQModule, DefaultsAreRLlibsAndShapesAndErrors) {
  QModuleOptions d;
  EXPECT_EQ(d.hiddens, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(d.activation, "tanh");
  EXPECT_TRUE(d.head_hiddens.empty());
  EXPECT_EQ(d.head_activation, "relu");
  EXPECT_TRUE(d.dueling);
  QModule m(Space::Box({-1, -1, -1, -1}, {1, 1, 1, 1}, {4}), Space::Discrete(3));
  EXPECT_EQ(m->QValues(torch::zeros({5, 4})).sizes(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(m->named_parameters().size(), 8u);  // encoder 2 x (w, b), af (w, b), vf (w, b)
  EXPECT_ERROR_HAS(QModule(kObs2, Space::Box({-1}, {1}, {1})), "Discrete action space");
  EXPECT_ERROR_HAS(QModule(Space::Discrete(3), kTwoActions), "Box observation space");
  QModuleOptions bad;
  bad.activation = "sigmoid";
  EXPECT_ERROR_HAS(QModule(kObs2, kTwoActions, bad), "unknown activation 'sigmoid'");
  bad = {};
  bad.hiddens = {8, 0};
  EXPECT_ERROR_HAS(QModule(kObs2, kTwoActions, bad), "must be >= 1");
}

TEST(DqnQModule, EpsilonGreedyExploresUniformlyAtItsRate) {
  QModule m(kObs2, Space::Discrete(4), Linear());
  SetParam(*m, "af.0.weight", {0, 0, 0, 0, 0, 0, 0, 0});
  SetParam(*m, "af.0.bias", {0, 0, 1, 0});  // action 2 is greedy everywhere
  std::mt19937_64 rng(7);
  std::vector<float> obs(2 * 1000, 0.5f);
  for (int64_t a : m->EpsilonGreedyActions(obs.data(), 1000, 0.0, rng)) ASSERT_EQ(a, 2);
  std::vector<int> counts(4, 0);
  for (int64_t a : m->EpsilonGreedyActions(obs.data(), 1000, 1.0, rng)) ++counts[a];
  for (int c : counts) EXPECT_NEAR(c, 250, 60);
  // epsilon 0.2: greedy 0.8 + 0.2 / 4 = 0.85 of the time.
  int greedy = 0;
  for (int64_t a : m->EpsilonGreedyActions(obs.data(), 1000, 0.2, rng)) greedy += a == 2;
  EXPECT_NEAR(greedy, 850, 40);
  EXPECT_ERROR_HAS(m->EpsilonGreedyActions(obs.data(), 1, 1.5, rng), "[0, 1]");
  EXPECT_EQ(m->ComputeSingleAction({0.1f, 0.2f}, false, 1.0, rng).index, 2);
  EXPECT_ERROR_HAS(m->ComputeSingleAction({0.1f}, false, 0.0, rng), "observation of 1 values");
}

TEST(DqnQModule, WeightsRoundTripAsBytesAndRefuseOtherShapes) {
  torch::manual_seed(1);
  QModule a(kObs2, kTwoActions);
  QModule b(kObs2, kTwoActions);
  torch::Tensor x = torch::randn({3, 2});
  ASSERT_FALSE(torch::allclose(a->QValues(x), b->QValues(x)));
  std::vector<uint8_t> w = GetWeights(*a);
  SetWeights(*b, w.data(), w.size());
  EXPECT_TRUE(torch::equal(a->QValues(x), b->QValues(x)));
  QModuleOptions small;
  small.hiddens = {16};
  QModule c(kObs2, kTwoActions, small);
  torch::Tensor before = c->QValues(x).clone();
  EXPECT_ERROR_HAS(SetWeights(*c, w.data(), w.size()), "parameters");
  EXPECT_TRUE(torch::equal(c->QValues(x), before));  // unchanged
  std::vector<uint8_t> cut(w.begin(), w.end() - 4);
  EXPECT_ERROR_HAS(SetWeights(*b, cut.data(), cut.size()), "expected");
  std::vector<uint8_t> other = w;
  other[0] ^= 0xff;
  EXPECT_ERROR_HAS(SetWeights(*b, other.data(), other.size()), "does not hold");
}

// ---- The loss, by hand ----
//
// Online Q(s) = s (W = I, b = 0); target Q(s) = (s0, 4 s1). gamma 0.9. Two rows:
//   row 0: s (1, 2), a 0, r 1,   s' (3, 1), not terminated. q = 1.
//          double Q: argmax online(s') = 0, target(s')[0] = 3: y = 1 + 0.9 * 3 = 3.7
//          plain:    max target(s') = max(3, 4) = 4:             y = 1 + 0.9 * 4 = 4.6
//   row 1: s (0.5, 0.25), a 1, r 0.5, s' (1, 1), terminated: y = 0.5. q = 0.25.
// Huber (delta 1): |d| > 1: |d| - 0.5; else d^2 / 2.
struct HandCase {
  QModule online{kObs2, kTwoActions, Linear()};
  QModule target{kObs2, kTwoActions, Linear()};
  torch::Tensor obs = T({1, 2, 0.5, 0.25}, {2, 2});
  torch::Tensor actions = torch::tensor(std::vector<int64_t>{0, 1});
  torch::Tensor rewards = torch::tensor(std::vector<float>{1, 0.5});
  torch::Tensor next_obs = T({3, 1, 1, 1}, {2, 2});
  torch::Tensor terminated = torch::tensor(std::vector<float>{0, 1});
  torch::Tensor n_steps = torch::tensor(std::vector<float>{1, 1});
  HandCase() {
    SetParam(*online, "af.0.weight", {1, 0, 0, 1});
    SetParam(*online, "af.0.bias", {0, 0});
    SetParam(*target, "af.0.weight", {1, 0, 0, 4});
    SetParam(*target, "af.0.bias", {0, 0});
  }
  LossOutputs Loss(LossParams p) {
    return DqnLoss(*online, *target, obs, actions, rewards, next_obs, terminated, n_steps, p);
  }
};

TEST(DqnLoss, DoubleQHuberMatchesHandComputation) {
  HandCase c;
  LossParams p;
  p.gamma = 0.9;
  LossOutputs out = c.Loss(p);
  // row 0: d = 1 - 3.7 = -2.7: 2.2; row 1: d = -0.25: 0.03125.
  EXPECT_NEAR(out.loss, (2.2 + 0.03125) / 2, 1e-6);
  EXPECT_NEAR(out.td_error[0].item<float>(), 2.7, 1e-6);
  EXPECT_NEAR(out.td_error[1].item<float>(), 0.25, 1e-6);
  EXPECT_NEAR(out.q_mean, 0.625, 1e-6);
  EXPECT_NEAR(out.q_min, 0.25, 1e-6);
  EXPECT_NEAR(out.q_max, 1.0, 1e-6);
  // Gradient: dL/dq = clamp(d, -1, 1) / B = (-0.5, -0.125); dq/dW[a] = s. Only the online
  // module gets gradients.
  out.total.backward();
  torch::Tensor gw = c.online->named_parameters()["af.0.weight"].grad();
  torch::Tensor gb = c.online->named_parameters()["af.0.bias"].grad();
  EXPECT_TRUE(torch::allclose(gw, T({-0.5, -1.0, -0.0625, -0.03125}, {2, 2}))) << gw;
  EXPECT_TRUE(torch::allclose(gb, torch::tensor(std::vector<float>{-0.5, -0.125}))) << gb;
  for (const auto& t : c.target->parameters()) EXPECT_FALSE(t.grad().defined());
}

TEST(DqnLoss, PlainMaxMseAndNStepDiscount) {
  {
    HandCase c;
    LossParams p;
    p.gamma = 0.9;
    p.double_q = false;
    EXPECT_NEAR(c.Loss(p).loss, (3.1 + 0.03125) / 2, 1e-6);  // d = 1 - 4.6 = -3.6
  }
  {
    HandCase c;
    LossParams p;
    p.gamma = 0.9;
    p.td_error_loss_fn = "mse";
    EXPECT_NEAR(c.Loss(p).loss, (2.7 * 2.7 + 0.0625) / 2, 1e-5);
  }
  {
    HandCase c;
    c.n_steps = torch::tensor(std::vector<float>{2, 3});  // row 1 is terminated: n is moot
    LossParams p;
    p.gamma = 0.9;
    // row 0: y = 1 + 0.81 * 3 = 3.43, d = -2.43: 1.93.
    EXPECT_NEAR(c.Loss(p).loss, (1.93 + 0.03125) / 2, 1e-6);
  }
  {
    HandCase c;
    LossParams p;
    p.td_error_loss_fn = "l1";
    EXPECT_ERROR_HAS(c.Loss(p), "'huber' or 'mse'");
  }
}

TEST(DqnTargetNetwork, SoftAndHardUpdates) {
  HandCase c;
  UpdateTargetNetwork(*c.online, *c.target, 0.5);  // 0.5 I + 0.5 diag(1, 4) = diag(1, 2.5)
  EXPECT_TRUE(torch::allclose(c.target->named_parameters()["af.0.weight"], T({1, 0, 0, 2.5}, {2, 2})));
  UpdateTargetNetwork(*c.online, *c.target, 1.0);
  EXPECT_TRUE(torch::equal(c.target->named_parameters()["af.0.weight"], c.online->named_parameters()["af.0.weight"]));
  EXPECT_ERROR_HAS(UpdateTargetNetwork(*c.online, *c.target, 0.0), "(0, 1]");
}

TransitionBatch TwoRowBatch() {
  TransitionBatch b;
  b.observations = {1, 2, 0.5, 0.25};
  b.next_observations = {3, 1, 1, 1};
  b.actions = {0, 1};
  b.rewards = {1, 0.5};
  b.terminated = {0, 1};
  return b;
}

TEST(DqnLearner, UpdatesTheTargetEveryFreqSampledStepsAndClipsGradients) {
  torch::manual_seed(3);
  LearnerOptions o;
  o.target_network_update_freq = 500;
  o.grad_clip = 1e-3;
  o.loss.gamma = 0.9;
  Learner l(QModule(kObs2, kTwoActions, Linear()), kObs2, kTwoActions, o);
  auto same = [&] {
    return torch::equal(l.module()->named_parameters()["af.0.weight"], l.target()->named_parameters()["af.0.weight"]);
  };
  ASSERT_TRUE(same());  // the target starts as a copy
  UpdateStats s = l.Update(TwoRowBatch(), 300);  // 300 - 0 < 500: no target update
  EXPECT_FALSE(s.target_updated);
  EXPECT_FALSE(same());
  // The gradient left after the step was clipped to a global norm of 1e-3.
  double sq = 0;
  for (const auto& p : l.module()->parameters()) sq += p.grad().pow(2).sum().item<double>();
  EXPECT_GT(s.grad_norm, 1e-2);
  EXPECT_NEAR(std::sqrt(sq), 1e-3, 1e-6);
  s = l.Update(TwoRowBatch(), 500);  // 500 - 0 >= 500
  EXPECT_TRUE(s.target_updated);
  EXPECT_TRUE(same());
  EXPECT_EQ(l.last_target_update_ts(), 500);
  EXPECT_FALSE(l.Update(TwoRowBatch(), 999).target_updated);
  EXPECT_TRUE(l.Update(TwoRowBatch(), 1000).target_updated);
  EXPECT_EQ(l.num_target_updates(), 2);
  EXPECT_EQ(l.num_updates(), 4);
  TransitionBatch bad = TwoRowBatch();
  bad.observations.pop_back();
  EXPECT_ERROR_HAS(l.Update(bad, 1000), "malformed");
  EXPECT_ERROR_HAS(l.Update(TransitionBatch{}, 1000), "empty");
  const std::vector<float> one_n{1};
  EXPECT_ERROR_HAS(l.Update(TwoRowBatch(), 1000, &one_n), "1 n-steps for 2 rows");
}

TEST(DqnLearner, RepeatedUpdatesFitAFixedTarget) {
  // A terminal-only batch: targets are the rewards, so Q(s, a) must reach them.
  torch::manual_seed(5);
  LearnerOptions o;
  o.lr = 1e-2;
  QModuleOptions mo;
  mo.hiddens = {16};
  Learner l(QModule(kObs2, kTwoActions, mo), kObs2, kTwoActions, o);
  TransitionBatch b = TwoRowBatch();
  b.terminated = {1, 1};
  for (int i = 0; i < 500; ++i) l.Update(b, i);
  torch::Tensor q = l.module()->QValues(T({1, 2, 0.5, 0.25}, {2, 2}));
  EXPECT_NEAR(q[0][0].item<float>(), 1.0, 0.02);
  EXPECT_NEAR(q[1][1].item<float>(), 0.5, 0.02);
}

// ---- The trainer ----

TEST(DqnConfig, DefaultsAreRLlibsAndErrors) {
  DqnConfig c;
  EXPECT_DOUBLE_EQ(c.lr, 5e-4);
  EXPECT_EQ(c.replay_capacity, 50000);
  EXPECT_EQ(c.target_network_update_freq, 500);
  EXPECT_EQ(c.num_steps_sampled_before_learning_starts, 1000);
  EXPECT_EQ(c.epsilon, (std::vector<std::pair<int64_t, double>>{{0, 1.0}, {10000, 0.05}}));
  EXPECT_TRUE(c.double_q);
  EXPECT_TRUE(c.model.dueling);
  EXPECT_EQ(c.n_step, 1);
  EXPECT_EQ(c.train_batch_size, 32);
  EXPECT_FALSE(c.training_intensity.has_value());
  EXPECT_DOUBLE_EQ(c.tau, 1.0);
  EXPECT_EQ(c.td_error_loss_fn, "huber");
  EXPECT_DOUBLE_EQ(c.grad_clip, 40.0);
  EXPECT_DOUBLE_EQ(c.adam_epsilon, 1e-8);
  EXPECT_EQ(c.min_sample_timesteps_per_iteration, 1000);
  EXPECT_NO_THROW(c.Validate());
  DqnConfig bad;
  bad.tau = 0;
  EXPECT_ERROR_HAS(bad.Validate(), "tau");
  bad = {};
  bad.epsilon = {{0, 1.0}, {100, 1.5}};
  EXPECT_ERROR_HAS(bad.Validate(), "outside [0, 1]");
  bad = {};
  bad.epsilon = {{10, 1.0}};
  EXPECT_ERROR_HAS(bad.Validate(), "timestep 0");
  bad = {};
  bad.td_error_loss_fn = "l2";
  EXPECT_ERROR_HAS(DqnTrainer{bad}, "td_error_loss_fn");
  bad = {};
  bad.env = "NoSuchEnv-v0";
  EXPECT_ERROR_HAS(DqnTrainer{bad}, "NoSuchEnv-v0");
  bad = {};
  bad.env = "Pendulum-v1";
  EXPECT_ERROR_HAS(DqnTrainer{bad}, "Discrete action space");
}

TEST(DqnConfig, TrainingIntensitySetsRLlibsRoundRobinWeights) {
  DqnConfig c;  // native ratio 32 / (1 * 1 * 1) = 32
  EXPECT_EQ(c.RoundRobinWeights(), (std::pair<int64_t, int64_t>{1, 1}));
  c.training_intensity = 64;
  EXPECT_EQ(c.RoundRobinWeights(), (std::pair<int64_t, int64_t>{1, 2}));
  c.training_intensity = 8;
  EXPECT_EQ(c.RoundRobinWeights(), (std::pair<int64_t, int64_t>{4, 1}));
  c.num_envs = 4;  // native ratio 8: intensity 8 is the natural one
  EXPECT_EQ(c.RoundRobinWeights(), (std::pair<int64_t, int64_t>{1, 1}));
}

DqnConfig SmallConfig() {
  DqnConfig c;
  c.model.hiddens = {32};
  c.seed = 11;
  return c;
}

TEST(DqnTrainer, IterationsFollowRLlibsCounts) {
  DqnTrainer t(SmallConfig());
  DqnMetrics m1 = t.TrainIteration();
  // 1000 steps; the first update once 1000 were sampled, which also copies the target.
  EXPECT_EQ(m1.training_iteration, 1);
  EXPECT_EQ(m1.num_env_steps_sampled, 1000);
  EXPECT_EQ(m1.num_env_steps_sampled_lifetime, 1000);
  EXPECT_EQ(m1.num_updates, 1);
  EXPECT_EQ(m1.num_env_steps_trained, 32);
  EXPECT_EQ(m1.num_target_updates_lifetime, 1);
  EXPECT_EQ(m1.replay_buffer_size, 1000);
  EXPECT_NEAR(m1.epsilon, 1.0 - 0.95 * 0.1, 1e-12);
  // Random play on CartPole: episodes of about 22 steps.
  EXPECT_GT(m1.num_episodes, 20);
  EXPECT_GT(m1.episode_return_mean, 8);
  EXPECT_LT(m1.episode_return_mean, 60);
  EXPECT_DOUBLE_EQ(m1.episode_len_mean, m1.episode_return_mean);  // reward 1 per step
  EXPECT_LE(m1.episode_return_min, m1.episode_return_mean);
  EXPECT_GE(m1.episode_return_max, m1.episode_return_mean);
  EXPECT_TRUE(std::isfinite(m1.loss));
  DqnMetrics m2 = t.TrainIteration();
  EXPECT_EQ(m2.num_env_steps_sampled, 1000);
  EXPECT_EQ(m2.num_updates, 1000);  // one update per env step
  EXPECT_EQ(m2.num_env_steps_trained_lifetime, 32 * 1001);
  EXPECT_EQ(m2.num_target_updates_lifetime, 3);  // at 1000, 1500, 2000
  EXPECT_EQ(m2.num_episodes_lifetime, m1.num_episodes + m2.num_episodes);
  EXPECT_EQ(m2.ToMap().at("num_updates"), 1000.0);
  EXPECT_EQ(m2.ToMap().size(), 19u);
}

TEST(DqnTrainer, TrainingIntensityAndVectorEnvsChangeTheRatio) {
  DqnConfig c = SmallConfig();
  c.num_envs = 4;
  c.num_steps_sampled_before_learning_starts = 0;
  c.training_intensity = 16;  // native 32 / 4 = 8: two updates per vector step
  DqnTrainer t(c);
  DqnMetrics m = t.TrainIteration();
  EXPECT_GE(m.num_env_steps_sampled, 1000);
  EXPECT_LT(m.num_env_steps_sampled, 1008);
  // Each round stores at least 4 transitions (a copy's reset step is none, so a round can
  // take a second vector step: 4 to 7 transitions), then makes 2 updates of 32 rows.
  EXPECT_EQ(m.num_updates % 2, 0);
  EXPECT_LE(m.num_updates, 2 * 250);
  EXPECT_GE(m.num_updates, 2 * (1000 / 7));
  const double ratio = static_cast<double>(m.num_env_steps_trained) / m.num_env_steps_sampled;
  EXPECT_GT(ratio, 64.0 / 7);
  EXPECT_LE(ratio, 16.0);
}

TEST(DqnTrainer, SaveAndLoadRestoreWeightsCountersAndEpisodes) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("prism_dqn_ckpt_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  DqnTrainer a(SmallConfig());
  a.TrainIteration();
  DqnMetrics ma = a.TrainIteration();
  a.Save(dir);
  ASSERT_TRUE(std::filesystem::exists(dir + "/dqn.h5"));
  DqnConfig other = SmallConfig();
  other.seed = 99;  // different initial weights
  DqnTrainer b(other);
  ASSERT_NE(a.GetWeights(), b.GetWeights());
  b.Load(dir);
  EXPECT_EQ(a.GetWeights(), b.GetWeights());
  EXPECT_TRUE(torch::equal(a.learner().target()->parameters()[0], b.learner().target()->parameters()[0]));
  EXPECT_EQ(b.num_env_steps_sampled_lifetime(), 2000);
  EXPECT_DOUBLE_EQ(b.epsilon(), a.epsilon());
  EXPECT_EQ(b.learner().num_target_updates(), 3);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> obs{u(rng), u(rng), u(rng), u(rng)};
    EXPECT_EQ(a.ComputeSingleAction(obs).index, b.ComputeSingleAction(obs).index);
  }
  // b goes on from a's counters; its episode window is a's.
  DqnMetrics mb = b.TrainIteration();
  EXPECT_EQ(mb.training_iteration, 3);
  EXPECT_EQ(mb.num_env_steps_sampled_lifetime, 3000);
  EXPECT_EQ(mb.num_updates, 1000);
  EXPECT_EQ(mb.num_episodes_lifetime, ma.num_episodes_lifetime + mb.num_episodes);
  DqnConfig wide = SmallConfig();
  wide.model.hiddens = {64};
  DqnTrainer c(wide);
  EXPECT_THROW(c.Load(dir), Error);
  EXPECT_ERROR_HAS(c.Load(dir + "/nowhere"), "no ");
  std::filesystem::remove_all(dir);
}

// A chain for n-step checks: obs (t), reward t + 1 on step t, terminated after 5 steps.
class ChainEnv : public Env {
 public:
  const Space& observation_space() const override { return obs_space_; }
  const Space& action_space() const override { return action_space_; }
  std::vector<float> Reset(std::optional<uint64_t>) override {
    t_ = 0;
    return {0.0f};
  }
  StepResult Step(const Action&) override {
    StepResult r;
    r.reward = t_ + 1;
    ++t_;
    r.observation = {static_cast<float>(t_)};
    r.terminated = t_ == 5;
    return r;
  }

 private:
  Space obs_space_ = Space::Box({0}, {10}, {1});
  Space action_space_ = Space::Discrete(2);
  int t_ = 0;
};
PRISM_RL_REGISTER_ENV("DqnTestChain-v0", [](const EnvConfig&) { return std::make_unique<ChainEnv>(); });

TEST(DqnTrainer, NStepRowsSumDiscountedRewardsAndCutAtTheEpisodesEnd) {
  DqnConfig c = SmallConfig();
  c.env = "DqnTestChain-v0";
  c.n_step = 3;
  c.gamma = 0.5;
  c.num_steps_sampled_before_learning_starts = 1000000;  // no updates: only the rows
  c.min_sample_timesteps_per_iteration = 5;
  DqnTrainer t(c);
  DqnMetrics m = t.TrainIteration();
  // Rounds of 3 env steps (rollout_fragment_length = n_step): steps 0-2, then 3, 4 (the
  // end), the reset step and step 0 of the next episode.
  EXPECT_EQ(m.num_env_steps_sampled, 6);
  EXPECT_EQ(m.num_episodes, 1);
  EXPECT_DOUBLE_EQ(m.episode_return_mean, 15);
  ASSERT_EQ(t.replay_buffer().size(), 5);  // the new episode's first step is pending
  // s: (n-step return, next obs, terminated, n) with gamma 0.5.
  const std::map<int, std::tuple<double, float, int, float>> want{
      {0, {1 + 0.5 * 2 + 0.25 * 3, 3, 0, 3}},
      {1, {2 + 0.5 * 3 + 0.25 * 4, 4, 0, 3}},
      {2, {3 + 0.5 * 4 + 0.25 * 5, 5, 1, 3}},
      {3, {4 + 0.5 * 5, 5, 1, 2}},
      {4, {5, 5, 1, 1}}};
  TransitionBatch b = t.replay_buffer().Sample(200);
  std::set<int> seen;
  for (int64_t r = 0; r < b.size(); ++r) {
    const int s = static_cast<int>(b.observations[r]);
    ASSERT_TRUE(want.count(s)) << s;
    const auto& [ret, next, term, n] = want.at(s);
    EXPECT_DOUBLE_EQ(b.rewards[r], ret) << "s " << s;
    EXPECT_EQ(b.next_observations[r], next) << "s " << s;
    EXPECT_EQ(b.terminated[r], term) << "s " << s;
    EXPECT_EQ(t.row_n_step(b.indices[r]), n) << "s " << s;
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 5u);
  DqnConfig bad = SmallConfig();
  bad.n_step = 0;
  EXPECT_ERROR_HAS(bad.Validate(), "n_step is 0");
}

// CartPole-v1 with RLlib's DQN defaults: the loose, fast version of RLlib's target (mean
// return 450 over the last 100 episodes within 100k steps; perf/rl_dqn_cartpole.cc runs it):
// a mean return of at least 100 within 20k env steps.
TEST(DqnLearning, CartPoleReaches100Within20kSteps) {
  torch::set_num_threads(1);
  DqnConfig c;
  c.seed = 0;
  DqnTrainer t(c);
  const auto start = std::chrono::steady_clock::now();
  double best = 0;
  int64_t steps = 0;
  while (steps < 20000) {
    DqnMetrics m = t.TrainIteration();
    steps = m.num_env_steps_sampled_lifetime;
    best = std::max(best, m.episode_return_mean);
    if (best >= 100) break;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("CartPole DQN: mean return %.1f after %lld env steps, %.1f s\n", best,
              static_cast<long long>(steps), secs);
  EXPECT_GE(best, 100.0) << "after " << steps << " steps";
}

}  // namespace
}  // namespace prism::rl::dqn
