#pragma once
// Prism Train: Ray Train for HPC. Distributed LibTorch training on a group of ranks, with
// gradients averaged by MPI (CPU) or NCCL (GPU) all-reduce and HDF5 checkpoints.
//
//   void TrainLoop(prism::train::Config config) {
//     auto model = prism::train::PrepareModel(MakeModel());
//     auto loader = prism::train::PrepareDataLoader(LoadData(), 128, /*shuffle=*/true);
//     for (int epoch = 0; epoch < config.Get<int>("epochs", 2); ++epoch) {
//       ... train one epoch ...
//       prism::train::Report({{"loss", loss}}, checkpoint);
//     }
//   }
//   PRISM_REMOTE(TrainLoop);
//
//   prism::train::TorchTrainer trainer(TrainLoop, {.train_loop_config = config,
//                                                  .scaling_config = {.num_workers = 2}});
//   prism::train::Result result = trainer.Fit();
//
// Library target prism::train (needs LibTorch and HDF5).

#include "prism/train/checkpoint.h"
#include "prism/train/collective.h"
#include "prism/train/config.h"
#include "prism/train/data.h"
#include "prism/train/session.h"
#include "prism/train/trainer.h"
