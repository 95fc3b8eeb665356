#pragma once
// How values become bytes. Fast paths, chosen at compile time:
//   * trivially copyable types (int, double, POD structs, std::array of them): memcpy
//   * std::string, std::vector<trivially copyable>: length + memcpy
//   * std::vector<T> of other T: length + each element
//   * prism::ObjectRef<T>: its id (the object stays alive while the value holding it lives)
// Everything else goes through Boost.Serialization: give your type a
//     template <class Archive> void serialize(Archive& ar, unsigned version) { ar & a & b; }
// member (or a free serialize found by ADL). Standard containers of serializable types
// work (map, unordered_map, set, list, deque, pair, tuple, optional, shared_ptr).
// A type that fits none of these is a compile error that says what to add.
// Boost's walk is recursive, so a value may nest at most kMaxValueDepth (1000) objects and
// containers deep; deeper ones are a SerializationError, never a stack overflow
// (prism/internal/depth_limited_archive.h).
//
// Byte order and layout are the machine's: all ranks of a job run the same binary.

#include <array>
#include <boost/serialization/array.hpp>
#include <boost/serialization/deque.hpp>
#include <boost/serialization/list.hpp>
#include <boost/serialization/map.hpp>
#include <boost/serialization/optional.hpp>
#include <boost/serialization/set.hpp>
#include <boost/serialization/shared_ptr.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/unordered_map.hpp>
#include <boost/serialization/unordered_set.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>
#include <deque>
#include <istream>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <streambuf>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "prism/errors.h"
#include "prism/internal/buffer.h"
#include "prism/internal/depth_limited_archive.h"
#include "prism/internal/ids.h"

// Boost 1.74 (Debian bookworm) serializes boost::optional but not std::optional or
// std::tuple: these make both work anywhere inside a value (e.g. map<string, optional<int>>).
namespace boost::serialization {
// (save/load overloads would collide with Boost's shared_ptr helpers: one serialize.)
template <class Archive, class T>
void serialize(Archive& ar, std::optional<T>& o, unsigned) {
  bool has = o.has_value();
  ar & has;
  if constexpr (Archive::is_saving::value) {
    if (has) ar & *o;
  } else {
    o.reset();
    if (has) ar & o.emplace();
  }
}
template <class Archive, class... Ts>
void serialize(Archive& ar, std::tuple<Ts...>& t, unsigned) {
  std::apply([&ar](auto&... element) { ((ar & element), ...); }, t);
}
}  // namespace boost::serialization

