// PPO's pure parts: GAE with terminated/truncated/segment ends, the distributions, the loss
// and the adaptive KL coefficient against hand-computed cases; the RLModule's weights as
// bytes and HDF5; the env runner's sampling loop; a local learner on CartPole.

#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <thread>

#include "prism/errors.h"
#include "rl_test_util.h"
#include "rl/ppo/gae.h"
#include "rl/ppo/learner.h"
#include "rl/ppo/rl_module.h"
#include "rl/ppo/sampler.h"

namespace prism::rl::ppo {
namespace {

using prism_test::ErrorOf;

SampleBatch Rows(std::vector<float> rewards, std::vector<float> values) {
  SampleBatch b;
  const size_t n = rewards.size();
  b.rewards = std::move(rewards);
  b.values = std::move(values);
  b.terminated.assign(n, 0);
  b.truncated.assign(n, 0);
  b.segment_end.assign(n, 0);
  b.bootstrap_values.assign(n, 0);
  return b;
}

// ---- GAE ----

TEST(PpoGae, TerminatedEpisodeDoesNotBootstrap) {
  SampleBatch b = Rows({1, 1, 1}, {0.5f, 0.4f, 0.3f});
  b.terminated[2] = 1;
  b.bootstrap_values[2] = 100;  // ignored: the MDP ended
  GaeResult g = ComputeGae(b, 0.9, 0.8);
  // delta2 = 1 - 0.3; delta1 = 1 + 0.9*0.3 - 0.4; delta0 = 1 + 0.9*0.4 - 0.5; A_t = delta_t + 0.72 A_{t+1}
  EXPECT_NEAR(g.advantages[2], 0.7, 1e-6);
  EXPECT_NEAR(g.advantages[1], 0.87 + 0.72 * 0.7, 1e-6);
  EXPECT_NEAR(g.advantages[0], 0.86 + 0.72 * 1.374, 1e-5);
  EXPECT_NEAR(g.value_targets[0], 1.84928 + 0.5, 1e-5);
  EXPECT_NEAR(g.value_targets[2], 1.0, 1e-6);
}

TEST(PpoGae, TruncatedEpisodeBootstrapsFromTheFinalObservationsValue) {
  SampleBatch b = Rows({1, 1, 1}, {0.5f, 0.4f, 0.3f});
  b.truncated[2] = 1;
  b.bootstrap_values[2] = 2.0f;
  GaeResult g = ComputeGae(b, 0.9, 0.8);
  EXPECT_NEAR(g.advantages[2], 1 + 0.9 * 2.0 - 0.3, 1e-6);
  EXPECT_NEAR(g.advantages[1], 0.87 + 0.72 * 2.5, 1e-5);
  EXPECT_NEAR(g.advantages[0], 0.86 + 0.72 * 2.67, 1e-5);
  // A segment cut by the sampler is the same computation.
  SampleBatch s = b;
  s.truncated[2] = 0;
  s.segment_end[2] = 1;
  GaeResult h = ComputeGae(s, 0.9, 0.8);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(h.advantages[i], g.advantages[i]);
}

TEST(PpoGae, NothingFlowsAcrossSegmentsAndLambdaOneGamma1IsMonteCarlo) {
  // Two segments: [r=1 terminated], [r=2, r=3 segment end bootstrapping 10].
  SampleBatch b = Rows({1, 2, 3}, {0.25f, 1, 2});
  b.terminated[0] = 1;
  b.segment_end[2] = 1;
  b.bootstrap_values[2] = 10;
  GaeResult g = ComputeGae(b, 1.0, 1.0);
  EXPECT_NEAR(g.advantages[0], 1 - 0.25, 1e-6);
  EXPECT_NEAR(g.value_targets[1], 2 + 3 + 10, 1e-5);  // the discounted return plus bootstrap
  EXPECT_NEAR(g.value_targets[2], 3 + 10, 1e-5);
  EXPECT_NEAR(g.advantages[1], 15 - 1, 1e-5);
}

TEST(PpoGae, BadBatchesAreErrors) {
  SampleBatch b = Rows({1, 1}, {0, 0});
  EXPECT_ERROR_HAS(ComputeGae(b, 0.99, 1.0), "ends neither an episode nor a segment");
  b.values.pop_back();
  EXPECT_ERROR_HAS(ComputeGae(b, 0.99, 1.0), "of one size");
}

TEST(PpoGae, StandardizeGivesZeroMeanUnitStd) {
  std::vector<float> x{1, 2, 3, 4};
  Standardize(x);
  EXPECT_NEAR(x[0] + x[1] + x[2] + x[3], 0, 1e-6);
  EXPECT_NEAR(x[3], 1.5 / std::sqrt(1.25), 1e-5);
  std::vector<float> same{2, 2};
  Standardize(same);  // std 0: divided by 1e-4, not by zero
  EXPECT_EQ(same[0], 0);
}

// ---- Distributions and the loss ----

/// A module on CartPole's spaces whose policy outputs logits (0, ln 3) (probabilities 0.25,
/// 0.75) and whose value is 0.5 for every observation.
RLModule ConstantModule() {
  auto env = MakeEnv("CartPole-v1");
  RLModule m(env->observation_space(), env->action_space(), std::vector<int64_t>{4});
  torch::NoGradGuard no_grad;
  for (auto& p : m->named_parameters()) {
    p.value().zero_();
    if (p.key() == "pi.2.bias") p.value()[1] = std::log(3.0f);
    if (p.key() == "vf.2.bias") p.value()[0] = 0.5f;
  }
  return m;
}

TEST(PpoLoss, HandComputedDiscreteCase) {
  RLModule m = ConstantModule();
  torch::Tensor obs = torch::randn({2, 4});
  torch::Tensor actions = torch::tensor({1.0f, 0.0f});
  torch::Tensor old_logp = torch::full({2}, std::log(0.5f));           // ratios 1.5 and 0.5
  torch::Tensor old_dist = torch::zeros({2, 2});                       // uniform
  torch::Tensor adv = torch::tensor({1.0f, -1.0f});
  torch::Tensor targets = torch::tensor({2.5f, 0.0f});
  LossParams p{.clip_param = 0.2, .vf_clip_param = 1.0, .vf_loss_coeff = 0.5,
               .entropy_coeff = 0.01, .use_kl_loss = true, .kl_coeff = 0.2};
  LossOutputs out = PpoLoss(*m, obs, actions, old_logp, old_dist, adv, targets, p);
  // surrogates min(1.5, 1.2) = 1.2 and min(-0.5, -0.8) = -0.8
  EXPECT_NEAR(out.policy_loss, (-1.2 + 0.8) / 2, 1e-5);
  EXPECT_NEAR(out.vf_loss, (1.0 + 0.25) / 2, 1e-5);  // (2.5-0.5)^2 = 4 clipped at 1
  const double entropy = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
  EXPECT_NEAR(out.entropy, entropy, 1e-5);
  const double kl = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0);
  EXPECT_NEAR(out.mean_kl, kl, 1e-5);
  EXPECT_NEAR(out.total.item<double>(), -0.2 + 0.5 * 0.625 - 0.01 * entropy + 0.2 * kl, 1e-5);
  out.total.backward();
  EXPECT_TRUE(m->named_parameters()["pi.2.bias"].grad().defined());
  // Without the KL term the total drops by kl_coeff * kl.
  p.use_kl_loss = false;
  EXPECT_NEAR(PpoLoss(*m, obs, actions, old_logp, old_dist, adv, targets, p).total.item<double>(),
              -0.2 + 0.5 * 0.625 - 0.01 * entropy, 1e-5);
}

TEST(PpoLoss, GaussianLogProbEntropyAndKl) {
  torch::Tensor old_in = torch::tensor({{0.0f, 0.0f}});                      // N(0, 1)
  torch::Tensor new_in = torch::tensor({{1.0f, static_cast<float>(std::log(2.0))}});  // N(1, 2^2)
  const double half_log_2pi = 0.5 * std::log(2 * M_PI);
  EXPECT_NEAR(LogProb(old_in, torch::tensor({{1.0f}}), false).item<double>(), -0.5 - half_log_2pi, 1e-5);
  EXPECT_NEAR(Entropy(old_in, false).item<double>(), 0.5 + half_log_2pi, 1e-5);
  EXPECT_NEAR(Kl(old_in, new_in, false).item<double>(), std::log(2.0) + 2.0 / 8 - 0.5, 1e-5);
  EXPECT_NEAR(Kl(old_in, old_in, false).item<double>(), 0, 1e-7);
}

TEST(PpoLoss, KlCoefficientAdaptsAsRLlib) {
  EXPECT_DOUBLE_EQ(UpdateKlCoeff(0.2, 0.03, 0.01), 0.3);
  EXPECT_DOUBLE_EQ(UpdateKlCoeff(0.2, 0.004, 0.01), 0.1);
  EXPECT_DOUBLE_EQ(UpdateKlCoeff(0.2, 0.01, 0.01), 0.2);
  EXPECT_DOUBLE_EQ(UpdateKlCoeff(0.2, 0.02, 0.01), 0.2);  // exactly 2x: kept
}

// ---- The module ----

TEST(PpoRLModule, ActionsForBothSpaceKinds) {
  std::mt19937_64 rng(1);
  RLModule m = ConstantModule();
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += m->ComputeSingleAction({0, 0, 0, 0}, true, rng).index;
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);  // sampled from (0.25, 0.75)
  EXPECT_EQ(m->ComputeSingleAction({0, 0, 0, 0}, false, rng).index, 1);  // the mode
  EXPECT_ERROR_HAS(m->ComputeSingleAction({0, 0}, false, rng), "observation space has 4");

