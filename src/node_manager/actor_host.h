#pragma once
// One actor living on this rank: its instance, its mailbox and the threads that run its
// calls. With max_concurrency 1, one thread runs calls in arrival order (the head forwards
// each caller's calls in submission order, so per-caller order holds). The creation is
// always the first item of an incarnation; calls wait behind it. Kill destroys the
// instance (once no call is running) and hands back the queued calls to be failed.
//
// Lifetime of the threads: once the actor ended (Kill without restart, or Die) its threads
// leave as their calls return, and the last one to leave calls `ended` so that the owner
// joins them (JoinThreads) and can delete the host. A thread that is neither joined nor
// detached keeps its stack mapped: not joining cost each ended actor ~8 MiB of address
// space and two of the process's vm.max_map_count (65530) mappings.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/protocol.h"

namespace prism::internal {

class ActorHost {
 public:
  using RunFn = std::function<void(DispatchTask&, ActorHost&)>;
  /// Called on the last thread to leave after the actor ended (not under the host's lock).
  using EndedFn = std::function<void(ActorHost&)>;
  ActorHost(ObjectId id, int max_concurrency, RunFn run, EndedFn ended = {});
  ~ActorHost();

  ObjectId id() const { return id_; }
  /// Queues a creation or a call. Returns false (and does not queue) if the actor is dead
  /// or ended, or if no thread could be started for it (cause() then says why).
  bool Enqueue(DispatchTask&& task);
  /// Takes call `id` out of the mailbox if it has not started: true, with it in `*removed`.
  /// A call already running is not interrupted (Ray's sync actors): its cancel flag is set
  /// (IsCancelled inside it, its Get/Wait throw) and returned in `*flag`; false.
  bool Cancel(TaskId id, DispatchTask* removed, const std::atomic<bool>** flag = nullptr);
  /// After the actor ended and every thread left: joins them and returns true (the host
  /// may then be deleted). False while the actor lives or a call is still running.
  bool JoinThreads();
  /// The rank stops (Shutdown): takes no more work; threads leave once their call
  /// returns. Waits until `deadline` for a running call to return. True when no call is
  /// running, so no thread of this host runs user code or reports to the head again;
  /// false when one still is (the runtime must then outlive it).
  bool Stop(std::chrono::steady_clock::time_point deadline = {});
  /// Ends the current incarnation: the instance is destroyed once no call runs; queued
  /// calls are returned (to be failed). With restart, a new creation may be queued after.
  std::deque<DispatchTask> Kill(bool restart, const std::string& cause = "");

  // For the call being run (thread-safe reads while a call of this incarnation runs).
  void* instance() const { return instance_; }
  void SetInstance(void* instance, std::function<void(void*)> destroy);
  int incarnation() const { return incarnation_; }

  bool dead() const;
  /// Marks the actor dead (ExitActor or a failed creation); returns the queued calls.
  std::deque<DispatchTask> Die(const std::string& cause);
  /// Why the actor is dead ("" while alive).
  std::string cause() const;

 private:
  void ThreadMain();
  void DestroyIfIdle();  // requires mu_

  ObjectId id_;
  int max_concurrency_;
  RunFn run_;
  EndedFn ended_;
  std::atomic<size_t> queued_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<DispatchTask> mailbox_;
  // Each running call's cancel flag: a few at once (max_concurrency), so a vector that
  // keeps its capacity, not a map node allocated and freed per call.
  std::vector<std::pair<TaskId, std::atomic<bool>*>> running_calls_;
  std::vector<std::thread> threads_;
  void* instance_ = nullptr;
  std::function<void(void*)> destroy_;
  bool creating_ = false;  // a creation is queued or running: calls wait
  bool destroy_pending_ = false;
  bool dead_ = false;
  bool stop_ = false;
  int running_ = 0;
  int sleeping_ = 0;  // threads in cv_.wait: Enqueue wakes only those
  int live_ = 0;      // threads started and not yet left ThreadMain
  static constexpr int kSpinUs = 50;
  int incarnation_ = -1;
  std::string cause_;
};

}  // namespace prism::internal
