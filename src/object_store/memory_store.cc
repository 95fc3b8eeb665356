#include "object_store/memory_store.h"

#include "common/spin_wait.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <thread>

#include "common/log.h"
#include "common/private_dir.h"
#include "object_store/spill_file.h"
#include "prism/errors.h"

namespace prism::internal {

namespace {

std::string Mib(uint64_t bytes) {
  char s[48];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return s;
}

uint64_t RandomToken() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
}

}  // namespace

MemoryStore::MemoryStore(uint64_t capacity, std::string spill_dir)
    : capacity_(capacity), spill_dir_(std::move(spill_dir)), writer_(RandomToken()) {}

MemoryStore::~MemoryStore() { RemoveSpillFiles(); }

void MemoryStore::RemoveSpillFiles() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  if (!spill_dir_made_) return;
  std::error_code ec;
  std::filesystem::remove_all(spill_dir_, ec);
  spill_dir_made_ = false;
}

std::string MemoryStore::PathOf(ObjectId id) const { return spill_dir_ + "/" + id.Hex(); }

void MemoryStore::Arrived(ObjectId id) {
  const uint64_t arrivals = arrivals_.fetch_add(1, std::memory_order_release) + 1;  // wakes WaitFor's look
  for (Waiter* w : counting_) {
    if (!w->woken && arrivals >= w->wake_at) {
      w->woken = true;
      w->cv.notify_one();
    }
  }
  if (!callbacks_.empty()) {
    auto cb = callbacks_.find(id);
    if (cb != callbacks_.end()) {
      sink_(std::move(cb->second));
      callbacks_.erase(cb);
    }
  }
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  for (Waiter* w : it->second) {
    if (++w->have == w->need) w->cv.notify_one();
  }
  waiters_.erase(it);
}

void MemoryStore::Touch(Entry& e, ObjectId id) {
  // Spilling a small value frees next to nothing (Ray keeps such values in the owner's
  // memory store, never spilled): they stay out of the LRU, which saves a list node per
  // task result.
  if (e.size < kMinSpillBytes) return;
  if (e.in_lru) {
    lru_.splice(lru_.end(), lru_, e.lru);
  } else {
    e.lru = lru_.insert(lru_.end(), id);
    e.in_lru = true;
  }
}

void MemoryStore::Unlink(Entry& e) {
  if (!e.in_lru) return;
  lru_.erase(e.lru);
  e.in_lru = false;
}

void MemoryStore::MakeRoom(uint64_t need) {
  for (;;) {
    std::vector<std::pair<ObjectId, Payload>> victims;
    std::string dir_problem;
    {
      std::lock_guard<AdaptiveMutex> lock(mu_);
      if (bytes_ + need <= capacity_) return;
      uint64_t freed = 0, pinned = 0, in_flight = 0;
      for (ObjectId id : lru_) {
        if (bytes_ - freed + need <= capacity_) break;
        Entry& e = objects_.at(id);
        if (e.spilling) {
          in_flight += e.size;
          continue;
        }
        // Only the store holds it: nobody is reading or sending it, so spilling frees it.
        if (spill_dir_.empty() || e.value.use_count() > 1) {
          pinned += e.size;
          continue;
        }
        e.spilling = true;
        freed += e.size;
        victims.emplace_back(id, e.value);
      }
      if (victims.empty()) {
        if (in_flight > 0) {  // another thread is freeing memory right now: look again
          std::this_thread::yield();
          continue;
        }
        throw ObjectStoreFullError(
            "prism: this rank's object store is full: " + Mib(need) + " more do not fit in " +
            Mib(capacity_) + " (object_store_memory), with " + Mib(bytes_) + " in use, " +
            Mib(pinned) + " of it pinned by readers" +
            (spill_dir_.empty() ? std::string(" and spilling off")
                                : "; nothing else can be spilled to " + spill_dir_) +
            ". Drop ObjectRefs you no longer need, raise object_store_memory "
            "(PRISM_OBJECT_STORE_MEMORY), or run fewer ranks per node.");
      }
      if (!spill_dir_made_) {
        dir_problem = MakePrivateDir(spill_dir_);  // 0700, and never through a link
        spill_dir_made_ = dir_problem.empty();
      }
    }
    // Write outside the lock: readers and writers of other objects go on meanwhile.
    std::vector<std::string> failures(victims.size());
    for (size_t i = 0; i < victims.size(); ++i) {
      failures[i] = !dir_problem.empty() ? dir_problem
                                         : WriteSpillFile(PathOf(victims[i].first), writer_,
                                                          victims[i].first, *victims[i].second);
    }
    std::string failure;
    {
      std::lock_guard<AdaptiveMutex> lock(mu_);
      for (size_t i = 0; i < victims.size(); ++i) {
        ObjectId id = victims[i].first;
        auto it = objects_.find(id);
        if (!failures[i].empty()) {
          failure = failures[i];
          if (it != objects_.end()) it->second.spilling = false;
          continue;
        }
        if (it == objects_.end()) {  // freed while being written
          ::unlink(PathOf(id).c_str());
          continue;
        }
        Entry& e = it->second;
        e.spilling = false;
        e.spilled = true;
        e.value.reset();
        Unlink(e);
        bytes_ -= e.size;
        spilled_bytes_ += e.size;
        ++num_spilled_;
        spilled_bytes_total_ += e.size;
        ++num_spilled_total_;
      }
    }
    victims.clear();  // drop our references: the memory is free now
    if (!failure.empty()) {
      throw ObjectStoreFullError("prism: this rank's object store is full (" + Mib(capacity_) +
                                 ") and spilling failed: " + failure);
    }
    PRISM_LOG_DEBUG("object store: spilled to make room for " << need << " bytes");
  }
}

