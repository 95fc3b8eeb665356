#pragma once
// A rank's local objects: values it made (large task results, Puts) and copies it fetched
// or received inline. A reader waiting for k of n objects registers one countdown on each
// missing id and is woken once, when its count is reached: waiting on 10k results costs
// 10k decrements, not 10k rescans of 10k ids. Thread-safe.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/adaptive_mutex.h"
#include "prism/internal/core_api.h"
#include "transport/messages.h"

namespace prism::internal {

struct StoredObject {
  Payload value;                     // null if failed
  std::shared_ptr<ErrorInfo> error;  // set if the producing task failed
};

class MemoryStore {
 public:
  void Put(ObjectId id, Payload value);
  void PutError(ObjectId id, ErrorInfo error);
  std::optional<StoredObject> Find(ObjectId id);
  /// Find for many ids under one lock.
  std::vector<std::optional<StoredObject>> FindMany(const std::vector<ObjectId>& ids);
  void Erase(const std::vector<ObjectId>& ids);
  /// Waits until at least `need` of `ids` are present or the deadline passes; returns
  /// presence flags.
  std::vector<bool> WaitFor(const std::vector<ObjectId>& ids, size_t need,
                            std::optional<std::chrono::steady_clock::time_point> deadline);
  size_t Size();
  uint64_t Bytes();

 private:
  struct Waiter {
    size_t need = 0;
    size_t have = 0;
    std::condition_variable_any cv;
  };
  std::vector<bool> Present(const std::vector<ObjectId>& ids, size_t& count);
  void Arrived(ObjectId id);  // requires mu_
  AdaptiveMutex mu_;
  std::unordered_map<ObjectId, StoredObject> objects_;
  std::unordered_map<ObjectId, std::vector<Waiter*>> waiters_;
  uint64_t bytes_ = 0;
};

}  // namespace prism::internal
