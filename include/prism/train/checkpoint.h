#pragma once
// Checkpoints: a directory of files (Ray's Checkpoint), and HDF5 state dicts to fill it.
//
//   // in the training loop, on every worker (world rank 0's is the one kept):
//   std::string dir = prism::train::MakeTempCheckpointDir();
//   prism::train::SaveStateDict(dir + "/model.h5", *model, &optimizer, {{"epoch", epoch}});
//   prism::train::Report(metrics, prism::train::Checkpoint::FromDirectory(dir));
//
//   // resuming:
//   if (auto ckpt = prism::train::GetCheckpoint()) {
//     prism::train::LoadStateDict(ckpt->path() + "/model.h5", *model, &optimizer);
//   }
//
// model.h5 holds one dataset per parameter and buffer named by its module path
// ("conv1.weight", "bn1.running_mean") under /model, the optimizer's state under
// /optimizer, and attributes (epoch, step, world size, Prism version, ...) on the root
// group: `h5ls -r model.h5` and h5py read it as is.

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "prism/checkpoint.h"
#include "prism/errors.h"
#include "prism/train/config.h"

namespace prism::train {

// Checkpoint, CheckpointConfig and MakeTempCheckpointDir live in prism/checkpoint.h (no
// LibTorch), shared with prism::tune.
using prism::Checkpoint;
using prism::CheckpointConfig;
using prism::MakeTempCheckpointDir;

/// An attribute value stored on the HDF5 root group.
using Attribute = std::variant<int64_t, double, std::string>;

/// Writes the module's parameters and buffers (and the optimizer's state, if given) to an
/// HDF5 file at `file` (replaced if it exists), with `attributes` on the root group plus
/// prism_version. Throws prism::Error naming the file on any I/O failure.
void SaveStateDict(const std::string& file, const torch::nn::Module& module,
                   const torch::optim::Optimizer* optimizer = nullptr,
                   const std::map<std::string, Attribute>& attributes = {});
/// Reads what SaveStateDict wrote into `module` (and `optimizer`): every parameter and
/// buffer must be present with the same shape, else prism::Error says which one differs.
/// In a committed checkpoint the file is first checked against the size and CRC-32 its
/// commit recorded; a file changed since (overwritten, truncated) throws prism::Error and
/// loads nothing.
void LoadStateDict(const std::string& file, torch::nn::Module& module,
                   torch::optim::Optimizer* optimizer = nullptr);
/// The root-group attributes of a file SaveStateDict wrote.
std::map<std::string, Attribute> ReadAttributes(const std::string& file);

}  // namespace prism::train
