// Trial schedulers against hand-checked vectors (Ray Tune's rules), with a fake TrialRunner:
// ASHA, synchronous HyperBand, the median stopping rule and PBT, their bad options, and
// SaveState/RestoreState round trips.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "prism/errors.h"
#include "prism/tune/schedulers.h"
#include "prism/tune/search_space.h"
#include "../../common/test_util.h"

namespace prism::tune {
namespace {

using ::testing::HasSubstr;
using prism_test::ErrorOf;

// The Tuner as a scheduler sees it: a list of trials, StopTrial and a clock. With
// `report_stops`, StopTrial tells the scheduler at once (OnTrialComplete), as a Tuner may.
class FakeRunner : public TrialRunner {
 public:
  Trial& Add(const std::string& id, Config config = {}) {
    trials_.push_back(std::make_unique<Trial>());
    trials_.back()->id = id;
    trials_.back()->config = std::move(config);
    return *trials_.back();
  }
  Trial& Get(const std::string& id) {
    for (auto& t : trials_) {
      if (t->id == id) return *t;
    }
    throw Error("no trial " + id);
  }
  std::vector<Trial*> Trials() override {
    std::vector<Trial*> out;
    for (auto& t : trials_) out.push_back(t.get());
    return out;
  }
  void StopTrial(Trial& trial) override {
    stopped.push_back(trial.id);
    trial.status = TrialStatus::kTerminated;
    if (report_stops && scheduler) scheduler->OnTrialComplete(*this, trial, trial.last_result);
  }
  double Now() const override { return now; }
  std::vector<Trial*> Candidates() {
    std::vector<Trial*> out;
    for (auto& t : trials_) {
      if (t->status == TrialStatus::kPending || t->status == TrialStatus::kPaused) out.push_back(t.get());
    }
    return out;
  }

  std::vector<std::string> stopped;
  double now = 0;
  bool report_stops = false;
  TrialScheduler* scheduler = nullptr;

