#pragma once

#include <cstddef>

namespace prism::internal {

/// Caps the bytes kept in the large-block pool (freed blocks beyond it go back to the OS).
/// The runtime sets it to a quarter of the rank's object store memory.
void SetBufferPoolLimit(size_t bytes);
/// Bytes currently held in the pool.
size_t BufferPoolBytes();

}  // namespace prism::internal
