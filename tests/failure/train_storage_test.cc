// prism::train when its storage fails, on a one-rank cluster without a launcher (issue 39):
// a checkpoint that does not fit on the storage path (a 1 MiB tmpfs, mounted when root)
// fails the run with "no space left" and the numbers, not "Input/output error"; the newest
// committed checkpoint stays the one a new Fit resumes from; the scratch copy that failed
// to commit does not stay in TMPDIR; and a run that fails before writing anything leaves
// no empty run directory behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "prism/api.h"
#include "prism/checkpoint_store.h"
#include "prism/train.h"
#include "../common/test_util.h"
#include "../unit/checkpoint/small_fs.h"

namespace train = prism::train;
namespace fs = std::filesystem;
using prism_test::SmallFs;
using prism_test::TempDir;
using prism_test::WriteBytes;

namespace {

/// Reports a checkpoint per epoch, of config "bytes[epoch]" bytes, from
/// MakeTempCheckpointDir's scratch; a resumed run starts after its checkpoint's epoch.
void CheckpointLoop(train::Config config) {
  int start = 0;
  if (auto ckpt = train::GetCheckpoint()) {
    std::ifstream(ckpt->path() + "/epoch.txt") >> start;
    ++start;
  }
  for (int epoch = start; epoch < config.Get<int>("epochs", 2); ++epoch) {
    const std::string dir = train::MakeTempCheckpointDir();
    std::ofstream(dir + "/epoch.txt") << epoch;
    WriteBytes(dir + "/model.bin", config.Get<int>("bytes" + std::to_string(epoch), 1024));
    train::Report({{"epoch", epoch}}, train::Checkpoint::FromDirectory(dir));
  }
}

void FailingLoop(train::Config) { throw std::runtime_error("the loop fails at once"); }

PRISM_REMOTE(CheckpointLoop, FailingLoop);

train::TorchTrainerOptions Options(const std::string& storage, const std::string& name) {
  train::TorchTrainerOptions o;
  o.scaling_config.num_workers = 1;
  o.run_config.name = name;
  o.run_config.storage_path = storage;
  o.run_config.verbose = false;
  o.run_config.failure_config.max_failures = 0;
  return o;
}

/// What Fit throws ("(no error)" if it returns).
std::string FitError(void (*loop)(train::Config), const train::TorchTrainerOptions& o) {
  try {
    train::TorchTrainer(loop, o).Fit();
  } catch (const train::TrainingFailedError& e) {
    return e.what();
  }
  return "(no error)";
}

/// Sets TMPDIR (where MakeTempCheckpointDir's scratch goes) for one test.
class ScopedTmpdir {
 public:
  explicit ScopedTmpdir(const std::string& dir) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (old_.empty()) ::unsetenv("TMPDIR"); else ::setenv("TMPDIR", old_.c_str(), 1);
  }

 private:
  std::string old_;
};

TEST(TrainStorage, ACheckpointThatDoesNotFitFailsTheRunWithNoSpaceLeftAndLosesNothing) {
  TempDir tmp, scratch;
  SmallFs disk(tmp / "disk", 1 << 20);
  if (!disk.Mounted()) GTEST_SKIP() << SmallFs::kWhySkipped;
  ScopedTmpdir tmpdir(scratch.path());
  const std::string run = disk / "run";
  auto o = Options(disk.path(), "run");
  o.train_loop_config.Set("epochs", 2).Set("bytes0", 16 << 10).Set("bytes1", 2 << 20);

  const std::string error = FitError(CheckpointLoop, o);
  EXPECT_NE(error.find("no space left on " + disk.path() + " (the file system holding " + run +
                       "): "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(" free, the checkpoint needs about 2.1 MiB"), std::string::npos) << error;
  EXPECT_NE(error.find("the newest checkpoint is still " + run + "/checkpoint_000001"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("was removed"), std::string::npos) << error;
  EXPECT_NE(error.find("The run's results and checkpoints so far are in " + run),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find("Input/output error"), std::string::npos) << error;

  // Nothing of either checkpoint stays in the scratch directory.
  const std::string root = scratch / ("prism-checkpoints-" + std::to_string(::getuid()));
  EXPECT_TRUE(!fs::exists(root) || fs::is_empty(root)) << root << " keeps a checkpoint";

  // The first checkpoint is whole and is where the run resumes: with room again (a
  // smaller second checkpoint) a new Fit goes on from epoch 1.
  prism::ResumePoint point = prism::CheckpointStore(run, {}).NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value());
  EXPECT_EQ(point.checkpoint->index, 1);
  EXPECT_TRUE(point.rejected.empty());
  o.train_loop_config.Set("bytes1", 16 << 10);
  train::Result result = train::TorchTrainer(CheckpointLoop, o).Fit();
  ASSERT_EQ(result.metrics_history.size(), 2u);
  EXPECT_EQ(result.metrics_history.back().at("epoch"), 1);
}

TEST(TrainStorage, ARunThatFailsBeforeWritingAnythingLeavesNoRunDirectory) {
  TempDir tmp;
  const std::string storage = tmp / "results";  // made by the Fit
  const std::string error = FitError(FailingLoop, Options(storage, "fails"));
  EXPECT_NE(error.find("the loop fails at once"), std::string::npos) << error;
  EXPECT_EQ(error.find("results and checkpoints so far"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(storage + "/fails")) << "an empty run directory stayed";
  EXPECT_FALSE(fs::exists(storage)) << "the storage path made for the run stayed, empty";

  // A storage path that was there stays; so does a run directory with a run's results.
  fs::create_directories(storage);
  auto o = Options(storage, "kept");
  o.train_loop_config.Set("epochs", 1);
  train::TorchTrainer(CheckpointLoop, o).Fit();
  EXPECT_NE(FitError(FailingLoop, o).find("The run's results and checkpoints so far are in " +
                                          storage + "/kept"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(storage + "/kept/checkpoint_000001"));
  EXPECT_FALSE(fs::exists(storage + "/fails"));
  EXPECT_TRUE(fs::exists(storage));
}

}  // namespace
