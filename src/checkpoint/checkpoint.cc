// Checkpoint (a directory of files with metadata.json) and MakeTempCheckpointDir.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/file_util.h"
#include "checkpoint/json.h"
#include "prism/train/checkpoint.h"

namespace prism::train {
namespace {

namespace fs = std::filesystem;
using internal::ErrnoText;

constexpr const char* kMetadataFile = "metadata.json";

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
  internal::JsonValue json = internal::ParseJson(*text, file);
  if (json.kind != internal::JsonValue::Kind::kObject) {
    throw Error(file + " is not a JSON object; checkpoint metadata is {\"key\": \"value\", ...}");
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : json.object) {
    using Kind = internal::JsonValue::Kind;
    // Strings as they are; numbers, booleans and null (a hand-edited file) as their JSON
    // text. Nested values have no string to be.
    if (value.kind == Kind::kArray || value.kind == Kind::kObject) {
      throw Error(file + ": metadata \"" + key +
                  "\" is a nested JSON value; checkpoint metadata maps strings to strings");
    }
    out[key] = value.text;
  }
  return out;
}

void Checkpoint::SetMetadata(const std::map<std::string, std::string>& metadata) const {
  if (path_.empty()) throw Error("Checkpoint::SetMetadata: the checkpoint has no directory");
  std::string text = "{";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    text += first ? "\n  " : ",\n  ";
    first = false;
    text += internal::JsonQuote(key) + ": " + internal::JsonQuote(value);
  }
  text += first ? "}\n" : "\n}\n";
  internal::WriteFileAtomically(path_ + "/" + kMetadataFile, text);
}

std::string MakeTempCheckpointDir() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string base = (tmpdir != nullptr && *tmpdir != '\0') ? tmpdir : "/tmp";
  // Per user: another user's directory of the same name would not be writable.
  base += "/prism-checkpoints-" + std::to_string(::getuid());
  if (::mkdir(base.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error("cannot create the checkpoint scratch directory " + base + ": " +
                ErrnoText(errno) + "; set TMPDIR to a writable directory");
  }
  std::string pattern = base + "/checkpoint-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    throw Error("cannot create a temporary checkpoint directory under " + base + ": " +
                ErrnoText(errno) + "; set TMPDIR to a writable directory");
  }
  return std::string(buffer.data());
}

}  // namespace prism::train