namespace prism::internal {

// ---- What can be serialized ------------------------------------------------------------

template <typename T, typename = void>
struct HasMemberSerialize : std::false_type {};
template <typename T>
struct HasMemberSerialize<T, std::void_t<decltype(std::declval<T&>().serialize(
                                 std::declval<DepthLimitedOArchive&>(), 0u))>> : std::true_type {};

// A free serialize(ar, t, version) in T's namespace, found by ADL only (the catch-all in
// boost::serialization is deliberately not visible here).
namespace adl_probe {
template <typename T, typename = void>
struct HasFreeSerialize : std::false_type {};
template <typename T>
struct HasFreeSerialize<T, std::void_t<decltype(serialize(std::declval<DepthLimitedOArchive&>(),
                                                          std::declval<T&>(), 0u))>>
    : std::true_type {};
}  // namespace adl_probe

template <typename T>
struct IsObjectRef : std::false_type {};

template <typename T>
struct IsSerializable;

template <typename T>
inline constexpr bool kIsSerializable = IsSerializable<std::remove_cv_t<T>>::value;

template <typename T>
struct IsSerializable
    : std::bool_constant<(std::is_trivially_copyable_v<T> && !std::is_pointer_v<T> &&
                          !std::is_member_pointer_v<T>) ||
                         HasMemberSerialize<T>::value || adl_probe::HasFreeSerialize<T>::value ||
                         IsObjectRef<T>::value> {};
template <>
struct IsSerializable<std::string> : std::true_type {};
template <typename T, typename A>
struct IsSerializable<std::vector<T, A>> : IsSerializable<T> {};
template <typename T, typename A>
struct IsSerializable<std::list<T, A>> : IsSerializable<T> {};
template <typename T, typename A>
struct IsSerializable<std::deque<T, A>> : IsSerializable<T> {};
template <typename T, size_t N>
struct IsSerializable<std::array<T, N>> : IsSerializable<T> {};
template <typename T, typename C, typename A>
struct IsSerializable<std::set<T, C, A>> : IsSerializable<T> {};
template <typename T, typename H, typename E, typename A>
struct IsSerializable<std::unordered_set<T, H, E, A>> : IsSerializable<T> {};
template <typename K, typename V, typename C, typename A>
struct IsSerializable<std::map<K, V, C, A>>
    : std::bool_constant<kIsSerializable<K> && kIsSerializable<V>> {};
template <typename K, typename V, typename H, typename E, typename A>
struct IsSerializable<std::unordered_map<K, V, H, E, A>>
    : std::bool_constant<kIsSerializable<K> && kIsSerializable<V>> {};
template <typename A, typename B>
struct IsSerializable<std::pair<A, B>>
    : std::bool_constant<kIsSerializable<A> && kIsSerializable<B>> {};
template <typename... Ts>
struct IsSerializable<std::tuple<Ts...>> : std::bool_constant<(kIsSerializable<Ts> && ...)> {};
template <typename T>
struct IsSerializable<std::optional<T>> : IsSerializable<T> {};
template <typename T>
struct IsSerializable<std::shared_ptr<T>> : IsSerializable<T> {};

// ---- Streams over Buffer, for Boost archives ------------------------------------------

class BufferOStreamBuf : public std::streambuf {
 public:
  explicit BufferOStreamBuf(Buffer& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_.Append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      char ch = static_cast<char>(c);
      out_.Append(&ch, 1);
    }
    return c;
  }

 private:
  Buffer& out_;
};

class ViewIStreamBuf : public std::streambuf {
 public:
  ViewIStreamBuf(const char* data, size_t size) {
    char* p = const_cast<char*>(data);
    setg(p, p, p + size);
  }
};

// ---- Collector of ObjectRefs nested inside a value being serialized ---------------------

/// While alive on a thread, records the ids of ObjectRefs serialized on that thread.
class ContainedRefScope {
 public:
  ContainedRefScope() : previous_(current_) { current_ = this; }
  ~ContainedRefScope() { current_ = previous_; }
  ContainedRefScope(const ContainedRefScope&) = delete;
  ContainedRefScope& operator=(const ContainedRefScope&) = delete;
  static void Record(ObjectId id) {
    if (current_ != nullptr) current_->ids_.push_back(id);
  }
  std::vector<ObjectId> Take() { return std::move(ids_); }

 private:
  inline static thread_local ContainedRefScope* current_ = nullptr;
  ContainedRefScope* previous_;
  std::vector<ObjectId> ids_;
};

// ---- Serializer -------------------------------------------------------------------------

template <typename T, typename Enable = void>
struct Serializer {
  static_assert(kIsSerializable<T>,
                "prism: this type cannot be sent between ranks. Make it trivially copyable, "
                "or give it a member `template <class Archive> void serialize(Archive& ar, "
                "unsigned version) { ar & field1 & field2; }` (Boost.Serialization). Raw "
                "pointers are never serializable: use values or std::shared_ptr.");
  static void Write(Writer& w, const T& value) {
    Buffer& out = w.buffer();
    size_t length_at = out.size();
    w.Pod<uint64_t>(0);
    {
      BufferOStreamBuf sb(out);
      DepthLimitedOArchive ar(sb);
      ar << value;
    }
    uint64_t length = out.size() - length_at - sizeof(uint64_t);
    std::memcpy(out.data() + length_at, &length, sizeof length);
  }
  static T Read(Reader& r) {
    ByteView v = r.Bytes();
    ViewIStreamBuf sb(v.data, v.size);
    T value{};
    try {
      DepthLimitedIArchive ar(sb);
      ar >> value;
    } catch (const boost::archive::archive_exception& e) {
      throw SerializationError(std::string("prism: cannot deserialize value: ") + e.what());
    }
    return value;
  }
};

