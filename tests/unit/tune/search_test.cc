// Search spaces and searchers: each distribution's range, quantization and types over many
// draws, bad bounds, seeding, grid expansion, SampleFrom, save/restore, the concurrency
// limiter, and TPE against random search on a quadratic.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "prism/errors.h"
#include "prism/tune/searcher.h"
#include "prism/tune/search_space.h"
#include "../../common/test_util.h"

namespace tune = prism::tune;
using ::testing::HasSubstr;
using prism_test::ErrorOf;

namespace {

constexpr int kDraws = 20000;

std::vector<tune::Value> Draw(const tune::Domain& d, int n = kDraws, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<tune::Value> out;
  for (int i = 0; i < n; ++i) out.push_back(d.Sample(rng, {}));
  return out;
}

std::vector<double> Doubles(const std::vector<tune::Value>& vs) {
  std::vector<double> out;
  for (const auto& v : vs) {
    EXPECT_TRUE(std::holds_alternative<double>(v)) << tune::ToText(v);
    out.push_back(std::get<double>(v));
  }
  return out;
}

std::vector<int64_t> Ints(const std::vector<tune::Value>& vs) {
  std::vector<int64_t> out;
  for (const auto& v : vs) {
    EXPECT_TRUE(std::holds_alternative<int64_t>(v)) << tune::ToText(v);
    out.push_back(std::get<int64_t>(v));
  }
  return out;
}

bool IsMultiple(double x, double q) { return std::fabs(x / q - std::round(x / q)) < 1e-9; }

tune::Metrics M(double loss) { return {{"loss", loss}}; }

}  // namespace

// --- Distributions -----------------------------------------------------------------------

TEST(DomainTest, UniformStaysInHalfOpenRange) {
  const auto xs = Doubles(Draw(tune::Uniform(-2, 3)));
  EXPECT_GE(*std::min_element(xs.begin(), xs.end()), -2);
  EXPECT_LT(*std::max_element(xs.begin(), xs.end()), 3);
  double mean = 0;
  for (double x : xs) mean += x / xs.size();
  EXPECT_NEAR(mean, 0.5, 0.05);
  // Both halves are hit about equally.
  EXPECT_NEAR(std::count_if(xs.begin(), xs.end(), [](double x) { return x < 0.5; }),
              kDraws / 2, kDraws * 0.02);
}

TEST(DomainTest, QUniformDrawsMultiplesOfQIncludingUpper) {
  const auto d = tune::QUniform(0, 1, 0.1);
  const auto xs = Doubles(Draw(d));
  std::set<std::string> seen;
  for (double x : xs) {
    EXPECT_GE(x, 0);
    EXPECT_LE(x, 1);
    EXPECT_TRUE(IsMultiple(x, 0.1)) << x;
    seen.insert(tune::ToText(x));
  }
  // Every multiple, printed short (0.3, not 0.30000000000000004), the upper bound included.
  EXPECT_EQ(seen, (std::set<std::string>{"0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7",
                                         "0.8", "0.9", "1"}));
}

TEST(DomainTest, LogUniformIsUniformInLogSpace) {
  const auto xs = Doubles(Draw(tune::LogUniform(1e-4, 1e-1)));
  int per_decade[3] = {0, 0, 0};
  for (double x : xs) {
    ASSERT_GE(x, 1e-4);
    ASSERT_LT(x, 1e-1);
    per_decade[std::clamp(static_cast<int>(std::floor(std::log10(x) + 4)), 0, 2)]++;
  }
  for (int n : per_decade) EXPECT_NEAR(n, kDraws / 3.0, kDraws * 0.02);
}

TEST(DomainTest, QLogUniformIsQuantizedWithinBounds) {
  const auto xs = Doubles(Draw(tune::QLogUniform(1, 1000, 5)));
  for (double x : xs) {
    EXPECT_GE(x, 5);  // the first multiple of 5 in [1, 1000]
    EXPECT_LE(x, 1000);
    EXPECT_TRUE(IsMultiple(x, 5)) << x;
  }
  EXPECT_EQ(*std::max_element(xs.begin(), xs.end()), 1000);
}

