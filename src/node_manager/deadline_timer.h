#pragma once
// Per-task timeouts (SetTimeout) on the submitting rank: one ordered set of deadlines and
// one thread that sleeps until the earliest, started on first use. A task without a
// timeout costs nothing; one with a timeout costs one set insert at submit. When a
// deadline passes, `fire` runs for its task (outside the lock) whether or not the task
// has finished: the head ignores cancels of finished tasks, so nothing is tracked per
// completion. Thread-safe.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "prism/internal/ids.h"

namespace prism::internal {

class DeadlineTimer {
 public:
  using Clock = std::chrono::steady_clock;
  /// Called with the task and its timeout once its deadline passed.
  using FireFn = std::function<void(TaskId id, int64_t timeout_ms)>;
  explicit DeadlineTimer(FireFn fire) : fire_(std::move(fire)) {}
  ~DeadlineTimer() { Stop(); }

  /// Fires for `id` timeout_ms from now.
  void Add(TaskId id, int64_t timeout_ms);
  /// Stops the thread; pending deadlines never fire.
  void Stop();
  size_t Pending();

 private:
  void ThreadMain();

  FireFn fire_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::pair<TaskId, int64_t>> deadlines_;
  std::thread thread_;
  bool stop_ = false;
};

}  // namespace prism::internal
