// prism::tune's Tuner on real ranks (mpirun -n 1 and 3, one CPU per rank): trials as tasks,
// grids and samples, ASHA stopping trials early, retries from checkpoints, errors in the
// results, bad input, preemption followed by Restore with no trial repeated or lost,
// stoppers (a trial's, the experiment's, one that throws, their state after Restore), and
// results a trial holds back reaching the driver.
#include <gtest/gtest.h>
#include <prism/api.h>
#include <prism/tune.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "../../common/test_util.h"

namespace tune = prism::tune;
namespace fs = std::filesystem;

namespace {

using prism_test::ErrorOf;

std::string Storage() {
  static const std::string dir = [] {
    std::string d = prism_test::SharedTestDir() + "/prism-tune-test-" + std::to_string(::getpid());
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

tune::RunConfig RunIn(const std::string& name) {
  tune::RunConfig run;
  run.name = name;
  run.storage_path = Storage();
  run.verbose = 0;
  return run;
}

size_t Lines(const std::string& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

// ---- Trainables (registered on every rank) ----------------------------------------------

/// Reports score = 10 * a + step for `steps` steps.
void Linear(tune::Config config) {
  const int a = config.Get<int>("a", 0);
  const int steps = config.Get<int>("steps", 3);
  for (int step = 1; step <= steps; ++step) tune::Report({{"score", 10.0 * a + step}});
}

/// Reports quality * step; a trial's quality is in its config. Slow enough that trials
/// overlap and ASHA's rungs fill from several of them.
void Curve(tune::Config config) {
  const double quality = config.Get<double>("quality", 0);
  for (int step = 1; step <= 8; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    tune::Report({{"acc", quality * step}});
  }
}

/// Checkpoints every step (a file holding the step) and resumes from the latest; fails at
/// step 3 of its first run.
void FlakyCounter(tune::Config config) {
  int start = 0;
  if (auto ckpt = tune::GetCheckpoint()) {
    std::ifstream in(ckpt->path() + "/step");
    in >> start;
  }
  const std::string marker = tune::TrialDir() + "/failed_once";
  for (int step = start + 1; step <= 5; ++step) {
    if (step == 4 && !fs::exists(marker)) {
      std::ofstream(marker) << "x";
      throw std::runtime_error("injected failure at step 4");
    }
    if (step == 3) {  // reported without a checkpoint: made again after the failure
      tune::Report({{"step", double(step)}});
      continue;
    }
    std::string dir = prism::MakeTempCheckpointDir();
    std::ofstream(dir + "/step") << step;
    tune::Report({{"step", double(step)}}, prism::Checkpoint::FromDirectory(dir));
  }
}

/// Fails when bad == 1.
void FailsIfBad(tune::Config config) {
  if (config.Get<int>("bad", 0) == 1) throw std::invalid_argument("bad config");
  tune::Report({{"score", 1.0}});
}

/// Reports a metric other than the one the Tuner optimizes.
void WrongMetric(tune::Config) { tune::Report({{"loss", 1.0}}); }

/// Checkpoints every step; on step 2 of trial 0's first run the driver's process gets
/// SIGUSR1 (a Slurm time-limit warning). Slow steps so the others are mid-run then.
void Preempted(tune::Config config) {
  int start = 0;
  if (auto ckpt = tune::GetCheckpoint()) {
    std::ifstream in(ckpt->path() + "/step");
    in >> start;
  }
  for (int step = start + 1; step <= 6; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::string dir = prism::MakeTempCheckpointDir();
    std::ofstream(dir + "/step") << step;
    if (config.Get<int>("i", -1) == 0 && step == 2 && start == 0 &&
        prism::GetRuntimeContext().GetRank() == 0) {
      std::raise(SIGUSR1);
    }
    tune::Report({{"step", double(step)}, {"i", config.Get<double>("i", 0)}},
                 prism::Checkpoint::FromDirectory(dir));
  }
}

/// Reads the shared input "data" (WithParameters) and reports its sum times `k`.
void UsesSharedData(tune::Config config) {
  std::shared_ptr<std::vector<double>> data = tune::GetParameter<std::vector<double>>("data");
  double sum = 0;
  for (double v : *data) sum += v;
  tune::Report({{"sum", sum * config.Get<double>("k", 0)}, {"size", double(data->size())}});
  tune::GetParameter<int>("missing");  // throws: the trial fails with a clear error
}

/// A model whose "weight" grows by `lr` each step: checkpoints the weight every step and
/// resumes from a checkpoint (its own, or another trial's after a PBT exploit). Reports
/// where it resumed from, to check PBT's copies.
void Climb(tune::Config config) {
  double weight = 0;
  int start = 0;
  double resumed_from_copy = 0;
  if (auto ckpt = tune::GetCheckpoint()) {
    std::ifstream in(ckpt->path() + "/weight");
    in >> weight >> start;
    resumed_from_copy = ckpt->path().find("exploited_") != std::string::npos;
  }
  const double lr = config.Get<double>("lr", 0);
  const int steps = config.Get<int>("steps", 12);
  for (int step = start; step < steps; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    weight += lr;
    std::string dir = prism::MakeTempCheckpointDir();
    std::ofstream(dir + "/weight") << weight << " " << step + 1;
    tune::Report({{"weight", weight}, {"resumed_from_copy", resumed_from_copy}},
                 prism::Checkpoint::FromDirectory(dir));
  }
}

/// Reports once, then reports nothing while it waits (up to 10 s) for the driver to write
/// that result into its result.json: a result the trial holds back (on the driver's rank,
/// no scheduler deciding on it) must reach the driver without a next report (session.cc's
/// flusher). Then reports how long it waited (-1: never).
void ReportsThenWaits(tune::Config) {
  tune::Report({{"score", 1}});
  const auto start = std::chrono::steady_clock::now();
  double waited_ms = -1;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    if (Lines(tune::TrialDir() + "/result.json") >= 1) {
      waited_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  tune::Report({{"score", 2}, {"waited_ms", waited_ms}});
}

PRISM_REMOTE(Linear, Curve, FlakyCounter, FailsIfBad, WrongMetric, Preempted, UsesSharedData, Climb,
             ReportsThenWaits);

// ---- Tests ----------------------------------------------------------------------------------

TEST(Tuner, GridTimesSamplesRunsEveryTrialWithItsConfigAndWritesItsFiles) {
  tune::Tuner tuner(Linear, {{"a", tune::GridSearch({1, 2, 3})}, {"b", tune::Uniform(0, 1)}, {"steps", 3}},
                    {.metric = "score", .mode = "max", .num_samples = 2}, RunIn("grid"));
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 6u);
  std::multiset<int> as;
  for (const auto& r : results) {
    EXPECT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << " " << r.error;
    as.insert(r.config.Get<int>("a", 0));
    const double b = r.config.Get<double>("b", -1);
    EXPECT_GE(b, 0);
    EXPECT_LT(b, 1);
    ASSERT_EQ(r.metrics_history.size(), 3u) << r.trial_id;
    EXPECT_EQ(r.metrics.at("training_iteration"), 3);
    EXPECT_EQ(r.metrics.at("score"), 10.0 * r.config.Get<int>("a", 0) + 3);
    EXPECT_TRUE(fs::exists(r.path + "/params.json"));
    EXPECT_EQ(Lines(r.path + "/result.json"), 3u);
    EXPECT_EQ(Lines(r.path + "/progress.csv"), 4u);  // header + 3 rows
  }
  EXPECT_EQ(as, (std::multiset<int>{1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(results.GetBestResult().config.Get<int>("a", 0), 3);
  EXPECT_EQ(results.GetBestResult("score", "min").config.Get<int>("a", 0), 1);
  EXPECT_EQ(results.GetBestResult("score", "max", "avg").metrics.at("score"), 33);
  const std::string csv = results.ToCsv();
  EXPECT_NE(csv.find("config/a"), std::string::npos) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7) << csv;
  EXPECT_TRUE(tune::Tuner::CanRestore(results.experiment_path()));
  // The histories moved into `results`: this Tuner's experiment is done.
  EXPECT_THROW(tuner.Fit(), prism::Error);
}

TEST(Tuner, AshaStopsPoorTrialsBeforeMaxT) {
  std::vector<tune::Value> qualities;
  // The best first: each later trial falls below the cutoff of a rung the better ones filled.
  for (int i = 8; i >= 1; --i) qualities.push_back(double(i) / 8);
  auto asha = std::make_shared<tune::ASHAScheduler>(
      tune::AsyncHyperBandOptions{.max_t = 8, .grace_period = 1, .reduction_factor = 2});
  tune::Tuner tuner(Curve, {{"quality", tune::GridSearch(qualities)}},
                    {.metric = "acc", .mode = "max", .scheduler = asha}, RunIn("asha"));
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 8u);
  int stopped_early = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.status, tune::TrialStatus::kTerminated) << r.error;
    const double iters = r.metrics.at("training_iteration");
    stopped_early += iters < 8;
    // Report waits for ASHA's answer: a stopped trial ends at the rung that stopped it
    // (grace 1, rf 2: 1, 2, 4), not one iteration later.
    EXPECT_TRUE(iters == 1 || iters == 2 || iters == 4 || iters == 8) << r.trial_id << ": " << iters;
  }
  EXPECT_GT(stopped_early, 0) << "ASHA stopped no trial";
  EXPECT_EQ(results.GetBestResult().config.Get<double>("quality", 0), 1.0);
  EXPECT_EQ(results.GetBestResult().metrics.at("training_iteration"), 8);
}

TEST(Tuner, HyperBandPausesTrialsAtMilestonesAndResumesTheBestFromTheirCheckpoints) {
  auto hyperband = std::make_shared<tune::HyperBandScheduler>(
      tune::HyperBandOptions{.max_t = 9, .reduction_factor = 3});
  std::vector<tune::Value> lrs;
  for (int i = 1; i <= 9; ++i) lrs.push_back(double(i));
  tune::Tuner tuner(Climb, {{"lr", tune::GridSearch(lrs)}, {"steps", 9}},
                    {.metric = "weight", .mode = "max", .scheduler = hyperband}, RunIn("hyperband"));
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 9u);
  int full = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << " " << r.error;
    const double iters = r.metrics.at("training_iteration");
    full += iters == 9;
    // Paused and resumed from its own checkpoint: the weight is lr x iterations, the
    // history has no repeated iteration.
    EXPECT_DOUBLE_EQ(r.metrics.at("weight"), r.config.Get<double>("lr", 0) * iters) << r.trial_id;
    for (size_t i = 0; i < r.metrics_history.size(); ++i) {
      EXPECT_EQ(r.metrics_history[i].at("training_iteration"), double(i + 1)) << r.trial_id;
    }
  }
  EXPECT_GE(full, 1);
  EXPECT_LT(full, 9) << "HyperBand stopped no trial early";
  EXPECT_EQ(results.GetBestResult().config.Get<double>("lr", 0), 9);
}

TEST(Tuner, PbtCopiesATopTrialsCheckpointAndConfigIntoABottomTrial) {
  tune::PBTOptions options;
  options.time_attr = "training_iteration";
  options.perturbation_interval = 3;
  options.hyperparam_mutations = {{"lr", tune::Choice({0.5, 1.0, 2.0, 4.0})}};
  options.seed = 7;
  auto pbt = std::make_shared<tune::PopulationBasedTraining>(options);
  tune::Tuner tuner(Climb, {{"lr", tune::GridSearch({0.5, 1.0, 2.0, 4.0})}, {"steps", 12}},
                    {.metric = "weight", .mode = "max", .scheduler = pbt}, RunIn("pbt"));
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 4u);
  ASSERT_FALSE(pbt->PolicyLog().empty()) << "PBT never exploited";
  const auto& first = pbt->PolicyLog().front();
  EXPECT_NE(first.trial, first.source);
  EXPECT_FALSE(first.source_checkpoint.empty());
  bool resumed_from_copy = false;
  for (const auto& r : results) {
    EXPECT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << " " << r.error;
    for (const auto& m : r.metrics_history) resumed_from_copy |= m.at("resumed_from_copy") == 1;
  }
  EXPECT_TRUE(resumed_from_copy) << "no trial started from a copied checkpoint";
  // The exploited trial carries on from the source's weight, so no trial ends below the
  // weight the worst config alone would reach.
  for (const auto& r : results) EXPECT_GE(r.metrics.at("weight"), 0.5 * 12) << r.trial_id;
}

