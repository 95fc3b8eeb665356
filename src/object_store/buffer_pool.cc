// Large-block pool behind Buffer. Blocks of at least kMinPooled bytes are kept after they
// are freed, up to a total of PoolLimit() bytes (the smallest make way for a new one), and
// handed out again to requests they fit without wasting more than half of themselves.
// Small blocks go straight to new/delete.
#include <sys/mman.h>

#include <map>
#include <new>
#include <mutex>
#include <utility>
#include <vector>

#include "object_store/buffer_pool.h"
#include "prism/internal/buffer.h"

namespace prism::internal {

namespace {
constexpr size_t kMinPooled = 1 << 20;
// Blocks this large are mapped directly and asked to use transparent huge pages: fresh
// pages fault in about twice as fast here (0.33 -> 0.65 GB/s first touch on this VM).
constexpr size_t kMinMapped = 2 << 20;

// Blocks of kMinMapped and more are mapped, so page aligned: values laid out at 64-byte
// offsets inside them (tensor elements) are 64-byte aligned for vectorised reads. Smaller
// ones come from operator new (16-byte aligned, enough for any scalar): an aligned new
// costs a task round trip about 600 more instructions (memalign) for nothing.
char* NewBlock(size_t size) {
  if (size < kMinMapped) return new char[size];
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, size, MADV_HUGEPAGE);  // a hint: ignored where THP is off
  return static_cast<char*>(p);
}

void DeleteBlock(char* block, size_t size) {
  if (size < kMinMapped) {
    delete[] block;
  } else {
    munmap(block, size);
  }
}

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
    DeleteBlock(it->second, it->first);
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
  // A fresh mapped block gets 1/16 headroom, in whole 2 MiB pages: the next request of
  // about the same size (the next round's shuffle outputs, the next batch) then finds it in
  // the pool instead of faulting in fresh pages (0.3-0.65 GB/s here, against ~5 GB/s for a
  // copy into mapped ones).
  const size_t cap = size < kMinMapped ? size : (size + size / 16 + kMinMapped - 1) / kMinMapped * kMinMapped;
  *capacity = cap;
  return NewBlock(cap);
}

void ReleaseBytes(char* data, size_t capacity) {
  if (capacity >= kMinPooled) {
    std::vector<std::pair<char*, size_t>> evicted;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (capacity > g_limit) evicted.emplace_back(std::exchange(data, nullptr), capacity);
      // Keep the block just freed (its size is likely wanted again) and drop the smallest
      // ones to make room: large blocks cost the most to fault in afresh.
      while (data != nullptr && g_pooled + capacity > g_limit && !g_free.empty()) {
        g_pooled -= g_free.begin()->first;
        evicted.emplace_back(g_free.begin()->second, g_free.begin()->first);
        g_free.erase(g_free.begin());
      }
      if (data != nullptr && g_pooled + capacity <= g_limit) {
        g_free.emplace(capacity, data);
        g_pooled += capacity;
        data = nullptr;
      }
    }
    for (auto [block, size] : evicted) DeleteBlock(block, size);  // unlocked: munmap is slow
  }
  if (data != nullptr) DeleteBlock(data, capacity);
}

}  // namespace prism::internal