 private:
  std::vector<std::unique_ptr<Trial>> trials_;
};

// Delivers one result as the Tuner would (the trial runs, last_result is set first) and
// applies the decision to the trial's status.
Decision Report(TrialScheduler& s, FakeRunner& runner, const std::string& id, double time, double value,
                const std::string& time_attr = "training_iteration", const std::string& metric = "score") {
  Trial& t = runner.Get(id);
  t.status = TrialStatus::kRunning;
  t.last_result = {{time_attr, time}, {metric, value}};
  Decision d = s.OnTrialResult(runner, t, t.last_result);
  if (d == Decision::kPause) t.status = TrialStatus::kPaused;
  if (d == Decision::kStop) {
    t.status = TrialStatus::kTerminated;
    s.OnTrialComplete(runner, t, t.last_result);
  }
  return d;
}

constexpr Decision kC = Decision::kContinue;
constexpr Decision kP = Decision::kPause;
constexpr Decision kS = Decision::kStop;

// ---------------------------------------------------------------------------------------
// ASHA

AsyncHyperBandOptions AshaOptions(double max_t, double grace, double rf, const std::string& mode = "max") {
  AsyncHyperBandOptions o;
  o.metric = "score";
  o.mode = mode;
  o.max_t = max_t;
  o.grace_period = grace;
  o.reduction_factor = rf;
  return o;
}

void AddAll(TrialScheduler& s, FakeRunner& runner, int n, const std::string& prefix = "t") {
  for (int i = 0; i < n; ++i) s.OnTrialAdd(runner, runner.Add(prefix + std::to_string(i)));
}

TEST(AsyncHyperBand, RaysDocstringVector) {
  // Ray's _Bracket(1, 10, 2, 0) example: rewards 2, 4, 1 at the first rung.
  AsyncHyperBandScheduler asha(AshaOptions(10, 1, 2));
  EXPECT_EQ(asha.Rungs(), (std::vector<std::vector<double>>{{8, 4, 2, 1}}));
  FakeRunner runner;
  AddAll(asha, runner, 3);
  EXPECT_EQ(Report(asha, runner, "t0", 1, 2), kC);
  EXPECT_EQ(Report(asha, runner, "t1", 1, 4), kC);
  EXPECT_THAT(asha.DebugString(), HasSubstr("Iter 1.000: 3"));  // percentile([2, 4], 50)
  EXPECT_EQ(Report(asha, runner, "t2", 1, 1), kS);
  EXPECT_THAT(asha.DebugString(), HasSubstr("Iter 1.000: 2"));  // percentile([2, 4, 1], 50)
  EXPECT_THAT(asha.DebugString(), HasSubstr("Using AsyncHyperBand: num_stopped=1"));
  EXPECT_THAT(asha.DebugString(), HasSubstr("Iter 8.000: None"));
}

TEST(AsyncHyperBand, MinModeFlipsTheComparison) {
  AsyncHyperBandScheduler asha(AshaOptions(10, 1, 2, "min"));
  FakeRunner runner;
  AddAll(asha, runner, 4);
  EXPECT_EQ(Report(asha, runner, "t0", 1, 2), kC);
  EXPECT_EQ(Report(asha, runner, "t1", 1, 1), kC);    // lower is better
  EXPECT_EQ(Report(asha, runner, "t2", 1, 1.4), kC);  // cutoff 1.5 (median of 2, 1)
  EXPECT_EQ(Report(asha, runner, "t3", 1, 3), kS);    // worse than median of 2, 1, 1.4
  EXPECT_THAT(asha.DebugString(), HasSubstr("Iter 1.000: 1.7"));  // shown in the metric's units
}

TEST(AsyncHyperBand, CutoffInterpolatesLinearly) {
  // rf 4: the 75th percentile. Recorded 1, 2, 3, 10: rank 2.25 -> 3 + 0.25 * 7 = 4.75, so 4
  // stops (the nearest-rank value 3 would let it go on).
  AsyncHyperBandScheduler asha(AshaOptions(100, 1, 4));
  EXPECT_EQ(asha.Rungs(), (std::vector<std::vector<double>>{{64, 16, 4, 1}}));
  FakeRunner runner;
  AddAll(asha, runner, 7);
  EXPECT_EQ(Report(asha, runner, "t0", 1, 1), kC);
  EXPECT_EQ(Report(asha, runner, "t1", 1, 2), kC);
  EXPECT_EQ(Report(asha, runner, "t2", 1, 3), kC);
  EXPECT_EQ(Report(asha, runner, "t3", 1, 10), kC);
  EXPECT_EQ(Report(asha, runner, "t4", 1, 4), kS);
  EXPECT_EQ(Report(asha, runner, "t5", 1, 4.76), kC);  // recorded 1,2,3,4,10: cutoff 4
  EXPECT_EQ(Report(asha, runner, "t6", 1, 4.2), kS);   // 1,2,3,4,4.76,10: rank 3.75 -> 4.57
}

TEST(AsyncHyperBand, EachRungDecidesOnceOnFirstArrival) {
  AsyncHyperBandScheduler asha(AshaOptions(100, 1, 4));
  FakeRunner runner;
  AddAll(asha, runner, 3);
  EXPECT_EQ(Report(asha, runner, "t0", 1, 5), kC);
  EXPECT_EQ(Report(asha, runner, "t1", 1, 6), kC);
  // Between rungs nothing is compared, however bad the value.
  EXPECT_EQ(Report(asha, runner, "t0", 2, -100), kC);
  EXPECT_EQ(Report(asha, runner, "t0", 3, -100), kC);
  // Rung 4: empty, so t0 is recorded with 7 and goes on; t1 arrives with 6 < 7 and stops.
  EXPECT_EQ(Report(asha, runner, "t0", 4, 7), kC);
  EXPECT_EQ(Report(asha, runner, "t1", 4, 6), kS);
  // t2 jumps past rungs 1 and 4 to time 5: it is judged at rung 4 only (8 >= 7).
  EXPECT_EQ(Report(asha, runner, "t2", 5, 8), kC);
  // On its next result Ray's walk goes on to rung 1, which t2 skipped: judged there with
  // the value it has now (cutoff of 5, 6 at the 75th percentile: 5.75).
  EXPECT_EQ(Report(asha, runner, "t2", 6, 5.5), kS);
}

TEST(AsyncHyperBand, StopsAtMaxT) {
  AsyncHyperBandScheduler asha(AshaOptions(10, 1, 2));
  FakeRunner runner;
  AddAll(asha, runner, 1);
  EXPECT_EQ(Report(asha, runner, "t0", 9, 1), kC);
  EXPECT_EQ(Report(asha, runner, "t0", 10, 1), kS);

  AsyncHyperBandOptions o = AshaOptions(10, 1, 2);
  o.stop_last_trials = false;
  AsyncHyperBandScheduler keep(o);
  FakeRunner runner2;
  AddAll(keep, runner2, 1);
  EXPECT_EQ(Report(keep, runner2, "t0", 10, 1), kC);
  EXPECT_EQ(Report(keep, runner2, "t0", 11, 1), kC);
}

TEST(AsyncHyperBand, IgnoresResultsWithoutTheMetric) {
  AsyncHyperBandScheduler asha(AshaOptions(10, 1, 2));
  FakeRunner runner;
  AddAll(asha, runner, 2);
  EXPECT_EQ(Report(asha, runner, "t0", 1, 5), kC);
  Trial& t1 = runner.Get("t1");
  EXPECT_EQ(asha.OnTrialResult(runner, t1, {{"training_iteration", 1}}), kC);
  EXPECT_EQ(asha.OnTrialResult(runner, t1, {{"training_iteration", 100}}), kC);  // not even max_t
}

// Which bracket each trial joined, read from the saved state.
std::map<std::string, int> BracketsOf(const std::string& state) {
  std::map<std::string, int> out;
  std::smatch m;
  std::string part = state.substr(state.find("\"trial_bracket\""));
  part = part.substr(0, part.find('}'));
  std::regex entry("\"(t\\d+)\":(\\d+)");
  for (auto it = std::sregex_iterator(part.begin(), part.end(), entry); it != std::sregex_iterator(); ++it) {
    out[(*it)[1]] = std::stoi((*it)[2]);
  }
  return out;
}

TEST(AsyncHyperBand, SeveralBracketsDrawnBySoftmaxSeeded) {
  AsyncHyperBandOptions o = AshaOptions(100, 1, 4);
  o.brackets = 3;
  o.seed = 7;
  AsyncHyperBandScheduler a(o), b(o);
  EXPECT_EQ(a.Rungs(), (std::vector<std::vector<double>>{{64, 16, 4, 1}, {64, 16, 4}, {64, 16}}));
  FakeRunner ra, rb;
  AddAll(a, ra, 300);
  AddAll(b, rb, 300);
  std::map<std::string, int> brackets = BracketsOf(a.SaveState());
  ASSERT_EQ(brackets.size(), 300u);
  EXPECT_EQ(brackets, BracketsOf(b.SaveState()));  // same seed, same draws
  int count[3] = {0, 0, 0};
  for (const auto& [id, i] : brackets) ++count[i];
  // Weights e^0, e^-1, e^-2: 66.5%, 24.5%, 9.0% of 300 = 200, 73, 27.
  EXPECT_NEAR(count[0], 200, 30);
  EXPECT_NEAR(count[1], 73, 25);
  EXPECT_NEAR(count[2], 27, 15);
  o.seed = 8;
  AsyncHyperBandScheduler c(o);
  FakeRunner rc;
  AddAll(c, rc, 300);
  EXPECT_NE(brackets, BracketsOf(c.SaveState()));
  // A trial of bracket 2 (rungs 64, 16) is not judged at time 1.
  for (const auto& [id, i] : brackets) {
    if (i == 2) {
      EXPECT_EQ(Report(a, ra, id, 1, -1e9), kC);
      break;
    }
  }
}

TEST(AsyncHyperBand, RestoredStateDecidesAsTheOriginal) {
  AsyncHyperBandOptions o = AshaOptions(100, 1, 3);
  o.brackets = 2;
  AsyncHyperBandScheduler original(o);
  FakeRunner runner;
  AddAll(original, runner, 6);
  const double values[] = {3, 1, 4, 1, 5, 9};
  for (int i = 0; i < 3; ++i) Report(original, runner, "t" + std::to_string(i), 1, values[i]);
  AsyncHyperBandScheduler restored(o);
  restored.RestoreState(original.SaveState());
  EXPECT_EQ(restored.DebugString(), original.DebugString());
  FakeRunner runner2;
  for (int i = 0; i < 6; ++i) runner2.Add("t" + std::to_string(i));
  for (int i = 3; i < 6; ++i) {
    for (double time : {1.0, 3.0}) {
      std::string id = "t" + std::to_string(i);
      EXPECT_EQ(Report(restored, runner2, id, time, values[i] * time), Report(original, runner, id, time, values[i] * time))
          << id << " at " << time;
    }
  }
  EXPECT_EQ(restored.SaveState(), original.SaveState());
  // New trials draw their bracket from the restored generator.
  original.OnTrialAdd(runner, runner.Add("t6"));
  restored.OnTrialAdd(runner2, runner2.Add("t6"));
  EXPECT_EQ(restored.SaveState(), original.SaveState());
}

TEST(AsyncHyperBand, BadOptionsSayWhatIsWrong) {
  auto make = [](AsyncHyperBandOptions o) { AsyncHyperBandScheduler s(std::move(o)); };
  AsyncHyperBandOptions o;
  o.grace_period = 0;
  EXPECT_THAT(ErrorOf([&] { make(o); }), HasSubstr("grace_period is 0; it must be positive"));
  o = {};
  o.max_t = 5;
  o.grace_period = 10;
  EXPECT_THAT(ErrorOf([&] { make(o); }), HasSubstr("max_t (5) is below grace_period (10)"));
  o = {};
  o.reduction_factor = 1;
  EXPECT_THAT(ErrorOf([&] { make(o); }), HasSubstr("reduction_factor is 1; it must be greater than 1"));
  o = {};
  o.brackets = 0;
  EXPECT_THAT(ErrorOf([&] { make(o); }), HasSubstr("brackets is 0"));
  o = {};
  o.mode = "maximize";
  EXPECT_THAT(ErrorOf([&] { make(o); }), HasSubstr("mode \"maximize\""));

  AsyncHyperBandScheduler no_metric;
  FakeRunner runner;
  EXPECT_THAT(ErrorOf([&] { no_metric.OnTrialAdd(runner, runner.Add("t0")); }), HasSubstr("no metric or mode"));
  AsyncHyperBandScheduler own(AshaOptions(10, 1, 2));
  EXPECT_THAT(ErrorOf([&] { own.SetSearchProperties("loss", "min"); }), HasSubstr("metric \"score\""));
  AsyncHyperBandScheduler takes;
  takes.SetSearchProperties("score", "max");
  takes.OnTrialAdd(runner, runner.Get("t0"));
  EXPECT_EQ(Report(takes, runner, "t0", 100, 1), kS);
  EXPECT_THAT(ErrorOf([&] { takes.RestoreState("{not json"); }), HasSubstr("cannot restore its state"));
}

// ---------------------------------------------------------------------------------------
// HyperBand

HyperBandOptions HbOptions(double max_t, double rf) {
  HyperBandOptions o;
  o.metric = "score";
  o.mode = "max";
  o.max_t = max_t;
  o.reduction_factor = rf;
  return o;
}

TEST(HyperBand, BracketSizesForMaxT81Rf3) {
  HyperBandScheduler hb(HbOptions(81, 3));
  EXPECT_EQ(hb.BracketSizes(),
            (std::vector<std::pair<int, double>>{{81, 1}, {34, 3}, {15, 9}, {8, 27}, {5, 81}}));
  // max_t 9, rf 3: 3 brackets, (9, 1), (5, 3), (3, 9).
  HyperBandScheduler small(HbOptions(9, 3));
  EXPECT_EQ(small.BracketSizes(), (std::vector<std::pair<int, double>>{{9, 1}, {5, 3}, {3, 9}}));
  // Ray rounds log(max_t) / log(rf): max_t 100, rf 3 (4.19) gives 5 brackets too.
  HyperBandScheduler rounded(HbOptions(100, 3));
  EXPECT_EQ(rounded.BracketSizes().size(), 5u);
  EXPECT_EQ(rounded.BracketSizes().front(), (std::pair<int, double>{81, 1}));  // int(100 / 81)
}

// max_t 9, rf 3. The first 3 trials fill bracket s = 0 (r = 9, no halving), the next 5
// bracket s = 1 (r = 3, then the top ceil(5 / 3) = 2 run to 9).
void RunSmallHyperBand(bool report_stops) {
  SCOPED_TRACE(report_stops ? "StopTrial reports back" : "StopTrial is silent");
  HyperBandScheduler hb(HbOptions(9, 3));
  FakeRunner runner;
  runner.report_stops = report_stops;
  runner.scheduler = &hb;
  AddAll(hb, runner, 8);
  // Both brackets are at 0%: the first pending trial of the first bracket runs first.
  EXPECT_EQ(hb.ChooseTrialToRun(runner, runner.Candidates())->id, "t0");

  // Bracket s = 0: everyone waits at 9 until the last arrives, then all stop.
  for (int t = 1; t < 9; ++t) {
    for (const char* id : {"t0", "t1", "t2"}) EXPECT_EQ(Report(hb, runner, id, t, 1), kC) << id << " at " << t;
  }
  EXPECT_EQ(Report(hb, runner, "t0", 9, 1), kP);
  EXPECT_EQ(Report(hb, runner, "t1", 9, 2), kP);
  EXPECT_EQ(hb.ChooseTrialToRun(runner, {&runner.Get("t0"), &runner.Get("t1")}), nullptr);
  EXPECT_EQ(Report(hb, runner, "t2", 9, 3), kS);
  EXPECT_EQ(runner.stopped, (std::vector<std::string>{"t0", "t1"}));
  runner.stopped.clear();

  // Bracket s = 1, milestone 3.
  const std::map<std::string, double> value = {{"t3", 0.1}, {"t4", 0.5}, {"t5", 0.9}, {"t6", 0.3}, {"t7", 0.7}};
  for (int t = 1; t < 3; ++t) {
    for (const auto& [id, v] : value) EXPECT_EQ(Report(hb, runner, id, t, v), kC);
  }
  for (const char* id : {"t3", "t4", "t5", "t6"}) EXPECT_EQ(Report(hb, runner, id, 3, value.at(id)), kP);
  // Waiting at the milestone: not chosen to run.
  EXPECT_EQ(hb.ChooseTrialToRun(runner, runner.Candidates()), nullptr);
  // The last arrival halves the bracket: t5 (0.9) and t7 (0.7) go on, the rest stop.
  EXPECT_EQ(Report(hb, runner, "t7", 3, value.at("t7")), kC);
  EXPECT_EQ(std::set<std::string>(runner.stopped.begin(), runner.stopped.end()),
            (std::set<std::string>{"t3", "t4", "t6"}));
  EXPECT_THAT(hb.DebugString(), HasSubstr("num_stopped=3"));
  EXPECT_THAT(hb.DebugString(), HasSubstr("Max Size (n)=2, Milestone (r)=9"));
  Trial* next = hb.ChooseTrialToRun(runner, runner.Candidates());
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->id, "t5");
  runner.stopped.clear();
  for (int t = 4; t < 9; ++t) EXPECT_EQ(Report(hb, runner, "t5", t, 1), kC);
  EXPECT_EQ(Report(hb, runner, "t5", 9, 1), kP);
  EXPECT_EQ(hb.ChooseTrialToRun(runner, runner.Candidates()), nullptr);
  for (int t = 4; t < 9; ++t) EXPECT_EQ(Report(hb, runner, "t7", t, 1), kC);
  // Last halving done and everyone at max_t: the bracket is finished, all stop.
  EXPECT_EQ(Report(hb, runner, "t7", 9, 1), kS);
  EXPECT_EQ(runner.stopped, (std::vector<std::string>{"t5"}));
}

TEST(HyperBand, SynchronousHalvingAsHandComputed) { RunSmallHyperBand(false); }
TEST(HyperBand, SameDecisionsWhenStopTrialReportsBack) { RunSmallHyperBand(true); }

TEST(HyperBand, ATrialLeavingCompletesTheRound) {
  HyperBandScheduler hb(HbOptions(9, 3));
  FakeRunner runner;
  AddAll(hb, runner, 8);
  for (const char* id : {"t3", "t4", "t5", "t6", "t7"}) Report(hb, runner, id, 1, 0);
  const std::map<std::string, double> value = {{"t4", 0.5}, {"t5", 0.9}, {"t6", 0.3}, {"t7", 0.7}};
  for (const auto& [id, v] : value) EXPECT_EQ(Report(hb, runner, id, 3, v), kP);
  // t3's function returns at time 1: the rest are all at the milestone, so the bracket
  // halves among them (n = 2): t5 and t7 are unpaused, t4 and t6 stop.
  Trial& t3 = runner.Get("t3");
  t3.status = TrialStatus::kTerminated;
  hb.OnTrialComplete(runner, t3, t3.last_result);
  EXPECT_EQ(std::set<std::string>(runner.stopped.begin(), runner.stopped.end()), (std::set<std::string>{"t4", "t6"}));
  Trial* next = hb.ChooseTrialToRun(runner, {&runner.Get("t5"), &runner.Get("t7")});
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->id, "t5");
  next = hb.ChooseTrialToRun(runner, {&runner.Get("t7")});
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->id, "t7");
}

