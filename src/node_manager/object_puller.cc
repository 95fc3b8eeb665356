#include "node_manager/object_puller.h"

#include <mutex>

#include "prism/errors.h"

namespace prism::internal {

void ThrowStored(MemoryStore& store, ObjectId id, const ErrorInfo& e) {
  // kCopyDidNotFit is not the object's fate, unlike a failed task: it is read once, and
  // the next Get fetches again (memory may have been freed meanwhile).
  switch (e.kind) {
    case ErrorKind::kObjectLost: throw ObjectLostError("prism: " + e.message);
    case ErrorKind::kActorError: throw ActorError("prism: " + e.message);
    case ErrorKind::kCopyDidNotFit: store.Erase({id}); [[fallthrough]];
    case ErrorKind::kObjectStoreFull: throw ObjectStoreFullError(e.message);
    case ErrorKind::kError: throw Error(e.message);
    case ErrorKind::kTaskCancelled:
      throw TaskCancelledError(e.type, e.message, e.task_name, e.rank, "prism: " + e.Render());
    case ErrorKind::kTaskException:
    case ErrorKind::kResourceError:
    case ErrorKind::kPlacementGroupRemoved:
    case ErrorKind::kWorkerCrashed: break;
  }
  throw TaskError(e.type, e.message, e.task_name, e.rank, "prism: task failed: " + e.Render());
}

void ObjectPuller::ExpectResults(ObjectId first, int count) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  for (int i = 0; i < count; ++i) {
    const uint64_t id = ReturnId(first, i).Value();
    if (expected_.Get(id) == 0) expected_.Set(id, kExpected);
  }
}

void ObjectPuller::Released(ObjectId id) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  if (!expected_.Empty()) expected_.Clear(id.Value());
}

void ObjectPuller::Request(std::span<const ObjectId> ids) {
  Subscribe sub;
  {
    auto here = store_.Contains(ids);
    std::lock_guard<AdaptiveMutex> lock(mu_);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (here[i]) continue;
      if (!expected_.Empty() && expected_.Get(ids[i].Value()) != 0) {
        expected_.Set(ids[i].Value(), kWaitedFor);  // the head's word is on its way
        continue;
      }
      if (!requested_.insert(ids[i]).second) continue;
      sub.ids.push_back(ids[i]);
    }
  }
  if (!sub.ids.empty()) to_head_(std::move(sub));
}

void ObjectPuller::Forget(ObjectId id, bool fetching) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  requested_.erase(id);
  if (fetching) fetching_.erase(id);
}

void ObjectPuller::OnObjectReady(ObjectReady&& m) {
  bool waited = false;
  {
    // One look under the lock per result: no longer expected, and, for a value or a
    // failure (stored just below), no longer requested.
    std::lock_guard<AdaptiveMutex> lock(mu_);
    if (!expected_.Empty()) {
      const uint8_t flag = expected_.Get(m.id.Value());
      if (flag != 0) {
        waited = flag == kWaitedFor;
        expected_.Clear(m.id.Value());
      }
    }
    if (!m.notice && (m.failed || m.inline_value)) requested_.erase(m.id);
  }
  if (m.notice) {
    // A large result of ours is ready elsewhere: subscribe now if something waits for it
    // (the head assigns a copy); a later Get subscribes itself.
    if (waited) Request({&m.id, 1});
    return;
  }
  if (m.failed) {
    store_.PutError(m.id, std::move(m.error));
  } else if (m.inline_value) {
    StoreArrived(m.id, std::move(m.inline_value));
  } else {
    StartFetch(m.id, m.holders);
  }
}

void ObjectPuller::StartFetch(ObjectId id, const std::vector<int>& holders) {
  // The head assigned this pull: however it ends, it hears back (AddLocation), so that the
  // copy it drew from can serve the next reader.
  if (store_.Contains({&id, 1})[0]) {
    Forget(id, false);
    to_head_(AddLocation{id, true});
    return;
  }
  {
    // One transfer per object per rank, however many tasks and Gets want it at once.
    std::lock_guard<AdaptiveMutex> lock(mu_);
    if (!fetching_.insert(id).second) return;
  }
  if (holders.empty() || fetcher_ == nullptr) {
    Forget(id, true);
    store_.PutError(id, ErrorInfo::Of(ErrorKind::kObjectLost,
                                      "object " + id.Hex() + " has no copy left on any rank"));
    to_head_(AddLocation{id, false});
    return;
  }
  int holder = holders[static_cast<size_t>(rank_) % holders.size()];
  fetcher_->Fetch(holder, id, [this, id, holder](Payload value, const std::string& error) {
    if (!value && recovery_) {
      // Still requested: the head answers this rank again once it knows whether `holder`
      // was lost (then: another copy, the rebuilt value, or ObjectLostError).
      {
        std::lock_guard<AdaptiveMutex> lock(mu_);
        fetching_.erase(id);
      }
      to_head_(AddLocation{id, false, holder});
      return;
    }
    Forget(id, true);
    bool stored = false;
    if (!value) {
      store_.PutError(id, ErrorInfo::Of(ErrorKind::kObjectLost, "object " + id.Hex() +
                                                                    " could not be fetched from rank " +
                                                                    std::to_string(holder) + ": " + error));
    } else {
      stored = StoreArrived(id, std::move(value));
    }
    to_head_(AddLocation{id, stored});
  });
}

bool ObjectPuller::StoreArrived(ObjectId id, Payload value) {
  try {
    store_.Put(id, std::move(value));
    return true;
  } catch (const ObjectStoreFullError& e) {
    store_.PutError(id, ErrorInfo::Of(ErrorKind::kCopyDidNotFit,
                                      std::string(e.what()) + " (a copy of object " + id.Hex() +
                                          " fetched to rank " + std::to_string(rank_) +
                                          "; a later Get tries again)",
                                      "", rank_));
    return false;
  }
}

}  // namespace prism::internal
