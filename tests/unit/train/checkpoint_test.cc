// Train's HDF5 state dicts without an MPI launcher (SaveStateDict, LoadStateDict,
// ReadAttributes), and their check against a committed checkpoint's record. The checkpoint
// store itself is tested in tests/unit/checkpoint/checkpoint_store_test.cc.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "prism/checkpoint_store.h"
#include "prism/train/checkpoint.h"
#include "../../common/test_util.h"
#include "../checkpoint/small_fs.h"

namespace {

namespace fs = std::filesystem;
using prism::CheckpointStore;
using prism::train::Attribute;
using prism::train::Checkpoint;
using prism::train::CheckpointConfig;
using prism::train::LoadStateDict;
using prism::train::Metrics;
using prism::train::ReadAttributes;
using prism::train::SaveStateDict;
using prism_test::DamageMiddle;
using prism_test::ErrorOf;
using prism_test::SmallFs;
using prism_test::TempDir;
using prism_test::WriteText;

// ---- A small CNN with parameters and buffers at nested paths ----------------------------

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int classes = 3)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(4))),
        fc(register_module("fc", torch::nn::Linear(4 * 6 * 6, classes))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(bn1(conv1(x)));
    return fc(x.flatten(1));
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

void TrainStep(Net& net, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
               const torch::Tensor& y) {
  optimizer.zero_grad();
  torch::Tensor loss = torch::mse_loss(net->forward(x), y);
  loss.backward();
  optimizer.step();
}

/// Every parameter and buffer of `a` equals (torch::equal) the one of `b` at the same path.
void ExpectSameState(const torch::nn::Module& a, const torch::nn::Module& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    ASSERT_NE(pb.find(item.key()), nullptr) << item.key();
    EXPECT_TRUE(torch::equal(item.value(), *pb.find(item.key()))) << item.key();
  }
  auto ba = a.named_buffers(), bb = b.named_buffers();
  ASSERT_EQ(ba.size(), bb.size());
  for (const auto& item : ba) {
    ASSERT_NE(bb.find(item.key()), nullptr) << item.key();
    EXPECT_TRUE(torch::equal(item.value(), *bb.find(item.key()))) << item.key();
  }
}

torch::optim::AdamOptions AdamOpts() { return torch::optim::AdamOptions(1e-2); }

// ---- HDF5 state dicts --------------------------------------------------------------------

TEST(StateDict, RoundTripRestoresModelAndAdamState) {
  TempDir dir;
  const std::string file = dir / "model.h5";
  torch::manual_seed(0);
  torch::Tensor x = torch::randn({5, 1, 8, 8}), y = torch::randn({5, 3});

  Net a;
  a->train();
  torch::optim::Adam opt_a(a->parameters(), AdamOpts());
  TrainStep(a, opt_a, x, y);
  TrainStep(a, opt_a, x, y);
  // The forward passes in train mode moved the running statistics off their initial values.
  ASSERT_FALSE(torch::equal(a->bn1->running_mean, torch::zeros({4})));
  ASSERT_EQ(a->bn1->num_batches_tracked.item<int64_t>(), 2);
  SaveStateDict(file, *a, &opt_a);
  EXPECT_FALSE(fs::exists(file + ".tmp"));

  torch::manual_seed(42);  // different initial weights, so a no-op load would be caught
  Net b;
  b->train();
  torch::optim::Adam opt_b(b->parameters(), AdamOpts());
  ASSERT_FALSE(torch::equal(a->conv1->weight, b->conv1->weight));
  LoadStateDict(file, *b, &opt_b);
  ExpectSameState(*a, *b);

  // Adam's moments and step count came along: one more step moves both models alike (a
  // fresh Adam state would take a differently sized first step).
  TrainStep(a, opt_a, x, y);
  TrainStep(b, opt_b, x, y);
  ExpectSameState(*a, *b);

  Net c;
  torch::optim::Adam opt_c(c->parameters(), AdamOpts());
  LoadStateDict(file, *c);  // without the optimizer: parameters only
  TrainStep(c, opt_c, x, y);
  EXPECT_FALSE(torch::equal(a->fc->weight, c->fc->weight));
}

