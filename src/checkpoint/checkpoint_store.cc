// CheckpointStore: a run's committed checkpoints on storage (see prism/checkpoint_store.h
// for the protocol). Everything is read back from run_dir on every call, so there is no state to
// go stale between processes.
//
// A commit that fails leaves nothing behind: the staging directory is removed (a moved
// directory is given back), so the newest committed checkpoint is still the newest. When it
// failed for want of room (ENOSPC, or libstdc++'s copy's EIO on a file system that has too
// little left: fs/space.h) the error says so with the numbers and the way out.

#include "prism/checkpoint_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "checkpoint/checksums.h"
#include "fs/durable_file.h"
#include "fs/space.h"
#include "prism/internal/json.h"

namespace prism {
namespace {

namespace fs = std::filesystem;
using internal::ChecksumTree;
using internal::ErrnoText;
using internal::FileChecksum;
using internal::FileError;
using internal::FsyncPath;
using internal::kMetadataFile;
using internal::ReadFileIfExists;
using internal::WriteFileAtomically;
using Metrics = std::map<std::string, double>;

constexpr const char* kIndexFile = ".prism_checkpoint_index";
constexpr const char* kCheckpointPrefix = "checkpoint_";
constexpr const char* kStagingPrefix = ".staging-checkpoint_";
constexpr const char* kDeletingPrefix = ".deleting-checkpoint_";

// Commits in one process run one at a time: the next index is read, then claimed.
std::mutex& CommitMutex() {
  static std::mutex mutex;
  return mutex;
}

bool AllDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
}

std::string DirName(int index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "checkpoint_%06d", index);
  return buf;
}

/// The N of "checkpoint_NNNNNN" (six or more digits and nothing else), or -1.
int ParseCheckpointName(const std::string& name) {
  const std::string prefix = kCheckpointPrefix;
  if (name.size() < prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) return -1;
  std::string digits = name.substr(prefix.size());
  if (digits.size() > 9 || !AllDigits(digits)) return -1;
  return std::stoi(digits);
}

/// The pid at the end of ".staging-checkpoint_NNNNNN-<pid>", or -1.
long StagingPid(const std::string& name) {
  auto dash = name.rfind('-');
  if (dash == std::string::npos || dash + 1 >= name.size()) return -1;
  std::string digits = name.substr(dash + 1);
  if (digits.size() > 9 || !AllDigits(digits)) return -1;
  return std::stol(digits);
}

bool StartsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::vector<std::string> DirectoryEntries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) throw Error("cannot list checkpoint directory " + dir + ": " + ec.message());
  return names;
}

/// fsyncs every file and directory under `root` (root included), without following links.
void FsyncTree(const std::string& root) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    fs::file_status status = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_regular_file(status) || fs::is_directory(status)) FsyncPath(it->path().string());
  }
  if (ec) throw Error("cannot walk " + root + " to fsync it: " + ec.message());
  FsyncPath(root);
}

/// The commit record: {"index": N, "time": T, "metrics": {...}, "files": {...}}, a metric
/// that is not finite as null (prism/internal/json.h).
std::string RecordJson(int index, double time, const Metrics& metrics,
                       const std::vector<FileChecksum>& files) {
  nlohmann::json record = {{"index", index}, {"time", time}, {"metrics", metrics},
                           {"files", internal::FilesJson(files)}};
  return record.dump(2) + "\n";
}

Metrics ParseRecordMetrics(const std::string& text, const std::string& file) {
  nlohmann::json json = internal::ParseJson(text, file);
  if (!internal::IsCheckpointRecord(json)) {
    throw Error(file + " is not a checkpoint record ({\"index\": N, \"time\": T, \"metrics\": "
                       "{...}}); repair or remove that checkpoint directory");
  }
  Metrics out;
  for (const auto& [name, value] : json["metrics"].items()) {
    if (!value.is_number() && !value.is_null()) {
      throw Error(file + ": metric \"" + name + "\" is not a number");
    }
    out[name] = internal::JsonDouble(value);
  }
  return out;
}

/// The index recorded in run_dir/.prism_checkpoint_index (0 if none yet).
int RecordedMaxIndex(const std::string& run_dir) {
  const std::string file = run_dir + "/" + kIndexFile;
  std::optional<std::string> text = ReadFileIfExists(file);
  if (!text) return 0;
  char* end = nullptr;
  long value = std::strtol(text->c_str(), &end, 10);
  while (end != nullptr && (*end == '\n' || *end == ' ')) ++end;
  if (text->empty() || end == nullptr || *end != '\0' || value < 0 || value > 999999999) {
    throw Error(file + " holds \"" + *text + "\", not a checkpoint index; delete it (the next " +
                "index is then one past the highest checkpoint_NNNNNN directory)");
  }
  return static_cast<int>(value);
}