TEST(HyperBand, AWinnerStillPausingIsResumedOnceItHasPaused) {
  HyperBandScheduler hb(HbOptions(9, 3));
  FakeRunner runner;
  AddAll(hb, runner, 8);
  const std::map<std::string, double> value = {{"t3", 0.1}, {"t4", 0.5}, {"t5", 0.9}, {"t6", 0.3}, {"t7", 0.7}};
  for (const char* id : {"t3", "t4", "t5", "t6"}) EXPECT_EQ(Report(hb, runner, id, 3, value.at(id)), kP);
  runner.Get("t5").status = TrialStatus::kRunning;  // its pause has not taken effect yet
  EXPECT_EQ(Report(hb, runner, "t7", 3, value.at("t7")), kC);
  runner.Get("t5").status = TrialStatus::kPaused;  // now it has
  Trial* next = hb.ChooseTrialToRun(runner, {&runner.Get("t5")});
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->id, "t5");
}

TEST(HyperBand, MinModeKeepsTheLowest) {
  HyperBandOptions o = HbOptions(9, 3);
  o.mode = "min";
  HyperBandScheduler hb(o);
  FakeRunner runner;
  AddAll(hb, runner, 8);
  const std::map<std::string, double> value = {{"t3", 0.1}, {"t4", 0.5}, {"t5", 0.9}, {"t6", 0.3}, {"t7", 0.7}};
  for (const char* id : {"t3", "t4", "t5", "t6"}) EXPECT_EQ(Report(hb, runner, id, 3, value.at(id)), kP);
  // The lowest two, t3 and t6, go on; t7 (0.7), whose result completes the round, stops.
  EXPECT_EQ(Report(hb, runner, "t7", 3, value.at("t7")), kS);
  EXPECT_EQ(std::set<std::string>(runner.stopped.begin(), runner.stopped.end()), (std::set<std::string>{"t4", "t5"}));
  EXPECT_EQ(hb.ChooseTrialToRun(runner, runner.Candidates())->id, "t0");  // bracket s = 0 is at 0%
  EXPECT_EQ(hb.ChooseTrialToRun(runner, {&runner.Get("t6"), &runner.Get("t3")})->id, "t3");
}

