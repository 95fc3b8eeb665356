#pragma once
// A rank's local objects: values it made (large task results, Puts) and copies it fetched
// or received inline. A reader waiting for a few of many objects (Wait's num_returns)
// registers one countdown on each missing id and is woken once, when its count is
// reached. A reader waiting for most of what it misses (a Get of 10k results) registers
// nothing per id: it sleeps until as many objects have arrived as it still misses, then
// looks at the ones it missed, at most four look-ups per arrival in all, and without the
// per-id entries' allocations. Thread-safe.
//
// Memory is capped (object_store_memory). To make room, the least recently used objects
// that nobody is reading are spilled to files in the spill directory (private to the job
// and rank) and read back transparently when asked for; reading one back keeps it in
// memory only if it fits. If even spilling everything spillable cannot make room, Put
// throws ObjectStoreFullError with the sizes involved. Files go when their objects are
// freed and when the store is destroyed. Disk I/O never happens under the store's lock.
// Each file starts with a header naming the store that wrote it (a random token), the
// object and its size, and a CRC-32 of the bytes (spill_file.h): a file that is not this
// store's copy of that object, or was changed, is read back as ObjectLostError, never as
// the object.

#include <chrono>
#include <condition_variable>
#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "common/adaptive_mutex.h"
#include "prism/internal/core_api.h"
#include "common/error_info.h"

namespace prism::internal {

struct StoredObject {
  Payload value;                     // null if failed
  std::shared_ptr<ErrorInfo> error;  // set if the producing task failed
};

/// One flag per id asked about, and one lookup result per id: inline for a few ids, so a
/// Get or Wait of a handful of refs allocates nothing here.
using PresenceFlags = boost::container::small_vector<bool, 8>;
using FoundObjects = boost::container::small_vector<std::optional<StoredObject>, 4>;

class MemoryStore {
 public:
  /// How long WaitFor looks again before it sleeps (see WaitFor).
  static constexpr int kWaitSpinUs = 50;
  /// WaitFor spins only when at most this many objects are missing.
  static constexpr size_t kWaitSpinMaxMissing = 16;
  /// Values smaller than this are never spilled (see Touch).
  static constexpr uint64_t kMinSpillBytes = 4096;
  /// `capacity` bytes in memory; `spill_dir` is created on first spill (empty: never spill).
  explicit MemoryStore(uint64_t capacity = UINT64_MAX, std::string spill_dir = "");
  ~MemoryStore();

  /// Stores a value, spilling others first if it does not fit. Throws ObjectStoreFullError
  /// if it cannot fit even then (the store is left as it was).
  void Put(ObjectId id, Payload value);
  void PutError(ObjectId id, ErrorInfo error);
  std::optional<StoredObject> Find(ObjectId id);
  /// Find for many ids, with one lock for those in memory.
  FoundObjects FindMany(std::span<const ObjectId> ids);
  /// Drops the objects. A task's failure that no Find read is logged as an unhandled
  /// error (Ray's): nothing else will ever show it.
  void Erase(const std::vector<ObjectId>& ids);
  /// Which of `ids` are here (in memory, spilled, or as an error), without reading any
  /// spilled object back.
  PresenceFlags Contains(std::span<const ObjectId> ids);
  /// Waits until at least `need` of `ids` are present or the deadline passes; returns
  /// presence flags. With `abort`, also returns early once *abort is true and Interrupt
  /// was called for it (a cancelled task's Get).
  PresenceFlags WaitFor(std::span<const ObjectId> ids, size_t need,
                        std::optional<std::chrono::steady_clock::time_point> deadline,
                        const std::atomic<bool>* abort = nullptr);
  /// Wakes the waits registered with `abort` (set it first) so that they return.
  void Interrupt(const std::atomic<bool>* abort);

