// TorchTrainable: a trial that runs a TorchTrainer (prism/tune/torch.h). The trial task
// (no CPU) is the trainer's driver: its reports go to the Tuner through on_report, and
// a stop from the Tuner stops the trainer's workers at their next checkpointed Report.

#include <cmath>

#include "prism/platform/invoke.h"
#include "prism/tune/torch.h"

namespace prism::tune {
namespace internal {
namespace {

/// What a TorchTrainer trial needs besides its config (Trainable::args).
struct TorchTrialArgs {
  std::string loop;
  train::Config loop_config;
  int num_workers = 1;
  bool use_gpu = false;
  std::map<std::string, double> resources_per_worker;
  std::string placement_strategy;
  int max_failures = 0;

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& loop& loop_config& num_workers& use_gpu& resources_per_worker& placement_strategy& max_failures;
  }
};

}  // namespace

/// The trial: one TorchTrainer::Fit with the trial's config.
void PrismTuneTorchTrial(Config config) {
  const auto args = platform::FromBytes<TorchTrialArgs>(TrainableArgs());
  train::TorchTrainerOptions o;
  o.train_loop_config = args.loop_config;
  for (const auto& [k, v] : config.Values()) o.train_loop_config.Set(k, v);
  o.scaling_config.num_workers = args.num_workers;
  o.scaling_config.use_gpu = args.use_gpu;
  o.scaling_config.resources_per_worker = args.resources_per_worker;
  o.scaling_config.placement_strategy = args.placement_strategy;
  o.run_config.name = "train";
  o.run_config.storage_path = TrialDir();
  o.run_config.failure_config.max_failures = args.max_failures;
  o.run_config.verbose = false;
  if (auto ckpt = GetCheckpoint()) o.resume_from_checkpoint = *ckpt;
  bool stop = false;
  o.run_config.on_report = [&stop](const Metrics& m, const std::optional<Checkpoint>& c) {
    stop = ReportCommitted(m, c);
    return !stop;
  };
  try {
    train::TorchTrainer(args.loop, std::move(o)).Fit();
  } catch (const train::TrainingPreemptedError&) {
    throw TrialStopSignal{};  // the signal reached this rank too: stopped at a checkpoint
  }
  if (stop) throw TrialStopSignal{};
}

}  // namespace internal

Trainable TorchTrainable(train::TrainLoop loop, train::TorchTrainerOptions options) {
  const auto& scaling = options.scaling_config;
  if (scaling.num_workers < 1) {
    throw Error("prism::tune::TorchTrainable: num_workers is " + std::to_string(scaling.num_workers) +
                "; it must be at least 1");
  }
  internal::TorchTrialArgs args;
  args.loop = platform::RegisteredName(loop, "prism::tune::TorchTrainable");
  args.loop_config = options.train_loop_config;
  args.num_workers = scaling.num_workers;
  args.use_gpu = scaling.use_gpu;
  args.resources_per_worker = scaling.resources_per_worker;
  if (args.resources_per_worker.empty()) {
    args.resources_per_worker["CPU"] = 1;
    if (scaling.use_gpu) args.resources_per_worker["GPU"] = 1;
  }
  args.placement_strategy = scaling.placement_strategy;
  args.max_failures = options.run_config.failure_config.max_failures;
  Trainable t(internal::PrismTuneTorchTrial);
  for (const auto& [name, amount] : args.resources_per_worker) t.resources[name] = amount * args.num_workers;
  t.task_resources = std::map<std::string, double>{{"CPU", 0}};
  t.args = platform::ToBytes(args);
  return t;
}

}  // namespace prism::tune

PRISM_REMOTE(prism::tune::internal::PrismTuneTorchTrial);
