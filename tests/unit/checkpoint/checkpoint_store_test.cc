// prism::checkpoint's public API without LibTorch or an MPI launcher: Checkpoint
// directories and their metadata, MakeTempCheckpointDir and its scratch root, and
// CheckpointStore's commit protocol, retention, checksums and choice of a checkpoint to
// resume from (prism/checkpoint.h, prism/checkpoint_store.h).

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "prism/checkpoint.h"
#include "prism/checkpoint_store.h"
#include "../../common/test_util.h"
#include "small_fs.h"

namespace {

namespace fs = std::filesystem;
using prism::Checkpoint;
using prism::CheckpointConfig;
using prism::CheckpointStore;
using prism::ResumePoint;
using prism::StoredCheckpoint;
using prism_test::DamageMiddle;
using prism_test::ErrorOf;
using prism_test::ReadText;
using prism_test::SmallFs;
using prism_test::TempDir;
using prism_test::WriteBytes;
using prism_test::WriteText;
using Metrics = std::map<std::string, double>;



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
  std::string a = prism::MakeTempCheckpointDir();
  std::string b = prism::MakeTempCheckpointDir();
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
  // Prism's JSON convention (prism/internal/json.h): a non-finite number is null.
  EXPECT_NE(record.find("\"nan\": null"), std::string::npos) << record;
}

TEST(CheckpointStore, ADeeplyNestedRecordIsRejectedNotACrash) {
  TempDir scratch, storage;
  CheckpointStore store(storage.path(), {});
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"loss", 1.0}});
  store.Commit(MakeWorkerCheckpoint(scratch, "y"), {{"loss", 0.5}});
  WriteText(storage / "checkpoint_000002/prism_checkpoint.json",
            std::string(100000, '[') + std::string(100000, ']'));
  ResumePoint point = store.NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value());
  EXPECT_EQ(point.checkpoint->index, 1);
  ASSERT_EQ(point.rejected.size(), 1u);
  EXPECT_NE(point.rejected[0].problem.find("nested deeper than 512 levels"), std::string::npos)
      << point.rejected[0].problem;
}

// Found by fuzzing the checkpoint readers (tests/fuzz/corpus/checkpoint/regress-*): a number
// no double holds threw nlohmann's out_of_range, past every `catch (const prism::Error&)`,
// so one such record stopped List and NewestValid for the whole run.
TEST(CheckpointStore, ARecordWithANumberTooLargeForADoubleIsRejectedNotAnEscape) {
  TempDir scratch, storage;
  CheckpointStore store(storage.path(), {});
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"loss", 1.0}});
  store.Commit(MakeWorkerCheckpoint(scratch, "y"), {{"loss", 0.5}});
  WriteText(storage / "checkpoint_000002/prism_checkpoint.json",
            "{\"index\": 2, \"metrics\": {\"loss\": 1e999}}");
  EXPECT_EQ(store.List().size(), 1u);
  ResumePoint point = store.NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value());
  EXPECT_EQ(point.checkpoint->index, 1);
  ASSERT_EQ(point.rejected.size(), 1u);
  EXPECT_NE(point.rejected[0].problem.find("malformed JSON: number overflow"), std::string::npos)
      << point.rejected[0].problem;
}

