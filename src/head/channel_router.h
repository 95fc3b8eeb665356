#pragma once
// The head's channel table (prism/platform/channel.h): which rank opened each channel.
// Published messages are forwarded to that rank in the order the head receives them, so
// messages from one publisher arrive in the order published. Pure logic.

#include <map>
#include <string>

namespace prism::internal {

class ChannelRouter {
 public:
  /// -1 if `rank` now owns `name` (or already did), else the rank that does.
  int Open(const std::string& name, int rank) {
    auto [it, fresh] = owners_.try_emplace(name, rank);
    return fresh || it->second == rank ? -1 : it->second;
  }
  /// Whether `rank` owned `name`; it no longer does.
  bool Close(const std::string& name, int rank) {
    auto it = owners_.find(name);
    if (it == owners_.end() || it->second != rank) return false;
    owners_.erase(it);
    return true;
  }
  /// The owner of `name`, or -1 (the message is dropped and counted).
  int Route(const std::string& name) {
    auto it = owners_.find(name);
    if (it != owners_.end()) return it->second;
    ++dropped_;
    return -1;
  }
  uint64_t dropped() const { return dropped_; }

 private:
  std::map<std::string, int> owners_;
  uint64_t dropped_ = 0;
};

}  // namespace prism::internal
