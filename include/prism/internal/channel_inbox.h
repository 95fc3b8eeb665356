#pragma once
// The receiving end of a channel on its rank (prism/platform/channel.h): messages pushed
// by the node manager as they arrive, taken by the channel's owner. Thread-safe.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace prism::internal {

struct ChannelMessage {
  int from_rank = -1;
  std::string bytes;
};

class ChannelInbox {
 public:
  void Push(ChannelMessage m) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(m));
    }
    cv_.notify_all();
  }
  /// The next message, waiting up to `timeout_ms` (< 0: no limit); nullopt on timeout.
  std::optional<ChannelMessage> Next(int64_t timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return !queue_.empty(); };
    if (timeout_ms < 0) {
      cv_.wait(lock, ready);
    } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
      return std::nullopt;
    }
    ChannelMessage m = std::move(queue_.front());
    queue_.pop_front();
    return m;
  }
  std::vector<ChannelMessage> Drain() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ChannelMessage> out(std::make_move_iterator(queue_.begin()),
                                    std::make_move_iterator(queue_.end()));
    queue_.clear();
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ChannelMessage> queue_;
};

}  // namespace prism::internal