  /// Completion callbacks (ObjectRef::OnReady). `sink` receives callbacks whose object has
  /// arrived; it is called under the store's lock, so it must only queue them (it never
  /// runs them). Set once, before the first NotifyWhenPresent.
  using ReadyCallback = std::function<void()>;
  void SetCallbackSink(std::function<void(std::vector<ReadyCallback>&&)> sink) { sink_ = std::move(sink); }
  /// Hands `callback` to the sink once `id` is present (a value or an error): now, if it
  /// is. Exactly once, unless the store is destroyed first.
  void NotifyWhenPresent(ObjectId id, ReadyCallback callback);
  size_t Size();
  /// Bytes held in memory.
  uint64_t Bytes();
  /// Bytes and objects currently spilled to disk.
  uint64_t SpilledBytes();
  size_t NumSpilled();
  uint64_t capacity() const { return capacity_; }
  /// What the store holds now and has done since it started (state::ObjectStoreState).
  struct Usage {
    uint64_t capacity = 0;
    uint64_t bytes = 0;         // in memory now
    uint64_t peak_bytes = 0;    // most ever in memory at once
    uint64_t num_objects = 0;   // in memory, spilled, or errors
    uint64_t spilled_bytes = 0;  // on disk now
    uint64_t num_spilled = 0;
    uint64_t spilled_bytes_total = 0;  // ever written to disk
    uint64_t num_spilled_total = 0;
    uint64_t restored_bytes_total = 0;  // ever read back from disk
    uint64_t num_restored_total = 0;
  };
  Usage GetUsage();
  /// Deletes the spill directory and every spilled object with it (at shutdown).
  void RemoveSpillFiles();

 private:
  struct Waiter {
    size_t need = 0;
    size_t have = 0;
    const std::atomic<bool>* abort = nullptr;
    std::condition_variable_any cv;
    // A counting waiter (WaitCounting): woken once arrivals_ reaches wake_at.
    uint64_t wake_at = 0;
    bool woken = false;
  };
  struct Entry {
    Payload value;  // null while spilled
    std::shared_ptr<ErrorInfo> error;
    bool error_read = false;  // a Find returned the error
    uint64_t size = 0;
    bool spilled = false;
    bool spilling = false;  // being written out: not a candidate again
    bool in_lru = false;
    std::list<ObjectId>::iterator lru;
  };
  PresenceFlags Present(std::span<const ObjectId> ids, size_t& count);
  /// Erase under mu_; the unread task failures go to `unread`.
  void EraseLocked(const std::vector<ObjectId>& ids, std::vector<std::shared_ptr<ErrorInfo>>& unread);
  /// WaitFor's sleep when the reader waits for most of the objects it misses: no per-id
  /// registration; looks again after every (need - have) arrivals. Requires mu_ (`lock`).
  void WaitCounting(std::unique_lock<AdaptiveMutex>& lock, std::span<const ObjectId> ids,
                    size_t need, PresenceFlags& present, size_t count,
                    std::optional<std::chrono::steady_clock::time_point> deadline,
                    const std::atomic<bool>* abort);
  void Arrived(ObjectId id);  // requires mu_
  void Touch(Entry& e, ObjectId id);    // requires mu_: most recently used
  void Unlink(Entry& e);                // requires mu_: out of the LRU list
  /// Spills until `need` more bytes fit; throws ObjectStoreFullError if they cannot.
  void MakeRoom(uint64_t need);
  /// Reads a spilled object back (no lock held); keeps it in memory if it fits.
  Payload Restore(ObjectId id);
  std::string PathOf(ObjectId id) const;

  const uint64_t capacity_;
  const std::string spill_dir_;
  const uint64_t writer_;  // this store's token in its spill files' headers
  AdaptiveMutex mu_;
  std::unordered_map<ObjectId, Entry> objects_;
  std::unordered_map<ObjectId, std::vector<Waiter*>> waiters_;
  std::vector<Waiter*> counting_;  // WaitCounting's sleepers
  std::atomic<uint64_t> arrivals_{0};  // objects stored or failed so far (WaitFor's spin)
  std::vector<Waiter*> abortable_;  // waits with an abort flag (a cancel wakes them)
  std::unordered_map<ObjectId, std::vector<ReadyCallback>> callbacks_;
  std::function<void(std::vector<ReadyCallback>&&)> sink_;
  std::list<ObjectId> lru_;  // values in memory, least recently used first
  uint64_t bytes_ = 0;       // in memory
  uint64_t spilled_bytes_ = 0;
  size_t num_spilled_ = 0;
  uint64_t peak_bytes_ = 0;
  uint64_t spilled_bytes_total_ = 0;
  uint64_t num_spilled_total_ = 0;
  uint64_t restored_bytes_total_ = 0;
  uint64_t num_restored_total_ = 0;
  bool spill_dir_made_ = false;
};

}  // namespace prism::internal
