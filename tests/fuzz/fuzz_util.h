#pragma once
// What the fuzz targets share: a private scratch directory per fuzzer process, and files
// written into it from the fuzzer's bytes (the readers under test read files by path).

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace prism::fuzz {

/// A directory of this process's own under $TMPDIR (or /tmp), removed at exit.
inline const std::string& ScratchDir() {
  // Never destroyed: the exit handler that removes the directory still reads it.
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* path = new std::string(std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                                 "/prism-fuzz-XXXXXX");
    if (::mkdtemp(path->data()) == nullptr) {
      std::perror("prism fuzz: mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(ScratchDir(), ignored);
    });
    return path;
  }();
  return *dir;
}

/// Writes `bytes` to `path` (replacing it); aborts if it cannot (the harness is broken).
inline void WriteFile(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(("prism fuzz: open " + path).c_str());
    std::abort();
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      std::perror(("prism fuzz: write " + path).c_str());
      std::abort();
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

/// A failed property of the code under test: prints it and aborts, so libFuzzer keeps the
/// input as a crash.
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "prism fuzz: property violated: %s\n", what.c_str());
  std::abort();
}

/// Reads the fuzzer's bytes front to back: small integers first, the rest as a string.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(reinterpret_cast<const char*>(data)), left_(size) {}
  uint8_t Byte() {
    if (left_ == 0) return 0;
    --left_;
    return static_cast<uint8_t>(*p_++);
  }
  uint64_t U64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(Byte()) << (8 * i);
    return v;
  }
  std::string_view Rest() {
    std::string_view out(p_, left_);
    p_ += left_;
    left_ = 0;
    return out;
  }
  size_t left() const { return left_; }

 private:
  const char* p_;
  size_t left_;
};

}  // namespace prism::fuzz