TEST(Tuner, AHeldResultReachesTheDriverWithoutTheTrialsNextReport) {
  tune::Tuner tuner(ReportsThenWaits, {}, {.metric = "score", .mode = "max", .num_samples = 2},
                    RunIn("held_results"));
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    ASSERT_EQ(r.metrics_history.size(), 2u) << r.trial_id << " " << r.error;
    // Held at most 0.1 s (kHoldTime); the bound leaves room for a loaded machine.
    EXPECT_GE(r.metrics.at("waited_ms"), 0) << r.trial_id;
    EXPECT_LT(r.metrics.at("waited_ms"), 5000) << r.trial_id;
  }
}

TEST(Tuner, AFailedTrialIsRetriedFromItsLatestCheckpoint) {
  tune::RunConfig run = RunIn("retry");
  run.failure_config.max_failures = 1;
  tune::Tuner tuner(FlakyCounter, {}, {.metric = "step", .mode = "max"}, run);
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 1u);
  const tune::Result& r = results[0];
  EXPECT_EQ(r.status, tune::TrialStatus::kTerminated) << r.error;
  EXPECT_EQ(r.metrics.at("step"), 5);
  EXPECT_EQ(r.metrics.at("training_iteration"), 5);  // counted from the checkpoint's report
  // Steps 1, 2 (checkpointed) and 3 (not) before the failure at 4, then 3, 4, 5 again from
  // the step-2 checkpoint: the history keeps step 3 once, as the trial's state has it.
  std::vector<double> steps;
  for (const auto& m : r.metrics_history) steps.push_back(m.at("step"));
  EXPECT_EQ(steps, (std::vector<double>{1, 2, 3, 4, 5}));
  EXPECT_FALSE(r.checkpoint.empty());
}

