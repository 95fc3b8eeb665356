#pragma once
// PPO's RLModule (RLlib's new API stack, DefaultPPOTorchRLModule without shared layers): a
// policy MLP whose output parameterizes the action distribution, and a separate value MLP.
//
//   Discrete(n)  policy outputs n logits: a categorical distribution
//   Box(d)       policy outputs d means; a learned, state-independent log-std vector (d
//                values, initialized to 0) completes a diagonal Gaussian. Its dist inputs
//                are [means, log_stds] (2d values), as RLlib's TorchDiagGaussian takes them.
//
// Hidden layers are Linear + tanh (RLlib's fcnet_activation "tanh"); the output layers are
// linear. Weights travel as a flat byte buffer (header + float32 parameters in named order)
// and are stored in HDF5 with prism::train's state dicts.

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "prism/rl/env.h"
#include "prism/train/checkpoint.h"

namespace prism::rl::ppo {

class RLModuleImpl : public torch::nn::Module {
 public:
  /// Throws prism::Error for an observation space that is not a Box, an empty or
  /// non-positive hidden size, or a Box action space with no elements.
  RLModuleImpl(const Space& observation_space, const Space& action_space,
               std::vector<int64_t> hidden = {64, 64});

  /// The action distribution's inputs for a batch of observations [B, obs_size]: [B, n]
  /// logits or [B, 2d] (means, log-stds).
  torch::Tensor DistInputs(const torch::Tensor& obs);
  /// V(s) for [B, obs_size] observations: [B].
  torch::Tensor Values(const torch::Tensor& obs);

  /// One action for one observation: sampled from the distribution (explore) or its mode
  /// (argmax / the mean). Throws prism::Error for an observation of the wrong size.
  Action ComputeSingleAction(const std::vector<float>& obs, bool explore, std::mt19937_64& rng);

  bool discrete() const { return discrete_; }
  int64_t obs_size() const { return obs_size_; }
  /// 1 (Discrete) or d (Box).
  int64_t action_size() const { return discrete_ ? 1 : action_dim_; }
  /// n (Discrete) or 2d (Box).
  int64_t dist_size() const { return discrete_ ? action_dim_ : 2 * action_dim_; }
  const std::vector<int64_t>& hidden() const { return hidden_; }

 private:
  bool discrete_;
  int64_t obs_size_, action_dim_;
  std::vector<int64_t> hidden_;
  torch::nn::Sequential pi_{nullptr}, vf_{nullptr};
  torch::Tensor log_std_;  // Box only
};
TORCH_MODULE(RLModule);

// ---- The action distribution, on dist inputs ----------------------------------------------

/// log pi(a|s) per row: actions [B] (indices as floats, Discrete) or [B, d].
torch::Tensor LogProb(const torch::Tensor& dist_inputs, const torch::Tensor& actions, bool discrete);
/// Entropy per row.
torch::Tensor Entropy(const torch::Tensor& dist_inputs, bool discrete);
/// KL(old || new) per row (RLlib's prev_action_dist.kl(curr_action_dist)).
torch::Tensor Kl(const torch::Tensor& old_inputs, const torch::Tensor& new_inputs, bool discrete);
/// One action per row [B, action_size] from dist inputs [B, dist_size] (no grad): sampled
/// with `rng`, or the mode.
std::vector<float> SampleActions(const torch::Tensor& dist_inputs, bool discrete, bool explore,
                                 std::mt19937_64& rng);

// ---- Weights ------------------------------------------------------------------------------

/// Every parameter, float32, in named order, after a header (magic, count, each numel).
std::vector<uint8_t> GetWeights(RLModuleImpl& module);
/// Copies weights GetWeights made into `module`. Throws prism::Error (and changes nothing)
/// if the buffer is not such weights or was made from a module of another shape.
void SetWeights(RLModuleImpl& module, const uint8_t* data, size_t size);

/// Writes the module (and optimizer) to an HDF5 state dict at `file` (prism::train's format:
/// one dataset per parameter under /model) with `attributes` on the root group.
void SaveModule(const std::string& file, const RLModuleImpl& module,
                const torch::optim::Optimizer* optimizer,
                const std::map<std::string, prism::train::Attribute>& attributes);
/// Reads what SaveModule wrote; prism::Error names a missing or differently shaped
/// parameter.
void LoadModule(const std::string& file, RLModuleImpl& module, torch::optim::Optimizer* optimizer);

}  // namespace prism::rl::ppo
