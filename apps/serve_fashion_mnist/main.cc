// Serving the Fashion-MNIST classifier that train_fashion_mnist trained, with prism::serve:
// Ray Serve's "serve a PyTorch model" example, as one MPI job.
//
//   mpirun -n 3 ./train_fashion_mnist --epochs=1               # writes prism_results/fashion_mnist_cnn
//   mpirun -n 3 ./serve_fashion_mnist --checkpoint=prism_results/fashion_mnist_cnn
//   curl -H 'Content-Type: application/octet-stream' --data-binary @image.bin "$(cat
//        serve_fashion_mnist.endpoint)/fashion_mnist"      # image.bin: 784 uint8 pixels
//
// The driver (rank 0) checks that the checkpoint loads, then deploys FashionClassifier
// (classifier.h) with 2 replicas on the worker ranks; each loads the model once and
// answers POSTed images with {"class", "label", "scores"}. With batching (the default) a
// replica's concurrent requests share one forward pass (serve::Batch). The HTTP server
// listens on 127.0.0.1 and a free port unless told otherwise, and writes its address to
// the endpoint file. It serves until SIGTERM or SIGUSR1 (Slurm's time limit or
// preemption), then drains the requests in flight and exits 0.
//
// --predict-local=N scores the first N test images in this process instead (no Serve),
// with the same decoding and model: the reference the tests compare served answers with.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>

#include "prism/api.h"
#include "prism/serve.h"
#include "serve_fashion_mnist/classifier.h"

namespace {

namespace serve = prism::serve;
namespace train = prism::train;
using fashion_serve::FashionClassifier;
using fashion_serve::ServeSettings;

struct Options {
  std::string checkpoint;  // default: <storage>/fashion_mnist_cnn, train_fashion_mnist's default run
  int replicas = 2;
  bool batching = true;
  int max_batch_size = 16;
  double batch_wait_ms = 5;
  int max_ongoing_requests = 0;  // 0: 2 x max_batch_size with batching, else 4
  int torch_threads = 1;
  std::string host = "127.0.0.1";
  int port = 0;
  std::string endpoint_file;  // default: serve_fashion_mnist[_JOBID].endpoint
  std::string route_prefix = "/fashion_mnist";
  int predict_local = 0;
  std::string data_dir = train::kFashionMnistDir;
  bool help = false;
};

constexpr const char* kUsage =
    "usage: serve_fashion_mnist [flags] [--prism-...]\n"
    "  --checkpoint=PATH        a train_fashion_mnist checkpoint: its model.h5, a checkpoint_NNNNNN\n"
    "                           directory, or a run directory (its newest checkpoint) (default\n"
    "                           $PRISM_STORAGE_PATH/fashion_mnist_cnn, else prism_results/fashion_mnist_cnn)\n"
    "  --replicas=N             replicas, spread over the worker ranks (default 2)\n"
    "  --batching=on|off        one forward pass for a replica's concurrent requests (default on)\n"
    "  --max-batch-size=N       images per forward pass at most (default 16)\n"
    "  --batch-wait-ms=X        how long a batch waits for more images after its first (default 5)\n"
    "  --max-ongoing-requests=N requests in flight per replica (default 2 x max-batch-size with\n"
    "                           batching, 4 without)\n"
    "  --torch-threads=N        LibTorch threads per replica (default 1)\n"
    "  --host=ADDR              address to listen on (default 127.0.0.1; 0.0.0.0 for the network)\n"
    "  --port=N                 port (default 0: a free one, written to the endpoint file)\n"
    "  --endpoint-file=PATH     where the server's address goes (default serve_fashion_mnist.endpoint,\n"
    "                           serve_fashion_mnist_JOBID.endpoint under Slurm)\n"
    "  --route-prefix=PATH      where the model answers (default /fashion_mnist)\n"
    "  --predict-local=N        no server: score the first N test images here and print one JSON\n"
    "                           line each ({\"index\", \"class\", \"label\", \"scores\"})\n"
    "  --data-dir=DIR           Fashion-MNIST IDX files, for --predict-local (default\n"
    "                           /usr/share/datasets/fashion-mnist)\n"
    "  --prism-*                Prism runtime flags (see README)\n"
    "POST an image to ENDPOINT/fashion_mnist: 784 bytes (Content-Type: application/octet-stream)\n"
    "or JSON (784 numbers 0..255, or 28 rows of 28); GET it for what is served.\n"
    "Runs until SIGTERM or SIGUSR1, then drains the requests in flight and exits 0.\n";

bool ParseInt(const std::string& text, int lo, int hi, int& out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  out = static_cast<int>(v);
  return true;
}

bool ParseNonNegative(const std::string& text, double& out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0) || !std::isfinite(v)) return false;
  out = v;
  return true;
}

