#pragma once
// RankList: a short list of ranks in 16 bytes, two of them inline and more on the heap.
// Every object on the head has two (its holders, its locations), nearly always of one or
// two ranks; boost's small_vector<int, 2> takes 32 bytes for that (Boost 1.74 has no
// narrower size type for it), and a million queued tasks carry a million such pairs
// (issue 22: head memory per queued task).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <utility>

namespace prism::internal {

class RankList {
 public:
  RankList() = default;
  RankList(std::initializer_list<int> ranks) {
    for (int rank : ranks) push_back(rank);
  }
  RankList(const RankList& other) { *this = other; }
  RankList(RankList&& other) noexcept { *this = std::move(other); }
  RankList& operator=(const RankList& other) {
    if (this == &other) return *this;
    clear();
    Reserve(other.size_);
    std::copy(other.begin(), other.end(), data());
    size_ = other.size_;
    return *this;
  }
  RankList& operator=(RankList&& other) noexcept {
    if (this == &other) return *this;
    Free();
    size_ = other.size_;
    capacity_ = other.capacity_;
    std::memcpy(&storage_, &other.storage_, sizeof storage_);
    other.size_ = 0;
    other.capacity_ = kInline;
    return *this;
  }
  ~RankList() { Free(); }

  const int* begin() const { return data(); }
  const int* end() const { return data() + size_; }
  int* begin() { return data(); }
  int* end() { return data() + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  void push_back(int rank) {
    if (size_ == capacity_) Reserve(2 * capacity_);
    data()[size_++] = rank;
  }
  /// Removes the rank at `at` (keeping the others' order).
  void erase(const int* at) {
    int* p = begin() + (at - begin());
    std::copy(p + 1, end(), p);
    --size_;
  }
  void clear() { size_ = 0; }

 private:
  static constexpr uint32_t kInline = 2;
  bool OnHeap() const { return capacity_ > kInline; }
  int* data() { return OnHeap() ? storage_.heap : storage_.local; }
  const int* data() const { return OnHeap() ? storage_.heap : storage_.local; }
  void Reserve(uint32_t capacity) {
    if (capacity <= capacity_) return;
    int* grown = new int[capacity];
    std::copy(begin(), end(), grown);
    Free();
    storage_.heap = grown;
    capacity_ = capacity;
  }
  void Free() {
    if (OnHeap()) delete[] storage_.heap;
    capacity_ = kInline;
  }

  uint32_t size_ = 0;
  uint32_t capacity_ = kInline;
  union Storage {
    int local[kInline];
    int* heap;
  } storage_{};
};

static_assert(sizeof(RankList) == 16);

}  // namespace prism::internal
