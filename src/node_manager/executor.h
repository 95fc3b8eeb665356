#pragma once
// A rank's task executor: an elastic pool of threads with local resource accounting.
// Tasks start in arrival order (FIFO) when their demand fits what is free. A task blocked in Get
// hands its CPU back (Block/Unblock), and a new thread is started if a queued task can then
// run, so nested tasks cannot deadlock the pool. Idle threads sleep on a condition variable
// (no CPU). Thread-safe.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/adaptive_mutex.h"
#include "common/resources.h"
#include "common/protocol.h"

namespace prism::internal {

class Executor {
 public:
  using RunFn = std::function<void(DispatchTask&)>;
  Executor(ResourceSet capacity, RunFn run);
  ~Executor();

  void Submit(DispatchTask&& task);
  /// Called by a running task's thread when it blocks in Get / resumes.
  void Block(const ResourceSet& demand);
  void Unblock(const ResourceSet& demand);
  /// Stops the pool. Returns true if every thread was idle and has been joined; false if
  /// some were still running user code (they are detached and the executor must then be
  /// kept alive until the process exits).
  bool Stop();
  size_t NumThreads();

 private:
  /// Moves waiting tasks that fit into runnable_ and makes sure threads are there for them,
  /// beyond `caller_takes` that the calling pool thread will run itself. Requires mu_.
  void Admit(size_t caller_takes = 0);
  void ThreadMain();
  static ResourceSet CpuOnly(const ResourceSet& demand);

  static constexpr int kSpinUs = 50;
  RunFn run_;
  std::atomic<size_t> num_runnable_{0};
  AdaptiveMutex mu_;
  std::condition_variable_any cv_;
  ResourceSet available_;
  std::deque<DispatchTask> waiting_;   // not yet admitted
  std::deque<DispatchTask> runnable_;  // admitted, waiting for a thread
  std::vector<std::thread> threads_;
  size_t idle_ = 0;      // threads waiting for work (spinning or asleep)
  size_t spinning_ = 0;  // of those, spinning: they need no wake-up
  bool stop_ = false;
  bool stopped_clean_ = true;
};

}  // namespace prism::internal
