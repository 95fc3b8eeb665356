#pragma once
// The narrow, non-template interface between the public API templates (Task, Put, Get,
// ObjectRef) and the runtime in src/. Users never call it directly.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "prism/internal/buffer.h"
#include "prism/internal/ids.h"

namespace prism::internal {

/// One argument of a task: a serialized value, or a reference resolved before the task runs.
struct TaskArg {
  bool is_ref = false;
  ObjectId ref;
  Buffer value;
};

/// Everything the template side knows about a task being submitted.
struct TaskRequest {
  enum class Kind : uint8_t { kTask = 0, kActorCreation = 1, kActorCall = 2 };
  Kind kind = Kind::kTask;
  ObjectId actor;            // actor calls
  int max_restarts = 0;      // actor creation
  int max_concurrency = 1;   // actor creation
  std::string class_name;    // actor creation: typeid name, checked by GetActor<T>
  std::string function;  // registered name
  std::string name;      // SetName, empty = function name
  std::vector<TaskArg> args;
  std::map<std::string, double> resources;  // CPU defaults to 1 unless given
  int max_retries = 3;
  bool retry_exceptions = false;
  std::vector<ObjectId> contained;  // ObjectRefs nested inside argument values
  std::string placement_group;       // id, empty = none
  int bundle_index = -1;
};

/// Serialized object bytes shared between the store and readers.
using Payload = std::shared_ptr<const Buffer>;

/// Implemented by the runtime (src/runtime). Thread-safe.
class CoreApi {
 public:
  virtual ~CoreApi() = default;
  virtual ObjectId Submit(TaskRequest&& request) = 0;
  /// Stores a serialized value; `contained` are ObjectRefs nested inside it.
  virtual ObjectId Put(Buffer&& value, std::vector<ObjectId> contained) = 0;
  /// Blocks until every id is ready (timeout_ms < 0: no limit). Throws TaskError for a
  /// failed task, TimeoutError, ObjectLostError.
  virtual std::vector<Payload> Get(const std::vector<ObjectId>& ids, int64_t timeout_ms) = 0;
  /// Ready flags, one per id, after at least num_objects are ready or the timeout passed.
  virtual std::vector<bool> Wait(const std::vector<ObjectId>& ids, int num_objects,
                                 int64_t timeout_ms) = 0;
  /// handle.Kill(no_restart).
  virtual void KillActor(ObjectId actor, bool no_restart) = 0;
  /// A live named actor's id and class (typeid name); nil id if none.
  virtual std::pair<ObjectId, std::string> LookupActor(const std::string& name) = 0;
  virtual void AddLocalRef(ObjectId id) = 0;
  virtual void RemoveLocalRef(ObjectId id) = 0;
};

/// While alive on a thread, ObjectRef releases on that thread are held back until the
/// running task's completion has been sent: a task's return value may hold the last
/// reference to an object, and the head must learn that the result contains it first.
class DeferRefReleases {
 public:
  DeferRefReleases() { ++Depth(); }
  ~DeferRefReleases() { --Depth(); }
  DeferRefReleases(const DeferRefReleases&) = delete;
  DeferRefReleases& operator=(const DeferRefReleases&) = delete;
  static int& Depth() {
    thread_local int depth = 0;
    return depth;
  }
};

/// Thrown by prism::ExitActor() and caught by the actor's host (not a std::exception, so
/// that `catch (const std::exception&)` in user code does not swallow it).
struct ExitActorSignal {};
/// True inside a method of an actor that was restarted at least once.
bool CurrentActorRestarted();

/// The running runtime, or nullptr outside Init..Shutdown.
CoreApi* CurrentCore();
/// Like CurrentCore but throws prism::RuntimeError naming `what` when not initialized.
CoreApi& RequireCore(const char* what);

}  // namespace prism::internal
