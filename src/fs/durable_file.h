#pragma once
// Durable file writes (checkpoints, their records, HDF5 state dicts): fsync of files and directories, and whole-file
// replacement (write a temporary, fsync it, rename it over the target, fsync the
// directory) so a crash leaves either the old file or the new one, never half of one.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "prism/errors.h"

namespace prism::internal {

/// strerror(err) as a std::string.
inline std::string ErrnoText(int err) { return std::strerror(err); }

/// Flushes a file or directory to stable storage. Throws prism::Error naming it.
inline void FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + " to fsync it: " + ErrnoText(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL); its entries are then as durable
  // as that file system makes them, and there is nothing more to do.
  if (rc != 0 && !(err == EINVAL && std::filesystem::is_directory(path))) {
    throw Error("fsync of " + path + " failed: " + ErrnoText(err));
  }
}

/// The directory holding `path` ("." for a bare name).
inline std::string ParentDir(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

/// Replaces `path` with `content` atomically and durably. Throws prism::Error naming the
/// file and the cause.
inline void WriteFileAtomically(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create " + tmp + ": " + ErrnoText(errno));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write " + tmp + ": " + ErrnoText(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("fsync of " + tmp + " failed: " + ErrnoText(err));
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot close " + tmp + ": " + ErrnoText(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + path + ": " + ErrnoText(err));
  }
  FsyncPath(ParentDir(path));
}

/// The whole content of `path`, or nullopt if it does not exist. Throws prism::Error on
/// any other failure.
inline std::optional<std::string> ReadFileIfExists(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw Error("cannot open " + path + ": " + ErrnoText(errno));
  }
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw Error("cannot read " + path + ": " + ErrnoText(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace prism::internal
