// Checkpoints without an MPI launcher: HDF5 state dicts (SaveStateDict, LoadStateDict,
// ReadAttributes), Checkpoint metadata, MakeTempCheckpointDir and its scratch root, and the
// CheckpointStore's commit protocol, retention, checksums and choice of a checkpoint to
// resume from.

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

#include "checkpoint/checkpoint_store.h"
#include "prism/train/checkpoint.h"
#include "../../common/test_util.h"

namespace {

namespace fs = std::filesystem;
using prism::train::Attribute;
using prism::train::Checkpoint;
using prism::train::CheckpointConfig;
using prism::train::LoadStateDict;
using prism::train::Metrics;
using prism::train::ReadAttributes;
using prism::train::SaveStateDict;
using prism::train::internal::CheckpointStore;
using prism::train::internal::ResumePoint;
using prism::train::internal::StoredCheckpoint;
using prism_test::ErrorOf;

/// A fresh directory for one test, removed with everything in it afterwards.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/prism-ckpt-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

/// Inverts up to `n` bytes in the middle of `path` in place: its size stays the same, as
/// when a bad disk or a stray `dd conv=notrunc` overwrites part of a file.
void DamageMiddle(const std::string& path, size_t n) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(file) << path;
  const size_t size = fs::file_size(path);
  n = std::min(n, size);
  const auto offset = static_cast<std::streamoff>((size - n) / 2);
  std::string bytes(n, '\0');
  file.seekg(offset);
  file.read(bytes.data(), static_cast<std::streamsize>(n));
  for (char& c : bytes) c = static_cast<char>(~c);
  file.seekp(offset);
  file.write(bytes.data(), static_cast<std::streamsize>(n));
  ASSERT_TRUE(file) << path;
}

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

// ---- Checkpoint directories and metadata --------------------------------------------------

TEST(CheckpointDir, FromDirectoryChecksAndMakesAbsolute) {
  TempDir dir;
  std::string error = ErrorOf([&] { Checkpoint::FromDirectory(dir / "missing"); });
  EXPECT_NE(error.find("not a directory: " + (dir / "missing")), std::string::npos) << error;
  WriteText(dir / "file", "x");
  error = ErrorOf([&] { Checkpoint::FromDirectory(dir / "file"); });
  EXPECT_NE(error.find("not a directory"), std::string::npos) << error;

  fs::create_directory(dir / "ckpt");
  Checkpoint c = Checkpoint::FromDirectory(dir.path() + "/./ckpt/");
  EXPECT_EQ(c.path(), dir / "ckpt");

  auto cwd = fs::current_path();
  fs::current_path(dir.path());
  Checkpoint relative = Checkpoint::FromDirectory("ckpt");
  fs::current_path(cwd);
  EXPECT_EQ(relative.path(), dir / "ckpt");
}

TEST(CheckpointDir, MetadataRoundTripWithSpecialCharacters) {
  TempDir dir;
  Checkpoint c = Checkpoint::FromDirectory(dir.path());
  EXPECT_TRUE(c.GetMetadata().empty());
  std::map<std::string, std::string> metadata = {
      {"quote\"key", "a \"quoted\" value"},
      {"backslash", "C:\\path\\to"},
      {"lines", "one\ntwo\tthree\r"},
      {"control", std::string("bell\x07 nul-free \x01")},
      {"unicode", "héllo wörld 😀"},
      {"empty", ""},
  };
  c.SetMetadata(metadata);
  EXPECT_EQ(c.GetMetadata(), metadata);
  EXPECT_FALSE(fs::exists(dir / "metadata.json.tmp-" + std::to_string(::getpid())));
  c.SetMetadata({{"only", "this"}});  // replaces, does not merge
  EXPECT_EQ(c.GetMetadata(), (std::map<std::string, std::string>{{"only", "this"}}));
}

TEST(CheckpointDir, MetadataParsesEscapesAndRejectsMalformedJson) {
  TempDir dir;
  Checkpoint c = Checkpoint::FromDirectory(dir.path());
  WriteText(dir / "metadata.json",
            R"({"e": "caf\u00e9", "smile": "\ud83d\ude00", "slash": "a\/b", "n": 3, "b": true})");
  auto m = c.GetMetadata();
  EXPECT_EQ(m.at("e"), "café");
  EXPECT_EQ(m.at("smile"), "😀");
  EXPECT_EQ(m.at("slash"), "a/b");
  EXPECT_EQ(m.at("n"), "3");
  EXPECT_EQ(m.at("b"), "true");

  WriteText(dir / "metadata.json", R"({"a": "unterminated)");
  std::string error = ErrorOf([&] { c.GetMetadata(); });
  EXPECT_NE(error.find("metadata.json: malformed JSON"), std::string::npos) << error;
  WriteText(dir / "metadata.json", R"({"a": {"nested": "x"}})");
  error = ErrorOf([&] { c.GetMetadata(); });
  EXPECT_NE(error.find("nested"), std::string::npos) << error;
}

