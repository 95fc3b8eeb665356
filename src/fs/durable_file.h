#pragma once
// Durable file writes (checkpoints, their records, HDF5 state dicts): fsync of files and directories, and whole-file
// replacement (write a temporary, fsync it, rename it over the target, fsync the
// directory) so a crash leaves either the old file or the new one, never half of one.
// A failure throws FileError, which keeps the errno; a write that fails for want of room
// says so with the numbers (fs/space.h).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "fs/space.h"
#include "prism/errors.h"

namespace prism::internal {

/// A failed system call on a file: prism::Error with the errno it failed with, so a caller
/// can tell a full disk from other failures.
class FileError : public Error {
 public:
  FileError(const std::string& what, int err) : Error(what), err_(err) {}
  int err() const { return err_; }

 private:
  int err_;
};

/// strerror(err) as a std::string.
inline std::string ErrnoText(int err) { return std::strerror(err); }

/// Why writing `needed` bytes into `dir` failed with `err`: the room left when that is the
/// cause (fs/space.h), else strerror(err).
inline std::string WriteFailureText(int err, const std::string& dir, uint64_t needed) {
  if (OutOfSpace(err, dir, needed)) return NoSpaceText(err, dir, needed, "the write");
  return ErrnoText(err);
}

/// The directory holding `path` ("." for a bare name).
inline std::string ParentDir(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

/// Flushes a file or directory to stable storage. Throws prism::Error naming it.
inline void FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw FileError("cannot open " + path + " to fsync it: " + ErrnoText(err), err);
  }
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL); its entries are then as durable
  // as that file system makes them, and there is nothing more to do.
  if (rc != 0 && !(err == EINVAL && std::filesystem::is_directory(path))) {
    // A file system that allocates late (NFS, Lustre) can find itself full only here.
    const std::string dir = std::filesystem::is_directory(path) ? path : ParentDir(path);
    throw FileError("fsync of " + path + " failed: " + WriteFailureText(err, dir, 0), err);
  }
}

/// Replaces `path` with `content` atomically and durably. Throws FileError naming the
/// file and the cause (a full file system with the room left).
inline void WriteFileAtomically(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const std::string dir = ParentDir(path);
  // Whatever fails removes the temporary first, so the room left is measured without it.
  auto fail = [&](int fd, const std::string& what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw FileError(what + ": " + WriteFailureText(err, dir, content.size()), err);
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(-1, "cannot create " + tmp, errno);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(fd, "cannot write " + tmp, errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail(fd, "fsync of " + tmp + " failed", errno);
  if (::close(fd) != 0) fail(-1, "cannot close " + tmp, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    fail(-1, "cannot rename " + tmp + " to " + path, errno);
  }
  FsyncPath(dir);
}

/// Appends `line` to `path` (created if missing) in one write, or not at all: a write that
/// fails part way (a full disk) is cut back off, so the file never ends in half a line.
/// Not fsynced. Throws FileError naming the file and the cause.
inline void AppendWhole(const std::string& path, std::string_view line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw FileError("cannot open " + path + " to append to it: " + ErrnoText(err), err);
  }
  struct stat st {};
  const off_t before = ::fstat(fd, &st) == 0 ? st.st_size : -1;
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      if (before >= 0) (void)::ftruncate(fd, before);
      ::close(fd);
      throw FileError("cannot append to " + path + ": " +
                          WriteFailureText(err, ParentDir(path), line.size()),
                      err);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

/// The whole content of `path`, or nullopt if it does not exist. Throws prism::Error on
/// any other failure.
inline std::optional<std::string> ReadFileIfExists(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return std::nullopt;
    throw FileError("cannot open " + path + ": " + ErrnoText(err), err);
  }
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw FileError("cannot read " + path + ": " + ErrnoText(err), err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace prism::internal
