#pragma once
// A small file system for tests of a full disk: a tmpfs of a given size mounted on a fresh
// directory, unmounted when the object goes. Mounting needs root (CAP_SYS_ADMIN): a test
// checks Mounted() and skips without it (GTEST_SKIP() << SmallFs::kWhySkipped).
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace prism_test {

class SmallFs {
 public:
  static constexpr const char* kWhySkipped =
      "needs root to mount a small tmpfs (a full disk made for the test)";

  /// Mounts a tmpfs of `bytes` on `dir` (created if missing); Mounted() says if it worked.
  SmallFs(std::string dir, uint64_t bytes) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (::geteuid() != 0) return;
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0700";
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) == 0;
  }
  ~SmallFs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallFs(const SmallFs&) = delete;
  SmallFs& operator=(const SmallFs&) = delete;

  bool Mounted() const { return mounted_; }
  const std::string& path() const { return dir_; }
  std::string operator/(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

/// Writes `bytes` bytes (a repeating pattern) to `path`, as far as they fit.
inline void WriteBytes(const std::string& path, uint64_t bytes) {
  std::ofstream out(path, std::ios::binary);
  std::string block(4096, '\0');
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>(i * 31 + 7);
  for (uint64_t done = 0; done < bytes && out; done += block.size()) {
    out.write(block.data(), static_cast<std::streamsize>(std::min<uint64_t>(block.size(), bytes - done)));
  }
}

}  // namespace prism_test
