#pragma once
// The demo's two image classifiers for 1x28x28 Fashion-MNIST, and Classifier, which holds
// either one so that a single module type flows through PrepareModel, the optimizer and
// the checkpoint whichever model was picked.

#include <torch/torch.h>

#include <string>

#include "prism/errors.h"

namespace fashion {

/// A small convolutional net: two conv + ReLU + max-pool stages, then two linear layers.
/// About 225k parameters; one epoch on a CPU core takes tens of seconds.
class SmallCnnImpl : public torch::nn::Module {
 public:
  SmallCnnImpl()
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3)))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3)))),
        fc1_(register_module("fc1", torch::nn::Linear(kFlat, 128))),
        fc2_(register_module("fc2", torch::nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);  // 28 -> 26 -> 13
    x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);  // 13 -> 11 -> 5
    x = torch::relu(fc1_->forward(x.flatten(1)));
    return fc2_->forward(x);
  }

 private:
  static constexpr int64_t kFlat = 64 * 5 * 5;
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};
TORCH_MODULE(SmallCnn);

/// torchvision's BasicBlock: two 3x3 convolutions with batch norm and a shortcut (a 1x1
/// convolution where the shape changes).
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", Conv3x3(in, out, stride))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", Conv3x3(out, out, 1))),
        bn2_(register_module("bn2", torch::nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      downsample_ = register_module(
          "downsample",
          torch::nn::Sequential(
              torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
              torch::nn::BatchNorm2d(out)));
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor shortcut = downsample_ ? downsample_->forward(x) : x;
    x = torch::relu(bn1_->forward(conv1_->forward(x)));
    x = bn2_->forward(conv2_->forward(x));
    return torch::relu(x + shortcut);
  }

 private:
  static torch::nn::Conv2d Conv3x3(int64_t in, int64_t out, int64_t stride) {
    return torch::nn::Conv2d(
        torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
  }
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  torch::nn::Conv2d conv2_;
  torch::nn::BatchNorm2d bn2_;
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(BasicBlock);

/// torchvision's resnet18 for one input channel and 10 classes. The stem keeps the 7x7
/// stride-2 convolution but drops the max-pool: on 28x28 inputs it would leave layer4 a
/// 1x1 map. Feature maps: 14x14 (layer1), 7x7, 4x4, 2x2 (layer4). About 11.2M parameters.
class ResNet18Impl : public torch::nn::Module {
 public:
  ResNet18Impl()
      : conv1_(register_module(
            "conv1", torch::nn::Conv2d(
                         torch::nn::Conv2dOptions(1, 64, 7).stride(2).padding(3).bias(false)))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(64))),
        layer1_(register_module("layer1", Stage(64, 64, 1))),
        layer2_(register_module("layer2", Stage(64, 128, 2))),
        layer3_(register_module("layer3", Stage(128, 256, 2))),
        layer4_(register_module("layer4", Stage(256, 512, 2))),
        fc_(register_module("fc", torch::nn::Linear(512, 10))) {
    // torchvision's initialisation: He-normal (fan out) convolutions, unit batch norms.
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<torch::nn::Conv2d>()) {
        torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      } else if (auto* bn = module->as<torch::nn::BatchNorm2d>()) {
        torch::nn::init::ones_(bn->weight);
        torch::nn::init::zeros_(bn->bias);
      }
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(bn1_->forward(conv1_->forward(x)));
    x = layer4_->forward(layer3_->forward(layer2_->forward(layer1_->forward(x))));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_->forward(x);
  }

 private:
  static torch::nn::Sequential Stage(int64_t in, int64_t out, int64_t stride) {
    return torch::nn::Sequential(BasicBlock(in, out, stride), BasicBlock(out, out, 1));
  }
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  torch::nn::Sequential layer1_, layer2_, layer3_, layer4_;
  torch::nn::Linear fc_;
};
TORCH_MODULE(ResNet18);

/// One of the models above by name ("cnn" or "resnet18"), registered as "net": parameter
/// names in checkpoints read "net.conv1.weight", whichever model it is.
class ClassifierImpl : public torch::nn::Module {
 public:
  explicit ClassifierImpl(const std::string& model) : name_(model) {
    if (model == "cnn") {
      net_ = torch::nn::AnyModule(SmallCnn());
    } else if (model == "resnet18") {
      net_ = torch::nn::AnyModule(ResNet18());
    } else {
      throw prism::Error("unknown model \"" + model + "\": use cnn or resnet18");
    }
    register_module("net", net_.ptr());
  }

  torch::Tensor forward(torch::Tensor x) { return net_.forward(x); }
  const std::string& model_name() const { return name_; }

 private:
  std::string name_;
  torch::nn::AnyModule net_;
};
TORCH_MODULE(Classifier);

/// The model called `name`, freshly initialised from torch's global generator (seed it
/// with torch::manual_seed for a reproducible start).
inline Classifier MakeModel(const std::string& name) { return Classifier(name); }

}  // namespace fashion
