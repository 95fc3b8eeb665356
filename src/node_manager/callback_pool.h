#pragma once
// Runs completion callbacks (ObjectRef::OnReady, Future) on a few threads of the rank's
// own: kCallbackThreads, started on first use, whatever the number of callbacks waiting
// (10k pending callbacks cost 10k queue entries, not 10k threads). Callbacks run in the
// order their objects arrived, each exactly once, never under the store's or the head's
// locks. A callback that blocks (a Get on an object not yet ready) holds one of the
// threads meanwhile and delays those behind it: keep them short. Thread-safe.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "prism/internal/core_api.h"

namespace prism::internal {

inline constexpr int kCallbackThreads = 2;

class CallbackPool {
 public:
  using Callback = std::function<void()>;
  /// `core` is what the callbacks see as their rank's core (CurrentCore).
  explicit CallbackPool(CoreApi* core) : core_(core) {}
  ~CallbackPool();

  /// Queues callbacks to run soon. Only takes the pool's lock: safe under other locks.
  void Post(std::vector<Callback>&& callbacks);
  /// Stops the threads. Returns false if one is still in a callback (it is then left
  /// running, detached, and the pool must outlive it); queued callbacks are dropped.
  bool Stop();

 private:
  void ThreadMain();

  CoreApi* core_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Callback> queue_;
  std::vector<std::thread> threads_;
  int busy_ = 0;  // threads inside a callback
  bool stop_ = false;
};

}  // namespace prism::internal