TEST(DomainTest, RandnHasItsMeanAndSd) {
  const auto xs = Doubles(Draw(tune::Randn(5, 2)));
  double mean = 0, var = 0;
  for (double x : xs) mean += x / xs.size();
  for (double x : xs) var += (x - mean) * (x - mean) / xs.size();
  EXPECT_NEAR(mean, 5, 0.06);
  EXPECT_NEAR(std::sqrt(var), 2, 0.05);
  for (double x : Doubles(Draw(tune::QRandn(0, 1, 0.25), 2000))) EXPECT_TRUE(IsMultiple(x, 0.25));
}

TEST(DomainTest, RandIntExcludesUpper) {
  const auto xs = Ints(Draw(tune::RandInt(3, 7)));
  EXPECT_EQ(std::set<int64_t>(xs.begin(), xs.end()), (std::set<int64_t>{3, 4, 5, 6}));
}

TEST(DomainTest, QRandIntIncludesUpperAndIsAMultiple) {
  const auto xs = Ints(Draw(tune::QRandInt(0, 10, 5)));
  EXPECT_EQ(std::set<int64_t>(xs.begin(), xs.end()), (std::set<int64_t>{0, 5, 10}));
  const auto ys = Ints(Draw(tune::QRandInt(1, 10, 3)));
  EXPECT_EQ(std::set<int64_t>(ys.begin(), ys.end()), (std::set<int64_t>{3, 6, 9}));
  const auto zs = Ints(Draw(tune::QRandInt(1, 4)));  // q = 1: 1..4 inclusive
  EXPECT_EQ(std::set<int64_t>(zs.begin(), zs.end()), (std::set<int64_t>{1, 2, 3, 4}));
}

TEST(DomainTest, LogRandIntExcludesUpperAndFavoursSmallValues) {
  const auto xs = Ints(Draw(tune::LogRandInt(1, 100)));
  EXPECT_GE(*std::min_element(xs.begin(), xs.end()), 1);
  EXPECT_EQ(*std::max_element(xs.begin(), xs.end()), 99);
  // log-uniform: [1, 10) and [10, 100) get about half each.
  EXPECT_NEAR(std::count_if(xs.begin(), xs.end(), [](int64_t x) { return x < 10; }), kDraws / 2,
              kDraws * 0.02);
}

TEST(DomainTest, QLogRandIntIncludesUpper) {
  const auto xs = Ints(Draw(tune::QLogRandInt(2, 64, 2)));
  for (int64_t x : xs) {
    EXPECT_GE(x, 2);
    EXPECT_LE(x, 64);
    EXPECT_EQ(x % 2, 0);
  }
  EXPECT_EQ(*std::max_element(xs.begin(), xs.end()), 64);
  EXPECT_EQ(*std::min_element(xs.begin(), xs.end()), 2);
}

TEST(DomainTest, ChoiceDrawsEveryCategoryAboutEqually) {
  const auto d = tune::Choice({"sgd", "adam", 3, 0.5, true});
  std::map<std::string, int> counts;
  for (const auto& v : Draw(d)) counts[tune::ToText(v)]++;
  ASSERT_EQ(counts.size(), 5u);
  for (const auto& [k, n] : counts) EXPECT_NEAR(n, kDraws / 5.0, kDraws * 0.02) << k;
  EXPECT_EQ(counts.count("0.5"), 1u);
  EXPECT_EQ(counts.count("true"), 1u);
}

