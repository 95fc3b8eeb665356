#pragma once
// This rank's side of distributed reference counting: how many ObjectRefs to each object
// live here. The head learns only the transitions (first ref on this rank, last ref gone)
// through RefUpdate; it frees an object once no rank holds it and no task needs it.
// Thread-safe.

#include <functional>
#include <unordered_map>
#include <vector>

#include "common/adaptive_mutex.h"
#include "common/protocol.h"

namespace prism::internal {

class ReferenceCounter {
 public:
  using ToHead = std::function<void(Message&&)>;
  explicit ReferenceCounter(ToHead to_head) : to_head_(std::move(to_head)) {}
  /// Called (under this table's lock) with each id whose last ref here went.
  void SetReleasedHook(std::function<void(ObjectId)> hook) { released_ = std::move(hook); }
  /// Batch releases (below) instead of sending each at once. Set before use, and only where
  /// SendReleases is called periodically.
  void SetBatchReleases(bool batch) { batch_ = batch; }

  /// A new object made here, with the one ObjectRef the caller returns. `announce` (its
  /// SubmitTask or PutObject) goes to the head under the lock, so no release of the object
  /// can reach the head before it does.
  /// With `count` > 1 (SetNumReturns), the refs of ids ReturnId(id, 0..count-1).
  void Adopt(ObjectId id, Message&& announce, int count = 1);
  /// A ref the head already counts for this rank: a streaming generator's value, reported
  /// to this rank as its consumer, now handed to an ObjectRef. No message.
  void AdoptHeld(ObjectId id);
  void Add(ObjectId id);
  /// Drops one ref. With `defer`, the release waits for FlushDeferred on this thread: a
  /// running task's result may hold the last ref, and the head must learn that first.
  /// With SetBatchReleases, the head hears of last refs in batches (one RefUpdate for a
  /// burst of drops, as when a vector of refs goes): a batch goes when it has kReleaseBatch
  /// ids, before the next message this counter sends (Adopt, Add), and on SendReleases.
  void Remove(ObjectId id, bool defer);
  /// Sends the releases batched so far. The node calls it before it waits (Get, Wait), and
  /// the MPI progress loop every 100 ms, so a release waits at most that long.
  void SendReleases();
  /// Releases what this thread deferred (after its task's completion was sent).
  void FlushDeferred();
  size_t Size();

  static constexpr size_t kReleaseBatch = 256;

 private:
  void SendReleasesLocked();

  ToHead to_head_;
  std::function<void(ObjectId)> released_;
  bool batch_ = false;
  AdaptiveMutex mu_;
  std::unordered_map<ObjectId, int64_t> refs_;
  std::vector<ObjectId> releases_;  // last refs dropped, not yet told to the head
};

}  // namespace prism::internal
