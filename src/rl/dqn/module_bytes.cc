// Module parameters <-> bytes (module_bytes.h). Everything is checked before the first
// parameter is written, so a bad buffer leaves the module as it was.

#include "rl/dqn/module_bytes.h"

#include <cstring>

#include "prism/errors.h"

namespace prism::rl {

std::vector<uint8_t> ModuleToBytes(torch::nn::Module& module, uint32_t magic) {
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> params = module.parameters();
  std::vector<uint64_t> header{magic, params.size()};
  uint64_t values = 0;
  for (const auto& p : params) {
    header.push_back(static_cast<uint64_t>(p.numel()));
    values += static_cast<uint64_t>(p.numel());
  }
  std::vector<uint8_t> out(header.size() * sizeof(uint64_t) + values * sizeof(float));
  std::memcpy(out.data(), header.data(), header.size() * sizeof(uint64_t));
  uint8_t* cursor = out.data() + header.size() * sizeof(uint64_t);
  for (const auto& p : params) {
    const torch::Tensor c = p.detach().to(torch::kFloat).contiguous();
    std::memcpy(cursor, c.data_ptr<float>(), c.numel() * sizeof(float));
    cursor += c.numel() * sizeof(float);
  }
  return out;
}

void BytesToModule(torch::nn::Module& module, uint32_t magic, const uint8_t* data, size_t size,
                   const std::string& what) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params = module.parameters();
  auto fail = [&](const std::string& why) {
    return Error(what + ": " + why + " (the module has " + std::to_string(params.size()) +
                 " parameters)");
  };
  if (data == nullptr || size < 2 * sizeof(uint64_t)) {
    throw fail("a buffer of " + std::to_string(size) + " bytes holds no weights");
  }
  uint64_t head[2];
  std::memcpy(head, data, sizeof(head));
  if (head[0] != magic) throw fail("the buffer does not hold this kind of module's weights");
  if (head[1] != params.size()) {
    throw fail("the weights have " + std::to_string(head[1]) + " parameters");
  }
  const size_t header_bytes = (2 + params.size()) * sizeof(uint64_t);
  if (size < header_bytes) throw fail("a buffer of " + std::to_string(size) + " bytes is cut short");
  uint64_t values = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    uint64_t numel;
    std::memcpy(&numel, data + (2 + i) * sizeof(uint64_t), sizeof(numel));
    if (numel != static_cast<uint64_t>(params[i].numel())) {
      throw fail("parameter " + std::to_string(i) + " has " + std::to_string(numel) +
                 " values in the weights and " + std::to_string(params[i].numel()) + " here");
    }
    values += numel;
  }
  if (size != header_bytes + values * sizeof(float)) {
    throw fail("a buffer of " + std::to_string(size) + " bytes, expected " +
               std::to_string(header_bytes + values * sizeof(float)));
  }
  const uint8_t* cursor = data + header_bytes;
  for (auto& p : params) {
    p.copy_(torch::from_blob(const_cast<uint8_t*>(cursor), p.sizes(), torch::kFloat));
    cursor += p.numel() * sizeof(float);
  }
}

}  // namespace prism::rl
