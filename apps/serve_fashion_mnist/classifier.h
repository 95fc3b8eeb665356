#pragma once
// The Fashion-MNIST classifier as a Serve deployment: the image decoding (JSON or raw
// bytes), the checkpoint loading, and FashionClassifier, the class each replica builds once
// and then answers requests with. The local reference pass (--predict-local) uses the same
// functions, so a served prediction and a local one differ only in how they were batched.

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "prism/errors.h"
#include "prism/serve.h"
#include "prism/train.h"
#include "train_fashion_mnist/models.h"

namespace fashion_serve {

namespace serve = prism::serve;
namespace train = prism::train;

inline constexpr int64_t kPixels = 28 * 28;

/// Fashion-MNIST's class names, by class index.
inline const char* const kLabels[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                        "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

/// The model.h5 that `path` names: the file itself, a checkpoint directory holding
/// model.h5, or a Train run directory (its newest checkpoint_NNNNNN with a model.h5).
/// Throws prism::Error saying what was found instead and how to make a checkpoint.
inline std::string ResolveCheckpoint(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string how =
      " (train one first: mpirun -n 3 train_fashion_mnist --epochs=1 writes "
      "prism_results/fashion_mnist_cnn; pass that directory)";
  std::error_code ec;
  if (path.empty()) throw prism::Error("no checkpoint given: pass --checkpoint=PATH" + how);
  if (fs::is_regular_file(path, ec)) return path;
  if (!fs::is_directory(path, ec)) throw prism::Error("checkpoint " + path + " does not exist" + how);
  if (fs::is_regular_file(fs::path(path) / "model.h5", ec)) return (fs::path(path) / "model.h5").string();
  std::string newest;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint_", 0) == 0 && fs::is_regular_file(entry.path() / "model.h5", ec) &&
        name > newest) {
      newest = name;  // checkpoint_NNNNNN: zero-padded, so the largest name is the newest
    }
  }
  if (newest.empty()) {
    throw prism::Error("checkpoint " + path +
                       " holds neither model.h5 nor a checkpoint_NNNNNN directory with one" + how);
  }
  return (fs::path(path) / newest / "model.h5").string();
}

/// A classifier restored from a checkpoint, in eval mode, with what its file says of it.
struct LoadedModel {
  fashion::Classifier model{nullptr};
  std::string model_name;  // "cnn" or "resnet18"
  int64_t epoch = -1;      // -1: not recorded
  double test_accuracy = NAN;
};

/// Restores the model a train_fashion_mnist checkpoint file holds (its "model" attribute
/// picks the architecture; "cnn" when absent) and puts it in eval mode. Throws
/// prism::Error naming the file when it is not such a checkpoint.
inline LoadedModel LoadModel(const std::string& file) {
  LoadedModel out;
  const std::map<std::string, train::Attribute> attributes = train::ReadAttributes(file);
  out.model_name = "cnn";
  if (auto it = attributes.find("model"); it != attributes.end()) {
    if (const auto* name = std::get_if<std::string>(&it->second)) out.model_name = *name;
  }
  if (auto it = attributes.find("epoch"); it != attributes.end()) {
    if (const auto* epoch = std::get_if<int64_t>(&it->second)) out.epoch = *epoch;
  }
  if (auto it = attributes.find("test_accuracy"); it != attributes.end()) {
    if (const auto* accuracy = std::get_if<double>(&it->second)) out.test_accuracy = *accuracy;
  }
  out.model = fashion::MakeModel(out.model_name);
  try {
    train::LoadStateDict(file, *out.model);
  } catch (const prism::Error& e) {
    throw prism::Error("cannot load " + file + " as a Fashion-MNIST " + out.model_name +
                       " (is it a train_fashion_mnist checkpoint?): " + e.what());
  }
  out.model->eval();
  return out;
}

/// Pixels (float [N, 784], values 0..255 as in the IDX file) -> the model's input: [N, 1,
/// 28, 28] scaled to [0, 1] and normalised as the training loader does (mean 0.2860, std
/// 0.3530).
inline torch::Tensor ToModelInput(const torch::Tensor& pixels) {
  return pixels.reshape({-1, 1, 28, 28}).div(255).sub(0.2860).div(0.3530);
}