TEST(DomainTest, ValueTextRoundTrips) {
  EXPECT_EQ(tune::ToText(0.1), "0.1");
  EXPECT_EQ(tune::ToText(1e-4), "0.0001");
  EXPECT_EQ(tune::ToText(tune::Value(int64_t{42})), "42");
  EXPECT_EQ(tune::ToText(true), "true");
  EXPECT_EQ(tune::ToText(std::string("adam")), "adam");
  std::mt19937_64 rng(3);
  const auto d = tune::LogUniform(1e-6, 1);
  for (int i = 0; i < 1000; ++i) {
    const double x = std::get<double>(d.Sample(rng, {}));
    tune::Config c;
    c.Set("x", x);  // train::Config's own formatting is the shortest round-trip form too
    EXPECT_EQ(c.Get<double>("x", 0), x);
    EXPECT_EQ(c.Get<std::string>("x", ""), tune::ToText(x));
  }
  tune::Config c;
  c.Set("lr", 0.1).Set("f", 0.25f);
  EXPECT_EQ(c.Get<std::string>("lr", ""), "0.1");
  EXPECT_EQ(c.Get<std::string>("f", ""), "0.25");
}

TEST(DomainTest, ContainsAndClip) {
  const auto u = tune::Uniform(0, 1);
  EXPECT_TRUE(u.Contains(0.0));
  EXPECT_FALSE(u.Contains(1.0));
  EXPECT_FALSE(u.Contains(std::string("a")));
  EXPECT_EQ(std::get<double>(u.Clip(-3)), 0);
  EXPECT_LT(std::get<double>(u.Clip(7)), 1);
  const auto q = tune::QRandInt(0, 10, 5);
  EXPECT_TRUE(q.Contains(tune::Value(int64_t{10})));
  EXPECT_FALSE(q.Contains(tune::Value(int64_t{7})));
  EXPECT_EQ(std::get<int64_t>(q.Clip(7.4)), 5);
  EXPECT_EQ(std::get<int64_t>(q.Clip(99)), 10);
  const auto r = tune::RandInt(0, 10);
  EXPECT_FALSE(r.Contains(tune::Value(int64_t{10})));
  EXPECT_EQ(std::get<int64_t>(r.Clip(42)), 9);
  EXPECT_EQ(std::get<double>(tune::QUniform(0, 1, 0.1).Clip(0.33)), 0.3);
  const auto c = tune::Choice({1, 2});
  EXPECT_TRUE(c.Contains(2.0));  // numbers compare by value
  EXPECT_FALSE(c.Contains(3.0));
  EXPECT_THAT(ErrorOf([&] { c.Clip(1); }), HasSubstr("not a numeric range"));
  EXPECT_TRUE(tune::Domain(5).Contains(tune::Value(int64_t{5})));
}

TEST(DomainTest, ToStringNamesTheDistribution) {
  EXPECT_EQ(tune::Uniform(0.1, 0.9).ToString(), "uniform(0.1, 0.9)");
  EXPECT_EQ(tune::LogUniform(1e-4, 0.1).ToString(), "loguniform(0.0001, 0.1)");
  EXPECT_EQ(tune::QRandInt(0, 10, 2).ToString(), "qrandint(0, 10, 2)");
  EXPECT_EQ(tune::Choice({"sgd", "adam"}).ToString(), "choice([sgd, adam])");
  EXPECT_EQ(tune::GridSearch({2, 3}).ToString(), "grid_search([2, 3])");
  EXPECT_EQ(tune::Domain("x").ToString(), "x");
}

