#pragma once
// The narrow, non-template interface between the public API templates (Task, Put, Get,
// ObjectRef) and the runtime in src/. Users never call it directly.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "prism/internal/buffer.h"
#include "prism/internal/channel_inbox.h"
#include "prism/internal/ids.h"
#include "prism/state.h"

namespace prism::internal {

/// The control-plane calls of the head, one op each (CoreApi::ControlCall). Their argument
/// and result types are declared once, in src/common/head_calls.h.
enum class HeadOp : uint16_t {
  kLookupActor, kAvailable,
  kCreatePlacementGroup, kRemovePlacementGroup, kPlacementGroupState, kGetPlacementGroups,
  kKvPut, kKvGet, kKvExists, kKvDelete, kKvList,
  kListNodes, kListActors, kListTasks, kListPlacementGroups, kSummarizeTasks, kListJobs,
  kListWorkers, kListErrors, kBundleRanks, kOpenChannel, kCloseChannel,
  kCommunicatorTag,
  kWatchPlacementGroup,
  kNumOps,
};

/// One argument of a task: a serialized value, or a reference resolved before the task runs.
struct TaskArg {
  bool is_ref = false;
  ObjectId ref;
  Buffer value;
};

/// Where a task may run (SetSchedulingStrategy): the default hybrid policy, SPREAD
/// (round-robin over the ranks with room), or node affinity to one rank (hard: only there;
/// soft: there if it has room, else anywhere).
struct SchedulingStrategy {
  enum class Kind : uint8_t { kDefault = 0, kSpread = 1, kNodeAffinity = 2 };
  Kind kind = Kind::kDefault;
  int rank = -1;      // kNodeAffinity
  bool soft = false;  // kNodeAffinity
  bool operator==(const SchedulingStrategy&) const = default;
};
/// A streaming generator's default backpressure limit (values yielded but not yet taken):
/// without any limit, a producer faster than its consumer grows memory without bound (its
/// values pile up, and the head handles a flood of them).
inline constexpr uint64_t kDefaultGeneratorBackpressure = 64;

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
  int64_t timeout_ms = -1;  // SetTimeout: cancelled if not finished this long after submit
  // Ray compatibility (issue 15): scheduling, actor namespace and call retries.
  SchedulingStrategy strategy;
  std::string ray_namespace;  // actor creation with a name: "" = the job's namespace
  int max_task_retries = 0;   // actor creation: retries of calls failed by a restart; -1: no limit
  int num_returns = 1;               // SetNumReturns: n objects, ids ReturnId(id, 0..n-1)
  bool streaming = false;            // a streaming generator (StreamWriter<T>& parameter)
  uint64_t generator_backpressure = kDefaultGeneratorBackpressure;  // streaming; 0 = no limit
};

/// Where a running streaming generator's values go (node_manager/generator_streams.cc).
/// Used by StreamWriter<T> on the generator task's thread.
class GeneratorSink {
 public:
  virtual ~GeneratorSink() = default;
  /// Reports one yielded value (serialized; `contained` are the ObjectRefs nested in it) to
  /// the consumer, in order. Blocks while the consumer has the backpressure limit of values
  /// not yet taken. Throws GeneratorStoppedSignal once the consumer dropped its generator.
  virtual void Yield(Buffer&& value, std::vector<ObjectId> contained) = 0;
  /// How many values this run yielded so far.
  virtual uint64_t NumYielded() const = 0;
};

/// Thrown by StreamWriter::Yield when the consumer dropped its ObjectRefGenerator, and
/// caught by the task runner, which ends the task quietly (not a std::exception, so that
/// `catch (const std::exception&)` in user code does not swallow it).
struct GeneratorStoppedSignal {};

