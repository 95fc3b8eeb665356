#pragma once

#include <cstddef>
#include <memory>

namespace prism::internal {

/// Caps the bytes kept in the large-block pool (freed blocks beyond it go back to the OS).
/// The runtime sets it to a quarter of the rank's object store memory.
void SetBufferPoolLimit(size_t bytes);
/// Bytes currently held in the pool.
size_t BufferPoolBytes();

/// Where pooled blocks (1 MiB and up) come from instead of anonymous memory: the UCX data
/// plane hands out memory its same-host peers can read directly. A block goes back to the
/// source it came from, even after another source is installed.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  /// A block of exactly `size` bytes, or nullptr to use ordinary memory.
  virtual char* Allocate(size_t size) = 0;
  virtual void Free(char* block, size_t size) = 0;
};
/// Installs `source` for new blocks.
void SetBlockSource(std::shared_ptr<BlockSource> source);
/// New blocks come from ordinary memory again, if `source` is the one installed.
void ClearBlockSource(const BlockSource* source);

}  // namespace prism::internal
