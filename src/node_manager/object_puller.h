#pragma once
// Brings objects this rank needs but does not hold: subscribes to them at the head once
// per object (Request), stores what the head pushes (small values, failures), and pulls
// large ones from the copy the head assigned, through the data plane (ObjectFetcher),
// once per object per rank however many readers wait. Every assigned pull is reported
// back (AddLocation), so the copy it drew from can serve the next reader. Thread-safe.

#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/adaptive_mutex.h"
#include "common/object_fetcher.h"
#include "common/protocol.h"
#include "node_manager/id_flags.h"
#include "object_store/memory_store.h"

namespace prism::internal {

class ObjectPuller {
 public:
  using ToHead = std::function<void(Message&&)>;
  /// `recovery`: a lost rank does not end the job (Open MPI's --enable-recovery), so a
  /// pull that fails is reported to the head, whose next word on the object the readers
  /// wait for (another copy, the value rebuilt by its task, or the error), instead of
  /// failing them at once.
  ObjectPuller(int rank, MemoryStore& store, ObjectFetcher* fetcher, ToHead to_head, bool recovery = false)
      : rank_(rank), store_(store), fetcher_(fetcher), to_head_(std::move(to_head)), recovery_(recovery) {}

  /// Results of tasks this rank submitted: the head tells this rank of each (the value, the
  /// failure, or a notice that a large one is ready) while it holds a ref, so Request
  /// does not subscribe to them. Call before the task is sent.
  void ExpectResults(ObjectId first, int count);
  /// This rank let go of its last ref to `id`: the head will not tell it of the result.
  void Released(ObjectId id);
  /// Makes sure each id not held here is on its way (one subscription per id; none for
  /// an expected result).
  void Request(std::span<const ObjectId> ids);
  /// The head's answer to a subscription: a value, a failure, or where to pull from.
  void OnObjectReady(ObjectReady&& m);
  /// Recovery mode: the head declared `rank` lost; pulls from it fail (and are reported).
  void PeerLost(int rank) {
    if (fetcher_ != nullptr) fetcher_->PeerLost(rank);
  }

 private:
  void StartFetch(ObjectId id, const std::vector<int>& holders);
  /// Stores a copy that arrived; if the store is full, readers get ObjectStoreFullError.
  bool StoreArrived(ObjectId id, Payload value);
  void Forget(ObjectId id, bool fetching);

  const int rank_;
  MemoryStore& store_;
  ObjectFetcher* fetcher_;
  ToHead to_head_;
  const bool recovery_;
  AdaptiveMutex mu_;
  std::unordered_set<ObjectId> requested_;  // subscribed or being fetched, not yet stored
  std::unordered_set<ObjectId> fetching_;   // transfers in flight to this rank
  // Expected results not heard of yet (kExpected), kWaitedFor once a reader waits for one.
  // This rank mints them in order: a window of flags, not a map entry per task.
  static constexpr uint8_t kExpected = 1, kWaitedFor = 2;
  IdFlags expected_;
};

/// Throws the prism exception for an object's stored error (ObjectLostError, ActorError,
/// ObjectStoreFullError, TaskError, ...). A copy that did not fit this rank's store is
/// dropped first, so that the next Get fetches it again.
[[noreturn]] void ThrowStored(MemoryStore& store, ObjectId id, const ErrorInfo& error);

}  // namespace prism::internal
