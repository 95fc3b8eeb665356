#pragma once
// prism::ArrayView<T>: a read-only array of trivially copyable elements that reads an
// object's bytes where they lie, without a copy.
//
//   auto ref = prism::Put(std::vector<float>(64 << 20, 1.0f));
//   prism::ArrayView<float> v = prism::GetView(ref);   // no copy: aliases the object
//   float x = v[0];
//
//   float Sum(prism::ArrayView<float> xs);             // a task reading an argument in place
//   PRISM_REMOTE(Sum);
//   prism::Task(Sum).Remote(ref);                      // ObjectRef<std::vector<float>> fits
//
// On the wire an ArrayView<T> is exactly a std::vector<T> (length, then the elements), so
// the two convert both ways: a ref to a vector can be read as a view, a vector passed where
// a view is expected is sent as one, and a task may return either.
//
// Lifetime: a view holds its object's bytes (the store's buffer on this rank: a value Put
// here, a task's large result, or a copy fetched from another rank straight into that
// buffer) for as long as the view or any copy of it lives. While it does, the store never
// spills that object; if the object is freed meanwhile, the view's bytes stay valid and go
// with the last view. Never write through data(): other readers on the rank share them.
// A view read from bytes that have no owner (a value nested inside a Boost-serialized
// struct, say) or that are misaligned for T owns a copy instead (IsShared() says which).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "prism/errors.h"
#include "prism/internal/buffer.h"
#include "prism/object_ref.h"
#include "prism/serialization.h"

namespace prism {

template <typename T>
class ArrayView {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_pointer_v<T> &&
                    !internal::IsObjectRef<T>::value,
                "prism::ArrayView<T> needs a trivially copyable element type without pointers "
                "(for other element types, Get a std::vector<T>)");

 public:
  using value_type = T;
  using const_iterator = const T*;

  ArrayView() = default;
  /// A view that owns a copy of `values` (to pass one to a task or Put it).
  ArrayView(const std::vector<T>& values) { Own(values.data(), values.size()); }  // NOLINT
  ArrayView(const T* data, size_t size) { Own(data, size); }

  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t size_bytes() const { return size_ * sizeof(T); }
  const T& operator[](size_t i) const { return data_[i]; }
  /// Bounds-checked element access; throws prism::Error past the end.
  const T& at(size_t i) const {
    if (i >= size_) {
      throw Error("prism: ArrayView index " + std::to_string(i) + " out of range (size " +
                  std::to_string(size_) + ")");
    }
    return data_[i];
  }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  /// A copy of the elements.
  std::vector<T> ToVector() const { return std::vector<T>(begin(), end()); }
  /// True if the view reads an object's bytes in place (no copy was made).
  bool IsShared() const { return shared_; }

  /// Reads `bytes` (a whole number of T) as a view: aliases them when `owner` holds them and
  /// they are aligned for T, copies them otherwise.
  static ArrayView FromBytes(const char* bytes, size_t n, const internal::Payload* owner) {
    if (n % sizeof(T) != 0) {
      throw SerializationError("prism: ArrayView: " + std::to_string(n) +
                               " bytes are not a whole number of " +
                               std::to_string(sizeof(T)) + "-byte elements: the ObjectRef's "
                               "element type does not match the stored vector's");
    }
    ArrayView v;
    if (owner != nullptr && *owner &&
        reinterpret_cast<uintptr_t>(bytes) % alignof(T) == 0) {
      v.owner_ = *owner;
      v.data_ = reinterpret_cast<const T*>(bytes);
      v.size_ = n / sizeof(T);
      v.shared_ = true;
    } else {
      v.OwnBytes(bytes, n);
    }
    return v;
  }

 private:
  void Own(const T* data, size_t size) {
    OwnBytes(reinterpret_cast<const char*>(data), size * sizeof(T));
  }
  void OwnBytes(const char* bytes, size_t n) {
    // Buffer storage is aligned for any scalar (operator new / mmap).
    auto copy = std::make_shared<internal::Buffer>(bytes, n);
    data_ = reinterpret_cast<const T*>(copy->data());
    size_ = n / sizeof(T);
    owner_ = std::move(copy);
    shared_ = false;
  }

  std::shared_ptr<const void> owner_;
  const T* data_ = nullptr;
  size_t size_ = 0;
  bool shared_ = false;
};

namespace internal {
template <typename T>
struct IsSerializable<ArrayView<T>> : std::true_type {};

template <typename T>
struct Serializer<ArrayView<T>> {
  static void Write(Writer& w, const ArrayView<T>& v) { w.Bytes(v.data(), v.size_bytes()); }
  static ArrayView<T> Read(Reader& r) {
    ByteView b = r.Bytes();
    return ArrayView<T>::FromBytes(b.data, b.size, r.owner());
  }
};
}  // namespace internal

/// Reads a vector object in place: blocks until it is ready, then returns a view of the
/// store's bytes on this rank (fetched here first if another rank holds it), no copy.
/// Throws TaskError if the task that makes it failed, TimeoutError after timeout_ms
/// (-1: no limit).
template <typename T, typename A>
ArrayView<T> GetView(const ObjectRef<std::vector<T, A>>& ref, int timeout_ms = -1) {
  if (ref.IsNil()) throw Error("prism: GetView on an empty ObjectRef");
  internal::Payload payload = internal::RequireCore("GetView").Get({ref.ID()}, timeout_ms)[0];
  return internal::Deserialize<ArrayView<T>>(payload->data(), payload->size(), &payload);
}
template <typename T>
ArrayView<T> GetView(const ObjectRef<ArrayView<T>>& ref, int timeout_ms = -1) {
  return *ref.Get(timeout_ms);
}

}  // namespace prism