TEST(CheckpointDir, MakeTempCheckpointDirIsFreshAndUnderTmpdir) {
  TempDir dir;
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  ::setenv("TMPDIR", dir.path().c_str(), 1);
  std::string a = prism::train::MakeTempCheckpointDir();
  std::string b = prism::train::MakeTempCheckpointDir();
  if (old) ::setenv("TMPDIR", saved.c_str(), 1); else ::unsetenv("TMPDIR");
  EXPECT_NE(a, b);
  const std::string base = dir / ("prism-checkpoints-" + std::to_string(::getuid())) + "/";
  EXPECT_EQ(a.rfind(base, 0), 0u) << a;
  EXPECT_EQ(fs::status(base).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_TRUE(fs::is_directory(a));
  EXPECT_TRUE(fs::is_empty(a));
  EXPECT_TRUE(fs::is_directory(b));
}

// ---- CheckpointStore ----------------------------------------------------------------------

/// A worker-side checkpoint directory holding one file with `content`.
Checkpoint MakeWorkerCheckpoint(const TempDir& scratch, const std::string& content) {
  static int counter = 0;
  std::string dir = scratch / ("worker-" + std::to_string(++counter));
  fs::create_directories(dir + "/sub");
  WriteText(dir + "/model.bin", content);
  WriteText(dir + "/sub/extra.txt", "extra " + content);
  return Checkpoint::FromDirectory(dir);
}

std::vector<int> Indices(const std::vector<StoredCheckpoint>& list) {
  std::vector<int> out;
  for (const auto& c : list) out.push_back(c.index);
  return out;
}

TEST(CheckpointStore, CommitsNumberFromOneAndANewStoreSeesThem) {
  TempDir scratch, storage;
  const std::string run = storage / "experiment/run1";  // created with its parents
  {
    CheckpointStore store(run, {});
    EXPECT_FALSE(store.Latest().has_value());
    for (int i = 1; i <= 3; ++i) {
      Checkpoint worker = MakeWorkerCheckpoint(scratch, "weights " + std::to_string(i));
      StoredCheckpoint c = store.Commit(worker, {{"loss", 1.0 / i}, {"epoch", i}});
      EXPECT_EQ(c.index, i);
      char name[32];
      std::snprintf(name, sizeof name, "/checkpoint_%06d", i);
      EXPECT_EQ(c.checkpoint.path(), run + name);
      EXPECT_FALSE(fs::exists(worker.path()));  // moved away
    }
    EXPECT_EQ(Indices(store.List()), (std::vector<int>{1, 2, 3}));
    ASSERT_TRUE(store.Latest().has_value());
    EXPECT_EQ(store.Latest()->index, 3);
  }
  CheckpointStore again(run, {});
  std::vector<StoredCheckpoint> list = again.List();
  ASSERT_EQ(Indices(list), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(list[1].metrics.at("loss"), 1.0 / 2);
  EXPECT_EQ(list[2].metrics.at("epoch"), 3);
  EXPECT_EQ(ReadText(list[1].checkpoint.path() + "/model.bin"), "weights 2");
  EXPECT_EQ(ReadText(list[1].checkpoint.path() + "/sub/extra.txt"), "extra weights 2");
  EXPECT_EQ(again.Latest()->index, 3);
  // Nothing but the checkpoints and the index record in the run directory.
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(run)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"checkpoint_000001", "checkpoint_000002",
                                          "checkpoint_000003", ".prism_checkpoint_index"}));
}

TEST(CheckpointStore, CommitWithoutMoveCopiesAndKeepsTheSource) {
  TempDir scratch, storage;
  CheckpointStore store(storage.path(), {});
  Checkpoint worker = MakeWorkerCheckpoint(scratch, "kept");
  StoredCheckpoint c = store.Commit(worker, {}, /*move=*/false);
  EXPECT_EQ(ReadText(worker.path() + "/model.bin"), "kept");
  EXPECT_EQ(ReadText(c.checkpoint.path() + "/sub/extra.txt"), "extra kept");
  EXPECT_FALSE(fs::exists(worker.path() + "/prism_checkpoint.json"));
}

