#include "object_store/memory_store.h"

#include <algorithm>

namespace prism::internal {

void MemoryStore::Arrived(ObjectId id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  for (Waiter* w : it->second) {
    if (++w->have == w->need) w->cv.notify_one();
  }
  waiters_.erase(it);
}

void MemoryStore::Put(ObjectId id, Payload value) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  auto [it, fresh] = objects_.try_emplace(id);
  if (!fresh) return;
  bytes_ += value ? value->size() : 0;
  it->second.value = std::move(value);
  Arrived(id);
}

void MemoryStore::PutError(ObjectId id, ErrorInfo error) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  auto [it, fresh] = objects_.try_emplace(id);
  it->second.error = std::make_shared<ErrorInfo>(std::move(error));
  if (fresh) Arrived(id);
}

std::optional<StoredObject> MemoryStore::Find(ObjectId id) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  auto it = objects_.find(id);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::optional<StoredObject>> MemoryStore::FindMany(const std::vector<ObjectId>& ids) {
  std::vector<std::optional<StoredObject>> out(ids.size());
  std::lock_guard<AdaptiveMutex> lock(mu_);
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = objects_.find(ids[i]);
    if (it != objects_.end()) out[i] = it->second;
  }
  return out;
}

void MemoryStore::Erase(const std::vector<ObjectId>& ids) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  for (ObjectId id : ids) {
    auto it = objects_.find(id);
    if (it == objects_.end()) continue;
    bytes_ -= it->second.value ? it->second.value->size() : 0;
    objects_.erase(it);
  }
}

std::vector<bool> MemoryStore::Present(const std::vector<ObjectId>& ids, size_t& count) {
  std::vector<bool> present(ids.size());
  count = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    present[i] = objects_.count(ids[i]) > 0;
    count += present[i];
  }
  return present;
}

std::vector<bool> MemoryStore::WaitFor(
    const std::vector<ObjectId>& ids, size_t need,
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::unique_lock<AdaptiveMutex> lock(mu_);
  size_t count = 0;
  auto present = Present(ids, count);
  if (count >= need) return present;
  if (deadline && *deadline <= std::chrono::steady_clock::now()) return present;
  Waiter w;
  w.need = need;
  w.have = count;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!present[i]) waiters_[ids[i]].push_back(&w);
  }
  auto done = [&] { return w.have >= w.need; };
  if (deadline) {
    w.cv.wait_until(lock, *deadline, done);
  } else {
    w.cv.wait(lock, done);
  }
  // Unregister from ids that have not arrived (Arrived already dropped the others).
  for (size_t i = 0; i < ids.size(); ++i) {
    if (present[i]) continue;
    auto it = waiters_.find(ids[i]);
    if (it == waiters_.end()) continue;
    auto& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), &w), list.end());
    if (list.empty()) waiters_.erase(it);
  }
  return Present(ids, count);
}

size_t MemoryStore::Size() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return objects_.size();
}

uint64_t MemoryStore::Bytes() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return bytes_;
}

}  // namespace prism::internal
