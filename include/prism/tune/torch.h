#pragma once
// A TorchTrainer as a Tune trainable (Ray: Tuner(TorchTrainer(...))): each trial is a
// multi-worker training run with its own placement group. Link prism::tune_torch.
//
//   void TrainLoop(prism::train::Config config) { ... prism::train::Report(...); }
//   PRISM_REMOTE(TrainLoop);
//
//   auto trainable = tune::TorchTrainable(TrainLoop, {.scaling_config = {.num_workers = 2}});
//   tune::Tuner(trainable, {{"lr", tune::LogUniform(1e-4, 1e-1)}},
//               {.metric = "loss", .mode = "min", .num_samples = 8}).Fit();
//
// The trial's config is merged into train_loop_config (the trial's values win). Every
// train::Report reaches the Tuner as the trial's report; its checkpoint stays where the
// trainer committed it (the trial's directory, train/checkpoint_NNNNNN) and a trial that
// is paused, retried, exploited (PBT) or restored resumes its trainer from it. A trial
// reserves num_workers x resources_per_worker for the Tuner's count of trials at once;
// its own task takes no CPU (its workers hold them). The trainer's RunConfig name,
// storage_path and on_report are the Tuner's; its failure_config applies inside a trial
// (the Tuner's FailureConfig retries the whole trial after that).

#include "prism/train/trainer.h"
#include "prism/tune/tuner.h"

namespace prism::tune {

/// Throws prism::Error if `loop` is not registered (PRISM_REMOTE) or num_workers < 1.
Trainable TorchTrainable(train::TrainLoop loop, train::TorchTrainerOptions options = {});

}  // namespace prism::tune
