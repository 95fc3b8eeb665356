#pragma once
// Runs what the head dispatches to this rank: plain tasks on the executor's threads, actor
// creations and calls on their actor's host (one per actor living here). For each it
// resolves the by-reference arguments (inline values came along; large ones are pulled),
// invokes the registered function by name, keeps a large result in the store, and sends
// TaskDone (or, for calls the actor can no longer run, their failure). Thread-safe.
//
// Threads: the executor's elastic pool, one or more threads per actor, and one "deferred
// work" thread for what must reach the head from inside Handle (which may run under the
// head's lock on rank 0, where a direct call back would deadlock).

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/protocol.h"
#include "node_manager/actor_host.h"
#include "node_manager/executor.h"
#include "node_manager/gpu_pool.h"
#include "node_manager/generator_streams.h"
#include "node_manager/object_puller.h"
#include "object_store/memory_store.h"

namespace prism::internal {

struct RemoteFunction;  // prism/remote.h

/// The task running on the calling thread: its id (nil outside a task) and its display
/// name (nullptr outside a task; valid while the task runs).
TaskId CurrentTaskId();
const std::string* CurrentTaskName();
/// How deeply the running task is nested: 1 for what the driver submits, its children 2,
/// ...; 0 outside a task.
int CurrentTaskDepth();
/// Makes `core` what CurrentCore returns on this thread outside tasks (the callback pool's
/// threads: ObjectRefs they copy and drop count on their own rank).
void SetThreadCore(CoreApi* core);
/// The TaskCancelledError a cancelled running task's Get/Wait throws.
[[noreturn]] void ThrowCancelled(int rank);
/// The GPUs the running task or actor holds (an actor's for its whole life): their ids as
/// the rank's launcher named them, and the CUDA ordinal this process uses for each. Empty
/// outside a task, and for a task or actor that asked for no GPU.
std::vector<std::string> CurrentGpuIds();
std::vector<int> CurrentGpuOrdinals();

/// How long a task waits for the specific GPUs its grant needs (see GpuPool::Acquire)
/// before it fails with a ResourceError.
inline constexpr std::chrono::milliseconds kGpuWait{60000};

/// Deepest a task may nest (TaskSpec::depth). A task that submits beyond it gets a
/// RuntimeError from Remote(): recursion that never ends stops here, at a depth no real
/// program reaches, instead of blocking a thread per level on every rank until the
/// process runs out (each level's parent waits in Get holding its thread).
inline constexpr int kMaxTaskDepth = 1000;

/// Most objects one task may return (SetNumReturns on a std::vector): ten times the 10,000
/// of Ray's published envelope; it bounds the ids one submission takes and the entries
/// one TaskDone carries.
inline constexpr int kMaxNumReturns = 100000;

class TaskRunner {
 public:
  using ToHead = std::function<void(Message&&)>;
  /// `core` is what the tasks run here see as their rank's core (CurrentCore); `after_task`
  /// runs on a task's thread once its completion was sent; `gpus` are the devices this
  /// rank's GPU capacity stands for.
  TaskRunner(int rank, const ResourceSet& capacity, uint64_t max_inline_bytes, MemoryStore& store,
             ObjectPuller& puller, GeneratorProducers& producers, ToHead to_head, CoreApi* core,
             std::function<void()> after_task, GpuDevices gpus = {});
  ~TaskRunner();

  /// A task, actor creation or actor call the head dispatched here.
  void Run(DispatchTask&& task);
  /// Destroys (or restarts) an actor living here; its queued calls fail with the cause.
  void Kill(const KillActor& m);
  /// The head cancels a task or actor call it sent here: one not started is dropped and
  /// reported failed with m.error; a running plain task is flagged (IsCancelled) and a Get
  /// it waits in is woken to throw; a running actor call is left to finish.
  void Cancel(const CancelDispatched& m);

  /// True on a thread running a task or actor method of this rank.
  static bool InTask();
  /// While a plain task on this thread waits for objects it gives its CPU back (to the
  /// executor and the head); Unblock takes it again. Block returns false (and nothing
  /// happens) outside a plain task. Throws RuntimeError, naming the task's depth, when
  /// kMaxBlockedTasks tasks of this rank wait already (Executor::Block).
  bool Block();
  void Unblock();
  /// A thread that is not running a task (the driver) waits for `id`: runs the task that
  /// makes it here and now if it waits in this rank's executor (Executor::RunHere).
  bool RunHere(ObjectId id);

  /// Stops running new tasks and waits up to kStopGrace for running ones to return.
  /// Returns false if some task is still running user code.
  bool Stop();
  static constexpr std::chrono::milliseconds kStopGrace{1000};
  Executor& executor() { return *executor_; }

 private:
  /// Runs a task, or (with `host`) an actor's creation or method call, and reports it.
  void Execute(DispatchTask& task, ActorHost* host = nullptr);
  void RouteToActor(DispatchTask&& task);
  /// The GPUs `spec` runs with: a plain task's own (the caller releases them when it
  /// ends), an actor's held from its creation until it dies. Throws ResourceError when the
  /// devices did not come free within kGpuWait.
  GpuGrant GpusFor(const TaskSpec& spec);
  /// Gives back a dead actor's GPUs. Idempotent.
  void ReleaseActorGpus(ObjectId actor);
  /// Runs the registered function of `spec` (a method on `self` if not null) and records
  /// its result(s) in `done`: one value, n values (SetNumReturns), or none for a streaming
  /// generator, whose values went out as it yielded them.
  void Invoke(const TaskSpec& spec, const RemoteFunction& fn, void* self,
              const std::vector<ByteView>& views, TaskDone& done);
  /// Fails actor calls that can no longer run, with ActorError(cause).
  void FailCalls(std::deque<DispatchTask>&& calls, const std::string& cause);
  /// Reports a task that was dropped before it ran as failed with `error` (deferred).
  void ReportDropped(DispatchTask&& task, const ErrorInfo& error);
  /// Fails a task the executor could not give a thread (on the deferred-work thread).
  void FailUnstartedTask(DispatchTask& task, const std::string& message);
  /// On the deferred-work thread: joins the threads of an ended actor and, once the head
  /// ended it here (Kill without restart), deletes its host. Idempotent.
  void Reap(ObjectId actor, ActorHost* host);
  /// Runs `work` soon on the deferred-work thread.
  void Defer(std::function<void()> work);
  void DeferredMain();

  const int rank_;
  const uint64_t max_inline_bytes_;
  MemoryStore& store_;
  ObjectPuller& puller_;
  GeneratorProducers& producers_;
  ToHead to_head_;
  CoreApi* core_;
  std::function<void()> after_task_;
  std::unique_ptr<Executor> executor_;
  GpuPool gpus_;

  std::mutex actors_mu_;
  std::unordered_map<ObjectId, std::unique_ptr<ActorHost>> actors_;  // actors living here
  // Killed for good, waiting for their threads to leave (Reap deletes them).
  std::unordered_map<ActorHost*, std::unique_ptr<ActorHost>> ended_actors_;
  std::unordered_map<ObjectId, GpuGrant> actor_gpus_;  // live actors' GPUs

  std::mutex deferred_mu_;
  std::condition_variable deferred_cv_;
  std::deque<std::function<void()>> deferred_;
  std::thread deferred_thread_;
  bool deferred_stop_ = false;
};

}  // namespace prism::internal
