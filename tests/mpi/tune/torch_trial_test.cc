// A TorchTrainer as a Tune trainable (prism/tune/torch.h) on 3 ranks with one CPU each:
// trials of 2 workers (one at a time), each a real training run with its own placement
// group and world size 2; ASHA stops the poor trial's trainer at a checkpointed report.
#include <gtest/gtest.h>
#include <prism/api.h>
#include <prism/train.h>
#include <prism/tune.h>
#include <prism/tune/torch.h>

#include <filesystem>
#include <fstream>

#include "../../common/test_util.h"

namespace train = prism::train;
namespace tune = prism::tune;
namespace fs = std::filesystem;

namespace {

/// Every worker checks the group's size; rank 0 checkpoints the epoch. The score grows
/// with the config's `quality` each epoch.
void ScoredLoop(train::Config config) {
  const auto& ctx = train::GetContext();
  if (ctx.GetWorldSize() != 2) throw std::runtime_error("expected 2 workers");
  int start = 0;
  if (auto ckpt = train::GetCheckpoint()) {
    std::ifstream in(ckpt->path() + "/epoch.txt");
    in >> start;
    ++start;
  }
  const double quality = config.Get<double>("quality", 0);
  for (int epoch = start; epoch < config.Get<int>("epochs", 4); ++epoch) {
    std::optional<train::Checkpoint> ckpt;
    if (ctx.GetWorldRank() == 0) {
      std::string dir = train::MakeTempCheckpointDir();
      std::ofstream(dir + "/epoch.txt") << epoch;
      ckpt = train::Checkpoint::FromDirectory(dir);
    }
    train::Report({{"score", quality * (epoch + 1)}, {"world", double(ctx.GetWorldSize())}}, ckpt);
  }
}

PRISM_REMOTE(ScoredLoop);

TEST(TorchTrainable, EachTrialIsATwoWorkerTrainingRunAndAshaStopsThePoorOne) {
  std::string storage = prism_test::SharedTestDir() + "/prism-tune-torch-" + std::to_string(::getpid());
  fs::remove_all(storage);
  train::TorchTrainerOptions options;
  options.scaling_config.num_workers = 2;
  options.train_loop_config.Set("epochs", 4);
  tune::Trainable trainable = tune::TorchTrainable(ScoredLoop, options);
  EXPECT_EQ(trainable.resources.at("CPU"), 2);
  auto asha = std::make_shared<tune::ASHAScheduler>(
      tune::AsyncHyperBandOptions{.max_t = 4, .grace_period = 1, .reduction_factor = 2});
  tune::RunConfig run;
  run.name = "torch";
  run.storage_path = storage;
  run.verbose = 0;
  tune::Tuner tuner(trainable, {{"quality", tune::GridSearch({1.0, 0.1})}},
                    {.metric = "score", .mode = "max", .scheduler = asha}, run);
  tune::ResultGrid results = tuner.Fit();
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r.status, tune::TrialStatus::kTerminated) << r.trial_id << ": " << r.error;
    EXPECT_EQ(r.metrics.at("world"), 2);
    EXPECT_FALSE(r.checkpoint.empty());
    EXPECT_TRUE(fs::exists(r.checkpoint + "/epoch.txt")) << r.checkpoint;
  }
  const tune::Result& best = results.GetBestResult();
  EXPECT_EQ(best.config.Get<double>("quality", 0), 1.0);
  EXPECT_EQ(best.metrics.at("training_iteration"), 4);
  // The second trial reaches rung 1 below the first's value there: its workers stop at
  // their next report (reports do not wait for the decision), the 2nd of 4.
  EXPECT_LE(results[1].metrics.at("training_iteration"), 2);
  fs::remove_all(storage);
}

}  // namespace
