#pragma once
// PutWritten: a Put whose bytes the caller writes itself, straight into the object's buffer.
// For a library that assembles a large value from pieces (prism::data's shuffle gathers
// rows from many received buckets into each output block): building the value first and
// then Put-ting it copies every byte twice; writing the value's serialized form in place
// copies it once.
//
//   ObjectRef<Block> ref = platform::PutWritten<Block>(bytes_hint, [&](internal::Writer& w) {
//     WriteGatheredBlock(w, sources, runs);  // what Serializer<Block>::Write would write
//   });

#include <cstddef>
#include <utility>

#include "prism/api.h"
#include "prism/serialization.h"

namespace prism::platform {

/// Stores a value of type T whose serialized bytes `write` produces, and returns its
/// reference. `write` must write exactly what internal::Serializer<T>::Write writes for the
/// value (a Get reads them back with Serializer<T>::Read, and a mismatch is a
/// SerializationError there, not here). `size_hint`, if known, reserves the buffer in one
/// allocation (from the pool of recently freed buffers, whose pages are mapped). ObjectRefs
/// serialized by `write` are recorded as contained, as in Put. Thread-safe.
template <typename T, typename WriteFn>
ObjectRef<T> PutWritten(size_t size_hint, WriteFn&& write) {
  internal::CoreApi& core = internal::RequireCore("PutWritten");
  internal::ContainedRefScope scope;
  internal::Buffer bytes;
  if (size_hint > 0) bytes.Reserve(size_hint);
  internal::Writer w(bytes);
  std::forward<WriteFn>(write)(w);
  ObjectId id = core.Put(std::move(bytes), scope.Take());
  return ObjectRef<T>(id, internal::ObjectRefBase::Adopt{});
}

}  // namespace prism::platform
