// TorchTrainer::Fit, on the driver: checks the options, then runs the registered loop as
// one worker per rank through RunGroup (group_run.h: placement, the run directory, reports,
// failure restarts from the latest checkpoint, preemption). Each attempt's workers get a
// WorkerSpec: the loop's name and config, the checkpoint to resume from, and their shards
// of the datasets.
#include "prism/platform/invoke.h"
#include "prism/platform/worker_group.h"
#include "prism/remote.h"
#include "prism/train/collective.h"
#include "prism/train/trainer.h"
#include "train/group_run.h"
#include "train/worker.h"

namespace prism::train::internal {

/// A training worker, as a WorkerGroup loop: the run's spec plus this worker's place in
/// the group; returns its WorkerOutcome's bytes.
std::string PrismTrainWorkerLoop(std::string spec_bytes) {
  auto spec = platform::FromBytes<WorkerSpec>(spec_bytes);
  const auto& me = platform::CurrentWorker();
  spec.attempt = me.attempt();
  spec.world_rank = me.info().index;
  spec.local_rank = me.info().local_rank;
  spec.local_world_size = me.info().local_world_size;
  spec.node_rank = me.info().node_rank;
  spec.world_ranks.clear();
  for (const auto& w : me.group()) spec.world_ranks.push_back(w.rank);
  return platform::ToBytes(RunWorker(spec));
}

}  // namespace prism::train::internal

PRISM_REMOTE(prism::train::internal::PrismTrainWorkerLoop);

namespace prism::train {

TorchTrainer::TorchTrainer(TrainLoop train_loop_per_worker, TorchTrainerOptions options)
    : loop_(train_loop_per_worker), options_(std::move(options)) {}

TorchTrainer::TorchTrainer(std::string loop_name, TorchTrainerOptions options)
    : loop_name_(std::move(loop_name)), options_(std::move(options)) {}

Result TorchTrainer::Fit() {
  const ScalingConfig& scaling = options_.scaling_config;
  const RunConfig& run = options_.run_config;
  if (scaling.num_workers < 1) {
    throw Error("prism::train: ScalingConfig::num_workers is " + std::to_string(scaling.num_workers) +
                "; it must be at least 1");
  }
  if (loop_ == nullptr && loop_name_.empty()) throw Error("prism::train: TorchTrainer was given no training loop");
  std::string loop_name = loop_name_;
  try {
    if (loop_ != nullptr) loop_name = platform::RegisteredName(loop_, "TorchTrainer");
  } catch (const std::exception&) {
    throw Error("prism::train: the training loop is not registered: add PRISM_REMOTE(<your loop>) "
                "next to its definition");
  }
  if (scaling.use_gpu && !HaveNccl()) {
    throw Error("prism::train: use_gpu needs the NCCL backend: build Prism with "
                "-DPRISM_WITH_NCCL=ON and a CUDA-enabled LibTorch");
  }
  internal::GroupRun spec;
  spec.kind = "TorchTrainer";
  spec.scaling = scaling;
  spec.run = run;
  spec.resume_from_checkpoint = options_.resume_from_checkpoint;
  spec.loop_entry = platform::RegisteredName(internal::PrismTrainWorkerLoop);
  // The attempt's dataset shards stay alive here for the attempt: the driver's copies hold
  // each split's coordinator actor, which dies when every handle to it is gone, and the
  // workers may not have read theirs yet when make_config returns.
  internal::WorkerSpec live;
  spec.make_config = [&](const internal::AttemptInfo& attempt) {
    internal::WorkerSpec& worker = live;
    worker.dataset_shards.clear();
    worker.run_id = attempt.run_id;
    worker.experiment_name = attempt.name;
    worker.trial_dir = attempt.trial_dir;
    worker.loop_name = loop_name;
    worker.config = options_.train_loop_config;
    worker.resume_path = attempt.resume;
    worker.checkpoint_config = run.checkpoint_config;
    worker.use_gpu = scaling.use_gpu;
    // A new execution of each dataset per attempt: a restarted group starts its epochs over,
    // split among this attempt's workers (fewer than num_workers after a lost rank).
    const int workers = static_cast<int>(attempt.workers->size());
    for (const auto& [ds_name, dataset] : options_.datasets) {
      worker.dataset_shards[ds_name] = dataset.StreamingSplit(workers, /*equal=*/true);
    }
    return platform::ToBytes(worker);
  };
  return internal::RunGroup(spec);
}

}  // namespace prism::train
