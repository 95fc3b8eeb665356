#include "object_store/memory_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/log.h"
#include "prism/errors.h"

namespace prism::internal {

namespace {

std::string Mib(uint64_t bytes) {
  char s[48];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return s;
}

/// Writes all of `data` to a new file at `path`. Returns "" or what went wrong.
std::string WriteFile(const std::string& path, const Buffer& data) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot create " + path + ": " + std::strerror(errno);
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = "cannot write " + path + ": " + std::strerror(errno);
      ::close(fd);
      ::unlink(path.c_str());
      return why;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    ::unlink(path.c_str());
    return "cannot write " + path + ": " + std::strerror(errno);
  }
  return "";
}

/// Reads `size` bytes of the file at `path`. Throws ObjectLostError if it cannot.
Payload ReadFile(const std::string& path, uint64_t size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw ObjectLostError("prism: cannot read spilled object " + path + ": " + std::strerror(errno));
  }
  Buffer out(size);
  char* p = out.data();
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::read(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = n == 0 ? "file is shorter than the object" : std::strerror(errno);
      ::close(fd);
      throw ObjectLostError("prism: cannot read spilled object " + path + ": " + why);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(fd);
  return std::make_shared<const Buffer>(std::move(out));
}

}  // namespace

MemoryStore::MemoryStore(uint64_t capacity, std::string spill_dir)
    : capacity_(capacity), spill_dir_(std::move(spill_dir)) {}

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
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  for (Waiter* w : it->second) {
    if (++w->have == w->need) w->cv.notify_one();
  }
  waiters_.erase(it);
}

void MemoryStore::Touch(Entry& e, ObjectId id) {
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
        std::error_code ec;
        std::filesystem::create_directories(spill_dir_, ec);
        spill_dir_made_ = true;
      }
    }
    // Write outside the lock: readers and writers of other objects go on meanwhile.
    std::vector<std::string> failures(victims.size());
    for (size_t i = 0; i < victims.size(); ++i) {
      failures[i] = WriteFile(PathOf(victims[i].first), *victims[i].second);
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
      auto it = objects_.find(id);
      if (it != objects_.end()) return;  // a copy is here already
      if (bytes_ + size <= capacity_ || made_room) {
        Entry& e = objects_[id];
        bytes_ += size;
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
  Payload value = ReadFile(PathOf(id), size);
  std::lock_guard<AdaptiveMutex> lock(mu_);
  auto it = objects_.find(id);
  if (it == objects_.end()) return value;
  Entry& e = it->second;
  if (!e.spilled) return e.value;  // another reader brought it back first
  if (bytes_ + size <= capacity_) {  // keep it in memory only if it fits as it is
    e.value = value;
    e.spilled = false;
    bytes_ += size;
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
      return StoredObject{e.value, e.error};
    }
  }
  Payload value = Restore(id);
  if (!value) return std::nullopt;
  return StoredObject{value, nullptr};
}

std::vector<std::optional<StoredObject>> MemoryStore::FindMany(const std::vector<ObjectId>& ids) {
  std::vector<std::optional<StoredObject>> out(ids.size());
  std::vector<size_t> spilled;
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
      out[i] = StoredObject{e.value, e.error};
    }
  }
  for (size_t i : spilled) {
    if (Payload value = Restore(ids[i])) out[i] = StoredObject{value, nullptr};
  }
  return out;
}

void MemoryStore::Erase(const std::vector<ObjectId>& ids) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  for (ObjectId id : ids) {
    auto it = objects_.find(id);
    if (it == objects_.end()) continue;
    Entry& e = it->second;
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

std::vector<bool> MemoryStore::Contains(const std::vector<ObjectId>& ids) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  size_t count = 0;
  return Present(ids, count);
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

uint64_t MemoryStore::SpilledBytes() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return spilled_bytes_;
}

size_t MemoryStore::NumSpilled() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return num_spilled_;
}

}  // namespace prism::internal