void MemoryStore::Put(ObjectId id, Payload value) {
  const uint64_t size = value ? value->size() : 0;
  for (bool made_room = false;; made_room = true) {
    {
      std::lock_guard<AdaptiveMutex> lock(mu_);
      if (objects_.count(id) > 0) return;  // a copy is here already
      if (bytes_ + size <= capacity_ || made_room) {
        Entry& e = objects_[id];
        bytes_ += size;
        peak_bytes_ = std::max(peak_bytes_, bytes_);
        e.value = std::move(value);
        e.size = size;
        Touch(e, id);
        Arrived(id);
        return;
      }
    }
    if (size > capacity_) {
      throw ObjectStoreFullError("prism: an object of " + Mib(size) +
                                 " is larger than this rank's whole object store (" +
                                 Mib(capacity_) + ", object_store_memory); raise "
                                 "object_store_memory (PRISM_OBJECT_STORE_MEMORY)");
    }
    MakeRoom(size);  // throws if it cannot; another Put may take the room first (brief overshoot)
  }
}

void MemoryStore::PutError(ObjectId id, ErrorInfo error) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  auto [it, fresh] = objects_.try_emplace(id);
  it->second.error = std::make_shared<ErrorInfo>(std::move(error));
  if (fresh) Arrived(id);
}

Payload MemoryStore::Restore(ObjectId id) {
  uint64_t size;
  {
    std::lock_guard<AdaptiveMutex> lock(mu_);
    auto it = objects_.find(id);
    if (it == objects_.end()) return nullptr;
    if (!it->second.spilled) return it->second.value;
    size = it->second.size;
  }
  Payload value = ReadSpillFile(PathOf(id), writer_, id, size);
  std::lock_guard<AdaptiveMutex> lock(mu_);
  restored_bytes_total_ += size;
  ++num_restored_total_;
  auto it = objects_.find(id);
  if (it == objects_.end()) return value;
  Entry& e = it->second;
  if (!e.spilled) return e.value;  // another reader brought it back first
  if (bytes_ + size <= capacity_) {  // keep it in memory only if it fits as it is
    e.value = value;
    e.spilled = false;
    bytes_ += size;
    peak_bytes_ = std::max(peak_bytes_, bytes_);
    spilled_bytes_ -= size;
    --num_spilled_;
    Touch(e, id);
    ::unlink(PathOf(id).c_str());
  }
  return value;
}

