// Batch prediction, after Ray's batch inference examples. The default mode runs it on Prism
// Data (Ray Data's map_batches with a callable class):
//
//   ReadHdf5(<out>/inputs) -> MapBatches(ActorClass<ModelPredictor>(<out>/model.bin),
//                                        {.batch_size, .concurrency = {min, max}})
//                          -> WriteHdf5(<out>/predictions)
//
// each pool actor loading the model once; the driver then checks every prediction against
// a local single-process run. --mode=tasks and --mode=actors run Ray Core's patterns instead:
// load a model once, Put it in the object store, run one prediction task per data shard with
// the model's ObjectRef as argument (or an ActorPool of predictors), and gather the results
// as they arrive.
//
//   mpirun -n 3 ./batch_predict --shards=12 --shard-size=1024
//
// The model is a plain-C++ multi-layer perceptron, 784 -> 1024 (ReLU) -> 10, about 3.1 MiB of
// float weights: far above the 100 KiB inline limit, so it stays in the driver's store and the
// other ranks pull it from there. The hidden layer is a fixed, seeded random projection and the output layer is
// fitted by the driver (softmax regression, a few SGD epochs) on synthetic data. Shards are
// generated deterministically inside the task from the shard index, so no data is shipped.
// The driver checks that the distributed results equal a local single-process run.
#include <prism/api.h>
#include <prism/data.h>
#include <prism/platform/invoke.h>

#include "common/driver.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kInputs = 784;  // a 28x28 "image"
constexpr int kHidden = 1024;
constexpr int kClasses = 10;

// ---- Deterministic random numbers (same stream on every rank) ----------------------------

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) { SplitMix64(state_); }
  /// Uniform in [0, 1).
  double Uniform() { return static_cast<double>(SplitMix64(state_) >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller, both halves used).
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = 0;
    while (u1 <= 0) u1 = Uniform();
    double u2 = Uniform();
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2 * std::numbers::pi * u2);
  }
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(SplitMix64(state_) % n); }

 private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0;
};

uint64_t StreamSeed(uint64_t stream) {
  uint64_t s = 0x5EED0F00DULL ^ (stream * 0xD1B54A32D192ED03ULL);
  return SplitMix64(s);
}

// ---- Synthetic data: 10 classes, each a noisy copy of its prototype ----------------------

constexpr double kSignal = 0.2;  // prototype scale relative to unit noise
constexpr uint64_t kPrototypeStream = ~0ULL;
constexpr uint64_t kTrainStream = ~0ULL - 1;

const std::vector<float>& Prototypes() {
  static const std::vector<float> protos = [] {
    std::vector<float> p(static_cast<size_t>(kClasses) * kInputs);
    Rng rng(StreamSeed(kPrototypeStream));
    for (auto& v : p) v = static_cast<float>(kSignal * rng.Normal());
    return p;
  }();
  return protos;
}

/// The labelled examples of one data stream (a shard index, or the training set), in order.
class SampleStream {
 public:
  explicit SampleStream(uint64_t stream) : rng_(StreamSeed(stream)) {}
  /// The next `count` examples: x[i][j], y[i].
  void Next(int count, std::vector<float>& x, std::vector<int>& y) {
    const auto& protos = Prototypes();
    x.resize(static_cast<size_t>(count) * kInputs);
    y.resize(count);
    for (int i = 0; i < count; ++i) {
      const int label = static_cast<int>(rng_.Below(kClasses));
      y[i] = label;
      const float* p = &protos[static_cast<size_t>(label) * kInputs];
      float* xi = &x[static_cast<size_t>(i) * kInputs];
      for (int j = 0; j < kInputs; ++j) xi[j] = p[j] + static_cast<float>(rng_.Normal());
    }
  }

 private:
  Rng rng_;
};

}  // namespace

// ---- The model ---------------------------------------------------------------------------

