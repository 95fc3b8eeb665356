#pragma once
// A rank's task executor: an elastic pool of threads with local resource accounting.
// Tasks start in arrival order (FIFO) when their demand fits what is free. A task blocked in Get
// hands its CPU back (Block/Unblock), and a new thread is started if a queued task can then
// run, so nested tasks cannot deadlock the pool. Idle threads sleep on a condition variable
// (no CPU). Thread-safe.
//
// Bounds: at most kMaxBlockedTasks tasks of a rank may block at once (each holds a thread);
// Block refuses the next one, which then fails with an error instead of growing the pool
// until the rank runs out of threads or memory mappings. So the pool never holds more than
// about num_cpus + 2 x kMaxBlockedTasks threads. A thread the system refuses to start fails
// the tasks that needed it (FailFn), never the rank.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/adaptive_mutex.h"
#include "common/resources.h"
#include "common/protocol.h"

namespace prism::internal {

/// Most tasks of one rank that may wait in Get/Wait at once (each keeps a thread): far
/// below the limits on threads and memory mappings (two per thread stack).
inline constexpr size_t kMaxBlockedTasks = 1024;

/// Why a thread the system refused to start (std::system_error from std::thread, EAGAIN
/// when the process is out of threads or memory mappings) did not start: what it was for
/// and what to do, without a "prism: " prefix (an actor's death cause has none).
std::string ThreadStartFailure(const std::string& what, const std::system_error& e);
/// For tests: the next `n` StartThread calls on this process fail as the system would.
void FailThreadStartsForTest(int n);
/// For tests: pool threads started while `hold` is on wait before they look for work.
void HoldNewPoolThreadsForTest(bool hold);
/// Throws std::system_error while FailThreadStartsForTest counts.
void MaybeFailThreadStartForTest();
/// For tests: Block refuses past `n` blocked tasks instead of kMaxBlockedTasks (0: back to it).
void SetMaxBlockedTasksForTest(size_t n);
/// kMaxBlockedTasks, or what a test set.
size_t MaxBlockedTasks();

/// std::thread(fn), or a std::system_error when the system refuses (or a test asked).
template <typename F>
std::thread StartThread(F&& fn) {
  MaybeFailThreadStartForTest();
  return std::thread(std::forward<F>(fn));
}

class Executor {
 public:
  using RunFn = std::function<void(DispatchTask&)>;
  /// Fails a task that could not be given a thread, with this message (outside the lock).
  using FailFn = std::function<void(DispatchTask&, const std::string& message)>;
  Executor(ResourceSet capacity, RunFn run, FailFn fail = {});
  ~Executor();

  void Submit(DispatchTask&& task);
  /// prism::Cancel reached this rank for task `id`. If it waits here (not started), it is
  /// taken out of the queue into `*removed` (the caller reports it): kRemoved. If a thread
  /// runs it, that thread's cancel flag is set (IsCancelled, and its Get/Wait throw):
  /// kFlagged, with the flag in `*flag` (to wake a Get it is blocked in). Else kNotHere.
  enum class CancelResult { kNotHere, kRemoved, kFlagged };
  CancelResult Cancel(TaskId id, DispatchTask* removed, const std::atomic<bool>** flag);
  /// The cancel flag of the task running on this thread, or nullptr outside a pool thread.
  static const std::atomic<bool>* CurrentCancelFlag();
  /// Makes `flag` this thread's cancel flag (an actor thread's, for the call it runs; null
  /// after it).
  static void BindCancelFlag(std::atomic<bool>* flag);
  /// Called by a running task's thread when it blocks in Get / resumes. Block returns false
  /// (and gives nothing back) when kMaxBlockedTasks tasks are blocked already: the caller
  /// must then fail rather than wait. Unblock only after a Block that returned true.
  bool Block(const ResourceSet& demand);
  void Unblock(const ResourceSet& demand);
  /// A thread outside the pool (the driver) waits for task `id`'s result: if the task is
  /// admitted here and no pool thread took it yet, this thread runs it now, as a pool
  /// thread would (its slot, so Cancel finds it), and returns true. The waiter does the
  /// work instead of handing it to a pool thread and sleeping until it is done: two thread
  /// switches on a shared core, the slow mode of issue 43. Never a streaming generator
  /// (it may wait for its consumer, this thread) nor a task that holds GPUs.
  bool RunHere(TaskId id);
  /// Stops the pool, waiting until `deadline` for running tasks to return. Returns true if
  /// every thread was then idle and has been joined; false if some were still running user
  /// code (they are detached and the executor must then be kept alive until the process
  /// exits).
  bool Stop(std::chrono::steady_clock::time_point deadline = {});
  size_t NumThreads();

 private:
  /// Moves waiting tasks that fit into runnable_ and makes sure threads are there for them,
  /// beyond `caller_takes` that the calling pool thread will run itself. Requires mu_.
  /// Returns true if a thread could not be started: the tasks it was for are in unstarted_
  /// and the caller must call FailUnstarted once it released mu_.
  bool Admit(size_t caller_takes = 0);
  void FailUnstarted();  // not under mu_
  struct Slot;
  /// Under mu_: the runnable task at `it` leaves the queue to run on `slot`'s thread.
  DispatchTask Take(std::deque<DispatchTask>::iterator it, Slot& slot);
  /// Under mu_: the task `slot` ran returned; its resources go back (Admit is the caller's).
  void Returned(Slot& slot, const DispatchTask& task);
  void ThreadMain();
  static ResourceSet CpuOnly(const ResourceSet& demand);

  /// What a pool thread runs now; written under mu_ as it takes a task, so that Cancel,
  /// also under mu_, finds every task either in a queue or in a slot.
  struct Slot {
    TaskId running;
    std::atomic<bool> cancelled{false};
  };

  static constexpr int kSpinUs = 50;
  RunFn run_;
  FailFn fail_;
  std::atomic<size_t> num_runnable_{0};
  AdaptiveMutex mu_;
  std::condition_variable_any cv_;
  ResourceSet available_;
  std::deque<DispatchTask> waiting_;   // not yet admitted
  std::deque<DispatchTask> runnable_;  // admitted, waiting for a thread
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<Slot>> slots_;  // one per thread that ever ran
  std::vector<Slot*> outside_slots_;          // of those, the free ones of RunHere
  size_t idle_ = 0;      // threads waiting for work (spinning or asleep)
  size_t spinning_ = 0;  // of those, spinning: they need no wake-up
  size_t starting_ = 0;  // threads started that have not yet looked for work: each takes one
  size_t blocked_ = 0;   // running tasks waiting in Get/Wait
  std::deque<DispatchTask> unstarted_;  // admitted, but no thread could be started for them
  std::string start_error_;
  bool stop_ = false;
  bool stopped_clean_ = true;
};

}  // namespace prism::internal