TEST(HyperBand, RestoredStateDecidesAsTheOriginal) {
  HyperBandScheduler original(HbOptions(9, 3));
  FakeRunner runner;
  AddAll(original, runner, 8);
  for (const char* id : {"t3", "t4", "t5"}) Report(original, runner, id, 3, id[1] - '0');
  HyperBandScheduler restored(HbOptions(9, 3));
  restored.RestoreState(original.SaveState());
  EXPECT_EQ(restored.SaveState(), original.SaveState());
  EXPECT_EQ(restored.DebugString(), original.DebugString());
  // The same runner state for both; each continues: t6 pauses, t7 triggers the halving.
  FakeRunner runner2;
  for (Trial* t : runner.Trials()) runner2.Add(t->id, t->config).status = t->status;
  EXPECT_EQ(Report(restored, runner2, "t6", 3, 6), Report(original, runner, "t6", 3, 6));
  EXPECT_EQ(Report(restored, runner2, "t7", 3, 7), Report(original, runner, "t7", 3, 7));
  EXPECT_EQ(runner2.stopped, runner.stopped);
  EXPECT_EQ(runner.stopped, (std::vector<std::string>{"t3", "t4", "t5"}));
  EXPECT_EQ(restored.ChooseTrialToRun(runner2, runner2.Candidates())->id,
            original.ChooseTrialToRun(runner, runner.Candidates())->id);
  EXPECT_EQ(restored.SaveState(), original.SaveState());
}