/// A two-layer perceptron. Weights are stored input-major so the forward pass is a sequence
/// of independent axpy updates (vectorizes without reordering any sum: bit-reproducible).
struct Model {
  int inputs = 0, hidden = 0, classes = 0;
  std::vector<float> w1;  // [inputs][hidden]
  std::vector<float> b1;  // [hidden]
  std::vector<float> w2;  // [hidden][classes]
  std::vector<float> b2;  // [classes]

  template <class Archive>
  void serialize(Archive& ar, unsigned /*version*/) {
    ar & inputs & hidden & classes & w1 & b1 & w2 & b2;
  }
  size_t Bytes() const { return (w1.size() + b1.size() + w2.size() + b2.size()) * sizeof(float); }
};

/// What one prediction task returns.
struct ShardResult {
  int shard = -1;
  int64_t samples = 0;
  int64_t correct = 0;                         // predictions equal to the true label
  std::array<int64_t, kClasses> predicted{};  // how many samples got each class
  uint64_t checksum = 0;                       // FNV-1a over predictions and logit bits
  // Where and how long: informational, not part of the equality check.
  int rank = -1;
  std::string node;
  double seconds = 0;

  template <class Archive>
  void serialize(Archive& ar, unsigned /*version*/) {
    ar & shard & samples & correct & predicted & checksum & rank & node & seconds;
  }
  bool SameAnswer(const ShardResult& o) const {
    return shard == o.shard && samples == o.samples && correct == o.correct &&
           predicted == o.predicted && checksum == o.checksum;
  }
};

namespace {

/// Hidden activations (ReLU) of `n` samples: h[s][k]. Each h[s][k] is summed over the inputs
/// in order, so the result is the same whatever the blocking or the vector width.
void HiddenLayer(const Model& m, const float* x, int n, float* h) {
  const size_t in = m.inputs, hid = m.hidden;
  constexpr int kBlock = 8;  // samples per pass over w1: each weight row is reused 8 times
  for (int s0 = 0; s0 < n; s0 += kBlock) {
    const int nb = std::min(kBlock, n - s0);
    for (int s = 0; s < nb; ++s) std::memcpy(h + (s0 + s) * hid, m.b1.data(), hid * sizeof(float));
    for (size_t j = 0; j < in; ++j) {
      const float* row = &m.w1[j * hid];
      int s = 0;
      for (; s + 4 <= nb; s += 4) {  // four samples per load of the row
        const float* xs = x + (s0 + s) * in + j;
        const float x0 = xs[0], x1 = xs[in], x2 = xs[2 * in], x3 = xs[3 * in];
        float* __restrict h0 = h + (s0 + s) * hid;
        float* __restrict h1 = h0 + hid;
        float* __restrict h2 = h1 + hid;
        float* __restrict h3 = h2 + hid;
        for (size_t k = 0; k < hid; ++k) {
          const float w = row[k];
          h0[k] += x0 * w;
          h1[k] += x1 * w;
          h2[k] += x2 * w;
          h3[k] += x3 * w;
        }
      }
      for (; s < nb; ++s) {
        const float xj = x[(s0 + s) * in + j];
        float* hs = h + (s0 + s) * hid;
        for (size_t k = 0; k < hid; ++k) hs[k] += xj * row[k];
      }
    }
    for (int s = 0; s < nb; ++s) {
      float* hs = h + (s0 + s) * hid;
      for (size_t k = 0; k < hid; ++k) hs[k] = std::max(hs[k], 0.0f);
    }
  }
}

/// Output logits of one sample from its hidden activations.
void OutputLayer(const Model& m, const float* h, float* logits) {
  for (int c = 0; c < m.classes; ++c) logits[c] = m.b2[c];
  for (int k = 0; k < m.hidden; ++k) {
    if (h[k] == 0.0f) continue;  // ReLU zeros: about half the units
    const float* row = &m.w2[static_cast<size_t>(k) * m.classes];
    for (int c = 0; c < m.classes; ++c) logits[c] += h[k] * row[c];
  }
}

int ArgMax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

void Fnv(uint64_t& h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ULL;
}

/// The model: a seeded random hidden layer, and an output layer fitted by softmax regression
/// (plain SGD) on `train_samples` synthetic examples. Deterministic.
Model BuildModel(int train_samples, int epochs) {
  Model m;
  m.inputs = kInputs;
  m.hidden = kHidden;
  m.classes = kClasses;
  Rng rng(StreamSeed(0x30DE1));
  const double a = std::sqrt(3.0 / kInputs);  // unit-variance pre-activations for unit inputs
  m.w1.resize(static_cast<size_t>(kInputs) * kHidden);
  for (auto& w : m.w1) w = static_cast<float>(a * (2 * rng.Uniform() - 1));
  m.b1.resize(kHidden);
  for (auto& b : m.b1) b = static_cast<float>(0.1 * rng.Normal());
  m.w2.assign(static_cast<size_t>(kHidden) * kClasses, 0.0f);
  m.b2.assign(kClasses, 0.0f);

  std::vector<float> x, h(static_cast<size_t>(train_samples) * kHidden);
  std::vector<int> y;
  SampleStream(kTrainStream).Next(train_samples, x, y);
  HiddenLayer(m, x.data(), train_samples, h.data());
  float logits[kClasses];
  for (int e = 0; e < epochs; ++e) {
    const float lr = 0.01f / (1.0f + e);
    for (int i = 0; i < train_samples; ++i) {
      const float* hi = &h[static_cast<size_t>(i) * kHidden];
      OutputLayer(m, hi, logits);
      float mx = *std::max_element(logits, logits + kClasses), sum = 0;
      for (float& l : logits) sum += (l = std::exp(l - mx));
      for (int c = 0; c < kClasses; ++c) {
        const float g = lr * (logits[c] / sum - (c == y[i] ? 1.0f : 0.0f));
        m.b2[c] -= g;
        for (int k = 0; k < kHidden; ++k) m.w2[static_cast<size_t>(k) * kClasses + c] -= g * hi[k];
      }
    }
  }
  return m;
}

}  // namespace

