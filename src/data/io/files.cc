// Paths, whole reads and durable writes, part files and the commit of an output directory
// (src/data/io.h explains the protocol: temporary part, rename, then one _SUCCESS manifest).

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "data/io/file_util.h"

namespace prism::data::io {
namespace fs = std::filesystem;

namespace detail {

std::string ErrnoText(int err) { return std::strerror(err); }

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd OpenForRead(const std::string& path, const char* what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw Error(std::string("prism::data: cannot open ") + what + " " + path + ": " +
                ErrnoText(err) +
                (err == ENOENT ? " (check the path and the working directory)" : ""));
  }
  return Fd(fd);
}

void PreadAll(int fd, char* out, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw Error("prism::data: cannot read " + path + " at byte " + std::to_string(offset + done) +
                  ": " + ErrnoText(errno));
    }
    if (got == 0) {
      throw Error("prism::data: " + path + " ends at byte " + std::to_string(offset + done) +
                  ", before the " + std::to_string(n) + " bytes wanted at " +
                  std::to_string(offset) + ": the file is truncated or changed while being read");
    }
    done += static_cast<size_t>(got);
  }
}

void WriteAll(int fd, std::string_view bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("prism::data: cannot write " + path + ": " + ErrnoText(errno));
    done += static_cast<size_t>(n);
  }
}

namespace {

void Fsync(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("prism::data: cannot open " + path + " to fsync it: " + ErrnoText(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL): nothing more to do there.
  if (rc != 0 && !(err == EINVAL && fs::is_directory(path))) {
    throw Error("prism::data: fsync of " + path + " failed: " + ErrnoText(err));
  }
}

std::string RandomHex() {
  std::random_device rd;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", rd(), rd());
  return text;
}

std::string PartName(int64_t index, const std::string& ext) {
  char name[64];
  std::snprintf(name, sizeof name, "part-%05lld", static_cast<long long>(index));
  return name + ext;
}

}  // namespace

PartFile::PartFile(const std::string& dir, int64_t index, const std::string& ext) : dir_(dir) {
  if (index < 0)
    throw Error("prism::data: a part index cannot be negative (" + std::to_string(index) + ")");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error("prism::data: cannot create the output directory " + dir + ": " + ec.message());
  final_name_ = PartName(index, ext);
  temp_ = (fs::path(dir) / ("." + PartName(index, "") + "-" + RandomHex() + ext)).string();
}

PartFile::~PartFile() {
  if (!committed_) ::unlink(temp_.c_str());
}

Part PartFile::Commit(int64_t rows) {
  Fsync(temp_);
  const std::string final_path = (fs::path(dir_) / final_name_).string();
  if (::rename(temp_.c_str(), final_path.c_str()) != 0) {
    throw Error("prism::data: cannot rename " + temp_ + " to " + final_path + ": " +
                ErrnoText(errno));
  }
  committed_ = true;
  std::error_code ec;
  const uint64_t bytes = fs::file_size(final_path, ec);
  return Part{final_name_, rows, ec ? 0 : bytes};
}

void CheckOneSchema(const std::vector<Block>& blocks, const std::string& what) {
  if (blocks.empty()) return;
  const Schema first = blocks.front().schema();
  for (size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].schema() != first) {
      throw Error("prism::data: " + what + ": block " + std::to_string(i) + " has schema {" +
                  blocks[i].schema().ToString() + "} but block 0 has {" + first.ToString() +
                  "}: the blocks of one file share a schema");
    }
  }
}

int64_t TotalRows(const std::vector<Block>& blocks) {
  int64_t rows = 0;
  for (const auto& b : blocks) rows += b.num_rows();
  return rows;
}

}  // namespace detail

// ---- Paths -------------------------------------------------------------------------------

namespace {

bool HasExtension(const std::string& path, const std::vector<std::string>& extensions) {
  if (extensions.empty()) return true;
  for (const auto& ext : extensions) {
    if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) {
      return true;
    }
  }
  return false;
}

std::string ExtensionText(const std::vector<std::string>& extensions) {
  std::string out;
  for (size_t i = 0; i < extensions.size(); ++i) out += (i ? ", " : "") + extensions[i];
  return out;
}

bool Hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && (name[0] == '.' || name[0] == '_');
}

}  // namespace