TEST(StateDict, AttributesRoundTrip) {
  TempDir dir;
  const std::string file = dir / "model.h5";
  Net net;
  SaveStateDict(file, *net, nullptr,
                {{"epoch", int64_t{7}},
                 {"step", -3},
                 {"lr", 0.1 + 0.2},
                 {"model", std::string("cnn \"small\" é")}});
  std::map<std::string, Attribute> attrs = ReadAttributes(file);
  ASSERT_EQ(attrs.count("epoch"), 1u);
  EXPECT_EQ(std::get<int64_t>(attrs.at("epoch")), 7);
  EXPECT_EQ(std::get<int64_t>(attrs.at("step")), -3);
  EXPECT_EQ(std::get<double>(attrs.at("lr")), 0.1 + 0.2);  // every bit
  EXPECT_EQ(std::get<std::string>(attrs.at("model")), "cnn \"small\" é");
  EXPECT_EQ(std::get<std::string>(attrs.at("format")), "prism-state-dict-1");
  EXPECT_FALSE(std::get<std::string>(attrs.at("prism_version")).empty());
  EXPECT_EQ(attrs.size(), 6u);

  std::string error = ErrorOf([&] { SaveStateDict(file, *net, nullptr, {{"format", 1}}); });
  EXPECT_NE(error.find("\"format\""), std::string::npos) << error;
}

TEST(StateDict, StoresNativeTypesScalarsAndConvertedDtypes) {
  struct Mixed : torch::nn::Module {
    Mixed() {
      weight = register_parameter("weight", torch::randn({2, 3}, torch::kDouble));
      half = register_buffer("half", torch::randn({4}).to(torch::kHalf));
      bf16 = register_buffer("bf16", torch::randn({4}).to(torch::kBFloat16));
      mask = register_buffer("mask", torch::tensor({true, false, true}));
      count = register_buffer("count", torch::tensor(int64_t{5}));  // 0-dim
      ids = register_buffer("ids", torch::arange(6, torch::kInt).reshape({2, 3}));
      empty = register_buffer("empty", torch::zeros({0, 3}));
    }
    torch::Tensor weight, half, bf16, mask, count, ids, empty;
  };
  TempDir dir;
  const std::string file = dir / "mixed.h5";
  Mixed a;
  SaveStateDict(file, a);

  // What is in the file, seen through the HDF5 C API as h5py would see it.
  {
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    auto type_of = [&](const char* path, hid_t native) {
      hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
      hid_t t = H5Dget_type(d);
      bool same = H5Tequal(t, native) > 0;
      H5Tclose(t);
      H5Dclose(d);
      return same;
    };
    EXPECT_TRUE(type_of("/model/weight", H5T_NATIVE_DOUBLE));
    EXPECT_TRUE(type_of("/model/half", H5T_NATIVE_FLOAT));
    EXPECT_TRUE(type_of("/model/mask", H5T_NATIVE_UINT8));
    EXPECT_TRUE(type_of("/model/count", H5T_NATIVE_INT64));
    EXPECT_TRUE(type_of("/model/ids", H5T_NATIVE_INT32));
    hid_t d = H5Dopen2(f, "/model/count", H5P_DEFAULT);
    hid_t s = H5Dget_space(d);
    EXPECT_EQ(H5Sget_simple_extent_type(s), H5S_SCALAR);
    H5Sclose(s);
    H5Dclose(d);
    EXPECT_GT(H5Aexists_by_name(f, "/model/half", "torch_dtype", H5P_DEFAULT), 0);
    EXPECT_GT(H5Aexists_by_name(f, "/model/bf16", "torch_dtype", H5P_DEFAULT), 0);
    EXPECT_EQ(H5Aexists_by_name(f, "/model/weight", "torch_dtype", H5P_DEFAULT), 0);
    H5Fclose(f);
  }

  Mixed b;
  {
    torch::NoGradGuard no_grad;
    b.weight.zero_();
    b.half.zero_();
    b.bf16.zero_();
    b.mask.fill_(false);
    b.count.fill_(0);
    b.ids.zero_();
  }
  LoadStateDict(file, b);
  EXPECT_TRUE(torch::equal(a.weight, b.weight));
  EXPECT_EQ(b.half.scalar_type(), torch::kHalf);  // loaded into the module's own dtype
  EXPECT_TRUE(torch::equal(a.half, b.half));       // half -> float32 -> half is exact
  EXPECT_EQ(b.bf16.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(a.bf16, b.bf16));
  EXPECT_TRUE(torch::equal(a.mask, b.mask));
  EXPECT_EQ(b.count.dim(), 0);
  EXPECT_EQ(b.count.item<int64_t>(), 5);
  EXPECT_TRUE(torch::equal(a.ids, b.ids));
}