// ---- The task ----------------------------------------------------------------------------

/// Predicts every sample of shard `shard` (generated here from the shard index). `model` is
/// passed as an ObjectRef<Model> by the driver; Prism resolves it to the value before running.
ShardResult Predict(const Model& model, int shard, int shard_size) {
  auto start = std::chrono::steady_clock::now();
  ShardResult r;
  r.shard = shard;
  r.samples = shard_size;
  r.checksum = 0xCBF29CE484222325ULL;
  SampleStream data(static_cast<uint64_t>(shard));
  constexpr int kChunk = 64;  // samples generated and predicted at a time: bounded memory
  std::vector<float> x, h(static_cast<size_t>(kChunk) * model.hidden);
  std::vector<float> logits(model.classes);
  std::vector<int> y;
  for (int s0 = 0; s0 < shard_size; s0 += kChunk) {
    const int n = std::min(kChunk, shard_size - s0);
    data.Next(n, x, y);
    HiddenLayer(model, x.data(), n, h.data());
    for (int s = 0; s < n; ++s) {
      OutputLayer(model, &h[static_cast<size_t>(s) * model.hidden], logits.data());
      const int cls = ArgMax(logits.data(), model.classes);
      ++r.predicted[cls];
      if (cls == y[s]) ++r.correct;
      Fnv(r.checksum, &cls, sizeof cls);
      Fnv(r.checksum, logits.data(), logits.size() * sizeof(float));
    }
  }
  auto ctx = prism::GetRuntimeContext();
  r.rank = ctx.GetRank();
  r.node = ctx.GetNodeId();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}
PRISM_REMOTE(Predict);

// The actor-based variant (Ray's "stateful" batch inference): each Predictor loads the model
// once, when it is created, and then serves any number of shards.
class Predictor {
 public:
  static Predictor* Create(Model model) { return new Predictor(std::move(model)); }
  ShardResult Predict(int shard, int shard_size) { return ::Predict(model_, shard, shard_size); }

 private:
  explicit Predictor(Model model) : model_(std::move(model)) {}
  Model model_;
};
PRISM_REMOTE(Predictor::Create, &Predictor::Predict);

