// TorchTrainer on 4 ranks (one CPU each): DDP on 2 and 3 workers matches one worker on the
// whole batch, a failing worker restarts the group from the latest checkpoint, a new Fit
// of the same run resumes where the last one stopped (from the newest intact checkpoint,
// past damaged ones), SIGUSR1 stops a run after a checkpoint, and bad input gets clear
// errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "prism/platform/panel.h"
#include "prism/train.h"
#include "runtime/stop_signals.h"
#include "train/worker.h"
#include "../test_util.h"

using namespace prism_test;
namespace train = prism::train;

namespace {

std::string FreshDir(const std::string& what) {
  std::string dir = SharedTestDir() + "/prism-trainer-test-" + what + "-" +
                    std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// ---- DDP equivalence --------------------------------------------------------------------

/// A small regression: every worker sees the same global batch of 12 rows and trains on
/// its own contiguous share of them, so the averaged gradient equals the full batch's.
void DdpLoop(train::Config config) {
  const auto& ctx = train::GetContext();
  // Each worker starts from different weights: PrepareModel must hand everyone rank 0's.
  torch::manual_seed(ctx.GetWorldRank() == 0 ? 1 : 1000 + ctx.GetWorldRank());
  torch::nn::Sequential net(torch::nn::Linear(8, 4), torch::nn::Tanh(), torch::nn::Linear(4, 1));
  net = train::PrepareModel(net, static_cast<size_t>(config.Get<int>("bucket_bytes", 1 << 20)));
  torch::optim::SGD opt(net->parameters(), 0.1);
  torch::manual_seed(123);
  auto x = torch::randn({12, 8});
  auto y = torch::randn({12, 1});
  const int64_t n = ctx.GetWorldSize(), share = 12 / n, first = ctx.GetWorldRank() * share;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    auto loss = torch::mse_loss(net->forward(x.narrow(0, first, share)), y.narrow(0, first, share));
    loss.backward();
    opt.step();
  }
  // Every worker must hold the same parameters; world rank 0 reports them.
  auto flat = torch::cat({net->parameters()[0].reshape(-1), net->parameters()[1].reshape(-1),
                          net->parameters()[2].reshape(-1), net->parameters()[3].reshape(-1)})
                  .detach()
                  .clone();
  auto all = ctx.GetCollective().AllGather(flat);
  double divergence = 0;
  for (const auto& other : all) divergence = std::max(divergence, (other - flat).abs().max().item<double>());
  train::Metrics m{{"divergence", divergence}};
  for (int64_t i = 0; i < flat.numel(); ++i) m["p" + std::to_string(i)] = flat[i].item<double>();
  train::Report(m);
}

train::Result FitDdp(int workers, int bucket_bytes, const std::string& storage) {
  train::TorchTrainerOptions o;
  o.train_loop_config.Set("bucket_bytes", bucket_bytes);
  o.scaling_config.num_workers = workers;
  o.run_config.name = "ddp_" + std::to_string(workers) + "_" + std::to_string(bucket_bytes);
  o.run_config.storage_path = storage;
  o.run_config.verbose = false;
  return train::TorchTrainer(DdpLoop, o).Fit();
}

// ---- Failures and resume ----------------------------------------------------------------

/// Counts epochs; a checkpoint per epoch holds the epoch in a file. With "fail_at" >= 0,
/// world rank 1 throws once at that epoch (a marker file remembers it did).
void EpochLoop(train::Config config) {
  const auto& ctx = train::GetContext();
  int start = 0;
  if (auto ckpt = train::GetCheckpoint()) {
    std::ifstream in(ckpt->path() + "/epoch.txt");
    in >> start;
    ++start;
  }
  const int epochs = config.Get<int>("epochs", 4);
  const int fail_at = config.Get<int>("fail_at", -1);
  const int epoch_ms = config.Get<int>("epoch_ms", 0);
  const std::string marker = config.Get<std::string>("marker", "");
  for (int epoch = start; epoch < epochs; ++epoch) {
    if (epoch == fail_at && ctx.GetWorldRank() == 1 && !std::filesystem::exists(marker)) {
      std::ofstream(marker) << "failed once";
      throw std::runtime_error("injected failure at epoch " + std::to_string(epoch));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(epoch_ms));
    std::optional<train::Checkpoint> ckpt;
    if (ctx.GetWorldRank() == 0) {
      std::string dir = train::MakeTempCheckpointDir();
      std::ofstream(dir + "/epoch.txt") << epoch;
      ckpt = train::Checkpoint::FromDirectory(dir);
    }
    train::Report({{"epoch", epoch}, {"score", epoch % 2 == 0 ? 10.0 - epoch : epoch}}, ckpt);
  }
}

void NeverRegisteredLoop(train::Config) {}

void MissingDataLoop(train::Config) { train::LoadFashionMnist("train", "/nonexistent/fashion-mnist"); }

PRISM_REMOTE(DdpLoop, EpochLoop, MissingDataLoop);

train::TorchTrainerOptions EpochOptions(const std::string& storage, const std::string& name, int workers,
                                        int epochs) {
  train::TorchTrainerOptions o;
  o.train_loop_config.Set("epochs", epochs);
  o.scaling_config.num_workers = workers;
  o.run_config.name = name;
  o.run_config.storage_path = storage;
  o.run_config.verbose = false;
  return o;
}

std::vector<double> Epochs(const train::Result& r) {
  std::vector<double> out;
  for (const auto& m : r.metrics_history) out.push_back(m.at("epoch"));
  return out;
}

TEST(Trainer, DdpOnTwoAndThreeWorkersMatchesOneWorkerOnTheWholeBatch) {
  ASSERT_GE(World(), 3);
  const std::string storage = FreshDir("ddp");
  train::Result one = FitDdp(1, 1 << 20, storage);
  for (int workers : {2, 3}) {
    for (int bucket_bytes : {1 << 20, 64}) {  // one bucket, and a bucket per tensor or so
      train::Result many = FitDdp(workers, bucket_bytes, storage);
      EXPECT_LT(many.metrics.at("divergence"), 1e-7) << workers << " workers disagree";
      ASSERT_EQ(many.metrics.size(), one.metrics.size());
      for (const auto& [k, v] : one.metrics) {
        if (k == "divergence") continue;
        EXPECT_NEAR(many.metrics.at(k), v, 1e-5) << k << " with " << workers << " workers, buckets of "
                                                 << bucket_bytes << " bytes";
      }
    }
  }
  // And training moved the parameters at all (the comparison is not between two no-ops).
  EXPECT_GT(std::abs(one.metrics.at("p0")), 0.0);
}

TEST(Trainer, AFailingWorkerRestartsTheGroupFromTheLatestCheckpoint) {
  ASSERT_GE(World(), 2);
  const std::string storage = FreshDir("restart");
  auto o = EpochOptions(storage, "flaky", 2, 4);
  o.train_loop_config.Set("fail_at", 2).Set("marker", storage + "/failed-once");
  o.run_config.failure_config.max_failures = 1;
  train::Result r = train::TorchTrainer(EpochLoop, o).Fit();
  EXPECT_TRUE(std::filesystem::exists(storage + "/failed-once"));
  EXPECT_EQ(r.metrics.at("epoch"), 3);
  EXPECT_EQ(Epochs(r), (std::vector<double>{0, 1, 2, 3})) << "the restart continued from epoch 1's checkpoint";
  ASSERT_EQ(r.failures.size(), 1u) << "Result::failures lists the failure restarted from";
  EXPECT_NE(r.failures[0].find("injected failure at epoch 2"), std::string::npos) << r.failures[0];
  ASSERT_TRUE(r.checkpoint);
  std::ifstream in(r.checkpoint->path() + "/epoch.txt");
  int epoch = -1;
  in >> epoch;
  EXPECT_EQ(epoch, 3);
}

TEST(Trainer, TooManyFailuresEndWithTrainingFailedErrorAndTheCause) {
  const std::string storage = FreshDir("fail");
  auto o = EpochOptions(storage, "fails", 2, 4);
  o.train_loop_config.Set("fail_at", 1).Set("marker", storage + "/failed-once");
  o.run_config.failure_config.max_failures = 0;
  try {
    train::TorchTrainer(EpochLoop, o).Fit();
    FAIL() << "max_failures=0 and a worker failed";
  } catch (const train::TrainingFailedError& e) {
    EXPECT_NE(std::string(e.what()).find("injected failure at epoch 1"), std::string::npos) << e.what();
  }
}

TEST(Trainer, ANewFitOfTheSameRunResumesFromItsLatestCheckpoint) {
  const std::string storage = FreshDir("resume");
  train::Result first = train::TorchTrainer(EpochLoop, EpochOptions(storage, "run", 2, 2)).Fit();
  EXPECT_EQ(Epochs(first), (std::vector<double>{0, 1}));
  train::Result second = train::TorchTrainer(EpochLoop, EpochOptions(storage, "run", 2, 4)).Fit();
  EXPECT_EQ(second.metrics.at("epoch"), 3);
  EXPECT_EQ(Epochs(second), (std::vector<double>{0, 1, 2, 3})) << "history spans both fits, epochs continue";
}

// Run by mpi_trainer_dashboard_n3 (--prism-dashboard=report); skipped without the dashboard.
TEST(Trainer, ShowsTheRunOnTheDashboard) {
  if (!prism::platform::DashboardOn()) GTEST_SKIP() << "run with --prism-dashboard=report";
  const std::string storage = FreshDir("dashboard");
  train::TorchTrainer(EpochLoop, EpochOptions(storage, "shown", 2, 3)).Fit();
  std::optional<std::string> panel = prism::kv::Get("prism.dashboard/panel/train/shown");
  ASSERT_TRUE(panel) << "no Train panel in the KV store";
  const nlohmann::json p = nlohmann::json::parse(*panel);
  EXPECT_EQ(p["title"], "Train: shown (TorchTrainer, finished)");
  EXPECT_EQ(p["rows"].size(), 3u) << p.dump();  // one per epoch's report
  EXPECT_EQ(p["columns"][0], "report");
  EXPECT_NE(p["lines"][0].get<std::string>().find("Workers on ranks "), std::string::npos) << p.dump();
  // Its progress for /metrics and its curves for the plots.
  std::map<std::string, double> metrics;
  for (const auto& m : p["metrics"]) {
    std::string key = m["name"].get<std::string>();
    for (const auto& label : m["labels"]) key += "," + label[0].get<std::string>() + "=" + label[1].get<std::string>();
    metrics[key] = m["value"].get<double>();
  }
  EXPECT_EQ(metrics["prism_train_reports,run=shown"], 3) << p["metrics"].dump();
  EXPECT_EQ(metrics["prism_train_checkpoints,run=shown"], 3) << p["metrics"].dump();
  EXPECT_EQ(metrics["prism_train_metric,run=shown,metric=epoch"], 2) << p["metrics"].dump();
  std::map<std::string, nlohmann::json> curves;
  for (const auto& c : p["series"]) curves[c["name"].get<std::string>()] = c;
  ASSERT_EQ(curves.size(), 2u) << p["series"].dump();
  EXPECT_EQ(curves["score"]["plot"], "metrics by report");
  EXPECT_EQ(curves["score"]["points"], nlohmann::json::parse("[[1,10.0],[2,1.0],[3,8.0]]")) << "(report, score)";
}

/// Overwrites the first byte of `file` in place (its size unchanged).
void Scribble(const std::string& file) {
  std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
  out.seekp(0);
  out.put('#');
  ASSERT_TRUE(out) << file;
}

TEST(Trainer, AResumeSkipsDamagedCheckpointsAndRefusesToStartOverWhenNoneIsIntact) {
  const std::string storage = FreshDir("damaged");
  const std::string run = storage + "/run";
  train::Result first = train::TorchTrainer(EpochLoop, EpochOptions(storage, "run", 2, 3)).Fit();
  ASSERT_EQ(Epochs(first), (std::vector<double>{0, 1, 2}));
  Scribble(run + "/checkpoint_000003/epoch.txt");  // the newest, overwritten after its commit
  train::Result second = train::TorchTrainer(EpochLoop, EpochOptions(storage, "run", 2, 5)).Fit();
  EXPECT_EQ(Epochs(second), (std::vector<double>{0, 1, 2, 2, 3, 4}))
      << "the second Fit resumed from checkpoint_000002 (after epoch 1), the newest intact one";

  std::vector<std::string> checkpoints;
  for (const auto& e : std::filesystem::directory_iterator(run)) {
    if (e.path().filename().string().rfind("checkpoint_", 0) != 0) continue;
    checkpoints.push_back(e.path().string());
    Scribble(e.path().string() + "/epoch.txt");
  }
  ASSERT_EQ(checkpoints.size(), 6u);
  try {
    train::TorchTrainer(EpochLoop, EpochOptions(storage, "run", 2, 8)).Fit();
    FAIL() << "Fit started although every checkpoint of the run is damaged";
  } catch (const train::TrainingFailedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("has no intact checkpoint to resume from"), std::string::npos) << what;
    for (const auto& c : checkpoints) EXPECT_NE(what.find(c + ": epoch.txt has CRC-32"), std::string::npos) << c;
  }
  EXPECT_EQ(train::internal::ReadHistory(run).size(), 6u) << "nothing was trained";
}