  auto pendulum = MakeEnv("Pendulum-v1");
  RLModule g(pendulum->observation_space(), pendulum->action_space());
  EXPECT_EQ(g->dist_size(), 2);
  Action a = g->ComputeSingleAction({1, 0, 0}, false, rng);
  ASSERT_EQ(a.values.size(), 1u);
  torch::NoGradGuard no_grad;
  EXPECT_FLOAT_EQ(a.values[0], g->DistInputs(torch::tensor({{1.0f, 0.0f, 0.0f}}))[0][0].item<float>());
  EXPECT_ERROR_HAS(RLModule(pendulum->observation_space(), pendulum->action_space(), std::vector<int64_t>{}),
                   "at least one hidden layer");
}

TEST(PpoRLModule, WeightsRoundTripThroughBytes) {
  auto env = MakeEnv("CartPole-v1");
  torch::manual_seed(1);
  RLModule a(env->observation_space(), env->action_space());
  torch::manual_seed(2);
  RLModule b(env->observation_space(), env->action_space());
  torch::Tensor obs = torch::randn({5, 4});
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(torch::allclose(a->DistInputs(obs), b->DistInputs(obs)));
  std::vector<uint8_t> w = GetWeights(*a);
  SetWeights(*b, w.data(), w.size());
  EXPECT_TRUE(torch::equal(a->DistInputs(obs), b->DistInputs(obs)));
  EXPECT_TRUE(torch::equal(a->Values(obs), b->Values(obs)));

  RLModule wide(env->observation_space(), env->action_space(), std::vector<int64_t>{32});
  EXPECT_ERROR_HAS(SetWeights(*wide, w.data(), w.size()), "parameters");
  std::vector<uint8_t> junk(100, 7);
  EXPECT_ERROR_HAS(SetWeights(*b, junk.data(), junk.size()), "does not hold RLModule weights");
  EXPECT_ERROR_HAS(SetWeights(*b, w.data(), w.size() - 4), "bytes");
}

