#pragma once
// DQN's Q-module (RLlib's DefaultDQNTorchRLModule, new API stack, num_atoms 1, no noisy
// nets): an MLP encoder, then an advantage/Q head and, with dueling, a value head:
//
//   z = encoder(obs)                    Linear + activation per hidden size
//   dueling:  Q(s, .) = V(z) + A(z, .) - mean_a A(z, a)
//   else:     Q(s, .) = A(z, .)         (the "af" head is the Q head)
//
// Each head is an MLP over z (head_hiddens, head_activation) ending in a linear layer of n
// outputs (A) or 1 (V). Defaults are RLlib's DefaultModelConfig as DQN uses it
// (rllib/core/rl_module/default_model_config.py: fcnet_hiddens [256, 256],
// fcnet_activation "tanh", head_fcnet_hiddens [], head_fcnet_activation "relu"; dueling
// and double_q true in rllib/algorithms/dqn/dqn.py's DQNConfig).
//
// Actions: greedy (argmax Q) or epsilon-greedy as RLlib's _forward_exploration: with
// probability epsilon a uniformly random action, else the argmax (rllib/algorithms/dqn/torch/
// default_dqn_torch_rl_module.py). Weights travel as bytes (module_bytes.h, magic "PDQW") and
// are stored in HDF5 with prism::train's state dicts.

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "prism/rl/env.h"
#include "prism/train/checkpoint.h"

namespace prism::rl::dqn {

struct QModuleOptions {
  std::vector<int64_t> hiddens{256, 256};   // encoder (RLlib's fcnet_hiddens)
  std::string activation = "tanh";          // "tanh", "relu", "swish"/"silu", "linear"
  std::vector<int64_t> head_hiddens{};      // each head's hidden layers (head_fcnet_hiddens)
  std::string head_activation = "relu";
  bool dueling = true;
};

class QModuleImpl : public torch::nn::Module {
 public:
  /// Throws prism::Error for an observation space that is not a non-empty Box, an action
  /// space that is not Discrete(n >= 1), a non-positive hidden size or an unknown
  /// activation.
  QModuleImpl(const Space& observation_space, const Space& action_space, QModuleOptions options = {});

  /// Q(s, a) for every action: [B, obs_size] -> [B, n].
  torch::Tensor QValues(const torch::Tensor& obs);

  /// argmax_a Q(s, a) per row of `obs` ([rows * obs_size] floats); ties go to the lowest
  /// index. No grad.
  std::vector<int64_t> GreedyActions(const float* obs, int64_t rows);
  /// Epsilon-greedy per row: with probability `epsilon` a uniform action from `rng`, else
  /// the greedy one. Throws prism::Error for an epsilon outside [0, 1].
  std::vector<int64_t> EpsilonGreedyActions(const float* obs, int64_t rows, double epsilon,
                                            std::mt19937_64& rng);
  /// One action for one observation: epsilon-greedy with `epsilon` if `explore`, else greedy.
  /// Throws prism::Error for an observation of the wrong size.
  Action ComputeSingleAction(const std::vector<float>& obs, bool explore, double epsilon,
                             std::mt19937_64& rng);

  int64_t obs_size() const { return obs_size_; }
  int64_t num_actions() const { return num_actions_; }
  const QModuleOptions& options() const { return options_; }

 private:
  int64_t obs_size_, num_actions_;
  QModuleOptions options_;
  torch::nn::Sequential encoder_{nullptr}, af_{nullptr}, vf_{nullptr};
};
TORCH_MODULE(QModule);

/// A new module of the same spaces and options with the same weights (the target network's
/// start, RLlib's make_target_network).
QModule CloneQModule(QModuleImpl& module, const Space& observation_space, const Space& action_space);

/// The parameters as bytes (module_bytes.h layout, magic "PDQW").
std::vector<uint8_t> GetWeights(QModuleImpl& module);
/// Loads GetWeights' bytes; prism::Error (and no change) if they are not a Q-module's of
/// this shape.
void SetWeights(QModuleImpl& module, const uint8_t* data, size_t size);

}  // namespace prism::rl::dqn