TEST(Tuner, TrialErrorsAreInTheResultsAndTheOthersFinish) {
  tune::Tuner tuner(FailsIfBad, {{"bad", tune::GridSearch({0, 1, 0})}}, {.metric = "score", .mode = "max"},
                    RunIn("errors"));
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results.num_errors(), 1u);
  EXPECT_EQ(results.num_terminated(), 2u);
  ASSERT_EQ(results.errors().size(), 1u);
  EXPECT_NE(results.errors()[0].find("bad config"), std::string::npos) << results.errors()[0];
  EXPECT_NE(results.errors()[0].find("invalid_argument"), std::string::npos) << results.errors()[0];
}

TEST(Tuner, SharedInputsArePutOnceAndReadByEveryTrial) {
  std::vector<double> data(100000, 0.5);  // 800 KB: in the object store, not in each config
  tune::Trainable trainable = tune::WithParameters(UsesSharedData, "data", data);
  tune::Tuner tuner(trainable, {{"k", tune::GridSearch({1, 2, 3})}}, {.metric = "sum", .mode = "max"},
                    RunIn("shared"));
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    EXPECT_EQ(r.metrics.at("size"), 100000);
    EXPECT_EQ(r.metrics.at("sum"), 50000.0 * r.config.Get<double>("k", 0));
    EXPECT_EQ(r.status, tune::TrialStatus::kError);  // GetParameter("missing") threw
    EXPECT_NE(r.error.find("no shared input named \"missing\""), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("data"), std::string::npos) << r.error;
  }
}

