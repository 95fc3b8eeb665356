// Sharded, shuffled batches of an in-memory dataset (torch's DistributedSampler), and the
// Fashion-MNIST IDX reader.
#include "prism/train/data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "prism/errors.h"

namespace prism::train {

namespace {

std::string ShapeText(const torch::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

}  // namespace

DataLoader::DataLoader(TensorDataset dataset, int64_t batch_size, bool shuffle, uint64_t seed,
                       int rank, int world_size, torch::Device device, bool drop_last)
    : dataset_(std::move(dataset)),
      batch_size_(batch_size),
      shuffle_(shuffle),
      seed_(seed),
      rank_(rank),
      world_size_(world_size),
      device_(device),
      drop_last_(drop_last) {
  if (batch_size_ < 1) {
    throw Error("DataLoader: batch_size is " + std::to_string(batch_size_) +
                "; it must be at least 1");
  }
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_) {
    throw Error("DataLoader: rank " + std::to_string(rank_) + " of world size " +
                std::to_string(world_size_) +
                " is invalid; need world_size >= 1 and 0 <= rank < "
                "world_size");
  }
  if (!dataset_.inputs.defined() || !dataset_.targets.defined()) {
    throw Error("DataLoader: the dataset's inputs or targets tensor is undefined; give both");
  }
  if (dataset_.inputs.dim() == 0 || dataset_.targets.dim() == 0 ||
      dataset_.inputs.size(0) != dataset_.targets.size(0)) {
    throw Error("DataLoader: inputs " + ShapeText(dataset_.inputs) + " and targets " +
                ShapeText(dataset_.targets) +
                " must have the same first dimension (one target per sample)");
  }
  if (dataset_.size() == 0) {
    throw Error("DataLoader: the dataset is empty (inputs " + ShapeText(dataset_.inputs) +
                "); there is nothing to shard");
  }
  // Every worker gets the same number of samples, so every worker runs the same number of
  // steps (a worker with one step less would leave the others waiting in an all-reduce).
  shard_size_ = (dataset_.size() + world_size_ - 1) / world_size_;
}

void DataLoader::SetEpoch(int64_t epoch) { epoch_ = epoch; }

std::vector<int64_t> DataLoader::ShardIndices() const {
  const int64_t n = dataset_.size();
  std::vector<int64_t> order(static_cast<size_t>(n));
  if (shuffle_) {
    // The same generator and seed as DistributedSampler (seed + epoch): every worker draws the
    // same permutation without talking to the others.
    auto generator = at::detail::createCPUGenerator(seed_ + static_cast<uint64_t>(epoch_));
    torch::Tensor perm = torch::randperm(n, generator, torch::kLong).contiguous();
    std::memcpy(order.data(), perm.data_ptr<int64_t>(), order.size() * sizeof(int64_t));
  } else {
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  // Pad to a multiple of the world size by wrapping around to the start.
  const int64_t total = shard_size_ * world_size_;
  std::vector<int64_t> shard;
  shard.reserve(static_cast<size_t>(shard_size_));
  for (int64_t i = rank_; i < total; i += world_size_) shard.push_back(order[i % n]);
  return shard;
}

int64_t DataLoader::NumBatches() const {
  return drop_last_ ? shard_size_ / batch_size_ : (shard_size_ + batch_size_ - 1) / batch_size_;
}

std::vector<Batch> DataLoader::Batches() const {
  const std::vector<int64_t> shard = ShardIndices();
  const int64_t num_batches = NumBatches();
  std::vector<Batch> batches;
  batches.reserve(static_cast<size_t>(num_batches));
  for (int64_t b = 0; b < num_batches; ++b) {
    const int64_t begin = b * batch_size_;
    const int64_t count = std::min(batch_size_, shard_size_ - begin);
    torch::Tensor index =
        torch::from_blob(const_cast<int64_t*>(shard.data() + begin), {count}, torch::kLong);
    batches.push_back({dataset_.inputs.index_select(0, index).to(device_),
                       dataset_.targets.index_select(0, index).to(device_)});
  }
  return batches;
}

// ---- Fashion-MNIST ------------------------------------------------------------------------

namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr int64_t kSide = 28;
constexpr int kClasses = 10;
// Mean and standard deviation of the training pixels scaled to [0, 1].
constexpr double kPixelMean = 0.2860;
constexpr double kPixelStd = 0.3530;

/// `dir/name.gz` if it exists, else `dir/name` if that exists; else throws the not-found
/// error naming the compressed path (what the Debian package ships).
std::string FindIdxFile(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path gz = fs::path(dir) / (name + ".gz");
  const fs::path raw = fs::path(dir) / name;
  std::error_code ec;
  if (fs::is_regular_file(gz, ec)) return gz.string();
  if (fs::is_regular_file(raw, ec)) return raw.string();
  throw Error("Fashion-MNIST not found: " + gz.string() +
              " (install the Debian package dataset-fashion-mnist, or pass the directory that "
              "holds the IDX files)");
}

/// The whole content of `path`, decompressed if it is gzip (zlib reads plain files as is).
std::vector<uint8_t> ReadMaybeGzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw Error("Fashion-MNIST: cannot open " + path + ": " + std::strerror(errno));
  }
  std::vector<uint8_t> data;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    const size_t old_size = data.size();
    data.resize(old_size + kChunk);
    const int got = gzread(file, data.data() + old_size, static_cast<unsigned>(kChunk));
    if (got < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      throw Error("Fashion-MNIST: " + path + " is corrupt or unreadable (zlib: " + message +
                  "); reinstall dataset-fashion-mnist or replace the file");
    }
    data.resize(old_size + static_cast<size_t>(got));
    if (got == 0) break;
  }
  // A truncated gzip stream ends in a short read without an error from gzread.
  int code = Z_OK;
  std::string message = gzerror(file, &code);
  gzclose(file);
  if (code != Z_OK) {
    throw Error("Fashion-MNIST: " + path + " is corrupt or truncated (zlib: " + message +
                "); reinstall dataset-fashion-mnist or replace the file");
  }
  return data;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string Hex(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

/// Checks an IDX header: at least `header_bytes` long, the expected magic number.
void CheckHeader(const std::vector<uint8_t>& data, const std::string& path, uint32_t magic,
                 size_t header_bytes, const char* kind) {
  if (data.size() < header_bytes) {
    throw Error("Fashion-MNIST: " + path + " has " + std::to_string(data.size()) +
                " bytes, too short for an IDX " + kind + " header (" +
                std::to_string(header_bytes) + " bytes)");
  }
  const uint32_t found = BigEndian32(data.data());
  if (found != magic) {
    throw Error("Fashion-MNIST: " + path + " is not an IDX " + kind + " file: magic number " +
                Hex(found) + ", expected " + Hex(magic));
  }
}

/// Checks that the payload after the header is exactly `expected` bytes.
void CheckPayload(const std::vector<uint8_t>& data, const std::string& path, size_t header_bytes,
                  uint64_t expected, const std::string& what) {
  const uint64_t payload = data.size() - header_bytes;
  if (payload != expected) {
    throw Error("Fashion-MNIST: " + path + " holds " + std::to_string(payload) +
                " bytes of data, but its header promises " + what + " = " +
                std::to_string(expected) + " bytes (truncated or corrupt file)");
  }
}

}  // namespace

