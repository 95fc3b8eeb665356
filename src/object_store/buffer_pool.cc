// Large-block pool behind Buffer. Blocks of at least kMinPooled bytes are kept after they
// are freed, up to a total of PoolLimit() bytes, and handed out again to requests they fit
// without wasting more than half of themselves. Small blocks go straight to new/delete.
#include <map>
#include <mutex>

#include "object_store/buffer_pool.h"
#include "prism/internal/buffer.h"

namespace prism::internal {

namespace {
constexpr size_t kMinPooled = 1 << 20;
std::mutex g_mu;
std::multimap<size_t, char*> g_free;  // capacity -> block
size_t g_pooled = 0;
size_t g_limit = size_t{1} << 30;
}  // namespace

void SetBufferPoolLimit(size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_limit = bytes;
  while (g_pooled > g_limit && !g_free.empty()) {
    auto it = std::prev(g_free.end());
    g_pooled -= it->first;
    delete[] it->second;
    g_free.erase(it);
  }
}

size_t BufferPoolBytes() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_pooled;
}

char* AllocateBytes(size_t size, size_t* capacity) {
  if (size >= kMinPooled) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_free.lower_bound(size);
    if (it != g_free.end() && it->first / 2 <= size) {
      *capacity = it->first;
      char* block = it->second;
      g_pooled -= it->first;
      g_free.erase(it);
      return block;
    }
  }
  *capacity = size;
  return new char[size];
}

void ReleaseBytes(char* data, size_t capacity) {
  if (capacity >= kMinPooled) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_pooled + capacity <= g_limit) {
      g_free.emplace(capacity, data);
      g_pooled += capacity;
      return;
    }
  }
  delete[] data;
}

}  // namespace prism::internal
