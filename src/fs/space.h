#pragma once
// Telling a full file system from other write failures, and saying so with numbers.
//
// A write to a full file system fails with ENOSPC (EDQUOT past a quota), but not every
// layer passes that on: libstdc++'s filesystem::copy reports a short sendfile as EIO
// ("Input/output error"), and HDF5 keeps errno in the text of its error stack. So after a
// failed write, once whatever was half-written is removed, the file system is asked
// (statvfs) how much room it has: with less than the write needed, the failure is reported
// as no space, naming the file system, the bytes free and the bytes needed. An errno that
// says something else (EACCES, EROFS, ENOENT...) is never read as a full disk.

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace prism::internal {

/// `path` if it exists, else its nearest existing ancestor ("." or "/" at worst).
inline std::string ExistingAncestor(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = path;
  while (!p.empty() && !std::filesystem::exists(p, ec) && p.has_parent_path() &&
         p.parent_path() != p) {
    p = p.parent_path();
  }
  return p.empty() ? "." : p.string();
}

/// Bytes an unprivileged writer may still use on the file system holding `path` (or its
/// nearest existing ancestor); nullopt if statvfs fails.
inline std::optional<uint64_t> FreeBytes(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(ExistingAncestor(path).c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

/// The mount point of the file system holding `path`: its highest ancestor on the same
/// device.
inline std::string MountPointOf(const std::string& path) {
  std::filesystem::path p = ExistingAncestor(path);
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return p.string();
  const dev_t dev = st.st_dev;
  while (p.has_parent_path() && p.parent_path() != p) {
    struct stat up {};
    if (::stat(p.parent_path().c_str(), &up) != 0 || up.st_dev != dev) break;
    p = p.parent_path();
  }
  return p.string();
}

/// A size for people: "812 KiB", "2.0 MiB", "17 bytes".
inline std::string SizeText(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, value < 10 ? "%.1f %s" : "%.0f %s", value, kUnits[unit]);
  return buf;
}

/// Whether a write into `dir` that failed with `err` failed for want of room: `err` is
/// ENOSPC or EDQUOT, or it names no other cause (0, EIO) and the file system holding `dir`
/// has less than `needed` bytes free. Ask once the failed write's leftovers are removed.
inline bool OutOfSpace(int err, const std::string& dir, uint64_t needed) {
  if (err == ENOSPC || err == EDQUOT) return true;
  if (err != 0 && err != EIO) return false;
  std::optional<uint64_t> free = FreeBytes(dir);
  return free && *free < needed;
}

/// "no space left on /mnt/small (the file system holding DIR): 812 KiB free, WHAT needs
/// about 2.0 MiB" ("disk quota exceeded on ..." for EDQUOT).
inline std::string NoSpaceText(int err, const std::string& dir, uint64_t needed,
                               const std::string& what) {
  const std::string mount = MountPointOf(dir);
  std::string text = std::string(err == EDQUOT ? "disk quota exceeded on " : "no space left on ") +
                     mount;
  const std::string held = ExistingAncestor(dir);
  if (held != mount) text += " (the file system holding " + held + ")";
  text += ": ";
  if (std::optional<uint64_t> free = FreeBytes(dir)) {
    text += SizeText(*free) + " free";
  } else {
    text += "free space unknown";
  }
  if (needed > 0) text += ", " + what + " needs about " + SizeText(needed);
  return text;
}

/// The bytes of every regular file under `root` (or of `root` itself if it is a file),
/// without following links; what could be counted if a file cannot be looked at.
inline uint64_t TreeBytes(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(fs::symlink_status(root, ec))) {
    uint64_t size = fs::file_size(root, ec);
    return ec ? 0 : size;
  }
  uint64_t total = 0;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (!fs::is_regular_file(it->symlink_status(size_ec))) continue;
    uint64_t size = fs::file_size(it->path(), size_ec);
    if (!size_ec) total += size;
  }
  return total;
}

}  // namespace prism::internal
