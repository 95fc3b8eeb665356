// DataLoader sharding (DistributedSampler semantics) and the Fashion-MNIST reader.
#include "prism/train/data.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "prism/errors.h"

namespace prism::train {
namespace {

namespace fs = std::filesystem;

/// N samples whose target is their own index, so a batch tells which samples it holds. The
/// inputs carry the index too, with trailing dimensions, to check that rows stay together.
TensorDataset Indexed(int64_t n) {
  TensorDataset d;
  d.targets = torch::arange(n, torch::kLong);
  d.inputs = d.targets.to(torch::kFloat32).view({n, 1, 1, 1}).expand({n, 1, 2, 3}).contiguous();
  return d;
}

/// The sample indices a loader hands out this epoch, in order; checks inputs match targets.
std::vector<int64_t> Served(const DataLoader& loader) {
  std::vector<int64_t> out;
  for (const Batch& b : loader.Batches()) {
    EXPECT_EQ(b.inputs.size(0), b.targets.size(0));
    for (int64_t i = 0; i < b.targets.size(0); ++i) {
      const int64_t index = b.targets[i].item<int64_t>();
      EXPECT_TRUE(torch::all(b.inputs[i] == static_cast<float>(index)).item<bool>())
          << "inputs row does not belong to sample " << index;
      out.push_back(index);
    }
  }
  return out;
}

std::vector<std::vector<int64_t>> AllShards(int64_t n, int world, bool shuffle, uint64_t seed,
                                            int64_t epoch, int64_t batch_size = 4) {
  std::vector<std::vector<int64_t>> shards;
  for (int rank = 0; rank < world; ++rank) {
    DataLoader loader(Indexed(n), batch_size, shuffle, seed, rank, world);
    loader.SetEpoch(epoch);
    shards.push_back(Served(loader));
  }
  return shards;
}

/// The global order the shards were cut from: shard r holds order[r], order[r + world], ...
std::vector<int64_t> Interleave(const std::vector<std::vector<int64_t>>& shards) {
  std::vector<int64_t> order;
  for (size_t i = 0; i < shards[0].size(); ++i) {
    for (const auto& shard : shards) order.push_back(shard[i]);
  }
  return order;
}

template <typename F>
void ExpectErrorMentioning(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected prism::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const auto& fragment : fragments) {
      EXPECT_NE(what.find(fragment), std::string::npos)
          << "error \"" << what << "\" does not mention \"" << fragment << "\"";
    }
  }
}

// ---- Sharding -----------------------------------------------------------------------------

TEST(DataLoader, ShardsAreEqualSizedAndCoverEveryIndex) {
  for (int world : {2, 3}) {
    for (int64_t n : {12, 10, 7, 2}) {  // divisible by both, by 2 only, by neither, < world
      for (bool shuffle : {false, true}) {
        SCOPED_TRACE("world " + std::to_string(world) + " n " + std::to_string(n) +
                     (shuffle ? " shuffled" : " in order"));
        auto shards = AllShards(n, world, shuffle, /*seed=*/7, /*epoch=*/3);
        const int64_t shard_size = (n + world - 1) / world;
        for (const auto& shard : shards) EXPECT_EQ(static_cast<int64_t>(shard.size()), shard_size);
        const std::vector<int64_t> order = Interleave(shards);
        // The first n entries are a permutation of 0..n-1: each sample exactly once.
        std::vector<int64_t> head(order.begin(), order.begin() + n);
        std::sort(head.begin(), head.end());
        std::vector<int64_t> all(n);
        std::iota(all.begin(), all.end(), int64_t{0});
        EXPECT_EQ(head, all);
        // The padding repeats the order from its start, as DistributedSampler does.
        for (size_t i = n; i < order.size(); ++i) EXPECT_EQ(order[i], order[i % n]);
        if (n % world == 0) {
          std::set<int64_t> seen;
          for (const auto& shard : shards) seen.insert(shard.begin(), shard.end());
          EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << "shards overlap";
        }
      }
    }
  }
}

