#pragma once
// Prism: Ray's programming model inside one MPI job. This umbrella header is the whole
// public API; names follow Ray's C++ API (ray/api.h) in namespace prism.
//
//   #include <prism/api.h>
//   int Square(int x) { return x * x; }
//   PRISM_REMOTE(Square);
//   int main(int argc, char** argv) {
//     prism::Init(argc, argv);             // ranks 1..N-1 serve here and never return
//     auto ref = prism::Task(Square).Remote(7);
//     std::cout << *prism::Get(ref) << "\n";  // 49
//     prism::Shutdown();
//   }

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "prism/actor.h"
#include "prism/actor_pool.h"
#include "prism/array_view.h"
#include "prism/config.h"
#include "prism/errors.h"
#include "prism/generator.h"
#include "prism/kv.h"
#include "prism/object_ref.h"
#include "prism/placement_group.h"
#include "prism/preemption.h"
#include "prism/remote.h"
#include "prism/runtime_context.h"
#include "prism/runtime_env.h"
#include "prism/scheduling_strategy.h"
#include "prism/state.h"
#include "prism/task_caller.h"
#include "prism/wait_result.h"

namespace prism {

/// Starts Prism with defaults (configuration from the environment and the launcher).
/// On rank 0 it returns and the rest of main is the driver. On every other rank of an MPI
/// job it never returns: the rank serves tasks until the driver's Shutdown, then waits for
/// the driver's next Init (a new session, with the driver's configuration and flags) or for
/// the driver's process to exit (then it exits 0; the job's status is rank 0's): code after Init runs
/// on rank 0 only. As in Ray, Init while Prism runs is a no-op, and Init after Shutdown
/// starts again. Thread-safe.
void Init();
/// Like Init(), also reading --prism-* flags from the command line. While Prism runs: a
/// no-op if the flags are those of the running session, else throws RuntimeError naming
/// what differs.
void Init(int argc, char** argv);
/// Like Init(argc, argv), starting from `config` (environment and flags override it). While
/// Prism runs: a no-op if `config` and the flags are the running session's, else throws
/// RuntimeError naming the fields that differ (Shutdown first to change them).
void Init(const Config& config, int argc = 0, char** argv = nullptr);
/// True between Init and Shutdown. Thread-safe.
bool IsInitialized();
/// Ends the session on every rank; Init may start another. Call from the driver, after the
/// last Get. Outstanding tasks are abandoned. Safe to call when not initialized (no-op).
/// A driver whose main returns without it is shut down at exit, as in Ray, and the job
/// ends with main's exit status. MPI is finalized when the process exits, not here.
void Shutdown();

/// Stores a value in the object store and returns a reference to it. The value is copied
/// (serialized) now. Thread-safe.
template <typename T>
ObjectRef<T> Put(const T& value) {
  internal::CoreApi& core = internal::RequireCore("Put");
  internal::ContainedRefScope scope;
  internal::Buffer bytes = internal::Serialize(value);
  ObjectId id = core.Put(std::move(bytes), scope.Take());
  return ObjectRef<T>(id, internal::ObjectRefBase::Adopt{});
}

/// Blocks until the object is ready and returns a copy of its value. Throws TaskError if
/// the task that makes it failed. No timeout: use Get(ref, timeout_ms) to bound the wait
/// (a dead rank ends the job, so this cannot wait on a lost object forever).
template <typename T>
std::shared_ptr<T> Get(const ObjectRef<T>& ref) {
  return ref.Get();
}
inline void Get(const ObjectRef<void>& ref) { ref.Get(); }

/// Like Get(ref), but throws TimeoutError after timeout_ms milliseconds.
template <typename T>
std::shared_ptr<T> Get(const ObjectRef<T>& ref, int timeout_ms) {
  return ref.Get(timeout_ms);
}
inline void Get(const ObjectRef<void>& ref, int timeout_ms) { ref.Get(timeout_ms); }

namespace internal {
template <typename T>
std::vector<ObjectId> IdsOf(const std::vector<ObjectRef<T>>& refs) {
  std::vector<ObjectId> ids;
  ids.reserve(refs.size());
  for (const auto& r : refs) {
    if (r.IsNil()) throw Error("prism: Get/Wait on an empty ObjectRef");
    ids.push_back(r.ID());
  }
  return ids;
}
}  // namespace internal

/// Gets many objects at once, in order. Throws on the first failed one.
template <typename T>
std::vector<std::shared_ptr<T>> Get(const std::vector<ObjectRef<T>>& refs, int timeout_ms = -1) {
  auto payloads = internal::RequireCore("Get").Get(internal::IdsOf(refs), timeout_ms);
  std::vector<std::shared_ptr<T>> out;
  out.reserve(payloads.size());
  for (const auto& p : payloads) out.push_back(internal::DeserializeShared<T>(p));
  return out;
}
inline void Get(const std::vector<ObjectRef<void>>& refs, int timeout_ms = -1) {
  internal::RequireCore("Get").Get(internal::IdsOf(refs), timeout_ms);
}

/// Waits until num_objects of refs are ready or timeout_ms passed (-1: no limit). Returns
/// the first num_objects ready refs (in input order) as `ready`, all others as `unready`.
/// Throws Error if num_objects is out of range or refs repeat. A failed task counts as
/// ready (its Get throws).
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, int num_objects, int timeout_ms) {
  if (num_objects < 0 || static_cast<size_t>(num_objects) > refs.size()) {
    throw Error("prism: Wait: num_objects is " + std::to_string(num_objects) +
                " but there are " + std::to_string(refs.size()) + " refs");
  }
  auto ids = internal::IdsOf(refs);
  auto ready = internal::RequireCore("Wait").Wait(ids, num_objects, timeout_ms);
  WaitResult<T> result;
  int taken = 0;
  for (size_t i = 0; i < refs.size(); ++i) {
    if (ready[i] && taken < num_objects) {
      result.ready.push_back(refs[i]);
      ++taken;
    } else {
      result.unready.push_back(refs[i]);
    }
  }
  return result;
}