TEST(Tuner, BadInputGetsAClearError) {
  EXPECT_NE(ErrorOf([] { tune::Tuner(Linear, {{"a", tune::GridSearch({})}}); }).find("GridSearch"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { tune::Uniform(2, 1); }).find("2"), std::string::npos);
  EXPECT_NE(ErrorOf([] { tune::Tuner(Linear, {}, {.metric = "score", .mode = "maximize"}); }).find("\"max\""),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { tune::Tuner(Linear, {}, {.metric = "score"}); }).find("mode"), std::string::npos);
  const std::string never = ErrorOf([] {
    tune::Tuner(WrongMetric, {}, {.metric = "accuracy", .mode = "max"}, RunIn("never")).Fit();
  });
  EXPECT_NE(never.find("accuracy"), std::string::npos) << never;
  EXPECT_NE(never.find("loss"), std::string::npos) << never;
  // The same experiment twice: Restore it or rename it.
  const std::string twice = ErrorOf([] { tune::Tuner(Linear, {}, {}, RunIn("grid")).Fit(); });
  EXPECT_NE(twice.find("Restore"), std::string::npos) << twice;
  EXPECT_NE(ErrorOf([] { tune::Tuner::Restore(Storage() + "/nothing", Linear, {}); }).find("no experiment"),
            std::string::npos);
  EXPECT_FALSE(tune::Tuner::CanRestore(Storage() + "/nothing"));
  // An experiment that ran ASHA (the test above) restored without a scheduler: say which.
  const std::string no_scheduler = ErrorOf([] { tune::Tuner::Restore(Storage() + "/asha", Curve, {}); });
  EXPECT_NE(no_scheduler.find("AsyncHyperBandScheduler"), std::string::npos) << no_scheduler;
  EXPECT_NE(no_scheduler.find("tune_config.scheduler"), std::string::npos) << no_scheduler;
}

