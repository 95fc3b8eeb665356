// Distributed training of an image classifier on Fashion-MNIST with prism::train: Ray
// Train's "get started with PyTorch" example, as one MPI job.
//
//   mpirun -n 3 ./train_fashion_mnist --workers=2 --epochs=2
//
// The driver (rank 0) starts a TorchTrainer; each worker runs TrainLoop on its own rank
// with its shard of the data, gradients are averaged across workers after every backward
// pass, and world rank 0 checkpoints the model to HDF5 after every epoch. At the end the
// driver restores the latest checkpoint into a fresh model and checks its test accuracy
// against the reported one. Run it again with the same --name and more --epochs and it
// resumes from that checkpoint. On SIGUSR1 or SIGTERM (a Slurm time-limit warning or
// preemption) it stops after the next epoch's checkpoint and exits with status 75
// (prism::kExitPreempted), on which jobs/train_fashion_mnist.sbatch requeues itself.
//
// With --data=hdf5 the training images come through prism::data instead of each worker
// loading the whole set: the driver converts the IDX files once into an HDF5 directory
// (image uint8 [N,28,28], label int64; reused while its _SUCCESS manifest is there), and
// the trainer streams ReadHdf5 of it to the workers, each reading its equal shard with
// GetDatasetShard("train").IterTorchBatches(...) every epoch.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/driver.h"
#include "models.h"
#include "prism/api.h"
#include "prism/data.h"
#include "prism/data/torch.h"
#include "prism/train.h"

namespace {

namespace train = prism::train;
namespace data = prism::data;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// The first `limit` samples of `data` (all of them when `limit` is 0 or too large): a
/// quick run on part of the data set.
train::TensorDataset FirstSamples(train::TensorDataset data, int64_t limit) {
  if (limit > 0 && limit < data.size()) {
    data.inputs = data.inputs.slice(0, 0, limit);
    data.targets = data.targets.slice(0, 0, limit);
  }
  return data;
}

/// Correct predictions and samples among `inputs`/`targets`, in eval mode (batch norm uses
/// its running statistics). Small batches: on one CPU thread the cnn scores the test set in
/// 1.5 s in batches of 100 and in 10 s in batches of 250 (LibTorch's CPU convolutions slow
/// down sharply once a batch's buffers grow past a few tens of MB).
std::pair<int64_t, int64_t> CountCorrect(fashion::Classifier& model, const torch::Tensor& inputs,
                                         const torch::Tensor& targets, torch::Device device) {
  constexpr int64_t kEvalBatch = 100;
  torch::NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0;
  for (int64_t begin = 0; begin < inputs.size(0); begin += kEvalBatch) {
    torch::Tensor x = inputs.slice(0, begin, begin + kEvalBatch).to(device);
    torch::Tensor y = targets.slice(0, begin, begin + kEvalBatch).to(device);
    correct += model->forward(x).argmax(1).eq(y).sum().item<int64_t>();
  }
  model->train();
  return {correct, inputs.size(0)};
}

/// World rank 0's view of an epoch, on stderr. As a bar redrawn in place (at most ten
/// times a second), or as one line per quarter epoch, which reads well in a log file.
/// "auto" draws the bar only when stderr is a terminal: mpirun hands ranks a pipe there
/// (and a terminal on stdout even when its own output goes to a file, so stdout cannot tell).
class EpochProgress {
 public:
  EpochProgress(int epoch, int epochs, int64_t steps, const std::string& mode)
      : epoch_(epoch),
        epochs_(epochs),
        steps_(steps),
        start_(Clock::now()),
        live_(mode == "bar" || (mode == "auto" && isatty(STDERR_FILENO))) {}