TEST(DomainTest, BadBoundsAreClearErrors) {
  EXPECT_THAT(ErrorOf([] { tune::Uniform(1, 1); }),
              AllOf(HasSubstr("Uniform(1, 1)"), HasSubstr("lower (1) must be below upper (1)")));
  EXPECT_THAT(ErrorOf([] { tune::Uniform(2, 1); }), HasSubstr("Uniform(2, 1)"));
  EXPECT_THAT(ErrorOf([] { tune::LogUniform(0, 1); }),
              AllOf(HasSubstr("LogUniform(0, 1)"), HasSubstr("must be > 0")));
  EXPECT_THAT(ErrorOf([] { tune::LogUniform(-1, 1); }), HasSubstr("log space"));
  EXPECT_THAT(ErrorOf([] { tune::QUniform(0, 1, 0); }),
              AllOf(HasSubstr("QUniform(0, 1, 0)"), HasSubstr("q > 0")));
  EXPECT_THAT(ErrorOf([] { tune::QUniform(0.01, 0.02, 0.1); }), HasSubstr("no multiple of q"));
  EXPECT_THAT(ErrorOf([] { tune::QRandInt(0, 10, -2); }), HasSubstr("q > 0"));
  EXPECT_THAT(ErrorOf([] { tune::RandInt(5, 5); }),
              AllOf(HasSubstr("RandInt(5, 5)"), HasSubstr("RandInt(5, 6)")));
  EXPECT_THAT(ErrorOf([] { tune::LogRandInt(0, 10); }), HasSubstr("LogRandInt(0, 10)"));
  EXPECT_THAT(ErrorOf([] { tune::QLogRandInt(0, 10, 1); }), HasSubstr("must be > 0"));
  EXPECT_THAT(ErrorOf([] { tune::Randn(0, 0); }),
              AllOf(HasSubstr("Randn(0, 0)"), HasSubstr("sd > 0")));
  EXPECT_THAT(ErrorOf([] { tune::Choice({}); }), HasSubstr("Choice([]): the list of categories is empty"));
  EXPECT_THAT(ErrorOf([] { tune::GridSearch({}); }), HasSubstr("GridSearch([])"));
  EXPECT_THAT(ErrorOf([] { tune::Uniform(0, INFINITY); }), HasSubstr("finite"));
  EXPECT_THAT(ErrorOf([] { tune::SampleFrom(nullptr); }), HasSubstr("function is empty"));
  EXPECT_THAT(ErrorOf([] { tune::ValidateParamSpace({{"", 1}}); }), HasSubstr("empty name"));
}

// --- BasicVariantGenerator ----------------------------------------------------------------

namespace {

std::vector<tune::Config> SuggestAll(tune::Searcher& s, int max = 1000) {
  std::vector<tune::Config> out;
  for (int i = 0; i < max; ++i) {
    auto sug = s.Suggest("t" + std::to_string(i));
    if (sug.kind == tune::Suggestion::kFinished) break;
    EXPECT_EQ(sug.kind, tune::Suggestion::kConfig);
    out.push_back(sug.config);
  }
  return out;
}

}  // namespace

TEST(BasicVariantTest, GridCrossProductRepeatedNumSamplesTimesFirstKeyFastest) {
  tune::ParamSpace space{{"a", tune::GridSearch({1, 2})},
                         {"b", tune::GridSearch({"x", "y", "z"})},
                         {"c", tune::Uniform(0, 1)},
                         {"epochs", 10}};
  tune::BasicVariantGenerator gen;
  gen.Setup(space, "", "", /*num_samples=*/2, /*seed=*/7);
  EXPECT_EQ(gen.TotalTrials(), 12);
  const auto configs = SuggestAll(gen);
  ASSERT_EQ(configs.size(), 12u);
  std::vector<std::string> order;
  std::set<std::string> cs;
  for (const auto& c : configs) {
    order.push_back(c.Get("a", "") + c.Get("b", ""));
    EXPECT_EQ(c.Get<int>("epochs", 0), 10);
    const double x = c.Get<double>("c", -1);
    EXPECT_GE(x, 0);
    EXPECT_LT(x, 1);
    cs.insert(c.Get("c", ""));
  }
  // Ray's order: the first grid key varies fastest; the whole grid, then the whole grid again.
  const std::vector<std::string> pass = {"1x", "2x", "1y", "2y", "1z", "2z"};
  std::vector<std::string> expected = pass;
  expected.insert(expected.end(), pass.begin(), pass.end());
  EXPECT_EQ(order, expected);
  EXPECT_EQ(cs.size(), 12u);  // non-grid values drawn per trial
  EXPECT_EQ(gen.Suggest("more").kind, tune::Suggestion::kFinished);
}

