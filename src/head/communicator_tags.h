#pragma once
// The head's side of the communicator service (prism/platform/communicator.h): one creation
// tag per group key. Every member of a new communicator asks with the same key and member
// count and gets the same tag, which MPI_Comm_create_group uses to keep concurrent creations
// on the same parent apart. The entry is dropped once every member has asked, and a tag is
// not handed out again while an entry holds it. Pure logic.

#include <map>
#include <set>
#include <string>

#include "prism/errors.h"

namespace prism::internal {

class CommunicatorTags {
 public:
  /// Tags stay within 0..kMaxTag: every MPI library accepts those (MPI_TAG_UB >= 32767).
  static constexpr int kMaxTag = 32767;

  /// The creation tag of the communicator `key` with `members` members.
  int Tag(const std::string& key, int members) {
    if (key.empty()) throw Error("prism: a communicator needs a non-empty key");
    if (members < 1) {
      throw Error("prism: communicator \"" + key + "\" asked for with " + std::to_string(members) +
                  " members; it needs at least one");
    }
    auto it = pending_.find(key);
    if (it == pending_.end()) {
      if (in_use_.size() > kMaxTag) {
        throw Error("prism: " + std::to_string(in_use_.size()) + " communicators are being "
                    "created at once; finish creating some first (all members must call "
                    "Communicator::Create)");
      }
      while (in_use_.count(next_)) next_ = next_ == kMaxTag ? 0 : next_ + 1;
      it = pending_.emplace(key, Entry{next_, members, 0}).first;
      in_use_.insert(next_);
      next_ = next_ == kMaxTag ? 0 : next_ + 1;
    } else if (it->second.members != members) {
      throw Error("prism: communicator \"" + key + "\" asked for with " + std::to_string(members) +
                  " members, but an earlier member said " + std::to_string(it->second.members) +
                  ": every member must pass the same ranks");
    }
    const int tag = it->second.tag;
    if (++it->second.asked == members) {
      in_use_.erase(tag);
      pending_.erase(it);
    }
    return tag;
  }
  /// Keys some but not all members have asked for.
  size_t pending() const { return pending_.size(); }

 private:
  struct Entry {
    int tag, members, asked;
  };
  std::map<std::string, Entry> pending_;
  std::set<int> in_use_;
  int next_ = 0;
};

}  // namespace prism::internal