/// The one door into the runtime: tasks, objects, actors, every control-plane call (KV,
/// placement groups, the state API go through ControlCall) and where the caller runs.
/// Implemented by each rank's node manager, in an MPI job and in the in-process cluster
/// (prism/platform/in_process.h). The public API (prism::Task, Put, Get, kv::, state::,
/// placement groups) and the libraries reach the runtime only through it. Thread-safe.
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
  /// prism::Cancel: asks the head to cancel the task that makes `id` (and, if `recursive`,
  /// the tasks it submitted). No effect on a finished task or a Put object. Does not wait.
  virtual void Cancel(ObjectId id, bool recursive) = 0;
  /// Runs `callback` once, on the rank's callback threads, when `id` is ready (a value or a
  /// failure). The object stays alive until the callback has run.
  virtual void OnReady(ObjectId id, std::function<void()> callback) = 0;
  /// PlacementGroup::Wait: true once group `id` is created, false if it is unknown or was
  /// removed, or after timeout_ms; woken by the head's push, not polled.
  virtual bool WaitPlacementGroup(const std::string& id, int64_t timeout_ms) = 0;
  /// handle.Kill(no_restart).
  virtual void KillActor(ObjectId actor, bool no_restart) = 0;
  /// A live named actor's id and class (typeid name) in namespace `ray_namespace` ("" =
  /// the job's); nil id if none.
  virtual std::pair<ObjectId, std::string> LookupActor(const std::string& name,
                                                       const std::string& ray_namespace) = 0;
  /// The job's namespace (Config::ray_namespace, else an anonymous one of this job).
  virtual const std::string& Namespace() const = 0;
  virtual void AddLocalRef(ObjectId id) = 0;
  virtual void RemoveLocalRef(ObjectId id) = 0;

  // Streaming generators (prism/generator.h), on the rank that submitted the task.
  /// The next value of generator task `generator`, in yield order, as an id whose local
  /// reference the caller adopts; nil once the stream ended. Blocks until one is reported
  /// (timeout_ms < 0: no limit; a task waiting here gives its CPU back). Throws the task's
  /// error (TaskError, ActorError, ...) once, after every value it yielded before it
  /// failed; TimeoutError; Error for a generator this rank does not consume.
  virtual ObjectId NextGeneratorValue(TaskId generator, int64_t timeout_ms) = 0;
  /// The ObjectRefGenerator is gone: values not taken are released and a producer still
  /// running is told to stop. Idempotent.
  virtual void DropGenerator(TaskId generator) = 0;
  /// One control-plane call to the head: `op` and its serialized arguments (each op's
  /// argument and result types are declared in src/common/head_calls.h), answered with its
  /// serialized result. Throws the head's ResourceError or Error, or Error if no answer
  /// comes in 60 s (only a lost rank 0 could delay it, and that ends the job).
  virtual Payload ControlCall(HeadOp op, Buffer&& args) = 0;

  // Channels (prism/platform/channel.h): a push stream from any rank to one rank.
  /// Opens channel `name` on this rank. Throws Error if it is open anywhere in the job.
  virtual std::shared_ptr<ChannelInbox> OpenChannel(const std::string& name) = 0;
  virtual void CloseChannel(const std::string& name) = 0;
  /// Sends `bytes` to the rank that opened `name`; does not wait.
  virtual void Publish(const std::string& name, Buffer&& bytes) = 0;

  // Where the caller runs.
  virtual int Rank() const = 0;
  virtual int WorldSize() const = 0;
  /// Node (host) of every rank; ranks sharing one share a node id.
  virtual const std::vector<std::string>& NodeIds() const = 0;
  virtual const std::string& JobId() const = 0;
  /// Every rank's total resources, by rank.
  virtual std::vector<std::map<std::string, double>> Capacities() const = 0;
  /// This rank's object store: capacity, bytes in memory and spilled (state.h).
  virtual state::ObjectStoreState LocalObjectStore() = 0;
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
/// Thrown by a language binding when the task's code ended its process (Python's
/// os._exit): caught by the task runner, which fails the task as its worker crashing
/// (ErrorKind::kWorkerCrashed: retried up to max_retries) or ends its actor, instead of
/// letting the call end the rank and everything else on it. Not a std::exception.
struct WorkerExitSignal {
  std::string what;  // "called os._exit(1)"
};
/// True inside a method of an actor that was restarted at least once.
bool CurrentActorRestarted();
/// True inside a task that prism::Cancel (or its timeout) cancelled while it ran.
bool CurrentTaskCancelled();

/// The core of the running task's rank on this thread (set by the rank's task runner), else
/// the process's core (the runtime's rank, or the in-process cluster's rank 0), else
/// nullptr outside Init..Shutdown.
CoreApi* CurrentCore();
/// The core running the task on this thread, or nullptr (node_manager/task_runner.cc).
CoreApi* RunningTaskCore();
/// Installs (or with nullptr removes) the process's core: prism::Init, or an in-process
/// cluster. Throws RuntimeError if one is installed already.
void SetProcessCore(CoreApi* core);
/// Like CurrentCore but throws prism::RuntimeError naming `what` when not initialized.
CoreApi& RequireCore(const char* what);

}  // namespace prism::internal