TEST(HyperBand, BadOptionsAndResults) {
  auto make = [](HyperBandOptions o) { HyperBandScheduler s(std::move(o)); };
  EXPECT_THAT(ErrorOf([] { HyperBandScheduler s(HbOptions(0, 3)); }), HasSubstr("max_t is 0"));
  EXPECT_THAT(ErrorOf([&] { make(HbOptions(81, 1)); }), HasSubstr("reduction_factor is 1"));
  HyperBandScheduler hb(HbOptions(9, 3));
  FakeRunner runner;
  AddAll(hb, runner, 1);
  EXPECT_THAT(ErrorOf([&] { hb.OnTrialResult(runner, runner.Get("t0"), {{"training_iteration", 1}}); }),
              HasSubstr("has no \"score\""));
}

// ---------------------------------------------------------------------------------------
// MedianStoppingRule

MedianStoppingOptions MedianOptions() {
  MedianStoppingOptions o;
  o.time_attr = "t";
  o.metric = "acc";
  o.mode = "max";
  o.grace_period = 2;
  o.min_samples_required = 2;
  return o;
}

// Adds trials "0", "1", ... that are all running (none waits for a slot).
void AddRunning(TrialScheduler& s, FakeRunner& runner, int n) {
  AddAll(s, runner, n, "");
  for (Trial* t : runner.Trials()) t->status = TrialStatus::kRunning;
}

Decision MReport(TrialScheduler& s, FakeRunner& runner, const std::string& id, double t, double acc) {
  return Report(s, runner, id, t, acc, "t", "acc");
}

TEST(MedianStoppingRule, HandVector) {
  MedianStoppingRule rule(MedianOptions());
  FakeRunner runner;
  AddRunning(rule, runner, 5);
  // Trials "0".."4": A = 0, B = 1, C = 2, D = 3, E = 4.
  EXPECT_EQ(MReport(rule, runner, "0", 1, 0.2), kC);
  EXPECT_EQ(MReport(rule, runner, "0", 2, 0.4), kC);  // no other trial at t >= 2 yet
  EXPECT_EQ(MReport(rule, runner, "0", 3, 0.6), kC);
  EXPECT_EQ(MReport(rule, runner, "1", 1, 0.5), kC);
  EXPECT_EQ(MReport(rule, runner, "1", 2, 0.5), kC);  // only A beyond t = 2: 1 < 2 samples
  EXPECT_EQ(MReport(rule, runner, "1", 3, 0.5), kC);
  // C at t = 2: means over [2, 2] of A 0.4 and B 0.5, median 0.45 > best 0.3: stop.
  EXPECT_EQ(MReport(rule, runner, "2", 1, 0.1), kC);  // grace period
  EXPECT_EQ(MReport(rule, runner, "2", 2, 0.3), kS);
  // D: its best (0.9, before the grace period) counts: 0.9 >= median(0.4, 0.5, 0.3) = 0.4.
  EXPECT_EQ(MReport(rule, runner, "3", 1, 0.9), kC);
  EXPECT_EQ(MReport(rule, runner, "3", 2, 0.1), kC);
  // E at t = 2: median of A 0.4, B 0.5, C 0.3, D 0.1 is 0.35; 0.36 is not worse.
  EXPECT_EQ(MReport(rule, runner, "4", 2, 0.36), kC);
  // E at t = 3: A and B have reached 3, means over [2, 3]: A 0.5, B 0.5. Best 0.36 < 0.5.
  EXPECT_EQ(MReport(rule, runner, "4", 3, 0.2), kS);
  EXPECT_EQ(rule.DebugString(), "Using MedianStoppingRule: num_stopped=2.");
}