TensorDataset LoadFashionMnist(const std::string& split, const std::string& dir) {
  if (split != "train" && split != "test") {
    throw Error("LoadFashionMnist: split is \"" + split + "\"; use \"train\" or \"test\"");
  }
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::string images_path = FindIdxFile(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = FindIdxFile(dir, prefix + "-labels-idx1-ubyte");

  // Images: magic, count, rows, columns, then count * rows * columns pixels (row-major).
  const std::vector<uint8_t> images = ReadMaybeGzip(images_path);
  CheckHeader(images, images_path, kImagesMagic, 16, "image");
  const int64_t num_images = BigEndian32(images.data() + 4);
  const int64_t rows = BigEndian32(images.data() + 8);
  const int64_t cols = BigEndian32(images.data() + 12);
  if (rows != kSide || cols != kSide) {
    throw Error("Fashion-MNIST: " + images_path + " holds " + std::to_string(rows) + "x" +
                std::to_string(cols) + " images; Fashion-MNIST's are 28x28");
  }
  CheckPayload(images, images_path, 16, static_cast<uint64_t>(num_images * rows * cols),
               std::to_string(num_images) + " x 28 x 28");

  // Labels: magic, count, then count bytes.
  const std::vector<uint8_t> labels = ReadMaybeGzip(labels_path);
  CheckHeader(labels, labels_path, kLabelsMagic, 8, "label");
  const int64_t num_labels = BigEndian32(labels.data() + 4);
  CheckPayload(labels, labels_path, 8, static_cast<uint64_t>(num_labels),
               std::to_string(num_labels) + " labels");
  if (num_labels != num_images) {
    throw Error("Fashion-MNIST: " + images_path + " holds " + std::to_string(num_images) +
                " images but " + labels_path + " holds " + std::to_string(num_labels) +
                " labels; the two files must come from the same split");
  }
  for (int64_t i = 0; i < num_labels; ++i) {
    if (labels[8 + i] >= kClasses) {
      throw Error("Fashion-MNIST: " + labels_path + ": label " + std::to_string(labels[8 + i]) +
                  " of sample " + std::to_string(i) + " is outside 0..9");
    }
  }

  TensorDataset dataset;
  // from_blob borrows the buffer; .to() copies, so the result owns its memory.
  dataset.inputs = torch::from_blob(const_cast<uint8_t*>(images.data() + 16),
                                    {num_images, 1, rows, cols}, torch::kUInt8)
                       .to(torch::kFloat32)
                       .div_(255.0)
                       .sub_(kPixelMean)
                       .div_(kPixelStd);
  dataset.targets =
      torch::from_blob(const_cast<uint8_t*>(labels.data() + 8), {num_labels}, torch::kUInt8)
          .to(torch::kInt64);
  return dataset;
}

}  // namespace prism::train
