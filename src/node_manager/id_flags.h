#pragma once
// A small flag per id for ids one rank mints in order (its task results): a window of
// bytes from the oldest id still flagged to the newest, so that flagging and clearing an
// id costs no allocation and no hashing (issue 21: a hash-map node per submitted task).
// When an id would stretch the window past kMaxSpan (a result still outstanding while a
// million newer tasks came and went), the window's flags move to a map and a new window
// starts; ids far before the window go to the map too. Not thread-safe.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>

namespace prism::internal {

class IdFlags {
 public:
  static constexpr size_t kMaxSpan = size_t{1} << 20;  // bytes in the window at most

  /// The flag of id `n` (its value), 0 if it has none.
  uint8_t Get(uint64_t n) const {
    if (!window_.empty() && n >= base_ && n - base_ < window_.size()) return window_[n - base_];
    if (overflow_.empty()) return 0;
    auto it = overflow_.find(n);
    return it == overflow_.end() ? 0 : it->second;
  }

  /// Flags `n` with `flag` (not 0).
  void Set(uint64_t n, uint8_t flag) {
    // The window spans at most kMaxSpan ids: an id that would stretch it further starts a
    // new window (the flags of the old one go to the map: usually none, or a few old ones
    // still outstanding), or, before the window, goes to the map itself.
    if (!overflow_.empty()) {  // an id that went to the map stays there
      auto it = overflow_.find(n);
      if (it != overflow_.end()) {
        it->second = flag;
        return;
      }
    }
    if (!window_.empty() && n >= base_ && n - base_ >= kMaxSpan) Restart();
    if (window_.empty()) {
      base_ = n;
      window_.push_back(flag);
      live_ = 1;
      return;
    }
    if (n < base_) {
      if (base_ - n > kMaxSpan - window_.size()) {
        overflow_[n] = flag;
        return;
      }
      window_.insert(window_.begin(), base_ - n, 0);
      base_ = n;
    } else if (n - base_ >= window_.size()) {
      window_.resize(n - base_ + 1, 0);
    }
    uint8_t& f = window_[n - base_];
    if (f == 0) ++live_;
    f = flag;
  }

  /// Drops `n`'s flag, if any.
  void Clear(uint64_t n) {
    if (!window_.empty() && n >= base_ && n - base_ < window_.size()) {
      uint8_t& f = window_[n - base_];
      if (f == 0) return;
      f = 0;
      --live_;
      Trim();
      return;
    }
    if (!overflow_.empty()) overflow_.erase(n);
  }

  bool Empty() const { return live_ == 0 && overflow_.empty(); }
  /// Bytes the window spans now (tests).
  size_t WindowSize() const { return window_.size(); }

 private:
  /// Moves the window's flags to the map and empties it.
  void Restart() {
    for (size_t i = 0; i < window_.size() && live_ > 0; ++i) {
      if (window_[i] == 0) continue;
      overflow_[base_ + i] = window_[i];
      --live_;
    }
    window_.clear();
    live_ = 0;
  }

  /// The window starts with a flagged id (or is empty). Its end stays at the newest id
  /// flagged: cleared flags there are reused by the next ids, and trimming them would cost
  /// the whole window per clear while an old flag holds its start.
  void Trim() {
    if (live_ == 0) {
      window_.clear();
      return;
    }
    while (window_.front() == 0) {
      window_.pop_front();
      ++base_;
    }
  }

  uint64_t base_ = 0;           // the id of window_[0]
  std::deque<uint8_t> window_;  // a flag per id from base_ on
  size_t live_ = 0;             // flags in window_ that are not 0
  std::unordered_map<uint64_t, uint8_t> overflow_;
};

}  // namespace prism::internal