TEST(CheckpointStore, RecordKeepsEveryBitOfTheMetrics) {
  TempDir scratch, storage;
  CheckpointStore store(storage.path(), {});
  store.Commit(MakeWorkerCheckpoint(scratch, "x"),
               {{"third", 1.0 / 3}, {"nan", std::nan("")}, {"big", 1e300}, {"neg", -0.5}});
  Metrics m = CheckpointStore(storage.path(), {}).Latest()->metrics;
  EXPECT_EQ(m.at("third"), 1.0 / 3);
  EXPECT_TRUE(std::isnan(m.at("nan")));
  EXPECT_EQ(m.at("big"), 1e300);
  EXPECT_EQ(m.at("neg"), -0.5);
  std::string record = ReadText(storage / "checkpoint_000001/prism_checkpoint.json");
  EXPECT_NE(record.find("\"index\": 1"), std::string::npos) << record;
  EXPECT_NE(record.find("\"time\": "), std::string::npos) << record;
}

TEST(CheckpointStore, RetentionKeepsTheBestByMaxAndAlwaysTheNewest) {
  TempDir scratch, storage;
  CheckpointConfig config;
  config.num_to_keep = 2;
  config.checkpoint_score_attribute = "accuracy";
  config.checkpoint_score_order = "max";
  CheckpointStore store(storage.path(), config);
  auto commit = [&](double accuracy) {
    store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"accuracy", accuracy}});
  };
  commit(0.1);
  commit(0.5);
  commit(0.3);
  EXPECT_EQ(Indices(store.List()), (std::vector<int>{2, 3}));
  commit(0.0);  // the worst, but the newest: kept beside the two best
  EXPECT_EQ(Indices(store.List()), (std::vector<int>{2, 3, 4}));
  commit(0.4);
  EXPECT_EQ(Indices(store.List()), (std::vector<int>{2, 5}));
  EXPECT_EQ(Indices(store.Best()), (std::vector<int>{2, 5}));
  EXPECT_FALSE(fs::exists(storage / "checkpoint_000003"));
}

TEST(CheckpointStore, RetentionByMinRanksMissingScoresLast) {
  TempDir scratch, storage;
  CheckpointConfig config;
  config.num_to_keep = 2;
  config.checkpoint_score_attribute = "loss";
  config.checkpoint_score_order = "min";
  CheckpointStore store(storage.path(), config);
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"loss", 3.0}});
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"loss", 1.0}});
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"loss", 2.0}});
  EXPECT_EQ(Indices(store.Best()), (std::vector<int>{2, 3}));
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"other", 0.0}});  // no loss: ranks last
  EXPECT_EQ(Indices(store.Best()), (std::vector<int>{2, 3, 4}));
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"loss", 0.5}});
  EXPECT_EQ(Indices(store.Best()), (std::vector<int>{5, 2}));
  EXPECT_EQ(store.Latest()->index, 5);
}

TEST(CheckpointStore, RetentionWithoutScoreKeepsTheNewest) {
  TempDir scratch, storage;
  CheckpointConfig config;
  config.num_to_keep = 2;
  CheckpointStore store(storage.path(), config);
  for (int i = 0; i < 4; ++i) store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"loss", 1.0 * i}});
  EXPECT_EQ(Indices(store.List()), (std::vector<int>{3, 4}));
  EXPECT_EQ(Indices(store.Best()), (std::vector<int>{4, 3}));

  CheckpointConfig keep_all;  // num_to_keep 0
  CheckpointStore all(storage / "all", keep_all);
  for (int i = 0; i < 4; ++i) all.Commit(MakeWorkerCheckpoint(scratch, "x"), {});
  EXPECT_EQ(Indices(all.List()), (std::vector<int>{1, 2, 3, 4}));
}