TEST(BasicVariantTest, SameSeedSameConfigsOtherSeedOthers) {
  tune::ParamSpace space{{"lr", tune::LogUniform(1e-4, 1e-1)},
                         {"opt", tune::Choice({"sgd", "adam"})},
                         {"layers", tune::RandInt(1, 8)}};
  auto run = [&](uint64_t seed) {
    tune::BasicVariantGenerator gen;
    gen.Setup(space, "loss", "min", 20, seed);
    std::vector<std::map<std::string, std::string>> out;
    for (const auto& c : SuggestAll(gen)) out.push_back(c.Values());
    return out;
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
  EXPECT_EQ(run(3).size(), 20u);
}

TEST(BasicVariantTest, SampleFromSeesTheOtherValues) {
  tune::ParamSpace space{
      {"lr", tune::Uniform(0.1, 1)},
      {"layers", tune::GridSearch({2, 4})},
      {"wd", tune::SampleFrom([](const tune::Config& c) {
         return tune::Value(c.Get<double>("lr", -1) / 10 + c.Get<int>("layers", -100));
       })},
      {"z", tune::SampleFrom([](const tune::Config& c) {  // sees the earlier SampleFrom's value
         return tune::Value(c.Get<double>("wd", -1) * 2);
       })}};
  tune::BasicVariantGenerator gen;
  gen.Setup(space, "", "", 3, 1);
  const auto configs = SuggestAll(gen);
  ASSERT_EQ(configs.size(), 6u);
  for (const auto& c : configs) {
    const double wd = c.Get<double>("lr", 0) / 10 + c.Get<int>("layers", 0);
    EXPECT_EQ(c.Get<double>("wd", 0), wd);
    EXPECT_EQ(c.Get<double>("z", 0), wd * 2);
  }
}

TEST(BasicVariantTest, ThrowingSampleFromNamesTheParameter) {
  tune::ParamSpace space{{"bad", tune::SampleFrom([](const tune::Config& c) -> tune::Value {
                            throw std::runtime_error("boom");
                          })}};
  tune::BasicVariantGenerator gen;
  gen.Setup(space, "", "", 1, 1);
  EXPECT_THAT(ErrorOf([&] { gen.Suggest("t0"); }),
              AllOf(HasSubstr("\"bad\""), HasSubstr("boom")));
}

TEST(BasicVariantTest, BadArgumentsAreErrors) {
  tune::BasicVariantGenerator gen;
  EXPECT_THAT(ErrorOf([&] { gen.Suggest("t"); }), HasSubstr("before Setup"));
  EXPECT_THAT(ErrorOf([&] { gen.Setup({}, "", "", 0, 1); }), HasSubstr("num_samples is 0"));
  EXPECT_THAT(ErrorOf([&] { gen.Setup({}, "loss", "minimize", 1, 1); }),
              HasSubstr("\"min\""));
  EXPECT_THAT(ErrorOf([&] { gen.RestoreState("{\"kind\":\"TPESearch\"}"); }),
              HasSubstr("not one BasicVariantGenerator::SaveState wrote"));
  EXPECT_THAT(ErrorOf([&] { gen.RestoreState("not json"); }), HasSubstr("RestoreState"));
}

TEST(BasicVariantTest, UnlimitedSamplesCycleTheGrid) {
  tune::BasicVariantGenerator gen;
  gen.Setup({{"a", tune::GridSearch({1, 2, 3})}, {"x", tune::Uniform(0, 1)}}, "", "", -1, 5);
  EXPECT_EQ(gen.TotalTrials(), -1);
  const auto configs = SuggestAll(gen, 10);
  ASSERT_EQ(configs.size(), 10u);
  for (size_t i = 0; i < configs.size(); ++i) {
    EXPECT_EQ(configs[i].Get<int>("a", 0), static_cast<int>(i % 3) + 1);
  }
}

TEST(BasicVariantTest, RestoreContinuesTheExactSequence) {
  tune::ParamSpace space{{"a", tune::GridSearch({1, 2, 3})},
                         {"x", tune::Uniform(0, 1)},
                         {"n", tune::QLogRandInt(1, 1024, 1)}};
  tune::BasicVariantGenerator whole;
  whole.Setup(space, "", "", 5, 11);
  const auto all = SuggestAll(whole);
  ASSERT_EQ(all.size(), 15u);

  tune::BasicVariantGenerator first;
  first.Setup(space, "", "", 5, 11);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(first.Suggest("t").config.Values(), all[i].Values());
  const std::string state = first.SaveState();

  tune::BasicVariantGenerator second;
  second.Setup(space, "", "", 5, 11);
  second.RestoreState(state);
  for (int i = 5; i < 10; ++i) EXPECT_EQ(second.Suggest("t").config.Values(), all[i].Values());

  // Restore before Setup works the same way.
  tune::BasicVariantGenerator third;
  third.RestoreState(state);
  third.Setup(space, "", "", 5, 11);
  EXPECT_EQ(third.Suggest("t").config.Values(), all[5].Values());
}

// --- ConcurrencyLimiter -------------------------------------------------------------------

TEST(ConcurrencyLimiterTest, WaitsAtTheLimitAndResumesWhenATrialEnds) {
  auto inner = std::make_shared<tune::BasicVariantGenerator>();
  tune::ConcurrencyLimiter limiter(inner, 2);
  limiter.Setup({{"x", tune::Uniform(0, 1)}}, "loss", "min", 4, 1);
  EXPECT_EQ(limiter.TotalTrials(), 4);
  EXPECT_EQ(limiter.Suggest("t0").kind, tune::Suggestion::kConfig);
  const auto s1 = limiter.Suggest("t1");
  EXPECT_EQ(s1.kind, tune::Suggestion::kConfig);
  EXPECT_EQ(limiter.Suggest("t2").kind, tune::Suggestion::kWait);
  EXPECT_EQ(limiter.Suggest("t2").kind, tune::Suggestion::kWait);

  // The state carries the live trials and the wrapped searcher's counter.
  auto inner2 = std::make_shared<tune::BasicVariantGenerator>();
  tune::ConcurrencyLimiter restored(inner2, 2);
  restored.Setup({{"x", tune::Uniform(0, 1)}}, "loss", "min", 4, 1);
  restored.RestoreState(limiter.SaveState());
  EXPECT_EQ(restored.Suggest("t2").kind, tune::Suggestion::kWait);

  const auto m = M(1);
  limiter.OnTrialComplete("t1", s1.config, &m, false);
  restored.OnTrialComplete("t1", s1.config, &m, false);
  const auto a = limiter.Suggest("t2");
  const auto b = restored.Suggest("t2");
  ASSERT_EQ(a.kind, tune::Suggestion::kConfig);
  ASSERT_EQ(b.kind, tune::Suggestion::kConfig);
  EXPECT_EQ(a.config.Values(), b.config.Values());
  EXPECT_EQ(limiter.Suggest("t3").kind, tune::Suggestion::kWait);
  limiter.OnTrialComplete("t0", {}, nullptr, true);  // an error frees the slot too
  EXPECT_EQ(limiter.Suggest("t3").kind, tune::Suggestion::kConfig);
  limiter.OnTrialComplete("t3", {}, nullptr, false);
  // The wrapped searcher's end passes through.
  EXPECT_EQ(limiter.Suggest("t4").kind, tune::Suggestion::kFinished);
}

TEST(ConcurrencyLimiterTest, BadArguments) {
  EXPECT_THAT(ErrorOf([] { tune::ConcurrencyLimiter(nullptr, 1); }), HasSubstr("null"));
  EXPECT_THAT(ErrorOf([] {
                tune::ConcurrencyLimiter(std::make_shared<tune::BasicVariantGenerator>(), 0);
              }),
              HasSubstr("max_concurrent is 0"));
}

// --- TPESearch ----------------------------------------------------------------------------

namespace {

double Quadratic(const tune::Config& c) {
  const double x = c.Get<double>("x", 1e9);
  return (x - 3) * (x - 3);
}

/// The best loss after `trials` sequential trials of `searcher` on (x - 3)^2.
double BestOnQuadratic(tune::Searcher& searcher, uint64_t seed, int trials) {
  searcher.Setup({{"x", tune::Uniform(-10, 10)}}, "loss", "min", trials, seed);
  double best = 1e300;
  for (int i = 0; i < trials; ++i) {
    const std::string id = "t" + std::to_string(i);
    auto s = searcher.Suggest(id);
    EXPECT_EQ(s.kind, tune::Suggestion::kConfig);
    const double loss = Quadratic(s.config);
    best = std::min(best, loss);
    const auto m = M(loss);
    searcher.OnTrialComplete(id, s.config, &m, false);
  }
  return best;
}

}  // namespace

TEST(TPETest, BeatsRandomSearchOnAQuadratic) {
  int tpe_wins = 0;
  double tpe_sum = 0, random_sum = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    tune::TPESearch tpe;
    tune::BasicVariantGenerator random;
    const double a = BestOnQuadratic(tpe, seed, 60);
    const double b = BestOnQuadratic(random, seed, 60);
    tpe_wins += a < b;
    tpe_sum += a;
    random_sum += b;
  }
  EXPECT_GE(tpe_wins, 7) << "TPE mean best " << tpe_sum / 10 << ", random " << random_sum / 10;
  EXPECT_LT(tpe_sum, random_sum);
}