TEST(Trainer, SigusrStopsTheRunAfterACheckpointAndANewFitResumesIt) {
  ASSERT_GE(World(), 3);
  const std::string storage = FreshDir("preempt");
  auto o = EpochOptions(storage, "preempted", 3, 8);
  o.train_loop_config.Set("epoch_ms", 300);
  // Slurm's time-limit warning, as the driver's process would get it from srun: sent once
  // two epochs are reported.
  std::thread signaller([&] {
    const std::string results = storage + "/preempted/result.json";
    for (int i = 0; i < 600; ++i) {
      std::ifstream in(results);
      int lines = 0;
      for (std::string line; std::getline(in, line);) ++lines;
      if (lines >= 2) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(getpid(), SIGUSR1);
  });
  std::string checkpoint;
  try {
    train::TorchTrainer(EpochLoop, o).Fit();
    signaller.join();
    FAIL() << "Fit finished all 8 epochs although SIGUSR1 came after the second";
  } catch (const train::TrainingPreemptedError& e) {
    signaller.join();
    EXPECT_EQ(e.Signal(), SIGUSR1);
    EXPECT_NE(std::string(e.what()).find("SIGUSR1"), std::string::npos) << e.what();
    checkpoint = e.CheckpointPath();
  }
  EXPECT_EQ(prism::PreemptionSignal(), SIGUSR1);
  ASSERT_FALSE(checkpoint.empty());
  int saved = -1;
  std::ifstream(checkpoint + "/epoch.txt") >> saved;
  std::vector<double> before;
  for (const auto& m : train::internal::ReadHistory(storage + "/preempted")) before.push_back(m.at("epoch"));
  ASSERT_GE(before.size(), 2u);
  EXPECT_LT(before.size(), 8u) << "the run stopped early";
  EXPECT_EQ(saved, static_cast<int>(before.back())) << "it stopped right after committing a checkpoint";

  // The requeued job: the same run resumes where it stopped and finishes.
  prism::internal::ClearStopSignalForTesting();
  train::Result r = train::TorchTrainer(EpochLoop, EpochOptions(storage, "preempted", 3, 8)).Fit();
  EXPECT_EQ(Epochs(r), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7})) << "no epoch lost or repeated";
}

