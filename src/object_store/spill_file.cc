// A spilled object's file: the header, the write and the checked read (spill_file.h).

#include "object_store/spill_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "prism/errors.h"

namespace prism::internal {

namespace {

constexpr char kSpillMagic[8] = {'P', 'R', 'I', 'S', 'M', 'S', 'P', '1'};
struct SpillHeader {
  char magic[8];
  uint64_t writer;
  uint64_t id;
  uint64_t size;
  uint32_t crc;
  uint32_t reserved;
};
static_assert(sizeof(SpillHeader) == 40);

uint32_t Crc32(const char* data, size_t size) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0, Z_NULL, 0), reinterpret_cast<const Bytef*>(data), size));
}

/// Writes `buf` fully to `fd`. Returns "" or what went wrong.
std::string WriteAll(int fd, const char* p, size_t left, const std::string& path) {
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "cannot write " + path + ": " + std::strerror(errno);
    p += n;
    left -= static_cast<size_t>(n);
  }
  return "";
}

/// Reads exactly `size` bytes of `fd` into `p`. Returns "" or what went wrong.
std::string ReadAll(int fd, char* p, size_t left) {
  while (left > 0) {
    ssize_t n = ::read(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? "the file is shorter than the object" : std::strerror(errno);
    p += n;
    left -= static_cast<size_t>(n);
  }
  return "";
}

}  // namespace

std::string WriteSpillFile(const std::string& path, uint64_t writer, ObjectId id, const Buffer& data) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return "cannot create " + path + ": " + std::strerror(errno);
  SpillHeader h{};
  std::memcpy(h.magic, kSpillMagic, sizeof h.magic);
  h.writer = writer;
  h.id = id.Value();
  h.size = data.size();
  h.crc = Crc32(data.data(), data.size());
  std::string why = WriteAll(fd, reinterpret_cast<const char*>(&h), sizeof h, path);
  if (why.empty()) why = WriteAll(fd, data.data(), data.size(), path);
  if (::close(fd) != 0 && why.empty()) why = "cannot write " + path + ": " + std::strerror(errno);
  if (!why.empty()) ::unlink(path.c_str());
  return why;
}

Payload ReadSpillFile(const std::string& path, uint64_t writer, ObjectId id, uint64_t size) {
  auto lost = [&](const std::string& why) {
    return ObjectLostError("prism: cannot read back spilled object " + id.Hex() + " from " + path +
                           ": " + why);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw lost(std::strerror(errno));
  SpillHeader h{};
  std::string why = ReadAll(fd, reinterpret_cast<char*>(&h), sizeof h);
  if (why.empty() && std::memcmp(h.magic, kSpillMagic, sizeof h.magic) != 0) {
    why = "it is not a Prism spill file";
  } else if (why.empty() && (h.writer != writer || h.id != id.Value())) {
    why = "the file was written by another process or for another object (another job "
          "sharing the spill directory?)";
  } else if (why.empty() && h.size != size) {
    why = "it holds " + std::to_string(h.size) + " bytes, not " + std::to_string(size);
  }
  Buffer out(why.empty() ? size : 0);
  if (why.empty()) why = ReadAll(fd, out.data(), size);
  ::close(fd);
  if (why.empty() && Crc32(out.data(), out.size()) != h.crc) {
    why = "the bytes do not match their checksum (the file was changed or damaged)";
  }
  if (!why.empty()) throw lost(why);
  return std::make_shared<const Buffer>(std::move(out));
}

}  // namespace prism::internal
