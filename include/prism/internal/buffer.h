#pragma once
// Byte buffers that never zero-fill (first touch of fresh pages is the expensive part of a
// large Put), with bounds-checked readers.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "prism/errors.h"

namespace prism::internal {

/// Storage for Buffers: 16-byte aligned, page aligned from 2 MiB. Large blocks come from a pool of recently freed blocks whose pages
/// are already mapped (a first touch of fresh pages costs ~10x a copy into reused ones);
/// `*capacity` receives the usable size, which may exceed `size`. Thread-safe.
char* AllocateBytes(size_t size, size_t* capacity);
void ReleaseBytes(char* data, size_t capacity);

/// A growable byte buffer with uninitialised storage. Not thread-safe.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t size) { Resize(size); }
  Buffer(const void* data, size_t size) { Append(data, size); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Free();
      data_ = other.data_;
      size_ = other.size_;
      capacity_ = other.capacity_;
      other.data_ = nullptr;
      other.size_ = other.capacity_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer& other) { Append(other.data(), other.size()); }
  Buffer& operator=(const Buffer& other) {
    if (this != &other) {
      size_ = 0;
      Append(other.data(), other.size());
    }
    return *this;
  }
  ~Buffer() { Free(); }

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  void Reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    size_t got = 0;
    char* fresh = AllocateBytes(capacity, &got);  // uninitialised: no zeroing
    if (size_ > 0) std::memcpy(fresh, data_, size_);
    Free();
    data_ = fresh;
    capacity_ = got;
  }
  void Resize(size_t size) {
    if (size > capacity_) Reserve(size);
    size_ = size;
  }
  /// Grows by n bytes and returns a pointer to them (uninitialised).
  char* Extend(size_t n) {
    if (size_ + n > capacity_) Reserve(std::max(size_ + n, capacity_ * 2 + 64));
    char* p = data_ + size_;
    size_ += n;
    return p;
  }
  void Append(const void* data, size_t n) {
    if (n == 0) return;
    std::memcpy(Extend(n), data, n);
  }
  void Clear() { size_ = 0; }

 private:
  void Free() {
    if (data_ != nullptr) ReleaseBytes(data_, capacity_);
    data_ = nullptr;
    capacity_ = 0;
  }
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

/// Serialized object bytes shared between the store and readers.
using Payload = std::shared_ptr<const Buffer>;

/// A non-owning view of bytes. `owner`, when set, is the payload the bytes lie in: a value
/// read from them may keep it alive and alias them instead of copying (prism::ArrayView,
/// torch tensors).
struct ByteView {
  const char* data = nullptr;
  size_t size = 0;
  const Payload* owner = nullptr;
};

/// Appends primitive values and length-prefixed byte strings to a Buffer.
class Writer {
 public:
  explicit Writer(Buffer& out) : out_(out) {}
  template <typename T>
  void Pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(out_.Extend(sizeof(T)), &v, sizeof(T));
  }
  void Bytes(const void* data, uint64_t n) {
    Pod(n);
    out_.Append(data, n);
  }
  void Str(const std::string& s) { Bytes(s.data(), s.size()); }
  void Raw(const void* data, size_t n) { out_.Append(data, n); }
  Buffer& buffer() { return out_; }

 private:
  Buffer& out_;
};

/// Reads what a Writer wrote; throws SerializationError instead of reading past the end.
/// `owner`, if given, is the payload holding the bytes, for values that alias them.
class Reader {
 public:
  Reader(const char* data, size_t size, const Payload* owner = nullptr)
      : p_(data), end_(data + size), owner_(owner) {}
  explicit Reader(ByteView v) : Reader(v.data, v.size, v.owner) {}
  template <typename T>
  T Pod() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, Take(sizeof(T)), sizeof(T));
    return v;
  }
  ByteView Bytes() {
    auto n = Pod<uint64_t>();
    const char* p = Take(n);
    return {p, static_cast<size_t>(n)};
  }
  std::string Str() {
    auto v = Bytes();
    return std::string(v.data, v.size);
  }
  const char* Take(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_)) {
      throw SerializationError("prism: truncated data: wanted " + std::to_string(n) +
                               " bytes, " + std::to_string(end_ - p_) + " left");
    }
    const char* p = p_;
    p_ += n;
    return p;
  }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool AtEnd() const { return p_ == end_; }
  /// The payload the bytes lie in, or nullptr if they are transient.
  const Payload* owner() const { return owner_; }

 private:
  const char* p_;
  const char* end_;
  const Payload* owner_;
};

}  // namespace prism::internal