TEST(PpoRLModule, WeightsRoundTripThroughHdf5) {
  auto env = MakeEnv("Pendulum-v1");
  RLModule a(env->observation_space(), env->action_space());
  RLModule b(env->observation_space(), env->action_space());
  {
    torch::NoGradGuard no_grad;
    a->named_parameters()["log_std"].fill_(-0.7f);
  }
  auto dir = std::filesystem::temp_directory_path() / ("prism_rl_ppo_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "module.h5").string();
  SaveModule(file, *a, nullptr, {{"iteration", int64_t{7}}, {"config", std::string("{}")}});
  LoadModule(file, *b, nullptr);
  torch::Tensor obs = torch::randn({3, 3});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(a->DistInputs(obs), b->DistInputs(obs)));
  auto attrs = prism::train::ReadAttributes(file);
  EXPECT_EQ(std::get<int64_t>(attrs.at("iteration")), 7);
  RLModule other(env->observation_space(), env->action_space(), std::vector<int64_t>{8});
  EXPECT_ERROR_HAS(LoadModule(file, *other, nullptr), "pi.0.weight");
  std::filesystem::remove_all(dir);
}

// ---- Sampling and learning ----

TEST(PpoSampler, SegmentsPerCopyWithTruncationBootstraps) {
  Sampler s("CartPole-v1", {{"max_episode_steps", 10}}, 3, /*seed=*/5, {16});
  SampleBatch b = s.Sample(100);
  ASSERT_GE(b.size(), 100);
  EXPECT_LT(b.size(), 103);
  EXPECT_EQ(static_cast<int64_t>(b.obs.size()), b.size() * 4);
  // Every episode is at most 10 steps; CartPole pays 1 per step.
  ASSERT_FALSE(b.episode_returns.empty());
  for (size_t i = 0; i < b.episode_returns.size(); ++i) {
    EXPECT_EQ(b.episode_returns[i], static_cast<double>(b.episode_lens[i]));
    EXPECT_LE(b.episode_lens[i], 10);
  }
  int segments = 0, truncations = 0;
  for (int64_t i = 0; i < b.size(); ++i) {
    segments += b.segment_end[i];
    if (b.truncated[i] && !b.terminated[i]) {
      ++truncations;
      EXPECT_NE(b.bootstrap_values[i], 0.0f) << "row " << i;  // V(final observation)
    }
    // The pole can fall on the 10th step too: terminated wins, nothing to bootstrap.
    if (b.terminated[i]) EXPECT_EQ(b.bootstrap_values[i], 0.0f) << "row " << i;
    if (!b.truncated[i] && !b.segment_end[i]) {
      EXPECT_EQ(b.bootstrap_values[i], 0.0f);
    }
  }
  EXPECT_GT(truncations, 0);
  EXPECT_LE(segments, 3);
  EXPECT_NO_THROW(ComputeGae(b, 0.99, 0.95));
  // Episodes continue across calls: the next sample's rows start where this one stopped.
  SampleBatch c = s.Sample(30);
  EXPECT_GE(c.size(), 30);
}