TEST(Tuner, PreemptionStopsTrialsAtACheckpointAndRestoreFinishesThemWithoutRepeats) {
  std::vector<tune::Value> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(i);
  tune::ParamSpace space{{"i", tune::GridSearch(ids)}};
  std::string path;
  try {
    tune::Tuner(Preempted, space, {.metric = "step", .mode = "max"}, RunIn("preempt")).Fit();
    FAIL() << "Fit returned although SIGUSR1 arrived";
  } catch (const tune::TunePreemptedError& e) {
    EXPECT_EQ(e.Signal(), SIGUSR1);
    path = e.ExperimentPath();
  }
  ASSERT_TRUE(tune::Tuner::CanRestore(path));
  // Restored with a 6-point grid instead of its 4 points: refused, naming the change (it
  // used to run 2 more trials silently).
  std::vector<tune::Value> more = ids;
  more.push_back(4);
  more.push_back(5);
  const std::string changed =
      ErrorOf([&] { tune::Tuner::Restore(path, Preempted, {{"i", tune::GridSearch(more)}}); });
  EXPECT_NE(changed.find("param_space differs"), std::string::npos) << changed;
  EXPECT_NE(changed.find("i was grid_search([0, 1, 2, 3])"), std::string::npos) << changed;
  tune::ResultGrid results = tune::Tuner::Restore(path, Preempted, space).Fit();
  ASSERT_EQ(results.size(), 4u);  // no trial lost, none added
  std::set<int> seen;
  for (const auto& r : results) {
    EXPECT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << " " << r.error;
    seen.insert(r.config.Get<int>("i", -1));
    std::vector<double> steps;
    for (const auto& m : r.metrics_history) steps.push_back(m.at("step"));
    EXPECT_EQ(steps, (std::vector<double>{1, 2, 3, 4, 5, 6})) << r.trial_id;  // none repeated
  }
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2, 3}));
}

/// Ends the experiment after `n` results from `trials` trials or more: with trials that do
/// not end by themselves, all those running, so that none is cancelled before it starts
/// (which the Tuner notices only after kEndGrace, 3 s).
class StopAllAfter : public tune::Stopper {
 public:
  StopAllAfter(size_t n, size_t trials) : n_(n), trials_(trials) {}
  bool ShouldStop(const std::string& trial_id, const tune::Metrics&) override {
    ++seen_;
    ids_.insert(trial_id);
    return false;
  }
  bool StopAll() override {
    if (seen_ >= n_ && ids_.size() >= trials_ && seen_at_stop == 0) seen_at_stop = seen_;
    return seen_at_stop > 0;
  }
  size_t seen_at_stop = 0;

 private:
  size_t n_, trials_, seen_ = 0;
  std::set<std::string> ids_;
};

