// DQN's Q-module (q_module.h).

#include "rl/dqn/q_module.h"

#include <string>

#include "prism/errors.h"
#include "rl/dqn/module_bytes.h"

namespace prism::rl::dqn {
namespace {

constexpr uint32_t kWeightsMagic = 0x50445157;  // "PDQW"

void PushActivation(torch::nn::Sequential& net, const std::string& name) {
  if (name == "tanh") {
    net->push_back(torch::nn::Tanh());
  } else if (name == "relu") {
    net->push_back(torch::nn::ReLU());
  } else if (name == "swish" || name == "silu") {
    net->push_back(torch::nn::SiLU());
  } else if (name != "linear" && !name.empty()) {
    throw Error("prism::rl: unknown activation '" + name + "' (tanh, relu, swish, silu or linear)");
  }
}

// Linear + activation per hidden size, then a linear output layer if out > 0.
torch::nn::Sequential Mlp(int64_t in, const std::vector<int64_t>& hidden, const std::string& activation,
                          int64_t out) {
  torch::nn::Sequential net;
  int64_t width = in;
  for (int64_t h : hidden) {
    if (h < 1) throw Error("prism::rl: hidden layer sizes must be >= 1, got " + std::to_string(h));
    net->push_back(torch::nn::Linear(width, h));
    PushActivation(net, activation);
    width = h;
  }
  if (out > 0) net->push_back(torch::nn::Linear(width, out));
  return net;
}

}  // namespace

QModuleImpl::QModuleImpl(const Space& observation_space, const Space& action_space, QModuleOptions options)
    : obs_size_(observation_space.size()), num_actions_(action_space.n), options_(std::move(options)) {
  if (observation_space.kind != Space::Kind::kBox || obs_size_ < 1) {
    throw Error("prism::rl: DQN needs a Box observation space, got " + observation_space.ToString());
  }
  if (action_space.kind != Space::Kind::kDiscrete || num_actions_ < 1) {
    throw Error("prism::rl: DQN needs a Discrete action space, got " + action_space.ToString());
  }
  // An unknown activation is an error even with no hidden layer to apply it to.
  torch::nn::Sequential probe;
  PushActivation(probe, options_.activation);
  PushActivation(probe, options_.head_activation);
  const int64_t latent = options_.hiddens.empty() ? obs_size_ : options_.hiddens.back();
  encoder_ = register_module("encoder", Mlp(obs_size_, options_.hiddens, options_.activation, 0));
  af_ = register_module("af", Mlp(latent, options_.head_hiddens, options_.head_activation, num_actions_));
  if (options_.dueling) {
    vf_ = register_module("vf", Mlp(latent, options_.head_hiddens, options_.head_activation, 1));
  }
}

torch::Tensor QModuleImpl::QValues(const torch::Tensor& obs) {
  torch::Tensor z = options_.hiddens.empty() ? obs : encoder_->forward(obs);
  torch::Tensor a = af_->forward(z);
  if (!options_.dueling) return a;
  return vf_->forward(z) + (a - a.mean(1, /*keepdim=*/true));
}

std::vector<int64_t> QModuleImpl::GreedyActions(const float* obs, int64_t rows) {
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::from_blob(const_cast<float*>(obs), {rows, obs_size_}, torch::kFloat);
  torch::Tensor q = QValues(x).contiguous();
  const float* v = q.data_ptr<float>();
  std::vector<int64_t> out(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = v + r * num_actions_;
    int64_t best = 0;
    for (int64_t a = 1; a < num_actions_; ++a) {
      if (row[a] > row[best]) best = a;
    }
    out[r] = best;
  }
  return out;
}

std::vector<int64_t> QModuleImpl::EpsilonGreedyActions(const float* obs, int64_t rows, double epsilon,
                                                       std::mt19937_64& rng) {
  if (!(epsilon >= 0.0 && epsilon <= 1.0)) {
    throw Error("prism::rl: epsilon is " + std::to_string(epsilon) + "; it must lie in [0, 1]");
  }
  std::vector<int64_t> out = GreedyActions(obs, rows);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<int64_t> any(0, num_actions_ - 1);
  for (int64_t r = 0; r < rows; ++r) {
    if (coin(rng) < epsilon) out[r] = any(rng);
  }
  return out;
}

Action QModuleImpl::ComputeSingleAction(const std::vector<float>& obs, bool explore, double epsilon,
                                        std::mt19937_64& rng) {
  if (static_cast<int64_t>(obs.size()) != obs_size_) {
    throw Error("prism::rl: ComputeSingleAction got an observation of " + std::to_string(obs.size()) +
                " values; the observation space has " + std::to_string(obs_size_));
  }
  std::vector<int64_t> a = explore ? EpsilonGreedyActions(obs.data(), 1, epsilon, rng)
                                   : GreedyActions(obs.data(), 1);
  return Action::Discrete(a[0]);
}

QModule CloneQModule(QModuleImpl& module, const Space& observation_space, const Space& action_space) {
  QModule copy(observation_space, action_space, module.options());
  std::vector<uint8_t> w = GetWeights(module);
  SetWeights(*copy, w.data(), w.size());
  return copy;
}

std::vector<uint8_t> GetWeights(QModuleImpl& module) { return ModuleToBytes(module, kWeightsMagic); }

void SetWeights(QModuleImpl& module, const uint8_t* data, size_t size) {
  BytesToModule(module, kWeightsMagic, data, size, "prism::rl: DQN SetWeights");
}

}  // namespace prism::rl::dqn