bool ProcessAlive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

/// Removes what an interrupted Commit or retention left behind: staging directories of
/// processes that are gone (or of this one: its commits are serialized, so none is in
/// flight), and directories renamed away for deletion. One that cannot be removed is named
/// on stderr (once per process) with the way out; the commit goes on.
void RemoveLeftovers(const std::string& run_dir) {
  static std::set<std::string> named;  // under CommitMutex()
  for (const auto& name : DirectoryEntries(run_dir)) {
    bool stale = false;
    if (StartsWith(name, kStagingPrefix)) {
      long pid = StagingPid(name);
      stale = pid == ::getpid() || !ProcessAlive(pid);
    } else if (StartsWith(name, kDeletingPrefix)) {
      stale = true;
    }
    if (!stale) continue;
    const std::string path = run_dir + "/" + name;
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec && named.insert(path).second) {
      std::fprintf(stderr,
                   "prism: cannot remove %s, left by an interrupted checkpoint commit or "
                   "deletion: %s; it is not a checkpoint any more (never listed or resumed "
                   "from): delete it by hand\n",
                   path.c_str(), ec.message().c_str());
    }
  }
}

/// The errno a failure carried (FileError, std::filesystem's errors), else 0.
int ErrnoOf(const std::exception& e) {
  if (const auto* file = dynamic_cast<const FileError*>(&e)) return file->err();
  if (const auto* fs_error = dynamic_cast<const fs::filesystem_error*>(&e)) {
    return fs_error->code().value();
  }
  return 0;
}

/// A score to rank by, or nullopt when the checkpoint has none (missing or NaN).
std::optional<double> Score(const StoredCheckpoint& c, const std::string& attribute) {
  auto it = c.metrics.find(attribute);
  if (it == c.metrics.end() || std::isnan(it->second)) return std::nullopt;
  return it->second;
}

/// `all` ordered best first: by score (those without one last), newer first among equals;
/// newest first without a score attribute.
std::vector<StoredCheckpoint> RankBestFirst(std::vector<StoredCheckpoint> all,
                                            const CheckpointConfig& config) {
  const std::string& attribute = config.checkpoint_score_attribute;
  const bool maximize = config.checkpoint_score_order == "max";
  std::stable_sort(all.begin(), all.end(),
                   [&](const StoredCheckpoint& a, const StoredCheckpoint& b) {
                     if (!attribute.empty()) {
                       auto sa = Score(a, attribute), sb = Score(b, attribute);
                       if (sa.has_value() != sb.has_value()) return sa.has_value();
                       if (sa && *sa != *sb) return maximize ? *sa > *sb : *sa < *sb;
                     }
                     return a.index > b.index;
                   });
  return all;
}

}  // namespace

CheckpointStore::CheckpointStore(std::string run_dir, CheckpointConfig config)
    : config_(std::move(config)) {
  if (config_.checkpoint_score_order != "max" && config_.checkpoint_score_order != "min") {
    throw Error("CheckpointConfig::checkpoint_score_order is \"" +
                config_.checkpoint_score_order + "\"; use \"max\" or \"min\"");
  }
  if (run_dir.empty()) throw Error("CheckpointStore: the run directory is empty");
  std::error_code ec;
  fs::path absolute = fs::absolute(run_dir, ec).lexically_normal();
  if (!ec && !absolute.has_filename() && absolute.has_relative_path()) {
    absolute = absolute.parent_path();
  }
  run_dir_ = ec ? run_dir : absolute.string();

  auto not_writable = [&](const std::string& cause) {
    return Error("storage path " + run_dir_ + " is not writable: " + cause +
                 "; set RunConfig::storage_path (or PRISM_STORAGE_PATH) to a writable "
                 "directory on a shared file system");
  };
  fs::create_directories(run_dir_, ec);
  if (ec) throw not_writable(ec.message());
  if (!fs::is_directory(run_dir_, ec)) throw not_writable("it exists and is not a directory");
  // Creating the directory can succeed where writing into it fails (a read-only mount
  // that already has it, a quota): write a file to be sure.
  const std::string probe = run_dir_ + "/.prism_write_probe-" + std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw not_writable(ErrnoText(errno));
  bool wrote = ::write(fd, "x", 1) == 1;
  int err = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (!wrote) throw not_writable(ErrnoText(err));
}