std::vector<std::string> ExpandPaths(const std::string& path,
                                     const std::vector<std::string>& extensions) {
  std::vector<std::string> out;
  const std::string filter = extensions.empty() ? "" : " ending in " + ExtensionText(extensions);
  if (path.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    const int rc = ::glob(path.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        std::error_code ec;
        if (fs::is_regular_file(g.gl_pathv[i], ec) && HasExtension(g.gl_pathv[i], extensions)) {
          out.emplace_back(g.gl_pathv[i]);
        }
      }
    }
    ::globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH) {
      throw Error("prism::data: cannot expand the pattern " + path +
                  " (a directory could not be read)");
    }
    if (out.empty()) {
      std::error_code ec;
      throw Error("prism::data: no file" + filter + " matches " + path +
                  ": check the pattern (relative to " + fs::current_path(ec).string() + ")");
    }
  } else {
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (!fs::exists(status)) {
      throw Error("prism::data: " + path + " does not exist: check the path (relative to " +
                  fs::current_path(ec).string() + ")");
    }
    if (fs::is_directory(status)) {
      for (auto it = fs::recursive_directory_iterator(path, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (Hidden(it->path())) {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file() && HasExtension(it->path().string(), extensions)) {
          out.push_back(it->path().string());
        }
      }
      if (ec) throw Error("prism::data: cannot list " + path + ": " + ec.message());
      if (out.empty())
        throw Error("prism::data: the directory " + path + " holds no file" + filter);
    } else {
      out.push_back(path);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    throw Error("prism::data: cannot read " + path + ": " + detail::ErrnoText(err) +
                (err == ENOENT ? " (check the path and the working directory)" : ""));
  }
  return static_cast<uint64_t>(st.st_size);
}

// ---- Commit ------------------------------------------------------------------------------

namespace {
constexpr const char* kManifestFormat = "prism-data-parts-1";

std::string ThisHost() {
  char host[256] = {};
  return gethostname(host, sizeof host - 1) == 0 ? host : "";
}

/// A part its writer reported written but this process cannot see: most often the output
/// path is node-local (each host's own /tmp or disk), so the part sits on the writer's host.
std::string MissingPartText(const std::string& dir, const Part& part) {
  const std::string here = ThisHost();
  std::string writer = "a write task";
  if (part.rank >= 0) writer = "rank " + std::to_string(part.rank);
  if (!part.host.empty()) writer += " (host " + part.host + ")";
  const bool other_host = !part.host.empty() && part.host != here;
  return "prism::data: cannot commit " + dir + ": its part " + part.file + ", which " + writer +
         " wrote, is not there as the committing process" +
         (here.empty() ? "" : " (host " + here + ")") + " sees it. " +
         (other_host ? "The part was written on another host: the output path must be on storage "
                       "every rank shares (a file system every node mounts, not a node-local "
                       "disk or /tmp); write to such a path, or check that the writer finished"
                     : "The output path must be on storage every rank shares; if it is, check "
                       "that the write task finished (its rank's log) and that nothing removed "
                       "the part before the commit");
}
}  // namespace

void CommitParts(const std::string& dir, const std::vector<Part>& parts) {
  int64_t rows = 0;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& part : parts) {
    const fs::path p = fs::path(dir) / part.file;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) throw Error(MissingPartText(dir, part));
    list.push_back(nlohmann::json{{"file", part.file}, {"rows", part.rows}, {"bytes", part.bytes}});
    rows += part.rows;
  }
  // Temporary parts of writers that died (or of attempts a retry replaced).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".part-", 0) == 0) fs::remove(entry.path(), ec);
  }
  nlohmann::json manifest = {{"format", kManifestFormat}, {"rows", rows}, {"parts", list}};
  const std::string text = manifest.dump(1) + "\n";
  const std::string path = (fs::path(dir) / kManifestName).string();
  const std::string tmp = (fs::path(dir) / (".part-manifest-" + detail::RandomHex())).string();
  {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("prism::data: cannot create " + tmp + ": " + detail::ErrnoText(errno));
    detail::Fd closer(fd);
    try {
      detail::WriteAll(fd, text, tmp);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  detail::Fsync(tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("prism::data: cannot rename " + tmp + " to " + path + ": " +
                detail::ErrnoText(err));
  }
  detail::Fsync(dir);
}

std::vector<Part> ReadManifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifestName).string();
  std::ifstream in(path);
  if (!in) {
    throw Error("prism::data: " + dir + " has no " + kManifestName +
                ": the write that made it did not finish (or it is not a Prism output directory)");
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<Part> parts;
  try {
    auto manifest = nlohmann::json::parse(text.str());
    if (manifest.at("format").get<std::string>() != kManifestFormat) throw Error("unknown format");
    for (const auto& p : manifest.at("parts")) {
      // Counts must be whole numbers of their type: get<int64_t>() of 1e300 is undefined,
      // and of -5 a negative row count.
      const auto& file = p.at("file");
      const auto& rows = p.at("rows");
      const auto& bytes = p.at("bytes");
      if (!file.is_string() || file.get<std::string>().empty() ||
          file.get<std::string>().find('/') != std::string::npos) {
        throw Error("part " + std::to_string(parts.size()) + " has no plain file name");
      }
      if (!rows.is_number_integer() || rows.get<int64_t>() < 0 || !bytes.is_number_unsigned()) {
        throw Error("part " + std::to_string(parts.size()) + " (" + file.get<std::string>() +
                    ") has no row or byte count (non-negative integers)");
      }
      parts.push_back({file.get<std::string>(), rows.get<int64_t>(), bytes.get<uint64_t>()});
    }
  } catch (const std::exception& e) {
    throw Error("prism::data: " + path + " is not a Prism manifest (" + e.what() + ")");
  }
  return parts;
}

}  // namespace prism::data::io