template <typename T>
struct Serializer<T, std::enable_if_t<std::is_trivially_copyable_v<T> && !std::is_pointer_v<T> &&
                                      !std::is_member_pointer_v<T> && !IsObjectRef<T>::value>> {
  static void Write(Writer& w, const T& value) { w.Pod(value); }
  static T Read(Reader& r) { return r.Pod<T>(); }
};

template <>
struct Serializer<std::string> {
  static void Write(Writer& w, const std::string& s) { w.Str(s); }
  static std::string Read(Reader& r) { return r.Str(); }
};

template <typename T, typename A>
struct Serializer<std::vector<T, A>> {
  static void Write(Writer& w, const std::vector<T, A>& v) {
    if constexpr (std::is_trivially_copyable_v<T> && !IsObjectRef<T>::value) {
      w.Bytes(v.data(), v.size() * sizeof(T));
    } else {
      w.Pod<uint64_t>(v.size());
      for (const auto& e : v) Serializer<T>::Write(w, e);
    }
  }
  static std::vector<T, A> Read(Reader& r) {
    if constexpr (std::is_trivially_copyable_v<T> && !IsObjectRef<T>::value) {
      ByteView b = r.Bytes();
      if (b.size % sizeof(T) != 0) {
        throw SerializationError("prism: vector byte length is not a multiple of its element");
      }
      std::vector<T, A> v(b.size / sizeof(T));
      if (b.size > 0) std::memcpy(v.data(), b.data, b.size);
      return v;
    } else {
      auto n = r.Pod<uint64_t>();
      if (n > r.remaining()) throw SerializationError("prism: corrupt vector length");
      std::vector<T, A> v;
      v.reserve(n);
      for (uint64_t i = 0; i < n; ++i) v.push_back(Serializer<T>::Read(r));
      return v;
    }
  }
};

/// std::shared_ptr<T> of a type Boost does not track (numbers, enums, std::string), as in
/// Ray's std::vector<std::shared_ptr<T>> results (ray::Get of a list): a null flag and the
/// value. Boost refuses these, and tracks every other T itself (shared owners stay shared).
template <typename T>
struct Serializer<std::shared_ptr<T>,
                  std::enable_if_t<boost::serialization::tracking_level<T>::value ==
                                   boost::serialization::track_never>> {
  static void Write(Writer& w, const std::shared_ptr<T>& p) {
    w.Pod<uint8_t>(p ? 1 : 0);
    if (p) Serializer<T>::Write(w, *p);
  }
  static std::shared_ptr<T> Read(Reader& r) {
    if (r.Pod<uint8_t>() == 0) return nullptr;
    return std::make_shared<T>(Serializer<T>::Read(r));
  }
};

/// Appends `value` to `out`.
template <typename T>
void SerializeInto(Buffer& out, const T& value) {
  Writer w(out);
  Serializer<std::decay_t<T>>::Write(w, value);
}

/// Serializes one value into a fresh buffer.
template <typename T>
Buffer Serialize(const T& value) {
  Buffer out;
  if constexpr (std::is_trivially_copyable_v<T>) out.Reserve(sizeof(T));
  if constexpr (std::is_same_v<T, std::string>) out.Reserve(value.size() + 8);
  SerializeInto(out, value);
  return out;
}

/// Reads one value; throws SerializationError if the bytes do not hold exactly one T.
/// `owner`, if given, is the payload holding the bytes: views (prism::ArrayView, tensors)
/// then alias it instead of copying.
template <typename T>
T Deserialize(const char* data, size_t size, const Payload* owner = nullptr) {
  Reader r(data, size, owner);
  T value = Serializer<T>::Read(r);
  if (!r.AtEnd()) {
    throw SerializationError("prism: " + std::to_string(r.remaining()) +
                             " bytes left over after deserializing a value: the ObjectRef's "
                             "type does not match the stored value's type");
  }
  return value;
}

}  // namespace prism::internal