  void Step(int64_t done, double mean_loss) {
    if (live_) {
      if (done < steps_ && Since(last_draw_) < 0.1) return;
      last_draw_ = Clock::now();
      std::fprintf(stderr, "\r%s", Bar(done, mean_loss).c_str());
      std::fflush(stderr);
    } else if (steps_ > 0 && done * 4 / steps_ > quarters_shown_ && done < steps_) {
      quarters_shown_ = static_cast<int>(done * 4 / steps_);
      std::fprintf(stderr, "%s\n", Bar(done, mean_loss).c_str());
      std::fflush(stderr);
    }
  }

  /// Ends the bar with the epoch's time and throughput.
  void Finish(double mean_loss, int64_t samples) {
    const double seconds = Since(start_);
    std::fprintf(stderr, "%s%s  %.1f s, %.0f samples/s per worker\n", live_ ? "\r" : "",
                 Bar(steps_, mean_loss).c_str(), seconds, samples / std::max(seconds, 1e-9));
    std::fflush(stderr);
  }

 private:
  std::string Bar(int64_t done, double mean_loss) const {
    constexpr int kWidth = 30;
    const int filled = steps_ > 0 ? static_cast<int>(done * kWidth / steps_) : kWidth;
    std::string bar(kWidth, ' ');
    for (int i = 0; i < filled; ++i) bar[i] = '=';
    if (filled < kWidth) bar[filled] = '>';
    const int digits = static_cast<int>(std::to_string(steps_).size());
    char text[160];
    std::snprintf(text, sizeof text, "epoch %d/%d [%s] %*lld/%lld loss %.4f", epoch_, epochs_,
                  bar.c_str(), digits, static_cast<long long>(done), static_cast<long long>(steps_),
                  mean_loss);
    return text;
  }

  int epoch_, epochs_;
  int64_t steps_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  bool live_;
  int quarters_shown_ = 0;
};

}  // namespace

