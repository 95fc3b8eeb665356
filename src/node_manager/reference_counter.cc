#include "node_manager/reference_counter.h"

#include <mutex>

namespace prism::internal {

namespace {
thread_local std::vector<ObjectId> t_deferred_releases;
}  // namespace

void ReferenceCounter::Adopt(ObjectId id, Message&& announce, int count) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  SendReleasesLocked();  // a release of an earlier object reaches the head first
  // The head counts this rank as a holder from the announcement on.
  for (int i = 0; i < count; ++i) refs_[ReturnId(id, i)] = 1;
  to_head_(std::move(announce));
}

void ReferenceCounter::AdoptHeld(ObjectId id) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  ++refs_[id];
}

void ReferenceCounter::Add(ObjectId id) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  if (refs_[id]++ == 0) {
    SendReleasesLocked();  // this id's own release, if pending, goes before its new ref
    to_head_(RefUpdate{{id}, {}});
  }
}

void ReferenceCounter::Remove(ObjectId id, bool defer) {
  if (defer) {
    t_deferred_releases.push_back(id);
    return;
  }
  std::lock_guard<AdaptiveMutex> lock(mu_);
  auto it = refs_.find(id);
  if (it == refs_.end()) return;
  if (--it->second == 0) {
    refs_.erase(it);
    if (released_) released_(id);
    releases_.push_back(id);
    if (!batch_ || releases_.size() >= kReleaseBatch) SendReleasesLocked();
  }
}

void ReferenceCounter::SendReleases() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  SendReleasesLocked();
}

void ReferenceCounter::SendReleasesLocked() {
  if (releases_.empty()) return;
  RefUpdate update;
  update.remove.swap(releases_);
  if (batch_) releases_.reserve(kReleaseBatch);  // unbatched, each release is one id
  to_head_(std::move(update));
}

void ReferenceCounter::FlushDeferred() {
  std::vector<ObjectId> ids;
  ids.swap(t_deferred_releases);
  for (ObjectId id : ids) Remove(id, false);
  SendReleases();  // a finished task's releases go now, not with the next burst
}

size_t ReferenceCounter::Size() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return refs_.size();
}

}  // namespace prism::internal