TEST(MedianStoppingRule, MinModeAndSoftStop) {
  MedianStoppingOptions o = MedianOptions();
  o.mode = "min";
  o.hard_stop = false;
  o.min_samples_required = 1;
  MedianStoppingRule rule(o);
  FakeRunner runner;
  AddRunning(rule, runner, 3);
  EXPECT_EQ(MReport(rule, runner, "0", 2, 1.0), kC);
  EXPECT_EQ(MReport(rule, runner, "1", 2, 0.5), kC);  // lower than 1.0: better
  EXPECT_EQ(MReport(rule, runner, "2", 2, 2.0), kP);  // worse than median(1.0, 0.5): paused
  EXPECT_EQ(MReport(rule, runner, "2", 3, 9.0), kC);  // judged once; then runs as FIFO
}

TEST(MedianStoppingRule, YieldsWhenSamplesAreMissingAndOthersWait) {
  MedianStoppingOptions o = MedianOptions();
  o.min_time_slice = 5;
  MedianStoppingRule rule(o);
  FakeRunner runner;
  AddAll(rule, runner, 2, "");
  EXPECT_EQ(MReport(rule, runner, "0", 2, 1), kP);  // "1" is pending: give it a turn
  EXPECT_EQ(MReport(rule, runner, "0", 3, 1), kC);  // paused 1 ago, slice 5: go on
  EXPECT_EQ(MReport(rule, runner, "0", 8, 1), kP);  // 6 > 5 since the last pause
  runner.Get("1").status = TrialStatus::kTerminated;
  EXPECT_EQ(MReport(rule, runner, "0", 20, 1), kC);  // nobody waits
}

TEST(MedianStoppingRule, RestoredStateDecidesAsTheOriginal) {
  MedianStoppingRule original(MedianOptions());
  FakeRunner runner;
  AddAll(original, runner, 4, "");
  EXPECT_EQ(MReport(original, runner, "0", 2, 0.4), kP);  // no samples yet, others wait
  EXPECT_EQ(MReport(original, runner, "1", 2, 0.5), kP);
  EXPECT_EQ(MReport(original, runner, "2", 2, 0.1), kS);  // median(0.4, 0.5) = 0.45
  const std::string saved = original.SaveState();
  MedianStoppingRule restored(MedianOptions());
  restored.RestoreState(saved);
  EXPECT_EQ(restored.SaveState(), saved);
  EXPECT_EQ(restored.DebugString(), "Using MedianStoppingRule: num_stopped=1.");
  // "3" at t = 2 against median(0.4, 0.5, 0.1) = 0.4.
  for (double v : {0.39, 0.41}) {
    MedianStoppingRule again(MedianOptions());
    again.RestoreState(saved);
    EXPECT_EQ(MReport(again, runner, "3", 2, v), v < 0.4 ? kS : kC) << v;
  }
  EXPECT_EQ(MReport(restored, runner, "3", 3, 0.41), MReport(original, runner, "3", 3, 0.41));
  EXPECT_EQ(restored.SaveState(), original.SaveState());
}

TEST(MedianStoppingRule, BadOptions) {
  MedianStoppingOptions o = MedianOptions();
  o.min_samples_required = 0;
  EXPECT_THAT(ErrorOf([&] { MedianStoppingRule r(o); }), HasSubstr("min_samples_required is 0"));
  o = MedianOptions();
  o.grace_period = -1;
  EXPECT_THAT(ErrorOf([&] { MedianStoppingRule r(o); }), HasSubstr("grace_period is -1"));
  o = MedianOptions();
  o.mode = "best";
  EXPECT_THAT(ErrorOf([&] { MedianStoppingRule r(o); }), HasSubstr("mode \"best\""));
}

// ---------------------------------------------------------------------------------------
// PopulationBasedTraining

TEST(PopulationBasedTraining, QuantileSizes) {
  EXPECT_EQ(PopulationBasedTraining::QuantileSize(4, 0.25), 1);
  EXPECT_EQ(PopulationBasedTraining::QuantileSize(5, 0.25), 2);  // ceil(1.25)
  EXPECT_EQ(PopulationBasedTraining::QuantileSize(8, 0.25), 2);
  EXPECT_EQ(PopulationBasedTraining::QuantileSize(1, 0.25), 0);  // nobody to copy
  EXPECT_EQ(PopulationBasedTraining::QuantileSize(0, 0.25), 0);
  EXPECT_EQ(PopulationBasedTraining::QuantileSize(3, 0.5), 1);   // ceil(1.5) > 1.5 -> floor
  EXPECT_EQ(PopulationBasedTraining::QuantileSize(4, 0.5), 2);
  EXPECT_EQ(PopulationBasedTraining::QuantileSize(10, 0), 0);
}

PBTOptions PbtOptions(uint64_t seed = 1) {
  PBTOptions o;
  o.time_attr = "training_iteration";
  o.metric = "score";
  o.mode = "max";
  o.perturbation_interval = 2;
  o.resample_probability = 0;
  o.hyperparam_mutations = {{"lr", Uniform(0.001, 1)}, {"batch", Choice({int64_t{16}, int64_t{32}, int64_t{64}})}};
  o.seed = seed;
  return o;
}

Config LrBatch(const std::string& lr, const std::string& batch) {
  Config c;
  c.Set("lr", lr).Set("batch", batch);
  return c;
}

// t0..t3 reach iteration 2 with scores 0.1, 0.9, 0.5, 0.2 (t1 on top, with checkpoint
// ckpt/t1/2); t0 then reports 0.05 at iteration 4 and, bottom of 4 (q = 1), copies t1.
void PopulationAtIteration2(PopulationBasedTraining& pbt, FakeRunner& runner) {
  const std::vector<std::pair<std::string, double>> scores = {{"t0", 0.1}, {"t1", 0.9}, {"t2", 0.5}, {"t3", 0.2}};
  const char* lrs[] = {"0.1", "0.5", "0.2", "0.3"};
  for (size_t i = 0; i < scores.size(); ++i) {
    Trial& t = runner.Add(scores[i].first, LrBatch(lrs[i], "32"));
    pbt.OnTrialAdd(runner, t);
    t.status = TrialStatus::kRunning;
  }
  for (const auto& [id, score] : scores) {
    runner.Get(id).checkpoint = "ckpt/" + id + "/2";
    EXPECT_EQ(Report(pbt, runner, id, 1, score), kC);
    EXPECT_EQ(Report(pbt, runner, id, 2, score), kC) << id;  // top or middle, or nobody to copy
  }
  runner.Get("t1").checkpoint = "ckpt/t1/3";  // newer, but not what the ranking recorded
}