TEST(CheckpointStore, ARecordWithPythonsNaNAndInfinityWordsStillReads) {
  // Records written before the null convention hold NaN and Infinity as bare words (as
  // Python's json module writes them): they stay readable, and the checkpoint stays valid.
  TempDir scratch, storage;
  CheckpointStore store(storage.path(), {});
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {{"loss", std::nan("")}, {"acc", 0.5}});
  const std::string file = storage / "checkpoint_000001/prism_checkpoint.json";
  std::string record = ReadText(file);
  const size_t at = record.find("\"loss\": null");
  ASSERT_NE(at, std::string::npos) << record;
  record.replace(at, std::string("\"loss\": null").size(), "\"loss\": NaN, \"up\": -Infinity");
  WriteText(file, record);
  ResumePoint point = CheckpointStore(storage.path(), {}).NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value()) << (point.rejected.empty() ? "" : point.rejected[0].problem);
  EXPECT_TRUE(point.verified);
  EXPECT_TRUE(std::isnan(point.checkpoint->metrics.at("loss")));
  EXPECT_TRUE(std::isnan(point.checkpoint->metrics.at("up")));  // null reads back as NaN
  EXPECT_EQ(point.checkpoint->metrics.at("acc"), 0.5);
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
  const nlohmann::json files = nlohmann::json::parse(record).at("files");
  EXPECT_EQ(files.at("model.bin"), nlohmann::json({{"size", 5}, {"crc32", "3610a686"}})) << record;
  EXPECT_EQ(files.at("sub/extra.txt"), nlohmann::json({{"size", 11}, {"crc32", "36ff5932"}}))
      << record;
  EXPECT_EQ(files.size(), 2u) << record;  // not metadata.json: SetMetadata may change it

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
    a = prism::MakeTempCheckpointDir();
    b = prism::MakeTempCheckpointDir();
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
  WithTmpdir(tmp.path(), [&] { a = prism::MakeTempCheckpointDir(); });
  EXPECT_NE(a.rfind(root + "/", 0), 0u) << a;
  EXPECT_TRUE(fs::is_empty(root));
}

TEST(CheckpointDir, MakeTempCheckpointDirMakesItsOwnLooseRootPrivate) {
  TempDir tmp;
  const std::string root = ScratchRootIn(tmp);
  fs::create_directory(root);
  fs::permissions(root, fs::perms::all);  // 0777, ours
  std::string a;
  WithTmpdir(tmp.path(), [&] { a = prism::MakeTempCheckpointDir(); });
  EXPECT_EQ(a.rfind(root + "/", 0), 0u) << a;
  EXPECT_EQ(fs::status(root).permissions() & fs::perms::all, fs::perms::owner_all);
}

// ---- A full disk and what cannot be deleted ----------------------------------------------

