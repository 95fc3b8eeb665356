// Checkpoint (a directory of files with metadata.json) and MakeTempCheckpointDir.
//
// The scratch root, ${TMPDIR:-/tmp}/prism-checkpoints-<uid>, sits in a directory others can
// write to, so whatever is found under that name is checked before anything goes into it:
// it is opened without following a symbolic link (O_NOFOLLOW | O_DIRECTORY) and must be a
// directory owned by this user that no one else can write to (one of ours with looser
// permissions is tightened to 0700). A name that fails (a link planted by someone else, a
// directory another user owns) is not touched: this process makes a fresh private root
// next to it with mkdtemp, says so once, and uses that instead, so another user can
// neither read the checkpoints nor stop the run. Each checkpoint then gets its own mkdtemp
// directory inside the root. (Checking the name once is enough where only its owner can
// rename it away, as in a sticky /tmp.)

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/checksums.h"
#include "fs/durable_file.h"
#include "prism/internal/json.h"
#include "prism/checkpoint.h"
#include "prism/runtime_context.h"

namespace prism {
namespace {

namespace fs = std::filesystem;
using internal::ErrnoText;
using internal::kMetadataFile;

/// mkdtemp(`prefix` + "XXXXXX"); throws prism::Error saying what to do.
std::string MakeUniqueDir(const std::string& prefix, const std::string& what) {
  std::string pattern = prefix + "XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    throw Error("cannot create " + what + " " + pattern + ": " + ErrnoText(errno) +
                "; set TMPDIR to a writable directory");
  }
  return std::string(buffer.data());
}

/// Why `root` is not safe to put checkpoints in ("" if it is: a directory, not a link,
/// owned by this user, writable by nobody else, the last made so if it was not).
std::string UnsafeRoot(const std::string& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (::lstat(root.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) return "it is a symbolic link";
    if (err == ENOTDIR) return "it is not a directory";
    return "it cannot be opened: " + ErrnoText(err);
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = "it cannot be examined: " + ErrnoText(errno);
  } else if (st.st_uid != ::geteuid()) {
    problem = "it belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
              std::to_string(::geteuid()) + ")";
  } else if ((st.st_mode & 077) != 0 && ::fchmod(fd, 0700) != 0) {
    problem = "others may use it and it cannot be made private: " + ErrnoText(errno);
  }
  ::close(fd);
  return problem;
}

/// The scratch root this process puts its checkpoint directories in, for `tmpdir`.
std::string ScratchRoot(const std::string& tmpdir) {
  // Per user: another user's directory of the same name would not be writable.
  const std::string root = tmpdir + "/prism-checkpoints-" + std::to_string(::getuid());
  if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error("cannot create the checkpoint scratch directory " + root + ": " +
                ErrnoText(errno) + "; set TMPDIR to a writable directory");
  }
  const std::string problem = UnsafeRoot(root);
  if (problem.empty()) return root;

  // The fallback is made once per process (and per TMPDIR), not once per checkpoint, and
  // removed at exit if empty (committed checkpoints have been moved out of it by then).
  struct Fallbacks {
    std::mutex mutex;
    std::map<std::string, std::string> roots;
    ~Fallbacks() {
      for (const auto& entry : roots) ::rmdir(entry.second.c_str());
    }
  };
  static Fallbacks fallbacks;
  std::lock_guard<std::mutex> lock(fallbacks.mutex);
  auto it = fallbacks.roots.find(root);
  if (it != fallbacks.roots.end()) return it->second;
  const std::string fallback = MakeUniqueDir(root + "-", "a private checkpoint scratch directory");
  std::fprintf(stderr,
               "prism.train: not using the checkpoint scratch directory %s: %s, so another "
               "user could read or replace the checkpoints in it. Using %s instead; remove %s "
               "(or set TMPDIR to a private directory) to stop this warning.\n",
               root.c_str(), problem.c_str(), fallback.c_str(), root.c_str());
  fallbacks.roots.emplace(root, fallback);
  return fallback;
}

}  // namespace

Checkpoint Checkpoint::FromDirectory(const std::string& path) {
  if (path.empty()) throw Error("not a directory: \"\" (a checkpoint needs a directory path)");
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    throw Error("not a directory: " + path +
                (fs::exists(path, ec) ? " (a checkpoint is a directory of files)"
                                      : " (it does not exist)"));
  }
  // Absolute, so the checkpoint still names the same place after a chdir or in another
  // process; no trailing separator, so path() + "/model.h5" reads well.
  fs::path absolute = fs::absolute(path, ec).lexically_normal();
  if (ec) throw Error("cannot make " + path + " absolute: " + ec.message());
  if (!absolute.has_filename() && absolute.has_relative_path()) absolute = absolute.parent_path();
  Checkpoint checkpoint;
  checkpoint.path_ = absolute.string();
  return checkpoint;
}

std::map<std::string, std::string> Checkpoint::GetMetadata() const {
  if (path_.empty()) throw Error("Checkpoint::GetMetadata: the checkpoint has no directory");
  const std::string file = path_ + "/" + kMetadataFile;
  std::optional<std::string> text = internal::ReadFileIfExists(file);
  if (!text) return {};
  nlohmann::json json = internal::ParseJson(*text, file);
  if (!json.is_object()) {
    throw Error(file + " is not a JSON object; checkpoint metadata is {\"key\": \"value\", ...}");
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : json.items()) {
    // Strings as they are; numbers, booleans and null (a hand-edited file) as their JSON
    // text. Nested values have no string to be.
    if (value.is_structured()) {
      throw Error(file + ": metadata \"" + key +
                  "\" is a nested JSON value; checkpoint metadata maps strings to strings");
    }
    out[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return out;
}

void Checkpoint::SetMetadata(const std::map<std::string, std::string>& metadata) const {
  if (path_.empty()) throw Error("Checkpoint::SetMetadata: the checkpoint has no directory");
  internal::WriteFileAtomically(path_ + "/" + kMetadataFile,
                                nlohmann::json(metadata).dump(2) + "\n");
}

std::string MakeTempCheckpointDir() {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string root = ScratchRoot((tmpdir != nullptr && *tmpdir != '\0') ? tmpdir : "/tmp");
  return MakeUniqueDir(root + "/checkpoint-", "a temporary checkpoint directory");
}

std::string DefaultStoragePath() {
  if (const char* s = std::getenv("PRISM_STORAGE_PATH"); s && *s) return s;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/prism_results";
}

std::string DefaultRunName(const std::string& prefix) {
  if (std::getenv("SLURM_JOB_ID") != nullptr) return prefix + "_" + GetRuntimeContext().GetJobId();
  char buf[64];
  std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "_%Y-%m-%d_%H-%M-%S", std::localtime(&now));
  return prefix + buf;
}

}  // namespace prism