TEST(PopulationBasedTraining, ExploitCopiesATopTrialsCheckpointAndConfig) {
  PopulationBasedTraining pbt(PbtOptions());
  FakeRunner runner;
  PopulationAtIteration2(pbt, runner);
  EXPECT_TRUE(pbt.PolicyLog().empty());
  EXPECT_EQ(Report(pbt, runner, "t0", 3, 0.05), kC);  // 1 since its last perturbation
  EXPECT_EQ(Report(pbt, runner, "t0", 4, 0.05), kP);
  Trial& t0 = runner.Get("t0");
  EXPECT_EQ(t0.restore_from, "ckpt/t1/2");
  double lr = t0.config.Get<double>("lr", 0);
  EXPECT_TRUE(lr == 0.5 * 1.2 || lr == 0.5 * 0.8) << lr;
  std::string batch = t0.config.Get<std::string>("batch", "");
  EXPECT_TRUE(batch == "16" || batch == "64") << batch;
  ASSERT_EQ(pbt.PolicyLog().size(), 1u);
  const PerturbationRecord& r = pbt.PolicyLog()[0];
  EXPECT_EQ(r.time, 4);
  EXPECT_EQ(r.trial, "t0");
  EXPECT_EQ(r.source, "t1");
  EXPECT_EQ(r.source_checkpoint, "ckpt/t1/2");
  EXPECT_EQ(r.old_config.Values(), LrBatch("0.5", "32").Values());
  EXPECT_EQ(r.new_config.Values(), t0.config.Values());
  EXPECT_EQ(pbt.DebugString(), "PopulationBasedTraining: 1 checkpoints, 1 perturbs");
  // t0 takes over t1's clock (2): its next perturbation is due at 4 again, not 6.
  t0.restore_from.clear();
  EXPECT_EQ(Report(pbt, runner, "t0", 3, 0.95), kC);
  EXPECT_EQ(Report(pbt, runner, "t0", 4, 0.95), kC);  // now on top: nothing to copy
  EXPECT_EQ(pbt.PolicyLog().size(), 1u);
}

TEST(PopulationBasedTraining, NoCheckpointNoExploit) {
  PopulationBasedTraining pbt(PbtOptions());
  FakeRunner runner;
  PopulationAtIteration2(pbt, runner);
  // t1 was on top when it had no checkpoint yet: Ray skips the exploit.
  runner.Get("t1").checkpoint = "";
  EXPECT_EQ(Report(pbt, runner, "t1", 4, 0.9), kC);
  EXPECT_EQ(Report(pbt, runner, "t0", 4, 0.05), kC);
  EXPECT_TRUE(pbt.PolicyLog().empty());
  EXPECT_TRUE(runner.Get("t0").restore_from.empty());
  EXPECT_EQ(runner.Get("t0").config.Get<std::string>("lr", ""), "0.1");
}

TEST(PopulationBasedTraining, PausesForWaitingTrialsAndPrefersExploited) {
  PopulationBasedTraining pbt(PbtOptions());
  FakeRunner runner;
  PopulationAtIteration2(pbt, runner);
  Trial& waiting = runner.Add("t4", LrBatch("0.4", "64"));
  pbt.OnTrialAdd(runner, waiting);
  // t2 is in the middle at its next interval: it pauses because t4 waits for a slot.
  EXPECT_EQ(Report(pbt, runner, "t2", 4, 0.5), kP);
  // Least training time first: t4 (never ran) before t2 (4).
  EXPECT_EQ(pbt.ChooseTrialToRun(runner, runner.Candidates())->id, "t4");
  EXPECT_EQ(Report(pbt, runner, "t0", 4, 0.05), kP);  // exploits t1
  EXPECT_EQ(pbt.ChooseTrialToRun(runner, runner.Candidates())->id, "t0");
}

TEST(PopulationBasedTraining, FillsMissingMutatedKeysOnAdd) {
  PopulationBasedTraining pbt(PbtOptions());
  FakeRunner runner;
  Trial& t = runner.Add("t0");
  pbt.OnTrialAdd(runner, t);
  double lr = t.config.Get<double>("lr", -1);
  EXPECT_GE(lr, 0.001);
  EXPECT_LT(lr, 1);
  std::string batch = t.config.Get<std::string>("batch", "");
  EXPECT_TRUE(batch == "16" || batch == "32" || batch == "64") << batch;
}

