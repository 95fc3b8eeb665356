// Hyperparameter search for the Fashion-MNIST CNN with prism::tune: Ray Tune's getting-started
// example (SGD's lr and momentum searched with ASHA), as one MPI job.
//
//   mpirun -n 3 ./tune_fashion_mnist --num-samples=6 --epochs=2 --train-samples=3000 --test-samples=500
//
// Each trial trains apps/train_fashion_mnist's CNN on one CPU, one epoch per tune::Report,
// with a checkpoint at every report; ASHA stops the poorer trials at its rungs. At the end
// the driver prints the best trial, writes results.csv into the experiment directory, and
// checks the best trial's checkpoint by scoring it again. Killed, the experiment resumes with
// --restore (same --name and --storage-path); on SIGUSR1 or SIGTERM (a Slurm time-limit
// warning or preemption) every running trial stops at its next report and the app exits with
// status 75 (prism::kExitPreempted), on which jobs/tune_fashion_mnist.sbatch requeues itself
// and the requeued job restores the experiment named after its job id.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/driver.h"
#include "prism/api.h"
#include "prism/preemption.h"
#include "prism/train.h"
#include "prism/tune.h"
#include "train_fashion_mnist/models.h"

namespace {

namespace fs = std::filesystem;
namespace train = prism::train;
namespace tune = prism::tune;

/// The first `limit` samples of `data` (all of them when `limit` is 0 or too large).
train::TensorDataset Head(train::TensorDataset data, int64_t limit) {
  if (limit > 0 && limit < data.size()) {
    data.inputs = data.inputs.slice(0, 0, limit);
    data.targets = data.targets.slice(0, 0, limit);
  }
  return data;
}

/// A split of Fashion-MNIST, read once per process and shared by the trials that run in it
/// (read-only tensors, so several trial threads may use one at once).
const train::TensorDataset& Shared(const std::string& split, const std::string& dir, int64_t limit) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, std::string, int64_t>, std::unique_ptr<train::TensorDataset>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[{split, dir, limit}];
  if (!slot) slot = std::make_unique<train::TensorDataset>(Head(train::LoadFashionMnist(split, dir), limit));
  return *slot;
}

/// Correct predictions of `model` on `data`, in eval mode, in batches of 100 (small batches
/// are the fast ones for LibTorch's CPU convolutions on one thread).
int64_t Correct(fashion::Classifier& model, const train::TensorDataset& data) {
  torch::NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0;
  for (int64_t begin = 0; begin < data.size(); begin += 100) {
    const torch::Tensor logits = model->forward(data.inputs.slice(0, begin, begin + 100));
    correct += logits.argmax(1).eq(data.targets.slice(0, begin, begin + 100)).sum().item<int64_t>();
  }
  model->train();
  return correct;
}

}  // namespace

/// One trial: SGD with the trial's lr and momentum, an epoch per report, a checkpoint (the
/// model and optimizer state, HDF5) at each; resumes from the checkpoint the Tuner hands it
/// (after a pause, a failure, or a restored experiment).
void TrainCnn(tune::Config config) {
  torch::set_num_threads(1);  // the trial holds one CPU; more threads would crowd the others
  const int epochs = config.Get<int>("epochs", 10);
  const int64_t batch_size = config.Get<int64_t>("batch_size", 64);
  const uint64_t seed = config.Get<uint64_t>("seed", 0);
  const std::string data_dir = config.Get("data_dir", train::kFashionMnistDir);

  torch::manual_seed(seed);
  fashion::Classifier model = fashion::MakeModel("cnn");
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(config.Get<double>("lr", 0.01))
                                  .momentum(config.Get<double>("momentum", 0.9)));
  int done = 0;  // epochs in the checkpoint
  if (std::optional<prism::Checkpoint> checkpoint = tune::GetCheckpoint()) {
    const std::string file = checkpoint->path() + "/model.h5";
    train::LoadStateDict(file, *model, &optimizer);
    done = static_cast<int>(std::get<int64_t>(train::ReadAttributes(file).at("epoch")));
  }

  const train::TensorDataset& train_set =
      Shared("train", data_dir, config.Get<int64_t>("train_samples", 0));
  const train::TensorDataset& test_set = Shared("test", data_dir, config.Get<int64_t>("test_samples", 0));
  train::DataLoader loader(train_set, batch_size, /*shuffle=*/true, seed, /*rank=*/0, /*world_size=*/1);
  for (int epoch = done + 1; epoch <= epochs; ++epoch) {
    loader.SetEpoch(epoch);
    double loss_sum = 0;
    int64_t steps = 0;
    for (const train::Batch& batch : loader.Batches()) {
      optimizer.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(batch.inputs), batch.targets);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    const double accuracy =
        static_cast<double>(Correct(model, test_set)) / static_cast<double>(std::max<int64_t>(test_set.size(), 1));
    const std::string dir = prism::MakeTempCheckpointDir();
    train::SaveStateDict(dir + "/model.h5", *model, &optimizer,
                         {{"epoch", int64_t{epoch}}, {"mean_accuracy", accuracy}});
    // Throws (a signal the trial lets through) when ASHA stopped the trial or the job is
    // being preempted; the checkpoint is committed first.
    tune::Report({{"mean_accuracy", accuracy}, {"loss", loss_sum / static_cast<double>(std::max<int64_t>(steps, 1))}},
                 prism::Checkpoint::FromDirectory(dir));
  }
}
PRISM_REMOTE(TrainCnn);