TEST(CheckpointStore, IncompleteDirectoriesAreIgnoredAndStagingIsCleaned) {
  TempDir scratch, storage;
  const std::string run = storage.path();
  CheckpointStore store(run, {});
  // A commit of this process interrupted mid-copy, one of a process that is gone, one of
  // a live process (pid 1), and a final name without its record.
  const std::string ours = run + "/.staging-checkpoint_000009-" + std::to_string(::getpid());
  const std::string dead = run + "/.staging-checkpoint_000008-999999999";
  const std::string live = run + "/.staging-checkpoint_000007-1";
  for (const auto& d : {ours, dead, live}) {
    fs::create_directories(d);
    WriteText(d + "/model.bin", "half");
  }
  fs::create_directories(run + "/checkpoint_000010");
  WriteText(run + "/checkpoint_000010/model.bin", "no record");
  WriteText(run + "/checkpoint_notanumber", "x");

  EXPECT_TRUE(store.List().empty());
  EXPECT_FALSE(store.Latest().has_value());
  StoredCheckpoint c = store.Commit(MakeWorkerCheckpoint(scratch, "x"), {});
  EXPECT_EQ(c.index, 11);  // 10 exists as a name, so it is not reused
  EXPECT_FALSE(fs::exists(ours));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));  // may still be writing
  EXPECT_EQ(Indices(store.List()), (std::vector<int>{11}));
}

TEST(CheckpointStore, IndicesAreNeverReused) {
  TempDir scratch, storage;
  CheckpointConfig config;
  config.num_to_keep = 1;
  {
    CheckpointStore store(storage.path(), config);
    for (int i = 0; i < 3; ++i) store.Commit(MakeWorkerCheckpoint(scratch, "x"), {});
    EXPECT_EQ(Indices(store.List()), (std::vector<int>{3}));
  }
  fs::remove_all(storage / "checkpoint_000003");  // even with no directory left
  CheckpointStore store(storage.path(), config);
  EXPECT_EQ(store.Commit(MakeWorkerCheckpoint(scratch, "x"), {}).index, 4);
}

TEST(CheckpointStore, UnwritableStoragePathIsAClearError) {
  TempDir dir;
  WriteText(dir / "file", "a regular file");
  const std::string run = dir / "file/run";  // a directory cannot be made under a file
  std::string error = ErrorOf([&] { CheckpointStore store(run, {}); });
  EXPECT_NE(error.find("storage path " + run + " is not writable: "), std::string::npos) << error;
  EXPECT_NE(error.find("RunConfig::storage_path (or PRISM_STORAGE_PATH)"), std::string::npos)
      << error;
}

TEST(CheckpointStore, BadScoreOrderIsAnError) {
  TempDir storage;
  CheckpointConfig config;
  config.checkpoint_score_order = "maximum";
  std::string error = ErrorOf([&] { CheckpointStore store(storage.path(), config); });
  EXPECT_NE(error.find("\"maximum\"; use \"max\" or \"min\""), std::string::npos) << error;
}

TEST(CheckpointStore, AnUnreadableRecordIsReportedAndDoesNotStopCommits) {
  TempDir scratch, storage;
  CheckpointConfig config;
  config.num_to_keep = 1;
  CheckpointStore store(storage.path(), config);
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"loss", 1}});
  WriteText(storage / "checkpoint_000001/prism_checkpoint.json", "{\"index\": 1, ");
  EXPECT_TRUE(store.List().empty());  // it cannot be ranked
  ResumePoint point = store.NewestValid();
  EXPECT_FALSE(point.checkpoint.has_value());
  ASSERT_EQ(point.rejected.size(), 1u);
  EXPECT_EQ(point.rejected[0].path, storage / "checkpoint_000001");
  EXPECT_NE(point.rejected[0].problem.find("prism_checkpoint.json: malformed JSON"),
            std::string::npos)
      << point.rejected[0].problem;

  // The run goes on: the next commit and its retention work around it.
  EXPECT_EQ(store.Commit(MakeWorkerCheckpoint(scratch, "y"), {{"loss", 2}}).index, 2);
  point = store.NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value());
  EXPECT_EQ(point.checkpoint->index, 2);
  EXPECT_TRUE(point.rejected.empty());
}

TEST(CheckpointStore, CommitOfAMissingDirectoryIsAnError) {
  TempDir scratch, storage;
  CheckpointStore store(storage.path(), {});
  Checkpoint worker = MakeWorkerCheckpoint(scratch, "x");
  store.Commit(worker, {});
  std::string error = ErrorOf([&] { store.Commit(worker, {}); });  // moved by the first
  EXPECT_NE(error.find("is not a directory"), std::string::npos) << error;
  EXPECT_EQ(Indices(store.List()), (std::vector<int>{1}));
}

// ---- Checksums and the choice of a checkpoint to resume from ------------------------------