/// The names in `dir`.
std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// A commit that does not fit says "no space left" with the numbers and the way out (not
// libstdc++'s "Input/output error" for a short copy), and loses nothing: no staging
// directory stays, the source is untouched and the newest checkpoint is still the newest.
TEST(CheckpointStore, ACommitThatDoesNotFitSaysNoSpaceLeftAndKeepsTheNewestCheckpoint) {
  TempDir scratch, tmp;
  SmallFs disk(tmp / "disk", 1 << 20);
  if (!disk.Mounted()) GTEST_SKIP() << SmallFs::kWhySkipped;
  const std::string run = disk / "run";
  CheckpointStore store(run, {});
  const StoredCheckpoint first = store.Commit(MakeWorkerCheckpoint(scratch, "small"), {{"loss", 1}});

  // 2 MiB from another file system (scratch): copied, and it does not fit.
  Checkpoint big = MakeWorkerCheckpoint(scratch, "big");
  WriteBytes(big.path() + "/model.bin", 2 << 20);
  std::string error = ErrorOf([&] { store.Commit(big, {{"loss", 0.5}}); });
  EXPECT_NE(error.find("cannot commit checkpoint " + big.path() + " into " + run +
                       ": no space left on " + disk.path() + " (the file system holding " + run +
                       "): "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(" free, the checkpoint needs about 2.1 MiB"), std::string::npos) << error;
  EXPECT_NE(error.find("the newest checkpoint is still " + first.checkpoint.path()),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("CheckpointConfig::num_to_keep"), std::string::npos) << error;
  EXPECT_NE(error.find("PRISM_STORAGE_PATH"), std::string::npos) << error;
  EXPECT_EQ(error.find("Input/output error"), std::string::npos) << error;
  EXPECT_TRUE(fs::exists(big.path() + "/model.bin"));  // the source is still whole
  EXPECT_EQ(fs::file_size(big.path() + "/model.bin"), 2u << 20);
  EXPECT_EQ(Names(run), (std::set<std::string>{"checkpoint_000001", ".prism_checkpoint_index"}));
  ResumePoint point = store.NewestValid();
  ASSERT_TRUE(point.checkpoint.has_value());
  EXPECT_EQ(point.checkpoint->index, 1);
  EXPECT_TRUE(point.rejected.empty());

  // A disk with no room at all: the first write (the index record) says it too.
  WriteBytes(disk / "filler", 2 << 20);
  error = ErrorOf([&] { store.Commit(MakeWorkerCheckpoint(scratch, "tiny"), {}); });
  EXPECT_NE(error.find("no space left on " + disk.path()), std::string::npos) << error;
  EXPECT_NE(error.find("0 bytes free"), std::string::npos) << error;
  EXPECT_EQ(store.NewestValid().checkpoint->index, 1);

  // Room again: the run goes on.
  fs::remove(disk / "filler");
  EXPECT_GT(store.Commit(MakeWorkerCheckpoint(scratch, "after"), {}).index, 1);
}

// A checkpoint retention cannot delete is named on stderr with the way out; the next
// commit tries again and names what it still cannot remove, once; once it can, it is gone.
TEST(CheckpointStore, ACheckpointRetentionCannotDeleteIsNamedAndRemovedLater) {
  TempDir scratch, storage;
  CheckpointConfig config;
  config.num_to_keep = 1;
  CheckpointStore store(storage.path(), config);
  const StoredCheckpoint first = store.Commit(MakeWorkerCheckpoint(scratch, "x"), {});
  // Something in the checkpoint that cannot be removed: a mount point (for root), a
  // directory without write permission (for anyone else).
  const std::string stuck = first.checkpoint.path() + "/sub";
  std::unique_ptr<SmallFs> mount;
  if (::geteuid() == 0) {
    mount = std::make_unique<SmallFs>(stuck, 1 << 16);
    if (!mount->Mounted()) GTEST_SKIP() << SmallFs::kWhySkipped;
    WriteText(stuck + "/inside", "x");
  } else {
    fs::permissions(stuck, fs::perms::owner_read | fs::perms::owner_exec);
  }
  const std::string doomed =
      storage / (".deleting-checkpoint_000001-" + std::to_string(::getpid()));
  struct Unmount {  // where the mount is once retention renamed its checkpoint away
    std::string path;
    ~Unmount() {
      if (!path.empty()) ::umount2(path.c_str(), MNT_DETACH);
    }
  } unmount_renamed{mount ? doomed + "/sub" : ""};

  testing::internal::CaptureStderr();
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {});
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("retention could not delete " + doomed + " (renamed from " +
                      first.checkpoint.path() + "): "),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("delete it by hand"), std::string::npos) << said;
  EXPECT_EQ(Indices(store.List()), (std::vector<int>{2}));  // never listed again

  // The next commits try again; the first says what is left, the second says nothing more.
  testing::internal::CaptureStderr();
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {});
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {});
  said = testing::internal::GetCapturedStderr();
  const std::string named = "prism: cannot remove " + doomed + ", left by an interrupted";
  EXPECT_NE(said.find(named), std::string::npos) << said;
  EXPECT_EQ(said.find(named), said.rfind(named)) << "named once: " << said;
  EXPECT_TRUE(fs::exists(doomed));

  // Once it can be removed, the next commit does.
  if (mount) {
    ASSERT_EQ(::umount2((doomed + "/sub").c_str(), MNT_DETACH), 0);
  } else {
    fs::permissions(doomed + "/sub", fs::perms::owner_all);
  }
  store.Commit(MakeWorkerCheckpoint(scratch, "x"), {});
  EXPECT_FALSE(fs::exists(doomed));
  EXPECT_EQ(Indices(store.List()), (std::vector<int>{5}));
}

}  // namespace
