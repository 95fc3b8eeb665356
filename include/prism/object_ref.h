#pragma once
// ObjectRef<T>: a cheap, copyable handle to a value that exists (or will exist) somewhere
// in the cluster. The object lives as long as any ObjectRef to it lives on any rank, or a
// pending task or a stored value needs it.

#include <boost/serialization/split_member.hpp>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "prism/internal/core_api.h"
#include "prism/serialization.h"

namespace prism {

template <typename T>
class ObjectRef;

namespace internal {
template <typename T>
struct IsObjectRef<ObjectRef<T>> : std::true_type {};

/// Shared by ObjectRef<T> and ObjectRef<void>: id plus one local reference count.
class ObjectRefBase {
 public:
  ObjectRefBase() = default;
  /// Adopts an id whose local reference the runtime already counted for this handle.
  struct Adopt {};
  ObjectRefBase(ObjectId id, Adopt) : id_(id) {}
  explicit ObjectRefBase(ObjectId id) : id_(id) { Acquire(); }
  ObjectRefBase(const ObjectRefBase& o) : id_(o.id_) { Acquire(); }
  ObjectRefBase(ObjectRefBase&& o) noexcept : id_(o.id_) { o.id_ = ObjectId(); }
  ObjectRefBase& operator=(const ObjectRefBase& o) {
    if (this != &o) {
      ObjectId old = id_;
      id_ = o.id_;
      Acquire();
      Release(old);
    }
    return *this;
  }
  ObjectRefBase& operator=(ObjectRefBase&& o) noexcept {
    if (this != &o) {
      Release(id_);
      id_ = o.id_;
      o.id_ = ObjectId();
    }
    return *this;
  }
  ~ObjectRefBase() { Release(id_); }

  /// The object's id.
  ObjectId ID() const { return id_; }
  bool IsNil() const { return id_.IsNil(); }
  friend bool operator==(const ObjectRefBase& a, const ObjectRefBase& b) {
    return a.id_ == b.id_;
  }
  friend bool operator!=(const ObjectRefBase& a, const ObjectRefBase& b) {
    return a.id_ != b.id_;
  }

  template <class Archive>
  void save(Archive& ar, unsigned) const {
    uint64_t v = id_.Value();
    ar << v;
    ContainedRefScope::Record(id_);
  }
  template <class Archive>
  void load(Archive& ar, unsigned) {
    uint64_t v = 0;
    ar >> v;
    *this = ObjectRefBase(ObjectId(v));
  }
  BOOST_SERIALIZATION_SPLIT_MEMBER()

  /// Runs `callback` once the object is ready, whether its task succeeded or failed (Get
  /// inside the callback then returns the value at once, or throws the task's error).
  /// Exactly once, on one of the rank's completion-callback threads (a small fixed pool,
  /// however many callbacks wait; callbacks run in the order their objects arrive), never
  /// on the calling thread and never under a runtime lock. Keep callbacks short: one that
  /// blocks holds a pool thread. Until it has run, the callback keeps the object alive
  /// (as Ray's holds its ObjectRef). An exception it throws is logged and dropped.
  /// Callbacks still pending at Shutdown never run. Throws Error on an empty ref,
  /// RuntimeError if Prism is not initialized. Thread-safe. (Ray: ref._on_completed.)
  void OnReady(std::function<void()> callback) const {
    if (id_.IsNil()) throw Error("prism: OnReady on an empty ObjectRef");
    if (!callback) throw Error("prism: OnReady needs a callback, got an empty std::function");
    RequireCore("OnReady").OnReady(id_, std::move(callback));
  }

 protected:
  std::vector<Payload> Fetch(int64_t timeout_ms) const {
    if (id_.IsNil()) throw Error("prism: Get on an empty ObjectRef");
    return RequireCore("Get").Get({id_}, timeout_ms);
  }

 private:
  void Acquire() {
    if (!id_.IsNil()) {
      if (auto* core = CurrentCore()) core->AddLocalRef(id_);
    }
  }
  static void Release(ObjectId id) {
    if (!id.IsNil()) {
      if (auto* core = CurrentCore()) core->RemoveLocalRef(id);
    }
  }
  ObjectId id_;
};

template <typename T>
std::shared_ptr<T> DeserializeShared(const Payload& payload) {
  return std::make_shared<T>(Deserialize<T>(payload->data(), payload->size(), &payload));
}
}  // namespace internal

/// Handle to a remote value of type T. Copyable, thread-safe to copy and Get.
template <typename T>
class ObjectRef : public internal::ObjectRefBase {
 public:
  using ValueType = T;
  ObjectRef() = default;
  explicit ObjectRef(ObjectId id) : ObjectRefBase(id) {}
  ObjectRef(ObjectId id, Adopt a) : ObjectRefBase(id, a) {}

  /// Same as prism::Get(*this): blocks until the value is ready. Throws TaskError if the
  /// producing task failed.
  std::shared_ptr<T> Get() const { return internal::DeserializeShared<T>(Fetch(-1)[0]); }
  /// Like Get(), but throws prism::TimeoutError after timeout_ms milliseconds.
  std::shared_ptr<T> Get(int timeout_ms) const {
    return internal::DeserializeShared<T>(Fetch(timeout_ms)[0]);
  }
  /// A std::future of the value, fulfilled from a completion callback (see OnReady): no
  /// thread waits per future. Its get() rethrows the task's error (TaskError,
  /// TaskCancelledError, ...). (Ray: ref.future().)
  std::future<std::shared_ptr<T>> Future() const {
    auto promise = std::make_shared<std::promise<std::shared_ptr<T>>>();
    auto future = promise->get_future();
    ObjectRef<T> self = *this;
    OnReady([self, promise] {
      try {
        promise->set_value(self.Get(0));
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
    return future;
  }
};

/// Handle to the completion of a task that returns void.
template <>
class ObjectRef<void> : public internal::ObjectRefBase {
 public:
  using ValueType = void;
  ObjectRef() = default;
  explicit ObjectRef(ObjectId id) : ObjectRefBase(id) {}
  ObjectRef(ObjectId id, Adopt a) : ObjectRefBase(id, a) {}
  /// Blocks until the task finished; throws TaskError if it failed.
  void Get() const { Fetch(-1); }
  void Get(int timeout_ms) const { Fetch(timeout_ms); }
  /// A std::future fulfilled when the task finished (see ObjectRef<T>::Future).
  std::future<void> Future() const {
    auto promise = std::make_shared<std::promise<void>>();
    auto future = promise->get_future();
    ObjectRef<void> self = *this;
    OnReady([self, promise] {
      try {
        self.Get(0);
        promise->set_value();
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
    return future;
  }
};

namespace internal {
template <typename T>
struct Serializer<ObjectRef<T>> {
  static void Write(Writer& w, const ObjectRef<T>& ref) {
    w.Pod<uint64_t>(ref.ID().Value());
    ContainedRefScope::Record(ref.ID());
  }
  static ObjectRef<T> Read(Reader& r) { return ObjectRef<T>(ObjectId(r.Pod<uint64_t>())); }
};
}  // namespace internal

}  // namespace prism