/// Reads our flags ("--flag=value" or "--flag value"); skips --prism-* (Init's). Returns
/// an error message, empty if all is well.
std::string ParseFlags(int argc, char** argv, Options& opt) {
  static const char* const kNames[] = {
      "--checkpoint", "--replicas", "--batching", "--max-batch-size", "--batch-wait-ms",
      "--max-ongoing-requests", "--torch-threads", "--host", "--port", "--endpoint-file",
      "--route-prefix", "--predict-local", "--data-dir"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--prism-", 0) == 0) {
      if (arg.find('=') == std::string::npos && i + 1 < argc) ++i;  // "--prism-x v"
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      opt.help = true;
      continue;
    }
    std::string name = arg, value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    } else if (i + 1 < argc) {
      value = argv[++i];
      has_value = true;
    }
    if (std::find(std::begin(kNames), std::end(kNames), name) == std::end(kNames)) {
      return "unknown argument '" + arg + "'";
    }
    if (!has_value) return name + " needs a value";
    auto bad = [&](const std::string& expected) { return name + ": '" + value + "' is not " + expected; };
    if (name == "--checkpoint") {
      opt.checkpoint = value;
    } else if (name == "--replicas") {
      if (!ParseInt(value, 1, 4096, opt.replicas)) return bad("a whole number in 1..4096");
    } else if (name == "--batching") {
      if (value != "on" && value != "off") return bad("on or off");
      opt.batching = value == "on";
    } else if (name == "--max-batch-size") {
      if (!ParseInt(value, 1, 1024, opt.max_batch_size)) return bad("a whole number in 1..1024");
    } else if (name == "--batch-wait-ms") {
      if (!ParseNonNegative(value, opt.batch_wait_ms) || opt.batch_wait_ms > 10000) {
        return bad("a number of milliseconds in 0..10000");
      }
    } else if (name == "--max-ongoing-requests") {
      if (!ParseInt(value, 1, 4096, opt.max_ongoing_requests)) return bad("a whole number in 1..4096");
    } else if (name == "--torch-threads") {
      if (!ParseInt(value, 1, 1024, opt.torch_threads)) return bad("a whole number in 1..1024");
    } else if (name == "--host") {
      if (value.empty()) return bad("an address");
      opt.host = value;
    } else if (name == "--port") {
      if (!ParseInt(value, 0, 65535, opt.port)) return bad("a port in 0..65535");
    } else if (name == "--endpoint-file") {
      opt.endpoint_file = value;
    } else if (name == "--route-prefix") {
      if (value.empty() || value[0] != '/') return bad("a path starting with '/'");
      opt.route_prefix = value;
    } else if (name == "--predict-local") {
      if (!ParseInt(value, 1, 10000, opt.predict_local)) return bad("a whole number in 1..10000");
    } else {
      opt.data_dir = value;
    }
  }
  return "";
}

/// train_fashion_mnist's default run outside Slurm: <storage>/fashion_mnist_cnn.
std::string DefaultCheckpoint() {
  const char* env = std::getenv("PRISM_STORAGE_PATH");
  const std::string storage = env != nullptr && *env != '\0' ? env : "prism_results";
  return storage + "/fashion_mnist_cnn";
}

/// `v` in the shortest form printf's %g gives ("5", "0.5").
std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

/// "cnn, epoch 2, test accuracy 0.8712": what a checkpoint's attributes say of its model.
std::string Describe(const fashion_serve::LoadedModel& m) {
  std::string text = m.model_name;
  if (m.epoch >= 0) text += ", epoch " + std::to_string(m.epoch);
  if (!std::isnan(m.test_accuracy)) {
    char accuracy[32];
    std::snprintf(accuracy, sizeof accuracy, "%.4f", m.test_accuracy);
    text += std::string(", test accuracy ") + accuracy;
  }
  return text;
}

/// --predict-local: the first `count` test images through the checkpoint's model in this
/// process, as the served model sees them (uint8 pixels -> ToModelInput), in batches of
/// 100. One JSON line per image on stdout; the accuracy on stderr.
int PredictLocal(const Options& opt, const std::string& file) {
  fashion_serve::LoadedModel loaded = fashion_serve::LoadModel(file);
  const train::TensorDataset test = train::LoadFashionMnist("test", opt.data_dir);
  // Back to the IDX file's bytes (the loader scaled and normalised them): what a client sends.
  const torch::Tensor pixels = test.inputs.slice(0, 0, opt.predict_local)
                                   .reshape({-1, fashion_serve::kPixels})
                                   .mul(0.3530).add(0.2860).mul(255).round().clamp(0, 255);
  int64_t correct = 0;
  for (int64_t begin = 0; begin < pixels.size(0); begin += 100) {
    const torch::Tensor probabilities =
        fashion_serve::Predict(loaded.model, pixels.slice(0, begin, begin + 100));
    for (int64_t i = 0; i < probabilities.size(0); ++i) {
      nlohmann::json line = fashion_serve::PredictionJson(probabilities[i]);
      line["index"] = begin + i;
      if (line["class"].get<int64_t>() == test.targets[begin + i].item<int64_t>()) ++correct;
      std::cout << line.dump() << "\n";
    }
  }
  std::cout << std::flush;
  std::fprintf(stderr, "local accuracy on the first %d test images: %.4f (%s)\n", opt.predict_local,
               static_cast<double>(correct) / opt.predict_local, Describe(loaded).c_str());
  return 0;
}

