// Stoppers against hand-checked sequences (Ray Tune's rules, python/ray/tune/stopper/):
// each built-in's decisions, a fake clock for TimeoutStopper, CombinedStopper's short
// circuit, bad options, and SaveState/RestoreState round trips.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "prism/errors.h"
#include "prism/tune/stopper.h"
#include "../../common/test_util.h"

namespace prism::tune {
namespace {

using ::testing::HasSubstr;
using prism_test::ErrorOf;

Metrics M(double loss) { return {{"loss", loss}}; }

TEST(MaximumIterationStopper, StopsEachTrialAtItsMaxIterthResult) {
  MaximumIterationStopper s(3);
  EXPECT_FALSE(s.ShouldStop("a", {}));
  EXPECT_FALSE(s.ShouldStop("a", {}));
  EXPECT_FALSE(s.ShouldStop("b", {}));  // counted per trial
  EXPECT_TRUE(s.ShouldStop("a", {}));
  EXPECT_FALSE(s.StopAll());
  MaximumIterationStopper restored(3);
  restored.RestoreState(s.SaveState());
  EXPECT_FALSE(restored.ShouldStop("b", {}));
  EXPECT_TRUE(restored.ShouldStop("b", {}));
}

TEST(TrialPlateauStopper, StopsOnceTheWindowIsFullAndFlatAfterTheGracePeriod) {
  TrialPlateauStopper s({.metric = "loss", .std_dev = 0.01, .num_results = 3, .grace_period = 4});
  EXPECT_FALSE(s.ShouldStop("a", M(1.0)));
  EXPECT_FALSE(s.ShouldStop("a", M(1.0)));
  EXPECT_FALSE(s.ShouldStop("a", M(1.0)));  // flat and full, but in the grace period
  EXPECT_TRUE(s.ShouldStop("a", M(1.0)));
  // np.std([0.5, 0.52, 0.54]) = 0.0163 > 0.01; then [0.52, 0.54, 0.53]: 0.0082 < 0.01.
  for (double v : {0.9, 0.7, 0.5, 0.52}) EXPECT_FALSE(s.ShouldStop("b", M(v)));
  EXPECT_FALSE(s.ShouldStop("b", M(0.54)));
  EXPECT_TRUE(s.ShouldStop("b", M(0.53)));
  EXPECT_FALSE(s.StopAll());
}

TEST(TrialPlateauStopper, AMissingValueAndTheThresholdHoldItBack) {
  TrialPlateauStopper s({.metric = "loss", .num_results = 2, .grace_period = 0});
  EXPECT_FALSE(s.ShouldStop("a", {{"other", 1}}));  // missing: NaN, Ray's None
  EXPECT_FALSE(s.ShouldStop("a", M(1.0)));          // the window still holds it
  EXPECT_TRUE(s.ShouldStop("a", M(1.0)));
  TrialPlateauStopper min({.metric = "loss", .num_results = 2, .grace_period = 0, .metric_threshold = 0.5,
                           .mode = "min"});
  EXPECT_FALSE(min.ShouldStop("a", M(1.0)));
  EXPECT_FALSE(min.ShouldStop("a", M(1.0)));  // flat, but not down to 0.5
  EXPECT_FALSE(min.ShouldStop("a", M(0.5)));  // below it now, but not flat
  EXPECT_TRUE(min.ShouldStop("a", M(0.5)));
  TrialPlateauStopper max({.metric = "loss", .num_results = 2, .grace_period = 0, .metric_threshold = 2,
                           .mode = "max"});
  EXPECT_FALSE(max.ShouldStop("a", M(1.0)));
  EXPECT_FALSE(max.ShouldStop("a", M(1.0)));
}

TEST(TrialPlateauStopper, StateRoundTrips) {
  TrialPlateauStopper s({.metric = "loss", .num_results = 2, .grace_period = 3});
  s.ShouldStop("a", M(2.0));
  s.ShouldStop("a", {});  // NaN travels as null
  TrialPlateauStopper restored({.metric = "loss", .num_results = 2, .grace_period = 3});
  restored.RestoreState(s.SaveState());
  EXPECT_EQ(restored.SaveState(), s.SaveState());
  EXPECT_FALSE(restored.ShouldStop("a", M(1.0)));  // the NaN is still in the window
  EXPECT_TRUE(restored.ShouldStop("a", M(1.0)));
}

TEST(ExperimentPlateauStopper, EndsTheExperimentWhenTheTopValuesAgreeForPatienceResults) {
  ExperimentPlateauStopper s({.metric = "loss", .std_dev = 0.01, .top = 3, .mode = "min", .patience = 1});
  EXPECT_FALSE(s.ShouldStop("a", M(1.0)));
  EXPECT_FALSE(s.ShouldStop("b", M(1.0)));
  EXPECT_FALSE(s.ShouldStop("c", M(5.0)));  // top 3: 1, 1, 5
  EXPECT_TRUE(s.ShouldStop("c", M(1.0)));  // 1, 1, 1: plateau, a run of 1 = patience: its trial stops
  EXPECT_TRUE(s.StopAll());                  // and so does the experiment
  ExperimentPlateauStopper again({.metric = "loss", .std_dev = 0.01, .top = 3, .mode = "min", .patience = 1});
  for (double v : {1.0, 1.0, 1.0}) again.ShouldStop("a", M(v));  // run of 1
  EXPECT_TRUE(again.StopAll());
  ExperimentPlateauStopper patient({.metric = "loss", .std_dev = 0.01, .top = 2, .mode = "max", .patience = 2});
  EXPECT_FALSE(patient.ShouldStop("a", M(1.0)));
  EXPECT_FALSE(patient.ShouldStop("a", M(1.0)));  // plateau, run 1
  EXPECT_TRUE(patient.ShouldStop("a", M(std::nan(""))));  // skipped; still a plateau, run 2
  EXPECT_TRUE(patient.StopAll());
  EXPECT_FALSE(patient.ShouldStop("a", M(3.0)));  // top 3, 1: no plateau, run 0
  EXPECT_FALSE(patient.StopAll());
}

TEST(ExperimentPlateauStopper, KeepsTheBestValuesInItsMode) {
  ExperimentPlateauStopper max({.metric = "loss", .std_dev = 0.01, .top = 2, .mode = "max"});
  for (double v : {5.0, 1.0, 5.0}) max.ShouldStop("a", M(v));
  EXPECT_TRUE(max.StopAll());  // 5, 5
  ExperimentPlateauStopper min({.metric = "loss", .std_dev = 0.01, .top = 2, .mode = "min"});
  for (double v : {5.0, 1.0, 5.0}) min.ShouldStop("a", M(v));
  EXPECT_FALSE(min.StopAll());  // 1, 5
  ExperimentPlateauStopper restored({.metric = "loss", .std_dev = 0.01, .top = 2, .mode = "min"});
  restored.RestoreState(min.SaveState());
  EXPECT_TRUE(restored.ShouldStop("a", M(1.0)));  // 1, 1
  // Ray indexes the result: a missing metric is an error naming it.
  EXPECT_THAT(ErrorOf([&] { min.ShouldStop("t7", {{"acc", 1}}); }), HasSubstr("without \"loss\""));
}

TEST(TimeoutStopper, CountsFromTheFirstStopAllAndKeepsItsBudgetAcrossRestore) {
  double now = 100;
  auto clock = [&now] { return now; };
  TimeoutStopper s(10, clock);
  EXPECT_FALSE(s.ShouldStop("a", {}));
  now = 150;                // setup before the first check is not counted
  EXPECT_FALSE(s.StopAll());
  now = 156;
  EXPECT_FALSE(s.StopAll());
  EXPECT_DOUBLE_EQ(s.BudgetLeft(), 4);
  TimeoutStopper restored(10, clock);
  restored.RestoreState(s.SaveState());
  now = 1000;               // the experiment was down: not counted
  EXPECT_FALSE(restored.StopAll());
  now = 1004;
  EXPECT_TRUE(restored.StopAll());
}

TEST(FunctionAndCombinedStopper, CallInOrderAndStopAtTheFirstYes) {
  std::vector<std::string> calls;
  auto first = std::make_shared<FunctionStopper>([&](const std::string& id, const Metrics& r) {
    calls.push_back("first " + id);
    return r.at("loss") < 0.5;
  });
  auto count = std::make_shared<MaximumIterationStopper>(2);
  CombinedStopper s({first, count});
  EXPECT_FALSE(s.ShouldStop("a", M(1.0)));
  EXPECT_TRUE(s.ShouldStop("a", M(0.1)));   // `count` is not asked (any() short-circuits)
  EXPECT_TRUE(s.ShouldStop("a", M(1.0)));   // its 2nd result
  EXPECT_EQ(calls.size(), 3u);
  EXPECT_FALSE(s.StopAll());
  auto timeout = std::make_shared<TimeoutStopper>(-1);
  EXPECT_TRUE(CombinedStopper({count, timeout}).StopAll());
  CombinedStopper restored({std::make_shared<FunctionStopper>([](const std::string&, const Metrics&) { return false; }),
                            std::make_shared<MaximumIterationStopper>(2)});
  restored.RestoreState(s.SaveState());
  EXPECT_EQ(restored.SaveState(), s.SaveState());
  EXPECT_THAT(ErrorOf([&] { CombinedStopper({count}).RestoreState(s.SaveState()); }), HasSubstr("2 stoppers"));
  EXPECT_THAT(ErrorOf([&] { count->RestoreState(timeout->SaveState()); }), HasSubstr("TimeoutStopper"));
}

TEST(Stoppers, BadOptionsGetAClearError) {
  EXPECT_THAT(ErrorOf([] { TrialPlateauStopper({.metric = "loss", .mode = "maximize"}); }), HasSubstr("\"max\""));
  EXPECT_THAT(ErrorOf([] { TrialPlateauStopper({.metric = "loss", .metric_threshold = 0.0}); }),
              HasSubstr("needs a mode"));
  EXPECT_THAT(ErrorOf([] { TrialPlateauStopper({.metric = "loss", .num_results = 0}); }), HasSubstr("num_results"));
  EXPECT_THAT(ErrorOf([] { TrialPlateauStopper({}); }), HasSubstr("metric"));
  EXPECT_THAT(ErrorOf([] { ExperimentPlateauStopper({.metric = "loss", .mode = "best"}); }), HasSubstr("\"min\""));
  EXPECT_THAT(ErrorOf([] { ExperimentPlateauStopper({.metric = "loss", .top = 1}); }), HasSubstr("top is 1"));
  EXPECT_THAT(ErrorOf([] { ExperimentPlateauStopper({.metric = "loss", .patience = -1}); }), HasSubstr("patience"));
  EXPECT_THAT(ErrorOf([] { ExperimentPlateauStopper({.metric = "loss", .std_dev = 0}); }), HasSubstr("std is 0"));
  EXPECT_THAT(ErrorOf([] { TimeoutStopper(std::nan("")); }), HasSubstr("not a number"));
  EXPECT_THAT(ErrorOf([] { FunctionStopper(nullptr); }), HasSubstr("empty"));
  EXPECT_THAT(ErrorOf([] { CombinedStopper({nullptr}); }), HasSubstr("null"));
  EXPECT_THAT(ErrorOf([] { MaximumIterationStopper(2).RestoreState("{"); }), HasSubstr("another version"));
}

}  // namespace
}  // namespace prism::tune
