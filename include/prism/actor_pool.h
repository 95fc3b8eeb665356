#pragma once
// ActorPool (Ray's): spread work over a fixed set of actors, one call per actor at a time.
//
//   prism::ActorPool<Model> pool(actors);
//   auto scores = pool.Map([](prism::ActorHandle<Model>& m, int shard) {
//     return m.Task(&Model::Predict).Remote(shard);
//   }, shards);                                   // results in input order
//
// Submit queues a value; it is called on the next idle actor. GetNext returns results in
// submission order, GetNextUnordered in completion order. Not thread-safe: use one pool
// from one thread.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "prism/actor.h"

namespace prism {

template <typename C>
class ActorPool {
 public:
  /// Throws Error if `actors` is empty.
  explicit ActorPool(std::vector<ActorHandle<C>> actors) : actors_(std::move(actors)) {
    if (actors_.empty()) throw Error("prism: ActorPool needs at least one actor");
    for (size_t i = 0; i < actors_.size(); ++i) idle_.push_back(i);
  }

  /// Calls fn(actor, value) -> ObjectRef<R> on an idle actor now, or once one is free.
  template <typename F, typename V>
  void Submit(F fn, V value) {
    uint64_t index = next_submit_++;
    pending_.push_back({index, [fn = std::move(fn), value = std::move(value)](
                                   ActorHandle<C>& actor) -> internal::ObjectRefBase {
                          return fn(actor, value);
                        }});
    Dispatch();
  }
  /// True while submitted work has results not yet returned.
  bool HasNext() const { return !in_flight_.empty() || !pending_.empty(); }
  /// True if some actor is idle.
  bool HasFree() const { return !idle_.empty(); }

  /// The next result in submission order. Throws Error if there is none, TimeoutError
  /// after timeout_ms (-1: no limit; the result stays next), TaskError if the call failed.
  template <typename R>
  R GetNext(int timeout_ms = -1) {
    if (in_flight_.empty()) throw Error("prism: ActorPool::GetNext: no pending results");
    auto it = in_flight_.begin();  // lowest submission index
    return Take<R>(it, timeout_ms);
  }
  /// Whichever result is ready first. Same errors as GetNext.
  template <typename R>
  R GetNextUnordered(int timeout_ms = -1) {
    if (in_flight_.empty()) throw Error("prism: ActorPool::GetNextUnordered: no pending results");
    std::vector<ObjectId> ids;
    std::vector<typename InFlightMap::iterator> its;
    for (auto it = in_flight_.begin(); it != in_flight_.end(); ++it) {
      ids.push_back(it->second.ref.ID());
      its.push_back(it);
    }
    auto ready = internal::RequireCore("ActorPool").Wait(ids, 1, timeout_ms);
    for (size_t i = 0; i < ready.size(); ++i) {
      if (ready[i]) return Take<R>(its[i], timeout_ms);
    }
    throw TimeoutError("prism: ActorPool::GetNextUnordered timed out after " +
                       std::to_string(timeout_ms) + " ms");
  }

  /// Submits every value and returns all results in input order.
  template <typename F, typename V>
  auto Map(F fn, const std::vector<V>& values) {
    return MapAll(std::move(fn), values, /*ordered=*/true);
  }
  /// Like Map, results in completion order.
  template <typename F, typename V>
  auto MapUnordered(F fn, const std::vector<V>& values) {
    return MapAll(std::move(fn), values, /*ordered=*/false);
  }

 private:
  struct InFlight {
    internal::ObjectRefBase ref;
    size_t actor;
  };
  using InFlightMap = std::map<uint64_t, InFlight>;
  struct Pending {
    uint64_t index;
    std::function<internal::ObjectRefBase(ActorHandle<C>&)> call;
  };

  template <typename F, typename V>
  auto MapAll(F fn, const std::vector<V>& values, bool ordered) {
    using R = typename std::invoke_result_t<F, ActorHandle<C>&, const V&>::ValueType;
    for (const auto& v : values) Submit(fn, v);
    std::vector<R> out;
    out.reserve(values.size());
    while (HasNext()) out.push_back(ordered ? GetNext<R>() : GetNextUnordered<R>());
    return out;
  }

  void Dispatch() {
    while (!idle_.empty() && !pending_.empty()) {
      size_t actor = idle_.front();
      idle_.pop_front();
      Pending p = std::move(pending_.front());
      pending_.pop_front();
      in_flight_.emplace(p.index, InFlight{p.call(actors_[actor]), actor});
    }
  }

  template <typename R>
  R Take(typename InFlightMap::iterator it, int timeout_ms) {
    auto release = [&] {
      idle_.push_back(it->second.actor);
      in_flight_.erase(it);
      Dispatch();
    };
    std::vector<internal::Payload> payloads;
    try {
      payloads = internal::RequireCore("ActorPool").Get({it->second.ref.ID()}, timeout_ms);
    } catch (const TimeoutError&) {
      throw;  // still running: the result stays next
    } catch (...) {
      release();  // a failed call is consumed, like a result
      throw;
    }
    release();
    return *internal::DeserializeShared<R>(payloads[0]);
  }

  std::vector<ActorHandle<C>> actors_;
  std::deque<size_t> idle_;
  std::deque<Pending> pending_;
  InFlightMap in_flight_;
  uint64_t next_submit_ = 0;
};

}  // namespace prism
