#include "common/private_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace prism::internal {

std::string MakePrivateDir(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
    if (std::string why = MakePrivateDir(parent.string()); !why.empty()) return why;
  }
  if (::mkdir(path.c_str(), 0700) == 0) return "";
  if (errno != EEXIST) return "cannot create directory " + path + ": " + std::strerror(errno);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "cannot inspect " + path + ": " + std::strerror(errno);
  if (S_ISLNK(st.st_mode)) {
    return path + " is a symbolic link; Prism does not follow links for its private "
           "directories: remove it, or point TMPDIR elsewhere";
  }
  if (!S_ISDIR(st.st_mode)) return path + " exists and is not a directory: remove it";
  if (st.st_uid != ::geteuid()) {
    return path + " belongs to another user (uid " + std::to_string(st.st_uid) +
           "); Prism will not write there: remove it, or point TMPDIR elsewhere";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return path + " can be written by other users (mode " +
           std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
           std::to_string(st.st_mode & 7) + "): make it private (chmod 700) or remove it";
  }
  return "";
}

}  // namespace prism::internal