std::vector<StoredCheckpoint> CheckpointStore::List() const {
  std::vector<StoredCheckpoint> out;
  for (const auto& name : DirectoryEntries(run_dir_)) {
    int index = ParseCheckpointName(name);
    if (index < 0) continue;
    const std::string dir = run_dir_ + "/" + name;
    // A directory without a record was not committed by Commit; one whose record cannot
    // be read cannot be ranked. Both are left out here (so one damaged checkpoint does not
    // stop a run's commits), and NewestValid reports them when a resume would need them.
    try {
      std::optional<std::string> record = ReadFileIfExists(dir + "/" + kCheckpointRecordFile);
      if (!record) continue;
      StoredCheckpoint c;
      c.index = index;
      c.metrics = ParseRecordMetrics(*record, dir + "/" + kCheckpointRecordFile);
      c.checkpoint = Checkpoint::FromDirectory(dir);
      out.push_back(std::move(c));
    } catch (const Error&) {
      continue;
    }
  }
  std::sort(out.begin(), out.end(),
            [](const StoredCheckpoint& a, const StoredCheckpoint& b) { return a.index < b.index; });
  return out;
}

std::optional<StoredCheckpoint> CheckpointStore::Latest() const {
  std::vector<StoredCheckpoint> all = List();
  if (all.empty()) return std::nullopt;
  return std::move(all.back());
}

std::vector<StoredCheckpoint> CheckpointStore::Best() const {
  return RankBestFirst(List(), config_);
}

ResumePoint CheckpointStore::NewestValid() const {
  std::vector<std::pair<int, std::string>> candidates;
  for (const auto& name : DirectoryEntries(run_dir_)) {
    int index = ParseCheckpointName(name);
    if (index >= 0) candidates.emplace_back(index, run_dir_ + "/" + name);
  }
  std::sort(candidates.rbegin(), candidates.rend());  // newest first
  ResumePoint out;
  for (const auto& [index, dir] : candidates) {
    CheckpointVerification verification = VerifyCheckpoint(dir);
    StoredCheckpoint c;
    c.index = index;
    if (verification.problem.empty()) {
      try {
        const std::string record_file = dir + "/" + kCheckpointRecordFile;
        std::optional<std::string> record = ReadFileIfExists(record_file);
        if (!record) throw Error(record_file + " disappeared while it was verified");
        c.metrics = ParseRecordMetrics(*record, record_file);
        c.checkpoint = Checkpoint::FromDirectory(dir);
      } catch (const Error& e) {
        verification.problem = e.what();
      }
    }
    if (!verification.problem.empty()) {
      out.rejected.push_back({dir, verification.problem});
      continue;
    }
    out.checkpoint = std::move(c);
    out.verified = verification.has_checksums;
    break;
  }
  return out;
}