std::optional<StoredObject> MemoryStore::Find(ObjectId id) {
  {
    std::lock_guard<AdaptiveMutex> lock(mu_);
    auto it = objects_.find(id);
    if (it == objects_.end()) return std::nullopt;
    Entry& e = it->second;
    if (!e.spilled) {
      if (e.in_lru) Touch(e, id);
      e.error_read = e.error != nullptr;
      return StoredObject{e.value, e.error};
    }
  }
  Payload value = Restore(id);
  if (!value) return std::nullopt;
  return StoredObject{value, nullptr};
}

FoundObjects MemoryStore::FindMany(std::span<const ObjectId> ids) {
  FoundObjects out(ids.size());
  boost::container::small_vector<size_t, 4> spilled;
  {
    std::lock_guard<AdaptiveMutex> lock(mu_);
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = objects_.find(ids[i]);
      if (it == objects_.end()) continue;
      Entry& e = it->second;
      if (e.spilled) {
        spilled.push_back(i);
        continue;
      }
      if (e.in_lru) Touch(e, ids[i]);
      e.error_read = e.error != nullptr;
      out[i] = StoredObject{e.value, e.error};
    }
  }
  for (size_t i : spilled) {
    if (Payload value = Restore(ids[i])) out[i] = StoredObject{value, nullptr};
  }
  return out;
}

void MemoryStore::Erase(const std::vector<ObjectId>& ids) {
  std::vector<std::shared_ptr<ErrorInfo>> unread;
  {
    std::lock_guard<AdaptiveMutex> lock(mu_);
    EraseLocked(ids, unread);
  }
  for (const auto& error : unread) {
    PRISM_LOG_WARN("unhandled error: task " << error->task_name << " failed and every ObjectRef to its "
                   "result was dropped unread: " << error->RenderText());
  }
}

void MemoryStore::EraseLocked(const std::vector<ObjectId>& ids, std::vector<std::shared_ptr<ErrorInfo>>& unread) {
  for (ObjectId id : ids) {
    auto it = objects_.find(id);
    if (it == objects_.end()) continue;
    Entry& e = it->second;
    if (e.error && !e.error_read &&
        (e.error->kind == ErrorKind::kTaskException || e.error->kind == ErrorKind::kWorkerCrashed)) {
      unread.push_back(e.error);
    }
    if (e.spilled) {
      ::unlink(PathOf(id).c_str());
      spilled_bytes_ -= e.size;
      --num_spilled_;
    } else {
      bytes_ -= e.size;
    }
    Unlink(e);
    objects_.erase(it);  // one being spilled: its writer deletes the file
  }
}

PresenceFlags MemoryStore::Contains(std::span<const ObjectId> ids) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  size_t count = 0;
  return Present(ids, count);
}

PresenceFlags MemoryStore::Present(std::span<const ObjectId> ids, size_t& count) {
  PresenceFlags present(ids.size());
  count = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    present[i] = objects_.count(ids[i]) > 0;
    count += present[i];
  }
  return present;
}

void MemoryStore::NotifyWhenPresent(ObjectId id, ReadyCallback callback) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  if (objects_.count(id) > 0) {
    std::vector<ReadyCallback> now;
    now.push_back(std::move(callback));
    sink_(std::move(now));
  } else {
    callbacks_[id].push_back(std::move(callback));
  }
}

void MemoryStore::Interrupt(const std::atomic<bool>* abort) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  for (Waiter* w : abortable_) {
    if (w->abort == abort) w->cv.notify_one();
  }
}