TEST(Trainer, RetentionKeepsTheBestCheckpointsAndTheNewest) {
  const std::string storage = FreshDir("retention");
  auto o = EpochOptions(storage, "kept", 2, 5);  // scores 10, 1, 8, 3, 6 for epochs 0..4
  o.run_config.checkpoint_config = {2, "score", "max"};
  train::Result r = train::TorchTrainer(EpochLoop, o).Fit();
  ASSERT_EQ(r.best_checkpoints.size(), 3u) << "the best 2 plus the newest";
  EXPECT_EQ(r.best_checkpoints[0].metrics.at("score"), 10);
  EXPECT_EQ(r.best_checkpoints[1].metrics.at("score"), 8);
  size_t dirs = 0;
  for (const auto& e : std::filesystem::directory_iterator(r.path)) {
    if (e.path().filename().string().rfind("checkpoint_", 0) == 0) ++dirs;
  }
  EXPECT_EQ(dirs, 3u);
}

TEST(Trainer, BadInputGetsClearErrors) {
  const std::string storage = FreshDir("bad");
  auto expect_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning \"" << needle << "\"";
    } catch (const prism::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { train::TorchTrainer(EpochLoop, EpochOptions(storage, "x", World() + 1, 1)).Fit(); },
               "distinct ranks");
  expect_error([&] { train::TorchTrainer(EpochLoop, EpochOptions(storage, "x", 0, 1)).Fit(); },
               "num_workers");
  std::ofstream(storage + "/a-file") << "not a directory";
  expect_error([&] { train::TorchTrainer(EpochLoop, EpochOptions(storage + "/a-file", "x", 1, 1)).Fit(); },
               "not writable");
  expect_error([&] { train::TorchTrainer(NeverRegisteredLoop, EpochOptions(storage, "x", 1, 1)).Fit(); },
               "PRISM_REMOTE");
  auto elastic = EpochOptions(storage, "x", 2, 1);
  elastic.scaling_config.min_workers = 3;
  expect_error([&] { train::TorchTrainer(EpochLoop, elastic).Fit(); }, "min_workers is 3");
  expect_error([&] { train::TorchTrainer(MissingDataLoop, EpochOptions(storage, "x", 2, 1)).Fit(); },
               "dataset-fashion-mnist");
  expect_error([] { train::GetContext(); }, "outside a training worker");
}

}  // namespace