StoredCheckpoint CheckpointStore::Commit(const Checkpoint& from, const Metrics& metrics,
                                         bool move) {
  if (from.path().empty()) throw Error("CheckpointStore::Commit: the checkpoint has no directory");
  std::error_code ec;
  if (!fs::is_directory(from.path(), ec)) {
    throw Error("CheckpointStore::Commit: " + from.path() +
                " is not a directory (was it already committed and moved away?)");
  }
  std::lock_guard<std::mutex> lock(CommitMutex());
  RemoveLeftovers(run_dir_);

  // One past every index ever used: directories present (complete or not: a name that
  // exists cannot be renamed onto) and the recorded maximum (deleted ones).
  int index = RecordedMaxIndex(run_dir_);
  for (const auto& name : DirectoryEntries(run_dir_)) index = std::max(index, ParseCheckpointName(name));
  ++index;

  const std::string final_dir = run_dir_ + "/" + DirName(index);
  const std::string staging =
      run_dir_ + "/" + kStagingPrefix + DirName(index).substr(11) + "-" + std::to_string(::getpid());
  bool moved = false;
  int err = 0;  // the errno of a failed call that threw without one
  try {
    // Claimed before anything is written: an interrupted commit's index is never reused.
    WriteFileAtomically(run_dir_ + "/" + kIndexFile, std::to_string(index) + "\n");
    if (move && ::rename(from.path().c_str(), staging.c_str()) == 0) {
      moved = true;  // same file system: no copy
    } else {
      fs::copy(from.path(), staging, fs::copy_options::recursive | fs::copy_options::copy_symlinks,
               ec);
      if (ec) {
        err = ec.value();
        throw Error("cannot copy checkpoint " + from.path() + " to " + staging + ": " +
                    ec.message());
      }
    }
    const double now = std::chrono::duration<double>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    const std::string record = staging + "/" + kCheckpointRecordFile;
    // The checksums are of the bytes FsyncTree then makes durable. metadata.json is left
    // out (SetMetadata may replace it later), and so is a record the
    // directory may carry from an earlier commit (it is replaced here).
    const std::vector<FileChecksum> files = ChecksumTree(staging, {kCheckpointRecordFile, kMetadataFile});
    // Plain write: FsyncTree below makes it durable before the rename publishes it.
    {
      std::string text = RecordJson(index, now, metrics, files);
      FILE* out = std::fopen(record.c_str(), "w");
      if (out == nullptr) {
        err = errno;
        throw Error("cannot create " + record + ": " + ErrnoText(err));
      }
      bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
      if (!ok) err = errno;
      if (std::fclose(out) != 0 && ok) {
        ok = false;
        err = errno;
      }
      if (!ok) throw Error("cannot write " + record + ": " + ErrnoText(err));
    }
    FsyncTree(staging);
    if (::rename(staging.c_str(), final_dir.c_str()) != 0) {
      err = errno;
      throw Error("cannot rename " + staging + " to " + final_dir + ": " + ErrnoText(err));
    }
    FsyncPath(run_dir_);
  } catch (const std::exception& e) {
    // Give a moved directory back to its owner; anything else left in staging is removed
    // here or by the next Commit.
    if (moved && ::rename(staging.c_str(), from.path().c_str()) == 0) {
      ::unlink((from.path() + "/" + kCheckpointRecordFile).c_str());
    } else {
      fs::remove_all(staging, ec);
    }
    if (err == 0) err = ErrnoOf(e);
    // What the commit needed on run_dir's file system: a copy, or only the record.
    const uint64_t needed = moved ? 64 * 1024 : internal::TreeBytes(from.path()) + 64 * 1024;
    if (!internal::OutOfSpace(err, run_dir_, needed)) throw;
    std::string newest = "the run has no checkpoint yet";
    try {
      if (auto latest = Latest()) newest = "the newest checkpoint is still " + latest->checkpoint.path();
    } catch (const Error&) {
    }
    throw FileError("cannot commit checkpoint " + from.path() + " into " + run_dir_ + ": " +
                        internal::NoSpaceText(err, run_dir_, needed, "the checkpoint") +
                        ". Nothing was committed (" + newest +
                        "). Free space there, keep fewer checkpoints "
                        "(CheckpointConfig::num_to_keep), or set RunConfig::storage_path (or "
                        "PRISM_STORAGE_PATH) to a file system with room",
                    err);
  }
  if (move && !moved) fs::remove_all(from.path(), ec);  // copied across file systems

  // Retention. Deletion renames first, so a half-deleted directory is never listed.
  if (config_.num_to_keep > 0) {
    std::vector<StoredCheckpoint> ranked = Best();
    std::set<int> keep;
    for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(config_.num_to_keep); ++i)
      keep.insert(ranked[i].index);
    keep.insert(index);  // the newest: a resume needs it
    for (const auto& c : ranked) {
      if (keep.count(c.index)) continue;
      const std::string doomed = run_dir_ + "/" + kDeletingPrefix +
                                 DirName(c.index).substr(11) + "-" + std::to_string(::getpid());
      // A checkpoint that cannot be deleted stays on storage, said once here with the way
      // out; the run goes on (retention must never fail a commit that succeeded).
      if (::rename(c.checkpoint.path().c_str(), doomed.c_str()) != 0) {
        std::fprintf(stderr, "prism: retention could not delete %s: %s; delete it by hand\n",
                     c.checkpoint.path().c_str(), ErrnoText(errno).c_str());
      } else if (fs::remove_all(doomed, ec); ec) {
        std::fprintf(stderr, "prism: retention could not delete %s (renamed from %s): %s; delete "
                     "it by hand\n", doomed.c_str(), c.checkpoint.path().c_str(),
                     ec.message().c_str());
      }
    }
  }

  StoredCheckpoint out;
  out.index = index;
  out.checkpoint = Checkpoint::FromDirectory(final_dir);
  out.metrics = metrics;
  return out;
}

}  // namespace prism
