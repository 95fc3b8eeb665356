#pragma once
// Helpers every test binary may use (no dependency beyond prism/errors.h). Data tests:
// tests/common/data_test_util.h. Include with a path relative to the test file
// ("../common/test_util.h") and name what you use (`using prism_test::ErrorOf;`).
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "prism/errors.h"

namespace prism_test {

/// Runs `f` and returns the message of the prism::Error it throws, or "(no error)" if it
/// returns: `EXPECT_THAT(ErrorOf([&] { Bad(); }), HasSubstr("what was wrong"))`. Other
/// exceptions propagate (gtest reports them as failures).
template <typename F>
std::string ErrorOf(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const prism::Error& e) {
    return e.what();
  }
  return "(no error)";
}

/// Where a test puts files that every rank of the job must see (storage paths, files tasks
/// write for the driver): $PRISM_TEST_SHARED_DIR when set (the two-host test bed sets it to
/// a directory both hosts share, as a cluster's shared file system: each host's /tmp is its
/// own), else $TMPDIR or /tmp, which every rank on one host shares.
inline std::string SharedTestDir() {
  for (const char* var : {"PRISM_TEST_SHARED_DIR", "TMPDIR"}) {
    const char* dir = std::getenv(var);
    if (dir != nullptr && *dir != '\0') return dir;
  }
  return "/tmp";
}

/// A fresh directory for one test under SharedTestDir(), removed with everything in it when
/// the object goes out of scope. `dir / "name"` is a path inside it.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "prism-test-") {
    std::string pattern = SharedTestDir() + "/" + prefix + "XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// The whole file at `path` ("" if it cannot be read).
inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Replaces the file at `path` with `text`.
inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

/// Inverts up to `n` bytes in the middle of `path` in place: its size stays the same, as
/// when a bad disk or a stray `dd conv=notrunc` overwrites part of a file. Throws
/// std::runtime_error if the file cannot be read or written.
inline void DamageMiddle(const std::string& path, size_t n) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!file) throw std::runtime_error("cannot open " + path + " to damage it");
  const size_t size = std::filesystem::file_size(path);
  n = std::min(n, size);
  const auto offset = static_cast<std::streamoff>((size - n) / 2);
  std::string bytes(n, '\0');
  file.seekg(offset);
  file.read(bytes.data(), static_cast<std::streamsize>(n));
  for (char& c : bytes) c = static_cast<char>(~c);
  file.seekp(offset);
  file.write(bytes.data(), static_cast<std::streamsize>(n));
  if (!file) throw std::runtime_error("cannot damage " + path);
}

}  // namespace prism_test
