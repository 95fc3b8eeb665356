#include "object_store/memory_store.h"

namespace prism::internal {

void MemoryStore::Put(ObjectId id, Payload value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = objects_.try_emplace(id);
    if (fresh) {
      bytes_ += value ? value->size() : 0;
      it->second.value = std::move(value);
    }
  }
  cv_.notify_all();
}

void MemoryStore::PutError(ObjectId id, ErrorInfo error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[id].error = std::make_shared<ErrorInfo>(std::move(error));
  }
  cv_.notify_all();
}

std::optional<StoredObject> MemoryStore::Find(ObjectId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(id);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

void MemoryStore::Erase(const std::vector<ObjectId>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::unique_lock<std::mutex> lock(mu_);
  size_t count = 0;
  auto present = Present(ids, count);
  while (count < need) {
    if (deadline) {
      if (cv_.wait_until(lock, *deadline) == std::cv_status::timeout) {
        return Present(ids, count);
      }
    } else {
      cv_.wait(lock);
    }
    present = Present(ids, count);
  }
  return present;
}

size_t MemoryStore::Size() {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_.size();
}

uint64_t MemoryStore::Bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace prism::internal