TEST(StateDict, ShapeMismatchNamesTheTensorAndLeavesTheModuleAlone) {
  TempDir dir;
  const std::string file = dir / "model.h5";
  Net three(3);
  SaveStateDict(file, *three);

  Net five(5);
  torch::Tensor before = five->conv1->weight.clone();
  std::string error = ErrorOf([&] { LoadStateDict(file, *five); });
  EXPECT_NE(error.find(file), std::string::npos) << error;
  EXPECT_NE(error.find("\"fc.weight\""), std::string::npos) << error;
  EXPECT_NE(error.find("expects shape [5, 144]"), std::string::npos) << error;
  EXPECT_NE(error.find("holds [3, 144]"), std::string::npos) << error;
  EXPECT_NE(error.find("\"fc.bias\""), std::string::npos) << error;
  // conv1 matched, but nothing is loaded when anything does not.
  EXPECT_TRUE(torch::equal(before, five->conv1->weight));
}

TEST(StateDict, MissingTensorIsNamed) {
  struct Bigger : NetImpl {
    Bigger() { extra = register_buffer("extra", torch::ones({2})); }
    torch::Tensor extra;
  };
  TempDir dir;
  const std::string file = dir / "model.h5";
  Net net;
  SaveStateDict(file, *net);
  Bigger bigger;
  std::string error = ErrorOf([&] { LoadStateDict(file, bigger); });
  EXPECT_NE(error.find("buffer \"extra\" (shape [2]) is missing"), std::string::npos) << error;
}

TEST(StateDict, MissingAndForeignFilesGiveClearErrors) {
  TempDir dir;
  Net net;
  const std::string missing = dir / "nope.h5";
  std::string error = ErrorOf([&] { LoadStateDict(missing, *net); });
  EXPECT_NE(error.find("no checkpoint file at " + missing), std::string::npos) << error;
  error = ErrorOf([&] { ReadAttributes(missing); });
  EXPECT_NE(error.find("no checkpoint file at " + missing), std::string::npos) << error;

  const std::string text = dir / "notes.h5";
  WriteText(text, "this is not HDF5\n");
  error = ErrorOf([&] { LoadStateDict(text, *net); });
  EXPECT_NE(error.find(text + " is not an HDF5 file"), std::string::npos) << error;

  error = ErrorOf([&] { SaveStateDict(dir / "no/such/dir/model.h5", *net); });
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
}

TEST(StateDict, OptimizerTypeMismatchIsRefused) {
  TempDir dir;
  const std::string file = dir / "model.h5";
  Net net;
  torch::optim::Adam adam(net->parameters(), AdamOpts());
  SaveStateDict(file, *net, &adam);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  std::string error = ErrorOf([&] { LoadStateDict(file, *net, &sgd); });
  EXPECT_NE(error.find("holds Adam optimizer state"), std::string::npos) << error;
  EXPECT_NE(error.find("SGD"), std::string::npos) << error;
}