// ---- The Data pipeline (--mode=data) -----------------------------------------------------

namespace {

namespace data = prism::data;

/// Writes the model where every rank can read it (a shared file system under Slurm).
void SaveModel(const Model& model, const std::string& path) {
  const std::string bytes = prism::platform::ToBytes(model);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write the model to " + path);
}

Model LoadModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open the model file " + path + " (is it on a file system every rank sees?)");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return prism::platform::FromBytes<Model>(bytes);
}

/// The rows of `n` samples: "id" (int64), "x" (float32 [784]) and "label" (int32).
data::Block SampleRows(int64_t first_id, const std::vector<float>& x, const std::vector<int>& y) {
  const int64_t n = static_cast<int64_t>(y.size());
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = first_id + i;
  return data::Block::FromColumns(
      {{"id", data::Column::FromVector(std::move(ids))},
       {"x", data::Column::FromVector(std::vector<float>(x), {kInputs})},
       {"label", data::Column::FromVector(std::vector<int32_t>(y.begin(), y.end()))}});
}

}  // namespace

/// A block of Range ids that is one whole shard (all blocks have shard_size rows) -> that
/// shard's samples, the same SampleStream as --mode=tasks generates.
data::Block GenerateShard(data::Block ids) {
  const auto id = ids.GetColumn("id").Values<int64_t>();
  const int64_t n = static_cast<int64_t>(id.size());
  std::vector<float> x;
  std::vector<int> y;
  SampleStream(static_cast<uint64_t>(id[0] / n)).Next(static_cast<int>(n), x, y);
  return SampleRows(id[0], x, y);
}
PRISM_REMOTE(GenerateShard);

/// The model as a callable class: each pool actor loads it once, then predicts batches.
class ModelPredictor {
 public:
  explicit ModelPredictor(std::string model_path) : model_(LoadModel(model_path)) {}
  /// id, label -> id, label, pred (int32), logits (float32 [10]).
  data::Block operator()(const data::Block& batch) const { return PredictBlock(model_, batch); }

  static data::Block PredictBlock(const Model& model, const data::Block& batch) {
    const auto x = batch.GetColumn("x").Values<float>();
    const int n = static_cast<int>(batch.num_rows());
    std::vector<float> h(static_cast<size_t>(n) * model.hidden);
    std::vector<float> logits(static_cast<size_t>(n) * model.classes);
    std::vector<int32_t> pred(n);
    HiddenLayer(model, x.data(), n, h.data());
    for (int s = 0; s < n; ++s) {
      float* l = &logits[static_cast<size_t>(s) * model.classes];
      OutputLayer(model, &h[static_cast<size_t>(s) * model.hidden], l);
      pred[s] = ArgMax(l, model.classes);
    }
    return batch.SelectColumns({"id", "label"})
        .AddColumn("pred", data::Column::FromVector(std::move(pred)))
        .AddColumn("logits", data::Column::FromVector(std::move(logits), {model.classes}));
  }

 private:
  Model model_;
};

// ---- Driver ------------------------------------------------------------------------------

namespace {

struct Options {
  int shards = 12;
  int shard_size = 1024;
  std::string mode = "data";  // data, tasks or actors
  int batch_size = 256;       // data: rows per model call
  int min_actors = 1;         // data: the actor pool's size
  int max_actors = 0;         //   (0: the cluster's CPUs)
  std::string out = "batch_predict_out";
  bool check = true;
};

/// Declares the flags on `app`, bound to `opt`.
void AddFlags(CLI::App& app, Options& opt) {
  app.add_option("--mode", opt.mode,
                 "data (default): Prism Data, ReadHdf5(DIR/inputs) -> MapBatches(model class in an "
                 "actor pool) -> WriteHdf5(DIR/predictions); tasks: one task per shard, the model "
                 "Put once; actors: one Predictor actor per rank loads the model once, an "
                 "ActorPool feeds it the shards")
      ->check(CLI::IsMember({"data", "tasks", "actors"}));
  app.add_option("--shards", opt.shards, "number of data shards (default 12)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--shard-size", opt.shard_size, "samples per shard (default 1024)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--batch-size", opt.batch_size, "data: samples per model call (default 256)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--min-actors", opt.min_actors, "data: the actor pool starts with A actors (default 1)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--max-actors", opt.max_actors,
                 "data: and grows to A while blocks wait (0, the default: the cluster's CPUs)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--out", opt.out,
                 "data: where the model, inputs and predictions go, on a file system every rank "
                 "sees (default ./batch_predict_out; its inputs/ and predictions/ are replaced)")
      ->check([](const std::string& dir) { return dir.empty() ? "--out needs a directory" : ""; });
  app.add_flag("--check,!--no-check", opt.check,
               "compare every prediction with a local single-process run (default), or skip that");
}

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string Rate(double samples, double seconds) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(0) << samples / std::max(seconds, 1e-9) << " samples/s";
  return s.str();
}