TEST(CheckpointStore, CommitRecordsTheSizeAndCrc32OfEveryFile) {
  TempDir scratch, storage;
  CheckpointStore store(storage.path(), {});
  Checkpoint worker = MakeWorkerCheckpoint(scratch, "hello");
  worker.SetMetadata({{"note", "mutable"}});
  StoredCheckpoint c = store.Commit(worker, {});
  std::string record = ReadText(c.checkpoint.path() + "/prism_checkpoint.json");
  // zlib.crc32(b"hello") and zlib.crc32(b"extra hello"), as Python computes them.
  EXPECT_NE(record.find("\"model.bin\": {\"size\": 5, \"crc32\": \"3610a686\"}"), std::string::npos)
      << record;
  EXPECT_NE(record.find("\"sub/extra.txt\": {\"size\": 11, \"crc32\": \"36ff5932\"}"),
            std::string::npos)
      << record;
  EXPECT_EQ(record.find("metadata.json"), std::string::npos) << record;  // SetMetadata may change it

  ResumePoint point = store.NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value());
  EXPECT_TRUE(point.verified);
  EXPECT_TRUE(point.rejected.empty());
  c.checkpoint.SetMetadata({{"note", "changed after the commit"}});
  EXPECT_TRUE(store.NewestValid().rejected.empty());
}

TEST(CheckpointStore, NewestValidFallsBackPastCorruptTruncatedAndIncompleteCheckpoints) {
  TempDir scratch, storage;
  CheckpointStore store(storage.path(), {});
  std::string big(256 * 1024, 'w');
  for (int i = 1; i <= 4; ++i) store.Commit(MakeWorkerCheckpoint(scratch, big + std::to_string(i)), {{"epoch", i}});
  const std::string c1 = storage / "checkpoint_000001", c2 = storage / "checkpoint_000002",
                    c3 = storage / "checkpoint_000003", c4 = storage / "checkpoint_000004";
  ASSERT_EQ(store.NewestValid().checkpoint->index, 4);

  DamageMiddle(c4 + "/model.bin", 64 * 1024);  // overwritten, size unchanged
  ResumePoint point = store.NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value());
  EXPECT_EQ(point.checkpoint->index, 3);
  EXPECT_EQ(point.checkpoint->checkpoint.path(), c3);
  EXPECT_EQ(point.checkpoint->metrics.at("epoch"), 3);
  ASSERT_EQ(point.rejected.size(), 1u);
  EXPECT_EQ(point.rejected[0].path, c4);
  EXPECT_NE(point.rejected[0].problem.find("model.bin has CRC-32 "), std::string::npos)
      << point.rejected[0].problem;
  EXPECT_NE(point.rejected[0].problem.find("when committed"), std::string::npos);
  EXPECT_EQ(store.Latest()->index, 4);  // Latest does not verify; resumes use NewestValid

  fs::resize_file(c3 + "/model.bin", 1000);  // truncated
  fs::remove(c2 + "/sub/extra.txt");          // a file gone
  point = store.NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value());
  EXPECT_EQ(point.checkpoint->index, 1);
  ASSERT_EQ(point.rejected.size(), 3u);
  EXPECT_EQ(point.rejected[1].path, c3);
  EXPECT_NE(point.rejected[1].problem.find("model.bin is 1000 bytes, 262145 when committed"),
            std::string::npos)
      << point.rejected[1].problem;
  EXPECT_EQ(point.rejected[2].path, c2);
  EXPECT_NE(point.rejected[2].problem.find("sub/extra.txt is missing"), std::string::npos)
      << point.rejected[2].problem;

  // A final name without its record (never committed, or the record was lost) is not
  // trusted either; with nothing intact left there is no checkpoint to resume from.
  fs::remove(c1 + "/prism_checkpoint.json");
  point = store.NewestValid();
  EXPECT_FALSE(point.checkpoint.has_value());
  ASSERT_EQ(point.rejected.size(), 4u);
  EXPECT_NE(point.rejected[3].problem.find("no prism_checkpoint.json"), std::string::npos)
      << point.rejected[3].problem;

  CheckpointStore empty(storage / "empty", {});
  point = empty.NewestValid();
  EXPECT_FALSE(point.checkpoint.has_value());
  EXPECT_TRUE(point.rejected.empty());
}

