// PPO's RLModule: the policy and value MLPs, the distributions on their outputs, and the
// weights as bytes and as HDF5.

#include "rl/ppo/rl_module.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <string>

#include "prism/errors.h"

namespace prism::rl::ppo {
namespace {

torch::nn::Sequential Mlp(int64_t in, const std::vector<int64_t>& hidden, int64_t out) {
  torch::nn::Sequential net;
  int64_t width = in;
  for (int64_t h : hidden) {
    net->push_back(torch::nn::Linear(width, h));
    net->push_back(torch::nn::Tanh());
    width = h;
  }
  net->push_back(torch::nn::Linear(width, out));
  return net;
}

constexpr uint32_t kWeightsMagic = 0x50524c57;  // "PRLW"

}  // namespace

RLModuleImpl::RLModuleImpl(const Space& observation_space, const Space& action_space,
                           std::vector<int64_t> hidden)
    : discrete_(action_space.kind == Space::Kind::kDiscrete),
      obs_size_(observation_space.size()),
      action_dim_(discrete_ ? action_space.n : action_space.size()),
      hidden_(std::move(hidden)) {
  if (observation_space.kind != Space::Kind::kBox || obs_size_ < 1) {
    throw Error("prism::rl: PPO's RLModule needs a Box observation space, got " +
                observation_space.ToString());
  }
  if (action_dim_ < 1) {
    throw Error("prism::rl: PPO's RLModule needs a non-empty action space, got " +
                action_space.ToString());
  }
  if (hidden_.empty()) throw Error("prism::rl: the RLModule needs at least one hidden layer");
  for (int64_t h : hidden_) {
    if (h < 1) throw Error("prism::rl: hidden layer sizes must be >= 1, got " + std::to_string(h));
  }
  pi_ = register_module("pi", Mlp(obs_size_, hidden_, action_dim_));
  vf_ = register_module("vf", Mlp(obs_size_, hidden_, 1));
  if (!discrete_) log_std_ = register_parameter("log_std", torch::zeros({action_dim_}));
}

torch::Tensor RLModuleImpl::DistInputs(const torch::Tensor& obs) {
  torch::Tensor out = pi_->forward(obs);
  if (discrete_) return out;
  return torch::cat({out, log_std_.expand_as(out)}, 1);
}

torch::Tensor RLModuleImpl::Values(const torch::Tensor& obs) { return vf_->forward(obs).squeeze(1); }

Action RLModuleImpl::ComputeSingleAction(const std::vector<float>& obs, bool explore,
                                         std::mt19937_64& rng) {
  if (static_cast<int64_t>(obs.size()) != obs_size_) {
    throw Error("prism::rl: ComputeSingleAction got an observation of " +
                std::to_string(obs.size()) + " values; the observation space has " +
                std::to_string(obs_size_));
  }
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::from_blob(const_cast<float*>(obs.data()), {1, obs_size_}, torch::kFloat);
  std::vector<float> a = SampleActions(DistInputs(x), discrete_, explore, rng);
  if (discrete_) return Action::Discrete(static_cast<int64_t>(a[0]));
  return Action::Box(std::move(a));
}

// ---- Distributions ------------------------------------------------------------------------

torch::Tensor LogProb(const torch::Tensor& dist_inputs, const torch::Tensor& actions, bool discrete) {
  if (discrete) {
    return torch::log_softmax(dist_inputs, 1).gather(1, actions.reshape({-1, 1}).to(torch::kLong)).squeeze(1);
  }
  auto parts = dist_inputs.chunk(2, 1);
  const torch::Tensor& mean = parts[0];
  const torch::Tensor& log_std = parts[1];
  torch::Tensor z = (actions.reshape_as(mean) - mean) * torch::exp(-log_std);
  return (-0.5 * z * z - log_std - 0.5 * std::log(2 * std::numbers::pi)).sum(1);
}

torch::Tensor Entropy(const torch::Tensor& dist_inputs, bool discrete) {
  if (discrete) {
    torch::Tensor logp = torch::log_softmax(dist_inputs, 1);
    return -(logp.exp() * logp).sum(1);
  }
  torch::Tensor log_std = dist_inputs.chunk(2, 1)[1];
  return (log_std + 0.5 * std::log(2 * std::numbers::pi * std::numbers::e)).sum(1);
}

torch::Tensor Kl(const torch::Tensor& old_inputs, const torch::Tensor& new_inputs, bool discrete) {
  if (discrete) {
    torch::Tensor old_logp = torch::log_softmax(old_inputs, 1);
    torch::Tensor new_logp = torch::log_softmax(new_inputs, 1);
    return (old_logp.exp() * (old_logp - new_logp)).sum(1);
  }
  auto o = old_inputs.chunk(2, 1);
  auto n = new_inputs.chunk(2, 1);
  torch::Tensor old_var = torch::exp(2 * o[1]);
  torch::Tensor new_var = torch::exp(2 * n[1]);
  torch::Tensor d = o[0] - n[0];
  return (n[1] - o[1] + (old_var + d * d) / (2 * new_var) - 0.5).sum(1);
}

std::vector<float> SampleActions(const torch::Tensor& dist_inputs, bool discrete, bool explore,
                                 std::mt19937_64& rng) {
  torch::NoGradGuard no_grad;
  torch::Tensor in = dist_inputs.contiguous();
  const int64_t rows = in.size(0);
  const int64_t cols = in.size(1);
  std::vector<float> out;
  if (discrete) {
    torch::Tensor probs = torch::softmax(in, 1).contiguous();
    const float* p = probs.data_ptr<float>();
    out.resize(rows);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = p + r * cols;
      int64_t pick = 0;
      if (explore) {
        double u = uniform(rng), acc = 0;
        pick = cols - 1;  // rounding: what is left belongs to the last action
        for (int64_t c = 0; c < cols; ++c) {
          acc += row[c];
          if (u < acc) {
            pick = c;
            break;
          }
        }
      } else {
        for (int64_t c = 1; c < cols; ++c) {
          if (row[c] > row[pick]) pick = c;
        }
      }
      out[r] = static_cast<float>(pick);
    }
    return out;
  }
  const int64_t d = cols / 2;
  const float* x = in.data_ptr<float>();
  out.resize(rows * d);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < d; ++j) {
      float mean = x[r * cols + j];
      float std = std::exp(x[r * cols + d + j]);
      out[r * d + j] = explore ? mean + std * normal(rng) : mean;
    }
  }
  return out;
}