TEST(PpoLearner, ImprovesCartPoleLocally) {
  torch::manual_seed(0);
  Sampler s("CartPole-v1", {}, 4, /*seed=*/0, {64, 64});
  LearnerOptions o;
  o.lr = 3e-4;
  o.num_epochs = 6;
  o.minibatch_size = 128;
  o.lambda = 0.95;
  o.loss.vf_loss_coeff = 0.01;
  Learner learner(s.module(), o);  // shares the module: sampling sees each update
  double first = 0, best = 0;
  for (int it = 0; it < 25 && best < 100; ++it) {
    SampleBatch b = s.Sample(2000);
    double mean = std::accumulate(b.episode_returns.begin(), b.episode_returns.end(), 0.0) /
                  std::max<size_t>(b.episode_returns.size(), 1);
    if (it == 0) first = mean;
    best = std::max(best, mean);
    LearnerStats st = learner.Update(b);
    EXPECT_TRUE(std::isfinite(st.total_loss));
    EXPECT_GT(st.num_minibatches, 0);
  }
  EXPECT_LT(first, 40);
  EXPECT_GE(best, 100) << "mean return of the first batch " << first;
}

TEST(PpoLearner, UpdatesAGaussianPolicyOnPendulum) {
  Sampler s("Pendulum-v1", {}, 2, /*seed=*/3, {32});
  LearnerOptions o;
  o.num_epochs = 2;
  Learner learner(s.module(), o);
  SampleBatch b = s.Sample(400);
  EXPECT_EQ(b.action_size, 1);
  EXPECT_EQ(b.dist_size, 2);
  std::vector<uint8_t> before = GetWeights(*s.module());
  LearnerStats st = learner.Update(b);
  EXPECT_TRUE(std::isfinite(st.total_loss));
  EXPECT_EQ(st.num_minibatches, 2 * (400 / 128));
  EXPECT_NE(GetWeights(*s.module()), before);
  SampleBatch empty;
  EXPECT_ERROR_HAS(learner.Update(empty), "empty train batch");
}