TEST(Tuner, StoppersEndTrialsOrTheExperimentAndComeBackOnRestore) {
  // MaximumIterationStopper: each trial ends at its 3rd result, with no 4th one reported
  // (Report waited for the driver's answer).
  tune::ParamSpace space{{"a", tune::GridSearch({0, 1, 2})}, {"steps", 10}};
  tune::RunConfig run = RunIn("stopper");
  auto counter = std::make_shared<tune::MaximumIterationStopper>(3);
  run.stopper = counter;
  tune::ResultGrid results = tune::Tuner(Linear, space, {}, run).Fit();
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    EXPECT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << " " << r.error;
    EXPECT_EQ(r.metrics_history.size(), 3u) << r.trial_id;
  }
  // Restore needs a stopper again, and hands it the journal's state.
  const std::string path = results.experiment_path();
  EXPECT_NE(ErrorOf([&] { tune::Tuner::Restore(path, Linear, space); }).find("RunConfig::stopper"),
            std::string::npos);
  auto fresh = std::make_shared<tune::MaximumIterationStopper>(3);
  tune::Tuner::Restore(path, Linear, space, true, false, false, {}, fresh);
  EXPECT_EQ(fresh->SaveState(), counter->SaveState());

  // StopAll: running trials stop, pending ones end as TERMINATED without a result.
  // (Trials of a million steps, which only the stopper ends.)
  tune::RunConfig all = RunIn("stop_all");
  const size_t running = prism::GetRuntimeContext().GetWorldSize();  // one CPU per rank
  auto stop_all = std::make_shared<StopAllAfter>(4, running);
  all.stopper = stop_all;
  std::vector<tune::Value> as;
  for (int a = 0; a < 8; ++a) as.push_back(a);
  results = tune::Tuner(Linear, {{"a", tune::GridSearch(as)}, {"steps", 1000000}}, {}, all).Fit();
  size_t reports = 0, never_ran = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << " " << r.error;
    reports += r.metrics_history.size();
    never_ran += r.metrics_history.empty();
  }
  EXPECT_GE(stop_all->seen_at_stop, 4u);
  EXPECT_LE(reports, stop_all->seen_at_stop + running);  // at most one more per running trial
  EXPECT_GE(never_ran, 1u);

  // A stopper that throws ends the experiment with TuneError, carrying its message (one
  // trial, the one the stopper answers).
  tune::RunConfig bad = RunIn("stopper_throws");
  bad.stopper = std::make_shared<tune::FunctionStopper>([](const std::string&, const tune::Metrics& r) -> bool {
    if (r.at("training_iteration") >= 2) throw std::runtime_error("no second result, please");
    return false;
  });
  try {
    tune::Tuner(Linear, {{"steps", 10}}, {}, bad).Fit();
    ADD_FAILURE() << "Fit returned although the stopper threw";
  } catch (const tune::TuneError& e) {
    EXPECT_NE(std::string(e.what()).find("no second result, please"), std::string::npos) << e.what();
  }
}


/// Suggests `n` trials of Linear that run until stopped; once each has reported, the next
/// Suggest throws (all of them running then, so none is cancelled before it starts).
class ThrowsWhileTrialsRun : public tune::Searcher {
 public:
  explicit ThrowsWhileTrialsRun(size_t n) : n_(n) {}
  void Setup(const tune::ParamSpace&, const std::string&, const std::string&, int, uint64_t) override {}
  tune::Suggestion Suggest(const std::string&) override {
    if (suggested_ < n_) {
      tune::Config c;
      c.Set("a", static_cast<int>(suggested_++));
      c.Set("steps", 1000000);
      return tune::Suggestion::Of(c);
    }
    if (reported_.size() < n_) return tune::Suggestion::Wait();
    throw std::runtime_error("the model broke");
  }
  void OnTrialResult(const std::string& trial_id, const tune::Metrics&) override { reported_.insert(trial_id); }
  void OnTrialComplete(const std::string&, const tune::Config&, const tune::Metrics*, bool) override {}
  std::string SaveState() const override { return ""; }
  void RestoreState(const std::string&) override {}

 private:
  size_t n_, suggested_ = 0;
  std::set<std::string> reported_;
};

TEST(Tuner, ASearcherThatThrowsWhileTrialsRunEndsTheExperimentAndStopsThem) {
  // ASHA decides on every report, so the trials wait for the driver at each one: Fit must
  // stop them rather than leave them waiting, and throw TuneError with the searcher's message.
  const size_t n = prism::GetRuntimeContext().GetWorldSize();  // one CPU per rank
  auto asha = std::make_shared<tune::ASHAScheduler>(tune::AsyncHyperBandOptions{.max_t = 1e9});
  tune::TuneConfig config{.metric = "score", .mode = "max",
                          .search_alg = std::make_shared<ThrowsWhileTrialsRun>(n), .scheduler = asha,
                          .num_samples = 10};
  const auto start = std::chrono::steady_clock::now();
  try {
    tune::Tuner(Linear, {}, config, RunIn("searcher_throws")).Fit();
    ADD_FAILURE() << "Fit returned although the searcher threw";
  } catch (const tune::TuneError& e) {
    EXPECT_NE(std::string(e.what()).find("the model broke"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Suggest"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
