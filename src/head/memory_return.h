#pragma once
// How rank 0 gives memory back after a burst of tasks (perf/README.md, "Memory on rank 0").
//
// A million tasks submitted at once cost rank 0 about 1.3 KB each while they are queued
// (their specs, the head's task and object entries, the messages posted to the head, the
// node's refs and results). Two things kept that memory once the tasks were gone:
//
//  * containers that never shrink: a hash map keeps its bucket array at its largest size
//    after erase, a vector its capacity after clear. The head's maps shrink when they fall
//    below 1/8 of their buckets (ShrinkIfSparse: one compare per erase; the rehashes of a
//    drain from N entries cost O(N) in all), and the head's queue of posted messages is
//    dropped after a batch larger than kMaxKeptPosted;
//  * glibc's malloc, which returns freed memory to the system only from the top of each
//    arena: a burst's entries, allocated by the driver's and the transport's threads
//    between longer-lived blocks, stay resident after free. DrainWatch sees a burst of at
//    least kBurst live tasks and objects drain to 1/64 of its peak (and its tail to 1/16
//    of that), and the head then calls malloc_trim(0) after letting go of its lock
//    (ReleaseFreeMemory), which hands every free page of every arena back: at most twice
//    per burst, never on the per-task path.
//
// Measured with perf/memory_benchmark.cc (prism_memory_benchmark): see perf/README.md.

#include <cstddef>

namespace prism::internal {

/// Hash maps with more buckets than this shrink when sparse; smaller ones are left alone.
inline constexpr size_t kMinShrinkBuckets = 4096;
/// A vector of posted messages whose capacity grew past this is freed after its batch.
inline constexpr size_t kMaxKeptPosted = 4096;

/// Rehashes `map` down to twice its size when it fills less than 1/8 of its buckets (and
/// has more than kMinShrinkBuckets). Invalidates iterators, never references or pointers.
template <class HashMap>
void ShrinkIfSparse(HashMap& map) {
  const size_t buckets = map.bucket_count();
  if (buckets > kMinShrinkBuckets && map.size() < buckets / 8) map.rehash(map.size() * 2);
}

/// Says when a burst of live entries (tasks and objects on the head) has drained.
class DrainWatch {
 public:
  /// A burst must reach this many live entries before its drain triggers a trim.
  static constexpr size_t kBurst = 65536;

  /// Call with the live count after each batch of work. True when a burst of at least
  /// kBurst has fallen to 1/64 of its peak, and once more when what was left then has
  /// fallen to 1/16 (the tail of the burst, freed after the first trim).
  bool Drained(size_t live) {
    if (live > peak_) {
      peak_ = live;
      return false;
    }
    if (peak_ >= kBurst && live <= peak_ / 64) {
      peak_ = live;
      has_tail_ = live >= 1024;  // a smaller tail is not worth a second trim
      tail_ = live / 16;
      return true;
    }
    if (has_tail_ && live <= tail_) {
      has_tail_ = false;
      return true;
    }
    return false;
  }

 private:
  size_t peak_ = 0;
  size_t tail_ = 0;
  bool has_tail_ = false;
};

/// Hands the free pages of every malloc arena back to the system (glibc's malloc_trim;
/// nothing elsewhere). Takes milliseconds per hundred MB freed: call it rarely, without
/// holding locks others wait on.
void ReleaseFreeMemory();

}  // namespace prism::internal