/// The training loop, run by every worker. Epochs count from 1: checkpoints and reports
/// carry the number of epochs completed.
void TrainLoop(train::Config config) {
  const train::TrainContext& ctx = train::GetContext();
  const bool chief = ctx.GetWorldRank() == 0;
  const std::string model_name = config.Get("model", "cnn");
  const int epochs = config.Get<int>("epochs", 2);
  const int64_t batch_size = config.Get<int64_t>("batch_size", 128);
  const double lr = config.Get<double>("lr", 1e-3);
  const uint64_t seed = config.Get<uint64_t>("seed", 0);
  const std::string data_dir = config.Get("data_dir", train::kFashionMnistDir);
  const std::string progress_mode = config.Get("progress", "auto");
  // One CPU per worker (the ScalingConfig default), as Ray Train sets OMP_NUM_THREADS:
  // more threads would compete with the other workers for the same cores.
  torch::set_num_threads(1);

  // Same seed everywhere, so every worker starts from the same weights (PrepareModel also
  // broadcasts world rank 0's).
  torch::manual_seed(seed);
  fashion::Classifier model = train::PrepareModel(fashion::MakeModel(model_name));
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(lr));

  int start_epoch = 0;
  if (std::optional<train::Checkpoint> checkpoint = train::GetCheckpoint()) {
    const std::string file = checkpoint->path() + "/model.h5";
    train::LoadStateDict(file, *model, &optimizer);  // every worker reads the same file
    start_epoch = static_cast<int>(std::get<int64_t>(train::ReadAttributes(file).at("epoch")));
    if (chief) {
      std::fprintf(stderr, "resuming after epoch %d from %s\n", start_epoch, file.c_str());
    }
  }
  if (start_epoch >= epochs) {
    if (chief) {
      std::fprintf(stderr,
                   "nothing to train: the checkpoint is at epoch %d and --epochs is %d (ask for "
                   "more epochs, or use a new --name to start over)\n",
                   start_epoch, epochs);
    }
    return;
  }

  // --data=memory: every worker loads the training set and takes its shard of it.
  // --data=hdf5: the trainer's "train" dataset streams each worker an equal shard.
  const bool streamed = config.Get("data", "memory") == "hdf5";
  std::optional<train::DataLoader> loader;
  if (!streamed) {
    train::TensorDataset train_set = FirstSamples(train::LoadFashionMnist("train", data_dir),
                                                  config.Get<int64_t>("train_samples", 0));
    loader = train::PrepareDataLoader(std::move(train_set), batch_size, /*shuffle=*/true, seed);
  }
  const int64_t shard_rows = streamed ? config.Get<int64_t>("train_rows", 0) / ctx.GetWorldSize()
                                      : loader->ShardSize();
  // Each worker scores every world-size-th test image: no padding, so the counts add up
  // to exactly the test set.
  const train::TensorDataset test = FirstSamples(train::LoadFashionMnist("test", data_dir),
                                                 config.Get<int64_t>("test_samples", 0));
  const torch::Tensor test_inputs =
      test.inputs.slice(0, ctx.GetWorldRank(), test.size(), ctx.GetWorldSize());
  const torch::Tensor test_targets =
      test.targets.slice(0, ctx.GetWorldRank(), test.size(), ctx.GetWorldSize());

  for (int epoch = start_epoch + 1; epoch <= epochs; ++epoch) {
    std::optional<EpochProgress> progress;
    if (chief) {
      progress.emplace(epoch, epochs, streamed ? (shard_rows + batch_size - 1) / batch_size : loader->NumBatches(),
                       progress_mode);
    }
    double loss_sum = 0;
    int64_t steps = 0;
    auto step = [&](const torch::Tensor& inputs, const torch::Tensor& targets) {
      optimizer.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(inputs), targets);
      loss.backward();  // gradients are averaged across workers here
      optimizer.step();
      loss_sum += loss.item<double>();
      ++steps;
      if (progress) progress->Step(steps, loss_sum / steps);
    };
    if (streamed) {
      // One epoch of this worker's shard (the same number of rows on every worker, so the
      // all-reduces line up), mixed in a local shuffle buffer.
      const uint64_t shuffle_seed = seed * 1000003 + static_cast<uint64_t>(epoch) * 1009 +
                                    static_cast<uint64_t>(ctx.GetWorldRank());
      for (data::TorchBatch& batch : train::GetDatasetShard("train").IterTorchBatches(
               batch_size, /*prefetch_batches=*/2, /*drop_last=*/false,
               /*local_shuffle_buffer_size=*/4 * batch_size, shuffle_seed)) {
        // uint8 pixels -> the loader's scaling ([0,1], then mean 0.2860 and std 0.3530).
        torch::Tensor inputs =
            batch.at("image").to(torch::kFloat32).div(255).sub(0.2860).div(0.3530).unsqueeze(1);
        step(inputs.to(ctx.GetDevice()), batch.at("label").to(ctx.GetDevice()));
      }
    } else {
      loader->SetEpoch(epoch);
      for (const train::Batch& batch : loader->Batches()) step(batch.inputs, batch.targets);
    }
    if (progress) progress->Finish(loss_sum / std::max<int64_t>(steps, 1), shard_rows);

    // Batch norm statistics are not averaged by DDP and drift apart; use world rank 0's
    // (the ones its checkpoint keeps) so the accuracy reported is the checkpoint's.
    {
      torch::NoGradGuard no_grad;
      for (torch::Tensor& buffer : model->buffers()) {
        if (buffer.is_contiguous()) ctx.GetCollective().Broadcast(buffer, 0);
      }
    }
    auto [correct, count] = CountCorrect(model, test_inputs, test_targets, ctx.GetDevice());
    torch::Tensor totals = torch::tensor({loss_sum, static_cast<double>(steps),
                                          static_cast<double>(correct), static_cast<double>(count)},
                                         torch::kFloat64);
    ctx.GetCollective().AllReduce(totals, train::ReduceOp::kSum);
    const double mean_loss = totals[0].item<double>() / totals[1].item<double>();
    const double accuracy = totals[2].item<double>() / totals[3].item<double>();

    // World rank 0's checkpoint is the one kept, so only it writes one.
    std::optional<train::Checkpoint> checkpoint;
    if (chief) {
      const std::string dir = train::MakeTempCheckpointDir();
      train::SaveStateDict(
          dir + "/model.h5", *model, &optimizer,
          {{"epoch", int64_t{epoch}}, {"test_accuracy", accuracy}, {"model", model_name}});
      checkpoint = train::Checkpoint::FromDirectory(dir);
    }
    train::Report(
        {{"epoch", static_cast<double>(epoch)}, {"loss", mean_loss}, {"test_accuracy", accuracy}},
        checkpoint);
  }
}
PRISM_REMOTE(TrainLoop);

