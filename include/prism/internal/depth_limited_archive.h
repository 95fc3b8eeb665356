#pragma once
// The Boost binary archives behind prism's serialization of non-trivial values, with one
// addition: they count how deeply the value nests and refuse to go past kMaxValueDepth.
//
// Boost.Serialization walks a value by recursion, a dozen stack frames per object (about
// 150 to 1,000 bytes per generation at -O2, 2 to 3 KiB at -O0), so a deep value overflowed
// the thread's stack and killed the rank with SIGSEGV: on an 8 MiB stack, a chain of about
// 20,000 shared_ptrs or a tree about 58,000 generations deep whose nodes hold a std::vector
// of nodes. Every object or container
// Boost enters passes through the archive's save_override/load_override (the hook Boost
// documents for archives derived from binary_oarchive_impl/binary_iarchive_impl), so
// counting there sees every level, on both the writing and the reading side. Primitives
// (numbers, strings, Boost's own class-id and version records) and wrappers (name-value
// pairs, arrays) are leaves or pass-throughs and do not count.
//
// The bytes are exactly binary_oarchive's with no_header, so nothing on the wire changes.
// Boost compiles its archive implementations (.ipp) only for its own archive classes; they
// are templates and are instantiated here for these two.

#include <boost/archive/binary_iarchive_impl.hpp>
#include <boost/archive/binary_oarchive_impl.hpp>
#include <boost/archive/detail/register_archive.hpp>
#include <boost/archive/impl/archive_serializer_map.ipp>
#include <boost/archive/impl/basic_binary_iarchive.ipp>
#include <boost/archive/impl/basic_binary_iprimitive.ipp>
#include <boost/archive/impl/basic_binary_oarchive.ipp>
#include <boost/archive/impl/basic_binary_oprimitive.ipp>
#include <boost/serialization/array_optimization.hpp>
#include <boost/serialization/level.hpp>
#include <boost/serialization/wrapper.hpp>
#include <istream>
#include <ostream>
#include <string>
#include <type_traits>

#include "prism/errors.h"

namespace prism {

/// How deeply a value sent between ranks (a task argument or result, a Put, a channel
/// message) may nest. Every object and every container inside the value is one level: a
/// tree node that keeps its children in a std::vector takes two per generation, so such a
/// tree may be 500 generations deep. Deeper values throw prism::SerializationError where
/// they are serialized (and where bytes claiming such a value are read) instead of
/// overflowing the thread's stack. At the limit Boost uses at most about 0.5 MiB of stack
/// at -O2 (1.6 MiB at -O0; measured for vector, list, map and shared_ptr chains), inside the
/// 8 MiB of a task thread and even glibc's 2 MiB default when the stack rlimit is unlimited.
/// Python's pickle, and so Ray, stops at about the same place: a list nested 500 deep.
inline constexpr unsigned kMaxValueDepth = 1000;

namespace internal {

/// Whether entering a T takes a level: objects and containers, not primitives or wrappers.
template <typename T>
inline constexpr bool kIsNestingLevel = boost::serialization::implementation_level<T>::value >=
                                            boost::serialization::object_serializable &&
                                        !boost::serialization::is_wrapper<T>::type::value;

[[noreturn]] inline void ThrowTooDeep(bool saving) {
  throw SerializationError(
      std::string("prism: cannot ") + (saving ? "serialize" : "deserialize") +
      " a value nested more than " + std::to_string(kMaxValueDepth) +
      " levels deep (prism::kMaxValueDepth: every object and container inside a value is a "
      "level, so a tree node that keeps its children in a std::vector takes two per "
      "generation); going deeper would overflow the thread's stack. " +
      (saving ? "Flatten the structure: keep a tree's nodes in one std::vector and refer to "
                "children by index, or a long chain as a vector"
              : "These bytes were not written by prism's serializer (corrupt, or another "
                "program's)"));
}

/// No header (prism frames the bytes itself) and no codecvt: binary archives move bytes with
/// sputn/sgetn, never converting them, so imbuing the buffer with Boost's locale is wasted work.
inline constexpr unsigned kArchiveFlags = boost::archive::no_header | boost::archive::no_codecvt;

/// boost::archive::binary_oarchive that refuses values nested deeper than kMaxValueDepth.
class DepthLimitedOArchive
    : public boost::archive::binary_oarchive_impl<DepthLimitedOArchive, std::ostream::char_type,
                                                  std::ostream::traits_type> {
  using Base = boost::archive::binary_oarchive_impl<DepthLimitedOArchive, std::ostream::char_type,
                                                    std::ostream::traits_type>;

 public:
  explicit DepthLimitedOArchive(std::streambuf& sb) : Base(sb, kArchiveFlags) {
    init(kArchiveFlags);
  }

  // Called by Boost for everything written, through interface_oarchive::operator<<.
  template <class T>
  void save_override(T& t) {
    if constexpr (kIsNestingLevel<std::remove_cv_t<T>>) {
      if (++depth_ > kMaxValueDepth) ThrowTooDeep(true);
      this->Base::save_override(t);
      --depth_;
    } else {
      this->Base::save_override(t);
    }
  }

 private:
  unsigned depth_ = 0;
};

/// boost::archive::binary_iarchive that refuses values nested deeper than kMaxValueDepth.
class DepthLimitedIArchive
    : public boost::archive::binary_iarchive_impl<DepthLimitedIArchive, std::istream::char_type,
                                                  std::istream::traits_type> {
  using Base = boost::archive::binary_iarchive_impl<DepthLimitedIArchive, std::istream::char_type,
                                                    std::istream::traits_type>;

 public:
  explicit DepthLimitedIArchive(std::streambuf& sb) : Base(sb, kArchiveFlags) {
    init(kArchiveFlags);
  }

  // Called by Boost for everything read, through interface_iarchive::operator>>.
  template <class T>
  void load_override(T& t) {
    if constexpr (kIsNestingLevel<std::remove_cv_t<T>>) {
      if (++depth_ > kMaxValueDepth) ThrowTooDeep(false);
      this->Base::load_override(t);
      --depth_;
    } else {
      this->Base::load_override(t);
    }
  }

 private:
  unsigned depth_ = 0;
};

}  // namespace internal
}  // namespace prism

// As boost/archive/binary_?archive.hpp do for Boost's own: BOOST_CLASS_EXPORT'ed types
// register with these archives too, and vectors and arrays of primitives go as one block.
BOOST_SERIALIZATION_REGISTER_ARCHIVE(prism::internal::DepthLimitedOArchive)
BOOST_SERIALIZATION_REGISTER_ARCHIVE(prism::internal::DepthLimitedIArchive)
BOOST_SERIALIZATION_USE_ARRAY_OPTIMIZATION(prism::internal::DepthLimitedOArchive)
BOOST_SERIALIZATION_USE_ARRAY_OPTIMIZATION(prism::internal::DepthLimitedIArchive)