TEST(PopulationBasedTraining, ExploreMultipliesStepsAndResamples) {
  PBTOptions o = PbtOptions();
  o.hyperparam_mutations.insert_or_assign("n", RandInt(1, 100));
  std::mt19937_64 rng(3);
  std::set<std::string> lrs, batches, ns, ops;
  for (int i = 0; i < 64; ++i) {
    Config c = LrBatch("0.5", "32");
    c.Set("n", int64_t{7});
    std::map<std::string, std::string> operations;
    Config out = PopulationBasedTraining::Explore(c, o, rng, &operations);
    lrs.insert(std::to_string(out.Get<double>("lr", 0)));
    batches.insert(out.Get<std::string>("batch", ""));
    ns.insert(out.Get<std::string>("n", ""));
    for (const auto& [k, op] : operations) ops.insert(k + ":" + op);
  }
  EXPECT_EQ(lrs, (std::set<std::string>{std::to_string(0.5 * 1.2), std::to_string(0.5 * 0.8)}));
  EXPECT_EQ(batches, (std::set<std::string>{"16", "64"}));
  EXPECT_EQ(ns, (std::set<std::string>{"8", "5"}));  // int(8.4), int(5.6)
  EXPECT_EQ(ops, (std::set<std::string>{"lr:* 1.2", "lr:* 0.8", "batch:shift left", "batch:shift right",
                                        "n:* 1.2", "n:* 0.8"}));

  // At the end of the list a step outward stays put ("noop"); a value not in the list is
  // resampled from it.
  std::set<std::string> edge, edge_ops;
  for (int i = 0; i < 32; ++i) {
    std::map<std::string, std::string> operations;
    Config low = LrBatch("0.5", "16"), odd = LrBatch("0.5", "48");
    low.Set("n", int64_t{7});
    odd.Set("n", int64_t{7});
    edge.insert(PopulationBasedTraining::Explore(low, o, rng, &operations).Get<std::string>("batch", ""));
    edge_ops.insert(operations["batch"]);
    odd = PopulationBasedTraining::Explore(odd, o, rng, &operations);
    EXPECT_EQ(operations["batch"], "resample");
    EXPECT_THAT((std::vector<std::string>{"16", "32", "64"}), ::testing::Contains(odd.Get<std::string>("batch", "")));
  }
  EXPECT_EQ(edge, (std::set<std::string>{"16", "32"}));
  EXPECT_EQ(edge_ops, (std::set<std::string>{"shift left (noop)", "shift right"}));

  // resample_probability 1: every value is drawn afresh from its domain.
  o.resample_probability = 1;
  for (int i = 0; i < 32; ++i) {
    std::map<std::string, std::string> operations;
    Config c = LrBatch("0.5", "32");
    c.Set("n", int64_t{7});
    Config out = PopulationBasedTraining::Explore(c, o, rng, &operations);
    EXPECT_EQ(operations, (std::map<std::string, std::string>{{"batch", "resample"}, {"lr", "resample"}, {"n", "resample"}}));
    double lr = out.Get<double>("lr", -1);
    EXPECT_TRUE(lr >= 0.001 && lr < 1) << lr;
    int64_t n = out.Get<int64_t>("n", -1);
    EXPECT_TRUE(n >= 1 && n < 100) << n;
  }

  // The same seed explores the same way.
  std::mt19937_64 a(11), b(11);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(PopulationBasedTraining::Explore(LrBatch("0.5", "32"), PbtOptions(), a).Values(),
              PopulationBasedTraining::Explore(LrBatch("0.5", "32"), PbtOptions(), b).Values());
  }
  EXPECT_THAT(ErrorOf([&] { PopulationBasedTraining::Explore(Config{}, PbtOptions(), a); }),
              HasSubstr("has no \"lr\""));
}

TEST(PopulationBasedTraining, RestoredStateDecidesAsTheOriginal) {
  PopulationBasedTraining original(PbtOptions(5));
  FakeRunner runner;
  PopulationAtIteration2(original, runner);
  Report(original, runner, "t0", 4, 0.05);  // exploits t1
  PopulationBasedTraining restored(PbtOptions(5));
  restored.RestoreState(original.SaveState());
  EXPECT_EQ(restored.SaveState(), original.SaveState());
  ASSERT_EQ(restored.PolicyLog().size(), 1u);
  EXPECT_EQ(restored.PolicyLog()[0].new_config.Values(), original.PolicyLog()[0].new_config.Values());
  // t3 (0.2) falls to the bottom at 4 in both; the exploit draws from the restored generator.
  FakeRunner runner2;
  for (Trial* t : runner.Trials()) {
    Trial& copy = runner2.Add(t->id, t->config);
    copy.status = t->status;
    copy.checkpoint = t->checkpoint;
  }
  for (const char* id : {"t3", "t2"}) {
    EXPECT_EQ(Report(restored, runner2, id, 4, 0.01), Report(original, runner, id, 4, 0.01)) << id;
    EXPECT_EQ(runner2.Get(id).config.Values(), runner.Get(id).config.Values()) << id;
    EXPECT_EQ(runner2.Get(id).restore_from, runner.Get(id).restore_from) << id;
  }
  EXPECT_EQ(restored.SaveState(), original.SaveState());
}

TEST(PopulationBasedTraining, BadOptionsSayWhatIsWrong) {
  auto error = [](PBTOptions o) { return ErrorOf([&] { PopulationBasedTraining p(std::move(o)); }); };
  PBTOptions o = PbtOptions();
  o.hyperparam_mutations.clear();
  EXPECT_THAT(error(o), HasSubstr("hyperparam_mutations is empty"));
  o = PbtOptions();
  o.quantile_fraction = 0.6;
  EXPECT_THAT(error(o), HasSubstr("quantile_fraction is 0.6; it must be between 0 and 0.5"));
  o = PbtOptions();
  o.resample_probability = -0.1;
  EXPECT_THAT(error(o), HasSubstr("resample_probability is -0.1"));
  o = PbtOptions();
  o.perturbation_interval = 0;
  EXPECT_THAT(error(o), HasSubstr("perturbation_interval is 0"));
  o = PbtOptions();
  o.hyperparam_mutations.insert_or_assign("f", SampleFrom([](const Config&) { return Value(1.0); }));
  EXPECT_THAT(error(o), HasSubstr("cannot perturb a constant, a grid or a SampleFrom"));
  o = PbtOptions();
  o.hyperparam_mutations.insert_or_assign("epochs", 10);
  EXPECT_THAT(error(o), HasSubstr("hyperparam_mutations[\"epochs\"]"));
  o = PbtOptions();
  o.mode = "up";
  EXPECT_THAT(error(o), HasSubstr("mode \"up\""));
  PopulationBasedTraining pbt(PbtOptions());
  FakeRunner runner;
  PopulationAtIteration2(pbt, runner);
  EXPECT_THAT(ErrorOf([&] { pbt.OnTrialResult(runner, runner.Get("t0"), {{"training_iteration", 4}}); }),
              HasSubstr("has no \"score\""));
}

}  // namespace
}  // namespace prism::tune
