// Checksums of a checkpoint's files and their verification (prism/checkpoint_store.h).

#include "checkpoint/checksums.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "fs/durable_file.h"
#include "prism/errors.h"
#include "prism/internal/json.h"

namespace prism::internal {
namespace {

namespace fs = std::filesystem;

std::string Hex(uint32_t crc) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08" PRIx32, crc);
  return buf;
}

/// A path a record may name: relative, inside the checkpoint (no "..").
bool InsideCheckpoint(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  for (const auto& part : fs::path(path)) {
    if (part == "..") return false;
  }
  return true;
}

/// Joins `problems` with "; ", showing at most a few.
std::string JoinProblems(const std::vector<std::string>& problems) {
  constexpr size_t kShown = 5;
  std::string out;
  for (size_t i = 0; i < problems.size() && i < kShown; ++i) out += (i ? "; " : "") + problems[i];
  if (problems.size() > kShown) {
    out += "; and " + std::to_string(problems.size() - kShown) + " more";
  }
  return out;
}

}  // namespace

FileChecksum ChecksumFile(const std::string& dir, const std::string& relative) {
  const std::string path = dir + "/" + relative;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw Error("cannot open " + path + " to checksum it: " + ErrnoText(errno));
  FileChecksum out;
  out.path = relative;
  uLong crc = crc32_z(0, Z_NULL, 0);
  std::vector<unsigned char> buf(1 << 20);
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw Error("cannot read " + path + " to checksum it: " + ErrnoText(err));
    }
    if (n == 0) break;
    crc = crc32_z(crc, buf.data(), static_cast<size_t>(n));
    out.size += static_cast<uint64_t>(n);
  }
  ::close(fd);
  out.crc32 = static_cast<uint32_t>(crc);
  return out;
}

std::vector<FileChecksum> ChecksumTree(const std::string& dir, const std::set<std::string>& skip) {
  std::vector<FileChecksum> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    fs::file_status status = it->symlink_status(ec);
    if (ec) break;
    if (!fs::is_regular_file(status)) continue;
    const std::string relative = it->path().lexically_relative(dir).generic_string();
    if (skip.count(relative) != 0) continue;
    out.push_back(ChecksumFile(dir, relative));
  }
  if (ec) throw Error("cannot walk " + dir + " to checksum its files: " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const FileChecksum& a, const FileChecksum& b) { return a.path < b.path; });
  return out;
}

std::string CompareFile(const std::string& dir, const FileChecksum& expected) {
  const std::string path = dir + "/" + expected.path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return expected.path + " is missing";
    return "cannot look at " + expected.path + ": " + ErrnoText(errno);
  }
  if (!S_ISREG(st.st_mode)) return expected.path + " is no longer a regular file";
  if (static_cast<uint64_t>(st.st_size) != expected.size) {
    return expected.path + " is " + std::to_string(st.st_size) + " bytes, " +
           std::to_string(expected.size) + " when committed (truncated or rewritten)";
  }
  FileChecksum found;
  try {
    found = ChecksumFile(dir, expected.path);
  } catch (const Error& e) {
    return e.what();
  }
  if (found.size != expected.size || found.crc32 != expected.crc32) {
    return expected.path + " has CRC-32 " + Hex(found.crc32) + ", " + Hex(expected.crc32) +
           " when committed (its bytes changed since)";
  }
  return "";
}

nlohmann::json FilesJson(const std::vector<FileChecksum>& files) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& f : files) out[f.path] = {{"size", f.size}, {"crc32", Hex(f.crc32)}};
  return out;
}

std::vector<FileChecksum> ParseFiles(const nlohmann::json& files, const std::string& source) {
  auto bad = [&](const std::string& what) {
    return Error(source + ": \"files\" " + what +
                 " (expected {\"<file>\": {\"size\": N, \"crc32\": \"8 hex digits\"}, ...})");
  };
  if (!files.is_object()) throw bad("is not an object");
  std::vector<FileChecksum> out;
  for (const auto& [path, entry] : files.items()) {
    if (!InsideCheckpoint(path)) throw bad("names \"" + path + "\", outside the checkpoint");
    if (!entry.is_object() || !entry.contains("size") || !entry.contains("crc32") ||
        !entry["crc32"].is_string()) {
      throw bad("entry \"" + path + "\" lacks a size or a crc32");
    }
    if (!entry["size"].is_number_unsigned()) throw bad("entry \"" + path + "\" has a bad size");
    FileChecksum f;
    f.path = path;
    f.size = entry["size"].get<uint64_t>();
    const std::string crc = entry["crc32"].get<std::string>();
    char* end = nullptr;
    unsigned long value = std::strtoul(crc.c_str(), &end, 16);
    if (crc.size() != 8 || *end != '\0') throw bad("entry \"" + path + "\" has a bad crc32");
    f.crc32 = static_cast<uint32_t>(value);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace prism::internal

namespace prism {

using internal::CompareFile;
using internal::kMetadataFile;
using internal::ParseFiles;
using internal::ReadFileIfExists;
namespace fs = std::filesystem;

CheckpointVerification VerifyCheckpoint(const std::string& dir) {
  CheckpointVerification v;
  std::optional<std::string> text;
  nlohmann::json record;
  try {
    text = ReadFileIfExists(dir + "/" + kCheckpointRecordFile);
    if (!text) {
      v.problem = std::string("it has no ") + kCheckpointRecordFile +
                  " (an unfinished commit, or the record was removed)";
      return v;
    }
    record = internal::ParseJson(*text, kCheckpointRecordFile);
  } catch (const Error& e) {
    v.problem = e.what();
    return v;
  }
  if (!internal::IsCheckpointRecord(record)) {
    v.problem = std::string(kCheckpointRecordFile) + " is not a checkpoint record";
    return v;
  }

  std::vector<std::string> problems;
  if (record.contains("files")) {
    v.has_checksums = true;
    try {
      for (const auto& expected : ParseFiles(record["files"], kCheckpointRecordFile)) {
        if (std::string problem = CompareFile(dir, expected); !problem.empty()) {
          problems.push_back(std::move(problem));
        }
      }
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  try {
    if (auto metadata = ReadFileIfExists(dir + "/" + kMetadataFile)) {
      if (!internal::ParseJson(*metadata, kMetadataFile).is_object()) {
        problems.push_back(std::string(kMetadataFile) + " is not a JSON object");
      }
    }
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
  v.problem = internal::JoinProblems(problems);
  return v;
}

std::string VerifyCheckpointFile(const std::string& file) {
  const fs::path path(file);
  const std::string dir = internal::ParentDir(file);
  const std::string name = path.filename().string();
  try {
    std::optional<std::string> text = ReadFileIfExists(dir + "/" + kCheckpointRecordFile);
    if (!text) return "";
    const std::string source = dir + "/" + kCheckpointRecordFile;
    nlohmann::json record = internal::ParseJson(*text, source);
    // A record without files was committed before checkpoints carried checksums.
    if (!record.is_object() || !record.contains("files")) return "";
    for (const auto& expected : ParseFiles(record["files"], source)) {
      if (expected.path == name) return CompareFile(dir, expected);
    }
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace prism