TEST(CheckpointStore, DamagedMetadataAndRecordChecksumsAreReported) {
  TempDir scratch, storage;
  CheckpointStore store(storage.path(), {});
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {});
  WriteText(storage / "checkpoint_000001/metadata.json", "{\"a\": ");
  ResumePoint point = store.NewestValid();
  ASSERT_EQ(point.rejected.size(), 1u);
  EXPECT_NE(point.rejected[0].problem.find("metadata.json: malformed JSON"), std::string::npos)
      << point.rejected[0].problem;

  store.Commit(MakeWorkerCheckpoint(scratch, "y"), {});
  const std::string record = storage / "checkpoint_000002/prism_checkpoint.json";
  std::string text = ReadText(record);
  const std::string entry = "\"model.bin\": {";
  ASSERT_NE(text.find(entry), std::string::npos) << text;
  text.replace(text.find(entry), entry.size(), "\"../../etc/passwd\": {");
  WriteText(record, text);
  point = store.NewestValid();
  ASSERT_EQ(point.rejected.size(), 2u);
  EXPECT_NE(point.rejected[0].problem.find("outside the checkpoint"), std::string::npos)
      << point.rejected[0].problem;
}

TEST(CheckpointStore, ACheckpointWithoutChecksumsIsUsedButNotVerified) {
  TempDir storage;
  const std::string dir = storage / "checkpoint_000001";
  fs::create_directories(dir);
  WriteText(dir + "/model.bin", "from an older Prism");
  WriteText(dir + "/prism_checkpoint.json", "{\"index\": 1, \"time\": 0, \"metrics\": {\"epoch\": 3}}");
  ResumePoint point = CheckpointStore(storage.path(), {}).NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value());
  EXPECT_FALSE(point.verified);
  EXPECT_EQ(point.checkpoint->metrics.at("epoch"), 3);
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

// ---- The scratch root of MakeTempCheckpointDir --------------------------------------------

/// Runs `f` with TMPDIR set to `dir`, then restores it.
template <typename F>
void WithTmpdir(const std::string& dir, F&& f) {
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  ::setenv("TMPDIR", dir.c_str(), 1);
  f();
  if (old) ::setenv("TMPDIR", saved.c_str(), 1); else ::unsetenv("TMPDIR");
}

std::string ScratchRootIn(const TempDir& dir) {
  return dir / ("prism-checkpoints-" + std::to_string(::getuid()));
}

TEST(CheckpointDir, MakeTempCheckpointDirNeverWritesThroughASymlinkedRoot) {
  TempDir tmp, elsewhere;  // elsewhere: a directory someone pointed the root at
  fs::permissions(elsewhere.path(), fs::perms::all);  // world-writable, as in the report
  const std::string root = ScratchRootIn(tmp);
  fs::create_directory_symlink(elsewhere.path(), root);
  std::string a, b;
  WithTmpdir(tmp.path(), [&] {
    a = prism::train::MakeTempCheckpointDir();
    b = prism::train::MakeTempCheckpointDir();
  });
  WriteText(a + "/model.h5", "weights");
  EXPECT_TRUE(fs::is_empty(elsewhere.path())) << "a checkpoint went through the link";
  EXPECT_TRUE(fs::is_symlink(root));  // left as it was
  EXPECT_NE(a.rfind(root + "/", 0), 0u) << a;
  EXPECT_EQ(a.rfind(root + "-", 0), 0u) << a;  // a private root of its own next to it
  EXPECT_EQ(fs::path(a).parent_path(), fs::path(b).parent_path()) << "one fallback per process";
  struct stat st {};
  ASSERT_EQ(::lstat(fs::path(a).parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

TEST(CheckpointDir, MakeTempCheckpointDirLeavesAnotherUsersRootAlone) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a directory another user owns";
  TempDir tmp;
  const std::string root = ScratchRootIn(tmp);
  fs::create_directory(root);
  ASSERT_EQ(::chown(root.c_str(), 65534, 65534), 0);
  fs::permissions(root, fs::perms::all);
  std::string a;
  WithTmpdir(tmp.path(), [&] { a = prism::train::MakeTempCheckpointDir(); });
  EXPECT_NE(a.rfind(root + "/", 0), 0u) << a;
  EXPECT_TRUE(fs::is_empty(root));
}

TEST(CheckpointDir, MakeTempCheckpointDirMakesItsOwnLooseRootPrivate) {
  TempDir tmp;
  const std::string root = ScratchRootIn(tmp);
  fs::create_directory(root);
  fs::permissions(root, fs::perms::all);  // 0777, ours
  std::string a;
  WithTmpdir(tmp.path(), [&] { a = prism::train::MakeTempCheckpointDir(); });
  EXPECT_EQ(a.rfind(root + "/", 0), 0u) << a;
  EXPECT_EQ(fs::status(root).permissions() & fs::perms::all, fs::perms::owner_all);
}

}  // namespace