// ---- Weights ------------------------------------------------------------------------------

std::vector<uint8_t> GetWeights(RLModuleImpl& module) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params = module.parameters();
  std::vector<uint64_t> header{kWeightsMagic, params.size()};
  uint64_t total = 0;
  for (const auto& p : params) {
    header.push_back(static_cast<uint64_t>(p.numel()));
    total += static_cast<uint64_t>(p.numel());
  }
  std::vector<uint8_t> out(header.size() * sizeof(uint64_t) + total * sizeof(float));
  std::memcpy(out.data(), header.data(), header.size() * sizeof(uint64_t));
  uint8_t* cursor = out.data() + header.size() * sizeof(uint64_t);
  for (const auto& p : params) {
    torch::Tensor c = p.detach().to(torch::kFloat).contiguous();
    std::memcpy(cursor, c.data_ptr<float>(), c.numel() * sizeof(float));
    cursor += c.numel() * sizeof(float);
  }
  return out;
}

void SetWeights(RLModuleImpl& module, const uint8_t* data, size_t size) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params = module.parameters();
  const size_t header_bytes = (2 + params.size()) * sizeof(uint64_t);
  auto bad = [&](const std::string& why) {
    return Error("prism::rl: SetWeights: " + why + " (the module has " +
                 std::to_string(params.size()) + " parameters)");
  };
  if (size < 2 * sizeof(uint64_t)) throw bad("a buffer of " + std::to_string(size) + " bytes");
  std::vector<uint64_t> head(2);
  std::memcpy(head.data(), data, 2 * sizeof(uint64_t));
  if (head[0] != kWeightsMagic) throw bad("the buffer does not hold RLModule weights");
  if (head[1] != params.size()) {
    throw bad("the weights have " + std::to_string(head[1]) + " parameters");
  }
  std::vector<uint64_t> numels(params.size());
  std::memcpy(numels.data(), data + 2 * sizeof(uint64_t), params.size() * sizeof(uint64_t));
  uint64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (numels[i] != static_cast<uint64_t>(params[i].numel())) {
      throw bad("parameter " + std::to_string(i) + " has " + std::to_string(numels[i]) +
                " values in the weights and " + std::to_string(params[i].numel()) + " here");
    }
    total += numels[i];
  }
  if (size != header_bytes + total * sizeof(float)) {
    throw bad("a buffer of " + std::to_string(size) + " bytes, expected " +
              std::to_string(header_bytes + total * sizeof(float)));
  }
  const uint8_t* cursor = data + header_bytes;
  for (auto& p : params) {
    torch::Tensor src = torch::from_blob(const_cast<uint8_t*>(cursor), p.sizes(), torch::kFloat);
    p.copy_(src);
    cursor += p.numel() * sizeof(float);
  }
}

void SaveModule(const std::string& file, const RLModuleImpl& module,
                const torch::optim::Optimizer* optimizer,
                const std::map<std::string, prism::train::Attribute>& attributes) {
  prism::train::SaveStateDict(file, module, optimizer, attributes);
}

void LoadModule(const std::string& file, RLModuleImpl& module, torch::optim::Optimizer* optimizer) {
  prism::train::LoadStateDict(file, module, optimizer);
}

}  // namespace prism::rl::ppo