TEST(TPETest, MaximizesToo) {
  tune::TPESearch tpe;
  tpe.Setup({{"x", tune::Uniform(-10, 10)}}, "score", "max", 60, 2);
  double best = -1e300;
  for (int i = 0; i < 60; ++i) {
    auto s = tpe.Suggest("t" + std::to_string(i));
    const double score = -Quadratic(s.config);
    best = std::max(best, score);
    const tune::Metrics m{{"score", score}};
    tpe.OnTrialComplete("t" + std::to_string(i), s.config, &m, false);
  }
  EXPECT_GT(best, -0.05);
}

TEST(TPETest, MixedSpaceStaysInDomainAndFindsTheGoodCategory) {
  tune::ParamSpace space{{"opt", tune::Choice({"sgd", "adam", "rmsprop"})},
                         {"layers", tune::QRandInt(2, 12, 2)},
                         {"units", tune::LogRandInt(8, 512)},
                         {"lr", tune::QLogUniform(1e-4, 1, 1e-4)},
                         {"noise", tune::Randn(0, 1)},
                         {"epochs", 3}};
  tune::TPESearch tpe;
  tpe.Setup(space, "loss", "min", 80, 9);
  int adam_late = 0;
  for (int i = 0; i < 80; ++i) {
    const std::string id = "t" + std::to_string(i);
    auto s = tpe.Suggest(id);
    const auto& c = s.config;
    for (const auto& [name, domain] : space) {
      const std::string text = c.Get(name, "");
      tune::Value v;
      if (domain.kind() == tune::Domain::Kind::kChoice) {
        v = text;
      } else if (domain.is_integer() || name == "epochs") {
        v = int64_t{std::stoll(text)};
        EXPECT_EQ(std::to_string(std::get<int64_t>(v)), text) << name;  // printed as an integer
      } else {
        v = std::stod(text);
      }
      EXPECT_TRUE(domain.Contains(v)) << name << " = " << text << " not in " << domain.ToString();
    }
    const double loss = (c.Get("opt", "") == "adam" ? 0 : 5) +
                        std::fabs(c.Get<int>("layers", 0) - 6) +
                        std::fabs(std::log10(c.Get<double>("lr", 1)) + 2);
    if (i >= 40 && c.Get("opt", "") == "adam") ++adam_late;
    const auto m = M(loss);
    tpe.OnTrialComplete(id, c, &m, false);
  }
  EXPECT_GE(adam_late, 25);  // of the last 40: random would give about 13
}

