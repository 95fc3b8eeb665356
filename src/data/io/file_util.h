#pragma once
// What the readers and writers of src/data/io/ share: whole reads at an offset, durable
// writes, the temporary-then-rename part files, and the check that blocks share a schema.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/io.h"

namespace prism::data::io::detail {

/// strerror(err).
std::string ErrnoText(int err);

/// An open file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

/// Opens `path` for reading. Throws prism::Error naming the file ("no such file: check the
/// path") if it cannot.
Fd OpenForRead(const std::string& path, const char* what);

/// Reads exactly n bytes at `offset` (pread, retried on EINTR and short reads). Throws
/// prism::Error naming the file if it ends first or the read fails.
void PreadAll(int fd, char* out, size_t n, uint64_t offset, const std::string& path);

/// A part file being written: `<dir>/.part-NNNNN-<random><ext>` until Commit renames it to
/// `<dir>/part-NNNNN<ext>`; removed if destroyed before Commit.
class PartFile {
 public:
  /// Creates `dir` if needed. Throws prism::Error if it cannot.
  PartFile(const std::string& dir, int64_t index, const std::string& ext);
  ~PartFile();
  PartFile(const PartFile&) = delete;
  PartFile& operator=(const PartFile&) = delete;

  /// Where to write the part now.
  const std::string& temp_path() const { return temp_; }
  /// fsyncs the temporary, renames it into place and returns the part (bytes from the
  /// file). Throws prism::Error naming the files.
  Part Commit(int64_t rows);

 private:
  std::string dir_, temp_, final_name_;
  bool committed_ = false;
};

/// A write() of all of `bytes` to fd (retried on EINTR and short writes). Throws
/// prism::Error naming `path`.
void WriteAll(int fd, std::string_view bytes, const std::string& path);

/// Throws prism::Error, naming `what` and the first differing column, unless every block
/// has the first one's schema.
void CheckOneSchema(const std::vector<Block>& blocks, const std::string& what);

/// Total rows of blocks.
int64_t TotalRows(const std::vector<Block>& blocks);

}  // namespace prism::data::io::detail