/// Class probabilities (float [N, 10], softmax of the logits) of the images `pixels`
/// (float [N, 784], 0..255). Runs without autograd; safe on several threads at once (the
/// model is in eval mode and only read).
inline torch::Tensor Predict(fashion::Classifier& model, const torch::Tensor& pixels) {
  torch::NoGradGuard no_grad;  // per thread: every request thread needs its own
  return torch::softmax(model->forward(ToModelInput(pixels)), 1);
}

/// The JSON answer for one image's probabilities (float [10]): {"class": k, "label":
/// name, "scores": [...]}.
inline nlohmann::json PredictionJson(const torch::Tensor& probabilities) {
  const torch::Tensor p = probabilities.contiguous();
  const float* data = p.data_ptr<float>();
  std::vector<double> scores(data, data + p.numel());
  const int64_t k = std::max_element(scores.begin(), scores.end()) - scores.begin();
  return {{"class", k}, {"label", kLabels[k]}, {"scores", scores}};
}

namespace detail {

/// Appends the pixel values of `value` (784 numbers, or 28 rows of 28) to `out`.
inline void ReadJsonPixels(const nlohmann::json& value, std::vector<float>& out) {
  auto pixel = [&](const nlohmann::json& v) {
    if (!v.is_number()) {
      throw serve::BadRequestError("pixel " + std::to_string(out.size()) + " is " + v.dump() +
                                   ": every pixel must be a number in 0..255");
    }
    const double x = v.get<double>();
    if (!(x >= 0 && x <= 255)) {
      throw serve::BadRequestError("pixel " + std::to_string(out.size()) + " is " + v.dump() +
                                   ": pixels are 0..255 (as in the IDX file), not normalised");
    }
    out.push_back(static_cast<float>(x));
  };
  if (!value.is_array()) {
    throw serve::BadRequestError("the image must be a JSON array of 784 numbers or of 28 rows of 28, got " +
                                 std::string(value.type_name()));
  }
  if (!value.empty() && value.front().is_array()) {
    if (value.size() != 28) {
      throw serve::BadRequestError("a nested image must have 28 rows of 28 pixels, got " +
                                   std::to_string(value.size()) + " rows");
    }
    for (const nlohmann::json& row : value) {
      if (!row.is_array() || row.size() != 28) {
        throw serve::BadRequestError("a nested image must have 28 rows of 28 pixels; row " +
                                     std::to_string(out.size() / 28) + " is " +
                                     (row.is_array() ? std::to_string(row.size()) + " long" : row.dump()));
      }
      for (const nlohmann::json& v : row) pixel(v);
    }
    return;
  }
  if (value.size() != static_cast<size_t>(kPixels)) {
    throw serve::BadRequestError("expected 784 pixels (one 28x28 image), got " + std::to_string(value.size()));
  }
  for (const nlohmann::json& v : value) pixel(v);
}

}  // namespace detail

/// The image a request carries, as float [784] pixel values 0..255. Two forms:
///   Content-Type: application/octet-stream  784 bytes, one uint8 pixel each, row by row
///   anything else                           JSON: an array of 784 numbers, 28 arrays of
///                                           28, or {"image": either}; numbers 0..255
/// Throws serve::BadRequestError (HTTP 400) saying what is wrong.
inline torch::Tensor DecodeImage(const serve::Request& request) {
  const std::string type = request.Header("content-type");
  if (type.rfind("application/octet-stream", 0) == 0) {
    if (request.body.size() != static_cast<size_t>(kPixels)) {
      throw serve::BadRequestError("expected 784 bytes (a 28x28 image, one uint8 pixel each), got " +
                                   std::to_string(request.body.size()));
    }
    torch::Tensor bytes = torch::empty({kPixels}, torch::kUInt8);
    std::copy(request.body.begin(), request.body.end(), reinterpret_cast<char*>(bytes.data_ptr<uint8_t>()));
    return bytes.to(torch::kFloat32);
  }
  nlohmann::json body;
  try {
    body = nlohmann::json::parse(request.body);
  } catch (const nlohmann::json::parse_error& e) {
    std::string hint;
    if (request.body.size() == static_cast<size_t>(kPixels)) {
      hint = " (784 bytes: to send raw pixels, set Content-Type: application/octet-stream)";
    }
    throw serve::BadRequestError(std::string("invalid JSON in the request body: ") + e.what() + hint);
  }
  if (body.is_object()) {
    if (!body.contains("image")) {
      throw serve::BadRequestError("a JSON object body needs an \"image\" field (784 numbers or 28x28)");
    }
    body = body.at("image");
  }
  std::vector<float> pixels;
  pixels.reserve(kPixels);
  detail::ReadJsonPixels(body, pixels);
  return torch::tensor(pixels, torch::kFloat32);
}