// ---- Driver ------------------------------------------------------------------------------

namespace {

struct Options {
  int workers = 2;
  int epochs = 2;
  std::string model = "cnn";
  std::string storage_path;
  std::string name;
  std::string data_dir = train::kFashionMnistDir;
  double lr = 1e-3;
  int batch_size = 128;
  int seed = 0;
  std::string progress = "auto";
  int train_samples = 0;  // 0: all 60000
  int test_samples = 0;   // 0: all 10000
  std::string data = "memory";  // or "hdf5": through prism::data
  std::string hdf5_dir;         // default: <storage>/fashion_mnist_hdf5
};

/// Declares the flags on `app`, bound to `opt`.
void AddFlags(CLI::App& app, Options& opt) {
  app.add_option("--workers", opt.workers, "training workers, one rank each (default 2)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--epochs", opt.epochs,
                 "epochs in total; a resumed run trains the missing ones (default 2)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--model", opt.model, "cnn (default) or resnet18")
      ->check(CLI::IsMember({"cnn", "resnet18"}));
  app.add_option("--batch-size", opt.batch_size, "samples per worker per step (default 128)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--lr", opt.lr, "Adam learning rate (default 0.001)")->check(CLI::PositiveNumber);
  app.add_option("--seed", opt.seed, "weights and shuffling (default 0)")->check(CLI::Range(0, 1 << 30));
  app.add_option("--train-samples", opt.train_samples,
                 "train on the first N images only, for a quick run (default: all)")
      ->check(CLI::Range(1, 60000));
  app.add_option("--test-samples", opt.test_samples,
                 "score each epoch on the first N test images only (default: all)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--data-dir", opt.data_dir,
                 "Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist, from the "
                 "Debian package dataset-fashion-mnist)");
  app.add_option("--storage-path", opt.storage_path,
                 "where runs live (default $PRISM_STORAGE_PATH, else ./prism_results)");
  app.add_option("--name", opt.name,
                 "the run's name; an existing run resumes (default fashion_mnist_MODEL, plus "
                 "_JOBID under Slurm, so a requeued job resumes its own run)");
  app.add_option("--data", opt.data,
                 "memory (default: each worker loads the IDX files) or hdf5 (the driver converts "
                 "them once to an HDF5 directory and the workers stream equal shards of it "
                 "through prism::data)")
      ->check(CLI::IsMember({"memory", "hdf5"}));
  app.add_option("--hdf5-dir", opt.hdf5_dir,
                 "where --data=hdf5 keeps the converted set (default "
                 "STORAGE_PATH/fashion_mnist_hdf5; reused once complete)");
  app.add_option("--progress", opt.progress,
                 "bar (redrawn in place), lines (one per quarter epoch), or auto: a bar when "
                 "stderr is a terminal (default; under mpirun it is not)")
      ->check(CLI::IsMember({"auto", "bar", "lines"}));
}

std::string Fixed(double v, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

double MetricOr(const train::Metrics& m, const std::string& key, double fallback) {
  auto it = m.find(key);
  return it == m.end() ? fallback : it->second;
}

/// The training set as an HDF5 directory `dir` for --data=hdf5: converted from the IDX
/// files once (image uint8 [N,28,28], label int64, in parts of 10000 rows); a directory
/// with its _SUCCESS manifest is complete and reused, one without it is redone.
void ConvertToHdf5(const std::string& data_dir, const std::string& dir) {
  if (std::filesystem::exists(dir + "/_SUCCESS")) {
    std::cout << "training set: " << dir << " (converted before)\n";
    return;
  }
  std::filesystem::remove_all(dir);
  const auto start = Clock::now();
  train::TensorDataset set = train::LoadFashionMnist("train", data_dir);
  // Back to the IDX file's bytes: the loader scaled them to [0,1] and normalised them.
  torch::Tensor pixels = set.inputs.squeeze(1).mul(0.3530).add(0.2860).mul(255).round().clamp(0, 255)
                             .to(torch::kUInt8).contiguous();
  torch::Tensor labels = set.targets.to(torch::kInt64).contiguous();
  std::vector<data::Block> blocks;
  for (int64_t begin = 0; begin < set.size(); begin += 10000) {
    const int64_t end = std::min<int64_t>(set.size(), begin + 10000);
    blocks.push_back(data::Block::FromColumns(
        {{"image", data::FromTensor(pixels.slice(0, begin, end).contiguous())},
         {"label", data::FromTensor(labels.slice(0, begin, end).contiguous())}}));
  }
  data::FromBlocks(blocks).WriteHdf5(dir);
  std::cout << "training set: converted " << set.size() << " images to " << dir << " in "
            << Fixed(Since(start), 1) << " s\n";
}

int RunDriver(const Options& opt) {
  auto ctx = prism::GetRuntimeContext();
  std::string storage = opt.storage_path;
  if (storage.empty()) {
    const char* env = std::getenv("PRISM_STORAGE_PATH");
    storage = env != nullptr && *env != '\0' ? env : "prism_results";
  }
  storage = std::filesystem::absolute(storage).lexically_normal().string();
  // Under Slurm each job (each array task) trains its own run; a requeued job keeps its
  // id, so it resumes its run.
  std::string name = opt.name;
  if (name.empty()) {
    name = "fashion_mnist_" + opt.model;
    if (std::getenv("SLURM_JOB_ID") != nullptr) name += "_" + ctx.GetJobId();
  }

  // The driver needs the test set at the end anyway; reading it first fails fast, with
  // the message saying what to install, before any worker starts.
  const train::TensorDataset test =
      FirstSamples(train::LoadFashionMnist("test", opt.data_dir), opt.test_samples);

  std::cout << "Fashion-MNIST with prism::train: " << opt.model << ", " << opt.workers
            << " worker(s) on " << ctx.GetWorldSize() << " rank(s), batch " << opt.batch_size
            << " per worker, Adam lr " << opt.lr << ", " << opt.epochs << " epoch(s)"
            << (opt.train_samples > 0 ? " of " + std::to_string(opt.train_samples) + " images" : "")
            << "\n"
            << "run: " << storage << "/" << name << "\n"
            << std::flush;

  train::Config config;
  config.Set("model", opt.model)
      .Set("epochs", opt.epochs)
      .Set("batch_size", opt.batch_size)
      .Set("lr", opt.lr)
      .Set("seed", opt.seed)
      .Set("data_dir", opt.data_dir)
      .Set("progress", opt.progress)
      .Set("train_samples", opt.train_samples)
      .Set("test_samples", opt.test_samples);
  train::TorchTrainerOptions options;
  options.train_loop_config = config;
  options.scaling_config.num_workers = opt.workers;
  options.run_config.name = name;
  options.run_config.storage_path = storage;
  options.run_config.checkpoint_config.num_to_keep = 2;
  options.run_config.checkpoint_config.checkpoint_score_attribute = "test_accuracy";
  options.run_config.checkpoint_config.checkpoint_score_order = "max";
  if (opt.data == "hdf5") {
    const std::string dir = opt.hdf5_dir.empty() ? storage + "/fashion_mnist_hdf5" : opt.hdf5_dir;
    ConvertToHdf5(opt.data_dir, dir);
    data::Dataset train_set = data::ReadHdf5(dir);
    if (opt.train_samples > 0) train_set = train_set.Limit(opt.train_samples);
    const int64_t rows = train_set.Count();
    options.train_loop_config.Set("data", "hdf5").Set("train_rows", rows);
    options.datasets = {{"train", train_set}};
  }
  train::TorchTrainer trainer(TrainLoop, options);

  const auto start = Clock::now();
  const train::Result result = trainer.Fit();
  const double seconds = Since(start);

  // What happened, epoch by epoch (earlier runs of the same name included).
  std::cout << "\ntrained in " << Fixed(seconds, 1) << " s\n"
            << "  epoch  loss    test accuracy\n";
  for (const train::Metrics& m : result.metrics_history) {
    std::cout << "  " << std::setw(5) << static_cast<int>(MetricOr(m, "epoch", 0)) << "  "
              << Fixed(MetricOr(m, "loss", NAN), 4) << "  "
              << Fixed(MetricOr(m, "test_accuracy", NAN), 4) << "\n";
  }
  if (!result.checkpoint) {
    std::cout << "no checkpoint was saved\n";
    return 1;
  }
  std::cout << "latest checkpoint: " << result.checkpoint->path() << "\n";
  for (const train::ReportedCheckpoint& kept : result.best_checkpoints) {
    std::cout << "  kept: " << std::filesystem::path(kept.checkpoint.path()).filename().string()
              << " (test accuracy " << Fixed(MetricOr(kept.metrics, "test_accuracy", NAN), 4)
              << ")\n";
  }

  // Restore the latest checkpoint into a fresh model, as an inference job would.
  const std::string file = result.checkpoint->path() + "/model.h5";
  const std::map<std::string, train::Attribute> attributes = train::ReadAttributes(file);
  const std::string saved_model = std::get<std::string>(attributes.at("model"));
  const double saved_accuracy = std::get<double>(attributes.at("test_accuracy"));
  const int64_t saved_epoch = std::get<int64_t>(attributes.at("epoch"));
  fashion::Classifier model = fashion::MakeModel(saved_model);
  train::LoadStateDict(file, *model);
  auto [correct, count] = CountCorrect(model, test.inputs, test.targets, torch::kCPU);
  const double accuracy = static_cast<double>(correct) / static_cast<double>(count);
  std::cout << "restored checkpoint: test accuracy " << Fixed(accuracy, 4) << " (" << correct << "/"
            << count << "; reported " << Fixed(saved_accuracy, 4) << " after epoch " << saved_epoch
            << ")\n";
  if (std::abs(accuracy - saved_accuracy) > 1e-3) {
    std::cout << "MISMATCH: the restored model scores " << Fixed(accuracy, 4)
              << ", the training run reported " << Fixed(saved_accuracy, 4) << "\n";
    return 1;
  }
  if (saved_model == "cnn" && saved_epoch >= 2 && opt.train_samples == 0 && opt.test_samples == 0 &&
      accuracy < 0.85) {
    std::cout << "warning: the cnn usually passes 0.85 after 2 epochs; got " << Fixed(accuracy, 4)
              << "\n";
  }
  std::cout << "OK: the restored model matches the reported accuracy\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Fashion-MNIST on a group of prism::train workers, checkpointed to HDF5:\n"
               "  mpirun -n 3 ./train_fashion_mnist --workers=2 --epochs=2 --progress=bar",
               "train_fashion_mnist"};
  Options opt;
  AddFlags(app, opt);
  return prism_apps::RunDriver(app, argc, argv, [&] {
    try {
      return RunDriver(opt);
    } catch (const train::TrainingPreemptedError& e) {
      std::cerr << "preempted: " << e.what() << "\n";
      return prism::kExitPreempted;  // the job script requeues on this status
    }
  });
}