TEST(PpoLearner, TwoLearnersAveragingGradientsTakeTheStepOfOne) {
  Sampler s("CartPole-v1", {}, 2, /*seed=*/4, {16});
  SampleBatch b = s.Sample(301);
  std::vector<LearnerShard> halves = Postprocess(b, 0.99, 0.95, 2);
  const int64_t per = halves[0].size();
  ASSERT_EQ(per, b.size() / 2);
  EXPECT_EQ(halves[1].size(), per);
  // The one learner's batch: both halves, the same rows.
  LearnerShard both = halves[0];
  for (auto [dst, src] : {std::pair{&both.obs, &halves[1].obs}, {&both.actions, &halves[1].actions},
                          {&both.logp, &halves[1].logp}, {&both.dist_inputs, &halves[1].dist_inputs},
                          {&both.advantages, &halves[1].advantages},
                          {&both.value_targets, &halves[1].value_targets}}) {
    dst->insert(dst->end(), src->begin(), src->end());
  }
  LearnerOptions o;
  o.lr = 1e-2;
  o.num_epochs = 1;
  o.minibatch_size = 2 * per;  // one step on everything; each of two learners: per rows
  const std::vector<uint8_t> init = GetWeights(*s.module());
  auto env = MakeEnv("CartPole-v1");
  auto fresh = [&] {
    RLModule m(env->observation_space(), env->action_space(), std::vector<int64_t>{16});
    SetWeights(*m, init.data(), init.size());
    return m;
  };
  Learner one(fresh(), o);
  LearnerStats single = one.UpdateShard(both);

  std::barrier<> sync(2);
  std::vector<float>* buffers[2] = {nullptr, nullptr};
  auto average_for = [&](int me) {
    return [&, me](std::vector<float>& v) {
      buffers[me] = &v;
      sync.arrive_and_wait();
      std::vector<float> mean(v.size());
      for (size_t i = 0; i < v.size(); ++i) mean[i] = ((*buffers[0])[i] + (*buffers[1])[i]) / 2;
      sync.arrive_and_wait();  // both read both before either writes
      v = mean;
    };
  };
  Learner a(fresh(), o), c(fresh(), o);
  LearnerStats sa, sc;
  std::thread t([&] { sc = c.UpdateShard(halves[1], average_for(1), 2); });
  sa = a.UpdateShard(halves[0], average_for(0), 2);
  t.join();
  EXPECT_EQ(sa.num_minibatches, 1);
  EXPECT_NEAR(sa.mean_kl, sc.mean_kl, 1e-9);  // the stats are the group's
  EXPECT_NEAR(sa.policy_loss, single.policy_loss, 1e-5);
  EXPECT_NEAR(sa.vf_loss, single.vf_loss, 1e-4);
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({8, 4});
  EXPECT_TRUE(torch::allclose(a.module()->DistInputs(x), one.module()->DistInputs(x), 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(a.module()->DistInputs(x), c.module()->DistInputs(x)));
  EXPECT_TRUE(torch::allclose(a.module()->Values(x), one.module()->Values(x), 1e-5, 1e-6));
  // And they moved: the step was not a no-op.
  RLModule start = fresh();
  EXPECT_FALSE(torch::allclose(start->DistInputs(x), a.module()->DistInputs(x)));
  EXPECT_ERROR_HAS(Postprocess(b, 0.99, 0.95, 0), "learner shards");
}

}  // namespace
}  // namespace prism::rl::ppo