/// --mode=data: the pipeline on Prism Data, then the check of every prediction.
int RunData(const Options& opt) {
  using Clock = std::chrono::steady_clock;
  namespace fs = std::filesystem;
  auto ctx = prism::GetRuntimeContext();
  auto cluster = prism::ClusterResources();
  const int64_t total = static_cast<int64_t>(opt.shards) * opt.shard_size;
  std::cout << "batch_predict (Prism Data): " << opt.shards << " shards x " << opt.shard_size
            << " samples on " << ctx.GetWorldSize() << " rank(s), " << cluster["CPU"] << " CPU(s)\n"
            << std::fixed << std::setprecision(3);
  const fs::path out = fs::absolute(opt.out);
  fs::create_directories(out);
  fs::remove_all(out / "inputs");
  fs::remove_all(out / "predictions");

  // 1. The model, fitted once and saved where every actor can load it.
  auto t0 = Clock::now();
  const Model model = BuildModel(/*train_samples=*/2000, /*epochs=*/4);
  SaveModel(model, (out / "model.bin").string());
  std::cout << "model: MLP " << model.inputs << " -> " << model.hidden << " -> " << model.classes
            << ", fitted and saved to " << (out / "model.bin").string() << " in " << Since(t0) << " s\n";

  // 2. The inputs as HDF5, generated in parallel (one block per shard).
  auto t_in = Clock::now();
  data::Range(total, opt.shards).MapBatches(GenerateShard, opt.shard_size).WriteHdf5((out / "inputs").string());
  std::cout << "inputs: " << total << " samples written to " << (out / "inputs").string() << " in "
            << Since(t_in) << " s\n";

  // 3. ReadHdf5 -> MapBatches(model class, actor pool) -> WriteHdf5.
  auto t_run = Clock::now();
  data::Dataset predictions =
      data::ReadHdf5((out / "inputs").string())
          .MapBatches(data::ActorClass<ModelPredictor>((out / "model.bin").string()),
                      {.batch_size = opt.batch_size, .concurrency = {opt.min_actors, opt.max_actors}});
  predictions.WriteHdf5((out / "predictions").string());
  const double run_s = Since(t_run);
  std::cout << "predicted " << total << " samples in " << run_s << " s: " << Rate(static_cast<double>(total), run_s)
            << "\n" << predictions.Stats().ToString();

  // 4. Read the predictions back: accuracy, and (--check) each one against a local run.
  auto t_check = Clock::now();
  int64_t rows = 0, correct = 0, mismatches = 0;
  std::array<int64_t, kClasses> predicted{};
  std::vector<float> x;
  std::vector<int> y;
  for (const data::Block& batch : data::ReadHdf5((out / "predictions").string()).IterBatches(opt.shard_size)) {
    const auto id = batch.GetColumn("id").Values<int64_t>();
    const auto label = batch.GetColumn("label").Values<int32_t>();
    const auto pred = batch.GetColumn("pred").Values<int32_t>();
    const auto logits = batch.GetColumn("logits").Values<float>();
    data::Block expected;
    if (opt.check) {
      // Batches of shard_size rows, in order: batch k is shard k, generated here as the
      // data mode's GenerateShard does, predicted in this process.
      SampleStream(static_cast<uint64_t>(rows / opt.shard_size)).Next(static_cast<int>(batch.num_rows()), x, y);
      expected = ModelPredictor::PredictBlock(model, SampleRows(rows, x, y));
    }
    for (int64_t i = 0; i < batch.num_rows(); ++i, ++rows) {
      ++predicted[pred[i]];
      correct += pred[i] == label[i] ? 1 : 0;
      if (!opt.check) continue;
      const bool same = id[i] == rows && label[i] == expected.GetColumn("label").Values<int32_t>()[i] &&
                        pred[i] == expected.GetColumn("pred").Values<int32_t>()[i] &&
                        std::memcmp(&logits[i * kClasses], &expected.GetColumn("logits").Values<float>()[i * kClasses],
                                    kClasses * sizeof(float)) == 0;
      if (!same && ++mismatches <= 5) {
        std::cout << "  sample " << rows << " differs: id " << id[i] << ", predicted " << pred[i]
                  << " (local " << expected.GetColumn("pred").Values<int32_t>()[i] << ")\n";
      }
    }
  }
  std::cout << "accuracy " << std::setprecision(2) << 100.0 * correct / std::max<int64_t>(1, rows)
            << "%, class counts:" << std::setprecision(3);
  for (auto c : predicted) std::cout << " " << c;
  std::cout << "\n";
  if (rows != total) {
    std::cout << "MISMATCH: " << rows << " predictions read back, " << total << " expected\n";
    return 1;
  }
  if (!opt.check) return 0;
  std::cout << "local single-process check: " << Since(t_check) << " s\n";
  if (mismatches > 0) {
    std::cout << "MISMATCH: " << mismatches << " of " << total << " predictions differ from the local computation\n";
    return 1;
  }
  std::cout << "OK: all " << total << " predictions match the local computation\n";
  return 0;
}

