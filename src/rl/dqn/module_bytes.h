#pragma once
// A torch module's parameters as one flat byte buffer, for sending weights to env runners
// (the same layout PPO's rl_module.cc uses for its RLModule, written as a module-agnostic
// helper so that any prism::rl module can use it):
//
//   uint64 magic | uint64 count | uint64 numel[count] | float32 values, parameter by parameter
//
// in the module's named-parameter order. The magic tells module kinds apart (a PPO
// RLModule's weights are refused by a DQN Q-module and the other way round).

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace prism::rl {

/// Every parameter of `module`, float32, after the header above.
std::vector<uint8_t> ModuleToBytes(torch::nn::Module& module, uint32_t magic);

/// Copies what ModuleToBytes made into `module`. Throws prism::Error (prefixed with `what`)
/// and changes nothing if the buffer has another magic, another parameter count or shape,
/// or the wrong length.
void BytesToModule(torch::nn::Module& module, uint32_t magic, const uint8_t* data, size_t size,
                   const std::string& what);

}  // namespace prism::rl