int RunServer(const Options& opt, const std::string& file) {
  // Load it here first: a wrong path or file fails now, with its message, not in a replica.
  const fashion_serve::LoadedModel probe = fashion_serve::LoadModel(file);
  std::string endpoint_file = opt.endpoint_file;
  if (endpoint_file.empty()) {
    const char* job = std::getenv("SLURM_JOB_ID");
    endpoint_file = job != nullptr && *job != '\0' ? "serve_fashion_mnist_" + std::string(job) + ".endpoint"
                                                   : "serve_fashion_mnist.endpoint";
  }
  endpoint_file = std::filesystem::absolute(endpoint_file).lexically_normal().string();

  ServeSettings settings;
  settings.batching = opt.batching;
  settings.max_batch_size = opt.max_batch_size;
  settings.batch_wait_timeout_s = opt.batch_wait_ms / 1000;
  settings.torch_threads = opt.torch_threads;
  const int max_ongoing = opt.max_ongoing_requests > 0 ? opt.max_ongoing_requests
                          : opt.batching              ? 2 * opt.max_batch_size
                                                      : 4;
  std::cout << "Fashion-MNIST with prism::serve: " << Describe(probe) << " from " << file << "\n"
            << opt.replicas << " replica(s) on " << prism::GetRuntimeContext().GetWorldSize() << " rank(s), "
            << (opt.batching ? "batching up to " + std::to_string(opt.max_batch_size) + " images (wait " +
                                   Number(opt.batch_wait_ms) + " ms)"
                             : std::string("no batching"))
            << ", " << max_ongoing << " requests in flight per replica\n"
            << std::flush;

  auto app = serve::Deployment<FashionClassifier>("classifier")
                 .NumReplicas(opt.replicas)
                 .MaxOngoingRequests(max_ongoing)
                 .Bind(file, settings);
  serve::Run(app, {.route_prefix = opt.route_prefix,
                   .name = "fashion_mnist",
                   .host = opt.host,
                   .port = static_cast<uint16_t>(opt.port),
                   .endpoint_file = endpoint_file,
                   .ready_timeout_s = 120});
  const serve::ServeStatus status = serve::Status();
  const std::string url = status.endpoint + opt.route_prefix;
  std::cout << "replicas:";
  for (const serve::DeploymentStatus& d : status.deployments) {
    for (const serve::ReplicaStatus& r : d.replicas) std::cout << " " << r.replica_id << "@rank" << r.rank;
  }
  std::cout << "\nendpoint: " << status.endpoint << " (written to " << endpoint_file << ")\n"
            << "serving at " << url << "\n"
            << "try: curl -H 'Content-Type: application/octet-stream' --data-binary @image.bin " << url << "\n"
            << "stop: kill -TERM " << getpid() << "\n"
            << std::flush;

  const int signal = serve::RunUntilStopped();  // drains in-flight requests before it returns
  std::cout << "stopped" << (signal > 0 ? " by signal " + std::to_string(signal) : std::string())
            << ": requests in flight drained, replicas stopped\n"
            << std::flush;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    prism::Init(argc, argv);  // ranks 1..N-1 host the replicas here and never return
  } catch (const prism::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  Options opt;
  const std::string flag_error = ParseFlags(argc, argv, opt);
  int status = 0;
  if (!flag_error.empty()) {
    std::cerr << "error: " << flag_error << "\n" << kUsage;
    status = 2;
  } else if (opt.help) {
    std::cout << kUsage;
  } else {
    try {
      const std::string file = std::filesystem::absolute(fashion_serve::ResolveCheckpoint(
                                                              opt.checkpoint.empty() ? DefaultCheckpoint() : opt.checkpoint))
                                   .lexically_normal()
                                   .string();
      status = opt.predict_local > 0 ? PredictLocal(opt, file) : RunServer(opt, file);
    } catch (const std::exception& e) {  // prism::Error, serve::DeploymentError, c10::Error
      std::cerr << "error: " << e.what() << "\n";
      status = 1;
    }
  }
  prism::Shutdown();  // the replicas' ranks exit here
  return status;
}
