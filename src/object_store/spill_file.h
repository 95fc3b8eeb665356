#pragma once
// A spilled object's file (memory_store.h spills objects to them): a 40-byte header, then
// the object's bytes. The header names the store that wrote it (a random token per store,
// so a file another process wrote under the same name, such as another job's sharing the
// directory, is never taken for ours), the object, its size and a CRC-32 of the bytes
// (zlib's), so a wrong or damaged file is an error, never data. The header is in the
// host's byte order: a spill file is read back only by the process that wrote it.

#include <cstdint>
#include <string>

#include "prism/internal/buffer.h"
#include "prism/internal/ids.h"

namespace prism::internal {

/// Writes object `id`'s bytes to a new file at `path` (not following a link there), with
/// its header. Returns "" or what went wrong (the file is then removed).
std::string WriteSpillFile(const std::string& path, uint64_t writer, ObjectId id, const Buffer& data);

/// Reads object `id` (`size` bytes) back from `path`, checking that store `writer` wrote it
/// for that object, that it holds `size` bytes and that they match their CRC-32. Never
/// allocates more than `size` bytes, whatever the file says. Throws ObjectLostError naming
/// the object, the file and what is wrong.
Payload ReadSpillFile(const std::string& path, uint64_t writer, ObjectId id, uint64_t size);

}  // namespace prism::internal