/// Cancels the task that makes `ref` (Ray's ray.cancel). Does not wait.
///  * Not started yet (waiting for arguments, for a rank, or queued on its rank): it never
///    runs; Get on `ref` throws TaskCancelledError.
///  * Running: its cancel flag is set (IsCancelled() is true inside it) and its next Get or
///    Wait throws TaskCancelledError (one already blocked is woken); however it ends, Get
///    on `ref` throws TaskCancelledError. It is not retried.
///  * Finished, or `ref` came from Put: no effect (Get returns the value).
///  * An actor method call: dropped if it has not started; a running call is not
///    interrupted (Ray's sync actors), but IsCancelled() turns true inside it, its next Get
///    or Wait throws TaskCancelledError, and Get on `ref` throws TaskCancelledError.
/// With `recursive` (the default), the tasks the cancelled task submitted are cancelled
/// too, and theirs. `force` = true would kill the worker process in Ray; Prism's tasks
/// share their rank's process, so it throws Error instead of ending the rank. Throws Error
/// on an empty ref. Thread-safe; callable from tasks.
void Cancel(const internal::ObjectRefBase& ref, bool force = false, bool recursive = true);

/// True inside a task or actor method call that Cancel (or its SetTimeout deadline)
/// cancelled while it ran: a long one checks it to stop early (Ray's
/// get_runtime_context().is_canceled()). False outside tasks. Thread-safe.
inline bool IsCancelled() { return internal::CurrentTaskCancelled(); }

/// Total resources of the cluster, summed over ranks ("CPU", "GPU", "memory", custom,
/// "rank:N"). Thread-safe.
std::map<std::string, double> ClusterResources();
/// Resources not held by running tasks right now (a snapshot from the scheduler).
std::map<std::string, double> AvailableResources();

}  // namespace prism