/// Batching and threading of one replica (FashionClassifier's constructor arguments).
struct ServeSettings {
  bool batching = true;
  int max_batch_size = 16;
  double batch_wait_timeout_s = 0.005;
  int torch_threads = 1;

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & batching & max_batch_size & batch_wait_timeout_s & torch_threads;
  }
};

/// The deployment: each replica loads the checkpoint once, then classifies one image per
/// POST. With batching, the forward passes of concurrent requests are one forward pass of
/// up to max_batch_size images (serve::Batch); decoding and answering stay on the request
/// threads. GET answers what is served and how to ask. Thread-safe (Serve calls it from up
/// to max_ongoing_requests threads).
class FashionClassifier {
 public:
  /// Loads `checkpoint_file` (a model.h5). Throws prism::Error when it cannot.
  FashionClassifier(std::string checkpoint_file, ServeSettings settings)
      : file_(std::move(checkpoint_file)), settings_(settings), loaded_(LoadModel(file_)) {
    torch::set_num_threads(settings_.torch_threads);  // the replica's share of its rank's cores
    if (settings_.batching) {
      batch_ = std::make_unique<serve::Batch<torch::Tensor, Scored>>(
          [this](std::vector<torch::Tensor> images) { return RunBatch(std::move(images)); },
          serve::BatchOptions{.max_batch_size = settings_.max_batch_size,
                              .batch_wait_timeout_s = settings_.batch_wait_timeout_s});
    }
  }

  /// POST: the image's class (the X-Batch-Size header tells how many images shared its
  /// forward pass). GET: what is served, by which replica ("host:pid"), and its batches so far.
  serve::Response operator()(const serve::Request& request) {
    if (request.method == "GET") return Describe();
    if (request.method != "POST") {
      return serve::Response::Json({{"error", request.method + " is not supported: POST an image, or GET for help"}},
                                   405);
    }
    torch::Tensor image = DecodeImage(request);
    Scored scored;
    if (batch_) {
      scored = (*batch_)(std::move(image));
    } else {
      scored = Scored{Predict(loaded_.model, image.unsqueeze(0))[0], 1};
    }
    serve::Response response = serve::Response::Json(PredictionJson(scored.probabilities));
    response.headers["X-Batch-Size"] = std::to_string(scored.batch_size);
    return response;
  }

 private:
  struct Scored {
    torch::Tensor probabilities;  // float [10]
    int batch_size = 0;
  };

  std::vector<Scored> RunBatch(std::vector<torch::Tensor> images) {
    const torch::Tensor probabilities = Predict(loaded_.model, torch::stack(images));
    std::vector<Scored> out;
    out.reserve(images.size());
    for (int64_t i = 0; i < probabilities.size(0); ++i) {
      out.push_back({probabilities[i], static_cast<int>(images.size())});
    }
    return out;
  }

  serve::Response Describe() const {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    nlohmann::json j{{"replica", std::string(host) + ":" + std::to_string(getpid())},
                     {"model", loaded_.model_name},
                     {"checkpoint", file_},
                     {"epoch", loaded_.epoch},
                     {"batching", settings_.batching},
                     {"labels", std::vector<std::string>(std::begin(kLabels), std::end(kLabels))},
                     {"usage",
                      "POST one 28x28 image: 784 uint8 bytes with Content-Type: application/octet-stream, "
                      "or JSON (784 numbers 0..255, or 28 rows of 28, or {\"image\": ...})"}};
    if (!std::isnan(loaded_.test_accuracy)) j["test_accuracy"] = loaded_.test_accuracy;
    if (batch_) {
      j["batches"] = batch_->batches();
      j["batched_images"] = batch_->items();
      j["max_observed_batch_size"] = batch_->max_observed_batch_size();
    }
    return serve::Response::Json(j);
  }

  std::string file_;
  ServeSettings settings_;
  LoadedModel loaded_;
  // Last: destroyed first, so its thread stops before the model it calls goes away.
  std::unique_ptr<serve::Batch<torch::Tensor, Scored>> batch_;
};

}  // namespace fashion_serve