TEST(DataLoader, UnshuffledShardsAreStridedAndPaddedFromTheStart) {
  auto shards = AllShards(7, 3, /*shuffle=*/false, 0, 0);
  EXPECT_EQ(shards[0], (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(shards[1], (std::vector<int64_t>{1, 4, 0}));
  EXPECT_EQ(shards[2], (std::vector<int64_t>{2, 5, 1}));

  DataLoader loader(Indexed(10), 3, /*shuffle=*/false, 0, /*rank=*/1, /*world=*/2);
  EXPECT_EQ(Served(loader), (std::vector<int64_t>{1, 3, 5, 7, 9}));
  loader.SetEpoch(5);  // without shuffle the epoch changes nothing
  EXPECT_EQ(Served(loader), (std::vector<int64_t>{1, 3, 5, 7, 9}));
}

TEST(DataLoader, ShuffleDependsOnlyOnSeedAndEpoch) {
  const int64_t n = 60;
  // Built independently (as on different workers), the same seed and epoch give the same
  // global order, and it is a real shuffle.
  auto first = Interleave(AllShards(n, 3, true, /*seed=*/42, /*epoch=*/1));
  auto again = Interleave(AllShards(n, 3, true, 42, 1));
  EXPECT_EQ(first, again);
  std::vector<int64_t> identity(n);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_NE(first, identity);

  auto next_epoch = Interleave(AllShards(n, 3, true, 42, 2));
  auto other_seed = Interleave(AllShards(n, 3, true, 43, 1));
  EXPECT_NE(first, next_epoch);
  EXPECT_NE(first, other_seed);

  // One loader moved through epochs and back reproduces each epoch's order.
  DataLoader loader(Indexed(n), 8, true, 42, /*rank=*/0, /*world=*/3);
  loader.SetEpoch(1);
  const auto epoch1 = Served(loader);
  loader.SetEpoch(2);
  EXPECT_NE(Served(loader), epoch1);
  loader.SetEpoch(1);
  EXPECT_EQ(Served(loader), epoch1);
}

// ---- Batches ------------------------------------------------------------------------------

TEST(DataLoader, BatchesKeepTrailingDimensionsAndEndWithThePartialBatch) {
  DataLoader loader(Indexed(10), 4, /*shuffle=*/false, 0, 0, 1);
  auto batches = loader.Batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(loader.NumBatches(), 3);
  EXPECT_EQ(loader.ShardSize(), 10);
  EXPECT_EQ(batches[0].inputs.sizes(), (std::vector<int64_t>{4, 1, 2, 3}));
  EXPECT_EQ(batches[1].targets.sizes(), (std::vector<int64_t>{4}));
  EXPECT_EQ(batches[2].inputs.sizes(), (std::vector<int64_t>{2, 1, 2, 3}));
  EXPECT_EQ(batches[2].targets.sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(batches[0].inputs.dtype(), torch::kFloat32);
  EXPECT_EQ(batches[0].targets.dtype(), torch::kLong);
  EXPECT_TRUE(batches[0].inputs.device().is_cpu());

  DataLoader dropping(Indexed(10), 4, false, 0, 0, 1, torch::kCPU, /*drop_last=*/true);
  auto kept = dropping.Batches();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(dropping.NumBatches(), 2);
  EXPECT_EQ(Served(dropping), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(DataLoader, NumBatchesMatchesBatches) {
  for (int64_t n : {1, 5, 16, 17}) {
    for (int world : {1, 2, 3}) {
      for (int64_t batch : {1, 4, 16, 100}) {
        for (bool drop_last : {false, true}) {
          DataLoader loader(Indexed(n), batch, true, 1, world - 1, world, torch::kCPU, drop_last);
          const auto batches = loader.Batches();
          EXPECT_EQ(static_cast<int64_t>(batches.size()), loader.NumBatches())
              << "n " << n << " world " << world << " batch " << batch << " drop_last "
              << drop_last;
          int64_t samples = 0;
          for (const auto& b : batches) samples += b.targets.size(0);
          const int64_t shard = (n + world - 1) / world;
          EXPECT_EQ(samples, drop_last ? shard / batch * batch : shard);
        }
      }
    }
  }
}

TEST(DataLoader, RejectsBadArguments) {
  ExpectErrorMentioning([] { DataLoader(Indexed(8), 0, false, 0, 0, 1); }, {"batch_size", "0"});
  ExpectErrorMentioning([] { DataLoader(Indexed(8), 4, false, 0, 2, 2); },
                        {"rank 2", "world size 2"});
  ExpectErrorMentioning([] { DataLoader(Indexed(8), 4, false, 0, -1, 2); }, {"rank -1"});
  ExpectErrorMentioning([] { DataLoader(Indexed(8), 4, false, 0, 0, 0); }, {"world size 0"});
  ExpectErrorMentioning(
      [] {
        TensorDataset d{torch::zeros({8, 3}), torch::zeros({7}, torch::kLong)};
        DataLoader(d, 4, false, 0, 0, 1);
      },
      {"[8, 3]", "[7]", "first dimension"});
  ExpectErrorMentioning([] { DataLoader(TensorDataset{}, 4, false, 0, 0, 1); }, {"undefined"});
  ExpectErrorMentioning(
      [] {
        TensorDataset d{torch::zeros({0, 3}), torch::zeros({0}, torch::kLong)};
        DataLoader(d, 4, false, 0, 0, 1);
      },
      {"empty"});
}

// ---- Fashion-MNIST ------------------------------------------------------------------------

bool HaveFashionMnist() {
  return fs::exists(fs::path(kFashionMnistDir) / "train-images-idx3-ubyte.gz") ||
         fs::exists(fs::path(kFashionMnistDir) / "train-images-idx3-ubyte");
}

void CheckSplit(const std::string& split, int64_t expected_size) {
  TensorDataset data = LoadFashionMnist(split);
  ASSERT_EQ(data.size(), expected_size);
  EXPECT_EQ(data.inputs.sizes(), (std::vector<int64_t>{expected_size, 1, 28, 28}));
  EXPECT_EQ(data.inputs.dtype(), torch::kFloat32);
  EXPECT_EQ(data.targets.sizes(), (std::vector<int64_t>{expected_size}));
  EXPECT_EQ(data.targets.dtype(), torch::kLong);
  EXPECT_GE(data.targets.min().item<int64_t>(), 0);
  EXPECT_LE(data.targets.max().item<int64_t>(), 9);
  // Fashion-MNIST is balanced: every class has a tenth of the samples.
  auto counts = torch::bincount(data.targets, {}, 10);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(counts[c].item<int64_t>(), expected_size / 10) << "class " << c;
  }
  // Normalised with the training set's mean and std: about 0 and 1.
  EXPECT_NEAR(data.inputs.mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR(data.inputs.std().item<double>(), 1.0, 0.05);
  // Pixels were bytes: the extremes are 0 and 255 after undoing the normalisation.
  EXPECT_NEAR(data.inputs.min().item<double>(), (0.0 - 0.2860) / 0.3530, 1e-5);
  EXPECT_NEAR(data.inputs.max().item<double>(), (1.0 - 0.2860) / 0.3530, 1e-5);
}

TEST(FashionMnist, TrainSplit) {
  if (!HaveFashionMnist()) GTEST_SKIP() << kFashionMnistDir << " missing (dataset-fashion-mnist)";
  CheckSplit("train", 60000);
}

TEST(FashionMnist, TestSplit) {
  if (!HaveFashionMnist()) GTEST_SKIP() << kFashionMnistDir << " missing (dataset-fashion-mnist)";
  CheckSplit("test", 10000);
}

TEST(FashionMnist, MissingDirectorySaysWhatToInstall) {
  ExpectErrorMentioning([] { LoadFashionMnist("train", "/nonexistent/fashion"); },
                        {"Fashion-MNIST not found", "/nonexistent/fashion/train-images-idx3-ubyte",
                         "dataset-fashion-mnist"});
}

TEST(FashionMnist, RejectsAnUnknownSplit) {
  ExpectErrorMentioning([] { LoadFashionMnist("validation"); },
                        {"\"validation\"", "\"train\" or \"test\""});
}

// A scratch directory of hand-made IDX files.
class IdxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("prism_data_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::vector<uint8_t> Idx(uint32_t magic, const std::vector<uint32_t>& dims,
                                  const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> bytes;
    auto put = [&](uint32_t v) {
      for (int shift = 24; shift >= 0; shift -= 8)
        bytes.push_back(static_cast<uint8_t>(v >> shift));
    };
    put(magic);
    for (uint32_t d : dims) put(d);
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    return bytes;
  }
  static std::vector<uint8_t> Images(uint32_t n, uint32_t magic = 0x803) {
    std::vector<uint8_t> pixels(n * 28 * 28);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i % 256);
    return Idx(magic, {n, 28, 28}, pixels);
  }
  static std::vector<uint8_t> Labels(uint32_t n, uint32_t magic = 0x801) {
    std::vector<uint8_t> labels(n);
    for (uint32_t i = 0; i < n; ++i) labels[i] = static_cast<uint8_t>(i % 10);
    return Idx(magic, {n}, labels);
  }
  std::string WriteGz(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / (name + ".gz")).string();
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr) << path;
    EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    EXPECT_EQ(gzclose(f), Z_OK);
    return path;
  }
  std::string WriteRaw(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  std::string Dir() const { return dir_.string(); }

  fs::path dir_;
};

TEST_F(IdxFiles, ReadsUncompressedFilesAndNormalises) {
  WriteRaw("t10k-images-idx3-ubyte", Images(3));
  WriteRaw("t10k-labels-idx1-ubyte", Labels(3));
  TensorDataset data = LoadFashionMnist("test", Dir());
  ASSERT_EQ(data.size(), 3);
  EXPECT_EQ(data.targets[2].item<int64_t>(), 2);
  // Pixel 255 of the first image sits at row 9, column 3 (index 255 in row-major order).
  EXPECT_NEAR(data.inputs[0][0][9][3].item<double>(), (1.0 - 0.2860) / 0.3530, 1e-5);
  EXPECT_NEAR(data.inputs[0][0][0][0].item<double>(), -0.2860 / 0.3530, 1e-5);
}

TEST_F(IdxFiles, ReadsGzipFiles) {
  WriteGz("train-images-idx3-ubyte", Images(5));
  WriteGz("train-labels-idx1-ubyte", Labels(5));
  TensorDataset data = LoadFashionMnist("train", Dir());
  ASSERT_EQ(data.size(), 5);
  EXPECT_EQ(data.targets[4].item<int64_t>(), 4);
}

TEST_F(IdxFiles, WrongMagicNamesTheFile) {
  const std::string images = WriteGz("train-images-idx3-ubyte", Images(2, /*magic=*/0x802));
  WriteGz("train-labels-idx1-ubyte", Labels(2));
  ExpectErrorMentioning([&] { LoadFashionMnist("train", Dir()); },
                        {images, "magic number 0x00000802", "expected 0x00000803"});
}

TEST_F(IdxFiles, LabelFileWithImageMagicIsRejected) {
  WriteGz("train-images-idx3-ubyte", Images(2));
  const std::string labels = WriteGz("train-labels-idx1-ubyte", Labels(2, /*magic=*/0x803));
  ExpectErrorMentioning([&] { LoadFashionMnist("train", Dir()); },
                        {labels, "not an IDX label file"});
}

TEST_F(IdxFiles, TruncatedPixelsAreRejected) {
  auto bytes = Images(2);
  bytes.resize(bytes.size() - 100);
  const std::string images = WriteGz("train-images-idx3-ubyte", bytes);
  WriteGz("train-labels-idx1-ubyte", Labels(2));
  ExpectErrorMentioning([&] { LoadFashionMnist("train", Dir()); },
                        {images, "1468 bytes", "1568 bytes", "truncated"});
}

TEST_F(IdxFiles, TooShortForAHeader) {
  const std::string images = WriteGz("train-images-idx3-ubyte", {0, 0, 8});
  WriteGz("train-labels-idx1-ubyte", Labels(2));
  ExpectErrorMentioning([&] { LoadFashionMnist("train", Dir()); }, {images, "too short"});
}

TEST_F(IdxFiles, CountsMustAgree) {
  WriteGz("train-images-idx3-ubyte", Images(3));
  WriteGz("train-labels-idx1-ubyte", Labels(2));
  ExpectErrorMentioning([&] { LoadFashionMnist("train", Dir()); }, {"3 images", "2 labels"});
}

TEST_F(IdxFiles, LabelsOutsideTheTenClassesAreRejected) {
  WriteGz("train-images-idx3-ubyte", Images(2));
  const std::string labels = WriteGz("train-labels-idx1-ubyte", Idx(0x801, {2}, {1, 12}));
  ExpectErrorMentioning([&] { LoadFashionMnist("train", Dir()); },
                        {labels, "label 12", "sample 1"});
}

TEST_F(IdxFiles, WrongImageSizeIsRejected) {
  const std::string images =
      WriteGz("train-images-idx3-ubyte", Idx(0x803, {1, 32, 32}, std::vector<uint8_t>(32 * 32)));
  WriteGz("train-labels-idx1-ubyte", Labels(1));
  ExpectErrorMentioning([&] { LoadFashionMnist("train", Dir()); }, {images, "32x32"});
}

TEST_F(IdxFiles, CorruptGzipStreamIsRejected) {
  const std::string images = WriteGz("train-images-idx3-ubyte", Images(50));
  WriteGz("train-labels-idx1-ubyte", Labels(50));
  // Cut the compressed stream in half.
  fs::resize_file(images, fs::file_size(images) / 2);
  ExpectErrorMentioning([&] { LoadFashionMnist("train", Dir()); }, {images, "zlib"});
}

TEST_F(IdxFiles, MissingLabelFileIsNamed) {
  WriteGz("train-images-idx3-ubyte", Images(2));
  ExpectErrorMentioning([&] { LoadFashionMnist("train", Dir()); },
                        {"train-labels-idx1-ubyte", "dataset-fashion-mnist"});
}

}  // namespace
}  // namespace prism::train