PresenceFlags MemoryStore::WaitFor(
    std::span<const ObjectId> ids, size_t need,
    std::optional<std::chrono::steady_clock::time_point> deadline,
    const std::atomic<bool>* abort) {
  std::unique_lock<AdaptiveMutex> lock(mu_);
  size_t count = 0;
  auto present = Present(ids, count);
  if (count >= need) return present;
  if (deadline && *deadline <= std::chrono::steady_clock::now()) return present;
  if (abort != nullptr && abort->load(std::memory_order_acquire)) return present;
  // A result usually comes within microseconds (a short task, a value on its way): look
  // again for a while before registering to sleep (a futex wake-up costs several
  // microseconds here), yielding the core to the threads producing it. Only an arrival
  // (arrivals_ moved) is worth a look under the lock. Not for a wait on many objects:
  // those take longer, and each look goes over every id.
  if (need - count <= kWaitSpinMaxMissing) {
    uint64_t seen = arrivals_.load(std::memory_order_acquire);
    bool ready = false;
    lock.unlock();
    SpinWhile(
        [&] {
          if (abort != nullptr && abort->load(std::memory_order_acquire)) return false;
          if (deadline && std::chrono::steady_clock::now() >= *deadline) return false;
          if (arrivals_.load(std::memory_order_acquire) == seen) return true;
          std::lock_guard<AdaptiveMutex> look(mu_);
          seen = arrivals_.load(std::memory_order_acquire);
          present = Present(ids, count);
          ready = count >= need;
          return !ready;
        },
        kWaitSpinUs);
    if (ready) return present;
    lock.lock();
    present = Present(ids, count);
    if (count >= need) return present;
  }
  // Waiting for most of the missing ones: count arrivals (no per-id registration).
  if (need - count > kWaitSpinMaxMissing && (need - count) * 4 >= ids.size() - count) {
    WaitCounting(lock, ids, need, present, count, deadline, abort);
    return present;  // each id was seen here (a reader holds refs: nothing it waits for goes)
  }
  Waiter w;
  w.need = need;
  w.have = count;
  w.abort = abort;
  if (abort != nullptr) abortable_.push_back(&w);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!present[i]) waiters_[ids[i]].push_back(&w);
  }
  auto done = [&] {
    return w.have >= w.need || (abort != nullptr && abort->load(std::memory_order_acquire));
  };
  if (deadline) {
    w.cv.wait_until(lock, *deadline, done);
  } else {
    w.cv.wait(lock, done);
  }
  if (abort != nullptr) abortable_.erase(std::find(abortable_.begin(), abortable_.end(), &w));
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

void MemoryStore::WaitCounting(std::unique_lock<AdaptiveMutex>& lock, std::span<const ObjectId> ids,
                               size_t need, PresenceFlags& present, size_t count,
                               std::optional<std::chrono::steady_clock::time_point> deadline,
                               const std::atomic<bool>* abort) {
  std::vector<uint32_t> missing;  // positions of ids not seen yet
  missing.reserve(ids.size() - count);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!present[i]) missing.push_back(static_cast<uint32_t>(i));
  }
  Waiter w;
  w.need = need;
  w.abort = abort;
  if (abort != nullptr) abortable_.push_back(&w);
  counting_.push_back(&w);
  auto aborted = [&] { return abort != nullptr && abort->load(std::memory_order_acquire); };
  for (;;) {
    // None of the missing can be here before this many more arrivals (of any object).
    w.wake_at = arrivals_.load(std::memory_order_relaxed) + (need - count);
    w.woken = false;
    auto woken = [&] { return w.woken || aborted(); };
    bool in_time = true;
    if (deadline) {
      in_time = w.cv.wait_until(lock, *deadline, woken);
    } else {
      w.cv.wait(lock, woken);
    }
    size_t kept = 0;
    for (uint32_t i : missing) {
      if (objects_.count(ids[i]) > 0) {
        present[i] = true;
        ++count;
      } else {
        missing[kept++] = i;
      }
    }
    missing.resize(kept);
    if (count >= need || !in_time || aborted()) break;
  }
  counting_.erase(std::find(counting_.begin(), counting_.end(), &w));
  if (abort != nullptr) abortable_.erase(std::find(abortable_.begin(), abortable_.end(), &w));
}

size_t MemoryStore::Size() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return objects_.size();
}

uint64_t MemoryStore::Bytes() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return bytes_;
}

uint64_t MemoryStore::SpilledBytes() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return spilled_bytes_;
}

size_t MemoryStore::NumSpilled() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return num_spilled_;
}

MemoryStore::Usage MemoryStore::GetUsage() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  Usage u;
  u.capacity = capacity_;
  u.bytes = bytes_;
  u.peak_bytes = peak_bytes_;
  u.num_objects = objects_.size();
  u.spilled_bytes = spilled_bytes_;
  u.num_spilled = num_spilled_;
  u.spilled_bytes_total = spilled_bytes_total_;
  u.num_spilled_total = num_spilled_total_;
  u.restored_bytes_total = restored_bytes_total_;
  u.num_restored_total = num_restored_total_;
  return u;
}

}  // namespace prism::internal