// ---- Driver ------------------------------------------------------------------------------

namespace {

struct Options {
  int num_samples = 30;
  int epochs = 10;
  int train_samples = 0;  // 0: all 60000
  int test_samples = 0;   // 0: all 10000
  int batch_size = 64;
  int seed = 0;
  std::string scheduler = "asha";
  std::string data_dir = train::kFashionMnistDir;
  std::string storage_path;
  std::string name;
  bool restore = false;
  std::set<std::string> given;  // the flags on the command line ("--epochs", ...)
};

/// Declares the flags on `app`, bound to `opt` (opt.given is filled after parsing).
void AddFlags(CLI::App& app, Options& opt) {
  const auto non_empty = [](const std::string& v) { return v.empty() ? "needs a non-empty value" : ""; };
  app.add_option("--num-samples", opt.num_samples,
                 "trials (default 30), each with lr from {0.001, 0.01, 0.1} and momentum from "
                 "uniform(0.1, 0.9), one CPU each")
      ->check(CLI::Range(1, 100000));
  app.add_option("--epochs", opt.epochs,
                 "epochs per trial at most, one report each (default 10; ASHA's max_t)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--scheduler", opt.scheduler,
                 "asha (default: grace period 1 epoch, reduction factor 4) or fifo (every trial "
                 "trains all its epochs)")
      ->check(CLI::IsMember({"asha", "fifo"}));
  app.add_option("--train-samples", opt.train_samples,
                 "train on the first N images only, for a quick run (default: all)")
      ->check(CLI::Range(1, 60000));
  app.add_option("--test-samples", opt.test_samples,
                 "score each epoch on the first N test images only (default: all)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--batch-size", opt.batch_size, "SGD batch size (default 64)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", opt.seed, "the search's draws, weights and shuffling (default 0)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--data-dir", opt.data_dir,
                 "Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist, from the "
                 "Debian package dataset-fashion-mnist)")
      ->check(non_empty);
  app.add_option("--storage-path", opt.storage_path,
                 "where experiments live (default $PRISM_STORAGE_PATH, else ~/prism_results)")
      ->check(non_empty);
  app.add_option("--name", opt.name,
                 "the experiment (default tune_fmnist_<job id> under Slurm, else tune_fmnist_<time>)")
      ->check(non_empty);
  app.add_flag("--restore", opt.restore,
               "resume the experiment storage-path/name if there is one (with the settings it "
               "started with), else start it");
}

/// The settings that define the search (the trials' constants and ASHA's max_t), kept in the
/// experiment's directory so that --restore resumes it as it started whatever flags it gets.
constexpr const char* kSettingsFile = "tune_fashion_mnist.settings";

std::map<std::string, std::string> SearchSettings(const Options& opt) {
  return {{"num_samples", std::to_string(opt.num_samples)}, {"epochs", std::to_string(opt.epochs)},
          {"train_samples", std::to_string(opt.train_samples)},
          {"test_samples", std::to_string(opt.test_samples)},
          {"batch_size", std::to_string(opt.batch_size)}, {"seed", std::to_string(opt.seed)},
          {"scheduler", opt.scheduler}, {"data_dir", opt.data_dir}};
}

void WriteSettings(const std::string& experiment, const Options& opt) {
  fs::create_directories(experiment);
  const std::string file = experiment + "/" + kSettingsFile;
  std::ofstream out(file + ".tmp", std::ios::trunc);
  for (const auto& [key, value] : SearchSettings(opt)) out << key << "=" << value << "\n";
  out.close();
  if (!out) throw prism::Error("cannot write " + file + ".tmp");
  fs::rename(file + ".tmp", file);
}

/// Replaces the search settings in `opt` with the ones the experiment started with (if it
/// wrote them), saying which of the flags given differ.
void ReadSettings(const std::string& experiment, Options& opt) {
  std::ifstream in(experiment + "/" + kSettingsFile);
  if (!in) return;
  std::map<std::string, std::string> saved;
  for (std::string line; std::getline(in, line);) {
    if (size_t eq = line.find('='); eq != std::string::npos) saved[line.substr(0, eq)] = line.substr(eq + 1);
  }
  const std::map<std::string, std::string> given = SearchSettings(opt);
  for (const auto& [key, value] : saved) {
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    auto it = given.find(key);
    if (it != given.end() && it->second != value && opt.given.count(flag) > 0) {
      std::cout << "note: the experiment keeps its " << key << "=" << value << " (this run was given "
                << it->second << ")\n";
    }
  }
  auto get = [&](const char* key, auto& out) {
    auto it = saved.find(key);
    if (it == saved.end()) return;
    if constexpr (std::is_same_v<std::decay_t<decltype(out)>, int>) {
      out = std::stoi(it->second);
    } else {
      out = it->second;
    }
  };
  get("num_samples", opt.num_samples);
  get("epochs", opt.epochs);
  get("train_samples", opt.train_samples);
  get("test_samples", opt.test_samples);
  get("batch_size", opt.batch_size);
  get("seed", opt.seed);
  get("scheduler", opt.scheduler);
  get("data_dir", opt.data_dir);
}

std::string Fixed(double v, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

double MetricOr(const tune::Metrics& m, const std::string& key, double fallback) {
  auto it = m.find(key);
  return it == m.end() ? fallback : it->second;
}

int RunDriver(Options opt) {
  const std::string storage = fs::absolute(opt.storage_path.empty() ? prism::DefaultStoragePath()
                                                                     : opt.storage_path)
                                  .lexically_normal()
                                  .string();
  if (opt.restore && opt.name.empty() && std::getenv("SLURM_JOB_ID") == nullptr) {
    std::cerr << "error: --restore needs --name outside Slurm (the default name, "
                 "tune_fmnist_<time>, is new each run)\n";
    return 2;
  }
  // Under Slurm the name comes from the job id: a requeued job keeps it and restores.
  const std::string name = opt.name.empty() ? prism::DefaultRunName("tune_fmnist") : opt.name;
  const std::string experiment = storage + "/" + name;
  const bool resume = opt.restore && tune::Tuner::CanRestore(experiment);
  if (!opt.restore && tune::Tuner::CanRestore(experiment)) {
    std::cerr << "error: " << experiment << " already holds an experiment; resume it with --restore, "
              << "or pass a new --name\n";
    return 2;
  }
  if (resume) ReadSettings(experiment, opt);

  // Read the test set here first: a missing data set fails now, saying what to install,
  // rather than in every trial.
  const train::TensorDataset test = Head(train::LoadFashionMnist("test", opt.data_dir), opt.test_samples);

  tune::ParamSpace space{
      {"lr", tune::Choice({0.001, 0.01, 0.1})},
      {"momentum", tune::Uniform(0.1, 0.9)},
      // Constants: every trial's config carries them (and results.csv shows them).
      {"epochs", opt.epochs},
      {"batch_size", opt.batch_size},
      {"seed", opt.seed},
      {"train_samples", opt.train_samples},
      {"test_samples", opt.test_samples},
      {"data_dir", opt.data_dir},
  };
  tune::TuneConfig tune_config{.metric = "mean_accuracy", .mode = "max", .num_samples = opt.num_samples,
                               .seed = static_cast<uint64_t>(opt.seed)};
  if (opt.scheduler == "asha") {
    tune_config.scheduler = std::make_shared<tune::ASHAScheduler>(
        tune::AsyncHyperBandOptions{.max_t = static_cast<double>(opt.epochs), .grace_period = 1});
  } else {
    tune_config.scheduler = std::make_shared<tune::FIFOScheduler>();
  }

  auto ctx = prism::GetRuntimeContext();
  std::cout << "Fashion-MNIST CNN, lr and momentum searched with prism::tune: " << opt.num_samples
            << " trial(s) of up to " << opt.epochs << " epoch(s)"
            << (opt.train_samples > 0 ? " on " + std::to_string(opt.train_samples) + " images" : "")
            << ", scheduler " << opt.scheduler << ", on " << ctx.GetWorldSize() << " rank(s)\n"
            << (resume ? "restoring" : "experiment") << ": " << experiment << "\n"
            << std::flush;

  std::optional<tune::Tuner> tuner;
  if (resume) {
    tuner.emplace(tune::Tuner::Restore(experiment, TrainCnn, space, /*resume_unfinished=*/true,
                                       /*resume_errored=*/false, /*restart_errored=*/false, tune_config));
  } else {
    tune::RunConfig run_config;
    run_config.name = name;
    run_config.storage_path = storage;
    // The latest two: a kill between a checkpoint's commit and its entry in the journal
    // leaves the journal naming the one before, which a resume then needs.
    run_config.checkpoint_config.num_to_keep = 2;
    tuner.emplace(TrainCnn, space, tune_config, run_config);
    WriteSettings(experiment, opt);
  }
  const tune::ResultGrid results = tuner->Fit();

  // Every trial, then the best.
  int stopped_early = 0;
  for (const tune::Result& r : results) {
    stopped_early += r.status == tune::TrialStatus::kTerminated &&
                     MetricOr(r.metrics, "training_iteration", 0) < opt.epochs;
  }
  std::cout << "\n" << results.size() << " trial(s): " << results.num_terminated() << " terminated ("
            << stopped_early << " stopped early by the scheduler), " << results.num_errors() << " failed\n";
  for (const std::string& error : results.errors()) std::cout << "  error: " << error << "\n";

  const std::string csv = results.experiment_path() + "/results.csv";
  {
    std::ofstream out(csv + ".tmp", std::ios::trunc);
    out << results.ToCsv();
    out.close();
    if (!out) throw prism::Error("cannot write " + csv + ".tmp");
    fs::rename(csv + ".tmp", csv);
  }
  std::cout << "results: " << csv << "\n";

  const tune::Result& best = results.GetBestResult();
  const double reported = MetricOr(best.metrics, "mean_accuracy", NAN);
  std::cout << "best trial: " << best.trial_id << " lr=" << best.config.Get<double>("lr", NAN)
            << " momentum=" << Fixed(best.config.Get<double>("momentum", NAN), 4)
            << " mean_accuracy=" << Fixed(reported, 4) << " after "
            << static_cast<int>(MetricOr(best.metrics, "training_iteration", 0)) << " epoch(s)\n";

  // Score the best trial's checkpoint again, as a user picking the model would.
  if (best.checkpoint.empty()) {
    std::cout << "the best trial left no checkpoint\n";
    return 1;
  }
  fashion::Classifier model = fashion::MakeModel("cnn");
  train::LoadStateDict(best.checkpoint + "/model.h5", *model);
  const int64_t correct = Correct(model, test);
  const int64_t expected = std::llround(reported * static_cast<double>(test.size()));
  std::cout << "best checkpoint " << best.checkpoint << ": " << correct << "/" << test.size()
            << " test images right\n";
  if (std::llabs(correct - expected) > std::max<int64_t>(1, test.size() / 1000)) {
    std::cout << "MISMATCH: the best trial reported " << expected << " right, its checkpoint scores "
              << correct << "\n";
    return 1;
  }
  if (results.num_errors() > 0) return 1;
  std::cout << "OK: the best checkpoint scores what its trial reported\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lr and momentum of train_fashion_mnist's CNN searched with prism::tune (ASHA):\n"
               "  mpirun -n 3 ./tune_fashion_mnist --num-samples=6 --epochs=2 --train-samples=3000 "
               "--test-samples=500",
               "tune_fashion_mnist"};
  Options opt;
  AddFlags(app, opt);
  return prism_apps::RunDriver(app, argc, argv, [&] {
    for (const CLI::Option* o : app.get_options()) {
      if (o->count() > 0) opt.given.insert(o->get_name());
    }
    try {
      return RunDriver(opt);
    } catch (const tune::TunePreemptedError& e) {
      const fs::path path(e.ExperimentPath());
      std::cerr << "preempted: " << e.what() << "\n"
                << "stopped: resume with --restore --name=" << path.filename().string()
                << " --storage-path=" << path.parent_path().string()
                << " (under Slurm the requeued job does so itself)\n";
      return prism::kExitPreempted;  // the job script requeues on this status
    }
  });
}
