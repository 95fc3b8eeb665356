#pragma once
// A rank's local objects: values it made (large task results, Puts) and copies it fetched
// or received inline. Readers block on a condition variable until what they need arrives.
// Thread-safe.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

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
  void Erase(const std::vector<ObjectId>& ids);
  /// Waits until at least `need` of `ids` are present or the deadline passes; returns
  /// presence flags. Runs `wake_check` never; callers re-check after a spurious wake.
  std::vector<bool> WaitFor(const std::vector<ObjectId>& ids, size_t need,
                            std::optional<std::chrono::steady_clock::time_point> deadline);
  size_t Size();
  uint64_t Bytes();

 private:
  std::vector<bool> Present(const std::vector<ObjectId>& ids, size_t& count);
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<ObjectId, StoredObject> objects_;
  uint64_t bytes_ = 0;
};

}  // namespace prism::internal
