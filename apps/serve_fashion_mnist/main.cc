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
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>

#include "common/driver.h"
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
};

/// Declares the flags on `app`, bound to `opt`.
void AddFlags(CLI::App& app, Options& opt) {
  app.add_option("--checkpoint", opt.checkpoint,
                 "a train_fashion_mnist checkpoint: its model.h5, a checkpoint_NNNNNN directory, "
                 "or a run directory (its newest checkpoint) (default "
                 "$PRISM_STORAGE_PATH/fashion_mnist_cnn, else prism_results/fashion_mnist_cnn)");
  app.add_option("--replicas", opt.replicas, "replicas, spread over the worker ranks (default 2)")
      ->check(CLI::Range(1, 4096));
  app.add_option_function<std::string>(
         "--batching", [&opt](const std::string& v) { opt.batching = v == "on"; },
         "one forward pass for a replica's concurrent requests: on (default) or off")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--max-batch-size", opt.max_batch_size, "images per forward pass at most (default 16)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--batch-wait-ms", opt.batch_wait_ms,
                 "how long a batch waits for more images after its first (default 5)")
      ->check(CLI::Range(0.0, 10000.0));
  app.add_option("--max-ongoing-requests", opt.max_ongoing_requests,
                 "requests in flight per replica (default 2 x max-batch-size with batching, 4 "
                 "without)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--torch-threads", opt.torch_threads, "LibTorch threads per replica (default 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--host", opt.host,
                 "address to listen on (default 127.0.0.1; 0.0.0.0 for the network)")
      ->check([](const std::string& v) { return v.empty() ? "--host needs an address" : ""; });
  app.add_option("--port", opt.port, "port (default 0: a free one, written to the endpoint file)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--endpoint-file", opt.endpoint_file,
                 "where the server's address goes (default serve_fashion_mnist.endpoint, "
                 "serve_fashion_mnist_JOBID.endpoint under Slurm)");
  app.add_option("--route-prefix", opt.route_prefix, "where the model answers (default /fashion_mnist)")
      ->check([](const std::string& v) {
        return v.empty() || v[0] != '/' ? "--route-prefix: a path starting with '/'" : "";
      });
  app.add_option("--predict-local", opt.predict_local,
                 "no server: score the first N test images here and print one JSON line each "
                 "({\"index\", \"class\", \"label\", \"scores\"})")
      ->check(CLI::Range(1, 10000));
  app.add_option("--data-dir", opt.data_dir,
                 "Fashion-MNIST IDX files, for --predict-local (default "
                 "/usr/share/datasets/fashion-mnist)");
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
  CLI::App app{"train_fashion_mnist's checkpoint served over HTTP by prism::serve.",
               "serve_fashion_mnist"};
  app.footer(
      "POST an image to ENDPOINT/fashion_mnist: 784 bytes (Content-Type: application/octet-stream)\n"
      "or JSON (784 numbers 0..255, or 28 rows of 28); GET it for what is served.\n"
      "Runs until SIGTERM or SIGUSR1, then drains the requests in flight and exits 0.");
  Options opt;
  AddFlags(app, opt);
  return prism_apps::RunDriver(app, argc, argv, [&] {
    const std::string checkpoint = opt.checkpoint.empty() ? DefaultCheckpoint() : opt.checkpoint;
    const std::string file = std::filesystem::absolute(fashion_serve::ResolveCheckpoint(checkpoint))
                                 .lexically_normal()
                                 .string();
    return opt.predict_local > 0 ? PredictLocal(opt, file) : RunServer(opt, file);
  });
}