TEST(TPETest, ErrorsAndIgnoredResults) {
  tune::TPESearch tpe;
  EXPECT_THAT(ErrorOf([&] { tpe.Setup({{"a", tune::GridSearch({1, 2})}}, "loss", "min", 5, 1); }),
              AllOf(HasSubstr("\"a\""), HasSubstr("grid_search([1, 2])"), HasSubstr("Choice")));
  EXPECT_THAT(ErrorOf([&] {
                tpe.Setup({{"a", tune::SampleFrom([](const tune::Config&) {
                             return tune::Value(1.0);
                           })}},
                          "loss", "min", 5, 1);
              }),
              HasSubstr("SampleFrom"));
  EXPECT_THAT(ErrorOf([&] { tpe.Setup({{"x", tune::Uniform(0, 1)}}, "", "", 5, 1); }),
              HasSubstr("needs a metric and a mode"));
  tune::TPEOptions opts;
  opts.metric = "acc";
  tune::TPESearch own(opts);
  EXPECT_THAT(ErrorOf([&] { own.Setup({{"x", tune::Uniform(0, 1)}}, "loss", "min", 5, 1); }),
              HasSubstr("metric \"acc\""));
  opts.n_ei_candidates = 0;
  EXPECT_THAT(ErrorOf([&] { tune::TPESearch bad(opts); }), HasSubstr("n_ei_candidates"));

  // Failed trials, trials without the metric, and NaNs are not observations: with
  // n_startup_trials = 1, the second suggestion is still random after them.
  tune::TPEOptions one;
  one.n_startup_trials = 1;
  auto run = [&](bool feed_junk) {
    tune::TPESearch t(one);
    t.Setup({{"x", tune::Uniform(-10, 10)}}, "loss", "min", -1, 4);
    auto s = t.Suggest("a");
    const auto bad = M(0);
    const tune::Metrics other{{"acc", 1}};
    const auto nan = M(NAN);
    if (feed_junk) {
      t.OnTrialComplete("a", s.config, &bad, /*error=*/true);
      t.OnTrialComplete("b", s.config, &other, false);
      t.OnTrialComplete("c", s.config, nullptr, false);
      t.OnTrialComplete("d", s.config, &nan, false);
    }
    return t.Suggest("e").config.Values();
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(TPETest, RestoreAndReplayGiveTheSameNextSuggestion) {
  tune::ParamSpace space{{"x", tune::Uniform(-10, 10)}, {"k", tune::Choice({1, 2, 3})}};
  struct Done {
    std::string id;
    tune::Config config;
    double loss;
  };
  std::vector<Done> done;
  tune::TPESearch whole;
  whole.Setup(space, "loss", "min", 100, 21);
  for (int i = 0; i < 30; ++i) {
    const std::string id = "t" + std::to_string(i);
    auto s = whole.Suggest(id);
    const double loss = Quadratic(s.config) + s.config.Get<int>("k", 0);
    const auto m = M(loss);
    whole.OnTrialComplete(id, s.config, &m, false);
    done.push_back({id, s.config, loss});
  }
  const std::string state = whole.SaveState();
  const auto next = whole.Suggest("t30").config.Values();
  const auto after = whole.Suggest("t31").config.Values();

  tune::TPESearch restored;
  restored.Setup(space, "loss", "min", 100, 21);
  restored.RestoreState(state);
  for (const auto& d : done) {
    const auto m = M(d.loss);
    restored.OnTrialComplete(d.id, d.config, &m, false);
  }
  EXPECT_EQ(restored.Suggest("t30").config.Values(), next);
  EXPECT_EQ(restored.Suggest("t31").config.Values(), after);
  EXPECT_THAT(ErrorOf([&] { restored.RestoreState(tune::BasicVariantGenerator().SaveState()); }),
              HasSubstr("not one TPESearch::SaveState wrote"));
}

TEST(TPETest, SameSeedSameSuggestions) {
  auto run = [](uint64_t seed) {
    tune::TPESearch tpe;
    tpe.Setup({{"x", tune::Uniform(-10, 10)}}, "loss", "min", 30, seed);
    std::vector<std::string> xs;
    for (int i = 0; i < 30; ++i) {
      auto s = tpe.Suggest("t" + std::to_string(i));
      xs.push_back(s.config.Get("x", ""));
      const auto m = M(Quadratic(s.config));
      tpe.OnTrialComplete("t" + std::to_string(i), s.config, &m, false);
    }
    EXPECT_EQ(tpe.Suggest("end").kind, tune::Suggestion::kFinished);
    return xs;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}