TEST(StateDict, FailedSaveKeepsThePreviousFile) {
  struct Complex : torch::nn::Module {
    Complex() { register_buffer("z", torch::zeros({2}, torch::kComplexFloat)); }
  };
  TempDir dir;
  const std::string file = dir / "model.h5";
  Net net;
  SaveStateDict(file, *net, nullptr, {{"epoch", 1}});
  Complex bad;
  std::string error = ErrorOf([&] { SaveStateDict(file, bad, nullptr, {{"epoch", 2}}); });
  EXPECT_NE(error.find("\"z\""), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  EXPECT_EQ(std::get<int64_t>(ReadAttributes(file).at("epoch")), 1);

  SaveStateDict(file, *net, nullptr, {{"epoch", 3}});  // a good save replaces it
  EXPECT_EQ(std::get<int64_t>(ReadAttributes(file).at("epoch")), 3);
}

TEST(StateDict, Hdf5FailuresBecomeErrorsNamingTheFile) {
  TempDir dir;
  const std::string file = dir / "model.h5";
  fs::create_directory(file + ".tmp");  // where the temporary file would go
  Net net;
  std::string error = ErrorOf([&] { SaveStateDict(file, *net); });
  EXPECT_EQ(error.rfind(file + ": cannot create the temporary file " + file + ".tmp", 0), 0u)
      << error;
  EXPECT_NE(error.find("Is a directory"), std::string::npos) << error;  // HDF5's own cause
  EXPECT_FALSE(fs::exists(file));
}

// A state dict that does not fit says "no space left" with the room left and the room it
// needed, and the file saved before is still there, whole.
TEST(StateDict, ASaveThatDoesNotFitSaysNoSpaceLeftAndKeepsThePreviousFile) {
  TempDir tmp;
  SmallFs disk(tmp / "disk", 1 << 20);
  if (!disk.Mounted()) GTEST_SKIP() << SmallFs::kWhySkipped;
  const std::string file = disk / "model.h5";
  Net net;
  SaveStateDict(file, *net, nullptr, {{"epoch", 1}});
  torch::nn::Linear big(512, 1024);  // 2 MiB of float32 weights
  torch::optim::SGD sgd(big->parameters(), 0.1);
  std::string error = ErrorOf([&] { SaveStateDict(file, *big, &sgd, {{"epoch", 2}}); });
  EXPECT_EQ(error.rfind("cannot save the state dict " + file + ": no space left on " +
                            disk.path() + ": ",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find(" free, the state dict needs about 2.0 MiB"), std::string::npos) << error;
  EXPECT_NE(error.find("a file already there is unchanged"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  EXPECT_EQ(std::get<int64_t>(ReadAttributes(file).at("epoch")), 1);
  Net loaded;
  LoadStateDict(file, *loaded);
}

/// Output of a shell command (stdout and stderr).
std::string RunShell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

TEST(StateDict, ReadableByH5lsAndH5dump) {
  if (std::system("command -v h5ls >/dev/null 2>&1") != 0) GTEST_SKIP() << "h5ls not installed";
  TempDir dir;
  const std::string file = dir / "model.h5";
  Net net;
  torch::optim::Adam adam(net->parameters(), AdamOpts());
  SaveStateDict(file, *net, &adam, {{"epoch", 4}});
  std::string listing = RunShell("h5ls -r '" + file + "'");
  for (const char* name : {"/model/conv1.weight", "/model/conv1.bias", "/model/bn1.running_mean",
                           "/model/bn1.num_batches_tracked", "/model/fc.weight",
                           "/optimizer/torch_archive"}) {
    EXPECT_NE(listing.find(name), std::string::npos) << name << " not in:\n" << listing;
  }
  EXPECT_NE(listing.find("{4, 1, 3, 3}"), std::string::npos) << listing;  // conv1.weight

  if (std::system("command -v h5dump >/dev/null 2>&1") == 0) {
    std::string dump = RunShell("h5dump -a /format '" + file + "'");
    EXPECT_NE(dump.find("prism-state-dict-1"), std::string::npos) << dump;
  }
}

TEST(StateDict, LoadRefusesACommittedFileWhoseBytesChanged) {
  TempDir scratch, storage;
  torch::manual_seed(0);
  Net saved;
  torch::optim::Adam adam(saved->parameters(), AdamOpts());
  const std::string worker = scratch / "worker";
  fs::create_directories(worker);
  SaveStateDict(worker + "/model.h5", *saved, &adam, {{"epoch", 1}});
  CheckpointStore store(storage.path(), {});
  const std::string file = store.Commit(Checkpoint::FromDirectory(worker), {}).checkpoint.path() +
                           "/model.h5";
  Net net;
  LoadStateDict(file, *net);  // intact: loads
  ExpectSameState(*saved, *net);

  DamageMiddle(file, 4096);
  torch::manual_seed(1);
  Net fresh;
  torch::Tensor before = fresh->fc->weight.clone();
  std::string error = ErrorOf([&] { LoadStateDict(file, *fresh); });
  EXPECT_NE(error.find("refusing to load " + file), std::string::npos) << error;
  EXPECT_NE(error.find("model.h5 has CRC-32"), std::string::npos) << error;
  EXPECT_TRUE(torch::equal(before, fresh->fc->weight));  // nothing loaded
}

}  // namespace