int RunDriver(const Options& opt) {
  if (opt.mode == "data") return RunData(opt);
  using Clock = std::chrono::steady_clock;
  auto ctx = prism::GetRuntimeContext();
  auto cluster = prism::ClusterResources();
  std::cout << "batch_predict: " << opt.shards << " shards x " << opt.shard_size
            << " samples on " << ctx.GetWorldSize() << " rank(s), " << cluster["CPU"]
            << " CPU(s)\n";
  std::cout << std::fixed << std::setprecision(3);

  // 1. Load (here: build and fit) the model once, and Put it once.
  auto t0 = Clock::now();
  Model model = BuildModel(/*train_samples=*/2000, /*epochs=*/4);
  std::cout << "model: MLP " << model.inputs << " -> " << model.hidden << " -> " << model.classes
            << ", " << std::setprecision(2) << model.Bytes() / 1048576.0 << " MiB of weights, fitted in "
            << std::setprecision(3) << Since(t0) << " s\n";
  auto t_put = Clock::now();
  prism::ObjectRef<Model> model_ref = prism::Put(model);
  std::cout << "model Put in " << Since(t_put) << " s\n";

  constexpr int kStallMs = 300000;
  std::vector<ShardResult> results(opt.shards);
  int done = 0;
  auto report = [&](ShardResult r) {
    ++done;
    std::cout << "  shard " << r.shard << " done on rank " << r.rank << " (" << r.node << ") in "
              << r.seconds << " s, accuracy " << std::setprecision(1)
              << 100.0 * r.correct / r.samples << "%  [" << done << "/" << opt.shards << "]\n"
              << std::setprecision(3);
    results.at(r.shard) = std::move(r);
  };
  auto t_run = Clock::now();
  if (opt.mode == "actors") {
    // 2'. One Predictor per rank, each loading the model once; an ActorPool feeds shards.
    std::vector<prism::ActorHandle<Predictor>> predictors;
    for (int r = 0; r < ctx.GetWorldSize(); ++r) {
      predictors.push_back(prism::Actor(Predictor::Create)
                               .SetResource("rank:" + std::to_string(r), 0.01)
                               .Remote(model_ref));
    }
    std::cout << "actors: " << predictors.size() << " Predictor(s), one per rank\n";
    prism::ActorPool<Predictor> pool(predictors);
    const int shard_size = opt.shard_size;
    for (int s = 0; s < opt.shards; ++s) {
      pool.Submit([shard_size](prism::ActorHandle<Predictor>& p, int shard) {
        return p.Task(&Predictor::Predict).Remote(shard, shard_size);
      }, s);
    }
    // 3'. Collect results as they arrive.
    while (pool.HasNext()) report(pool.GetNextUnordered<ShardResult>(kStallMs));
  } else {
    // 2. One task per shard, the model passed by reference.
    std::vector<prism::ObjectRef<ShardResult>> pending;
    for (int s = 0; s < opt.shards; ++s) {
      pending.push_back(prism::Task(Predict).Remote(model_ref, s, opt.shard_size));
    }
    // 3. Collect results as they arrive.
    while (!pending.empty()) {
      auto waited = prism::Wait(pending, 1, kStallMs);
      if (waited.ready.empty()) {
        std::cerr << "batch_predict: no shard finished in " << kStallMs / 1000 << " s ("
                  << pending.size() << " outstanding)\n";
        return 1;
      }
      report(*prism::Get(waited.ready.front()));
      pending = std::move(waited.unready);
    }
  }
  const double run_s = Since(t_run);
  const double total = static_cast<double>(opt.shards) * opt.shard_size;

  // 4. Summary: accuracy, predicted class histogram, who did the work.
  int64_t correct = 0;
  std::array<int64_t, kClasses> predicted{};
  std::map<int, std::pair<int, double>> by_rank;  // rank -> shards, busy seconds
  for (const auto& r : results) {
    correct += r.correct;
    for (int c = 0; c < kClasses; ++c) predicted[c] += r.predicted[c];
    auto& [n, busy] = by_rank[r.rank];
    ++n;
    busy += r.seconds;
  }
  std::cout << "predicted " << static_cast<int64_t>(total) << " samples in " << run_s << " s: "
            << Rate(total, run_s) << ", accuracy " << std::setprecision(2)
            << 100.0 * correct / total << "%\n"
            << std::setprecision(3) << "class counts:";
  for (auto c : predicted) std::cout << " " << c;
  std::cout << "\nwork by rank:";
  for (const auto& [rank, stats] : by_rank) {
    std::cout << " rank " << rank << ": " << stats.first << " shard(s), " << stats.second
              << " s busy;";
  }
  std::cout << "\n";

  // 5. Verify against a local, single-process run of the same function.
  if (!opt.check) return 0;
  auto t_local = Clock::now();
  int mismatches = 0;
  for (int s = 0; s < opt.shards; ++s) {
    ShardResult local = Predict(model, s, opt.shard_size);
    if (!local.SameAnswer(results[s])) {
      if (++mismatches <= 5) {
        std::cout << "  shard " << s << " differs: remote correct=" << results[s].correct
                  << " checksum=" << std::hex << results[s].checksum << ", local correct="
                  << std::dec << local.correct << " checksum=" << std::hex << local.checksum
                  << std::dec << "\n";
      }
    }
  }
  const double local_s = Since(t_local);
  std::cout << "local single-process run: " << local_s << " s (" << Rate(total, local_s)
            << "), speedup " << std::setprecision(2) << local_s / run_s << "x\n";
  if (mismatches > 0) {
    std::cout << "MISMATCH: " << mismatches << " of " << opt.shards
              << " shards differ from the local computation\n";
    return 1;
  }
  std::cout << "OK: all " << opt.shards << " shards match the local computation\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Batch prediction on Prism Data, tasks or actors, every prediction checked:\n"
               "  mpirun -n 3 batch_predict --shards=12 --shard-size=1024",
               "batch_predict"};
  Options opt;
  AddFlags(app, opt);
  return prism_apps::RunDriver(app, argc, argv, [&] { return RunDriver(opt); });
}
