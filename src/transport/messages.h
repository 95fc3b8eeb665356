#pragma once
// The control-plane protocol: every message kind and its fields, in one place. A message is
// a plain struct; Message is a variant over all of them. Between ranks, messages travel in
// batches (several per MPI send); inside rank 0, node and head pass them without encoding.
//
// Who sends what (W = any rank's node manager, H = the head on rank 0):
//   W->H  SubmitTask, TaskDone, TaskBlocked, PutObject, RefUpdate, Subscribe, AddLocation,
//         Heartbeat
//         KillActorRequest, ActorDied, HeadCall
//   H->W  DispatchTask, ObjectReady, FreeObjects, Stop, KillActor, HeadReply
//   W->W  FetchRequest, FetchReply (+ data frames on their own tag, see mpi_transport.h)

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "prism/internal/buffer.h"
#include "prism/internal/core_api.h"
#include "prism/internal/ids.h"
#include "scheduler/resources.h"

namespace prism::internal {

/// An error as data: what Get rethrows as prism::TaskError on whichever rank reads it.
struct ErrorInfo {
  std::string type;     // demangled exception type, or a Prism kind like "ObjectLost"
  std::string message;  // its what()
  std::string task_name;
  int rank = -1;
  /// The what() of the rethrown TaskError.
  std::string Render() const;
};

struct TaskSpecArg {
  bool is_ref = false;
  ObjectId ref;
  Payload value;  // serialized value (is_ref == false)
};

enum class TaskKind : uint8_t { kTask = 0, kActorCreation = 1, kActorCall = 2 };

struct TaskSpec {
  TaskId id;
  TaskKind kind = TaskKind::kTask;
  ObjectId actor;         // actor calls: the actor (= id of its creation task)
  std::string actor_name; // creation: SetName (named actors outlive their handles)
  std::string class_name; // creation: typeid name of the class
  int max_restarts = 0;   // creation
  int max_concurrency = 1;  // creation
  std::string function;
  std::string name;  // display name (SetName, else function)
  std::vector<TaskSpecArg> args;
  ResourceSet demand;
  int max_retries = 3;
  bool retry_exceptions = false;
  std::vector<ObjectId> contained;  // refs nested in argument values
  int submitter = 0;
  int attempt = 0;
  std::string placement_group;  // empty: none
  int bundle_index = -1;        // -1: any bundle of the group
};

/// A by-reference argument as the head knows it at dispatch time: small objects travel
/// along; for large ones the executing rank asks the head where to pull from (Subscribe).
struct ArgLocation {
  ObjectId id;
  Payload inline_value;  // set for small, ready objects
};

struct SubmitTask {
  TaskSpec spec;
};
struct DispatchTask {
  std::shared_ptr<const TaskSpec> spec;  // shared with the head's task table: no copy
  std::vector<ArgLocation> refs;  // one per by-reference arg, in order
};
struct TaskDone {
  TaskId id;
  int attempt = 0;
  bool ok = true;
  Payload inline_value;   // result if small
  uint64_t size = 0;      // result size; large results stay on the executing rank
  std::vector<ObjectId> contained;
  ErrorInfo error;
  uint64_t exec_ns = 0;
};
struct TaskBlocked {
  TaskId id;
  bool blocked = true;  // false: unblocked again
};
struct PutObject {
  ObjectId id;
  Payload inline_value;  // set if small; large values stay on the putting rank
  uint64_t size = 0;
  std::vector<ObjectId> contained;
};
struct RefUpdate {
  std::vector<ObjectId> add;
  std::vector<ObjectId> remove;
};
struct Subscribe {
  std::vector<ObjectId> ids;
};
struct ObjectReady {
  ObjectId id;
  Payload inline_value;
  uint64_t size = 0;
  std::vector<int> holders;
  bool failed = false;
  ErrorInfo error;
};
struct FetchRequest {
  ObjectId id;
  uint32_t tag = 0;  // data frames come back on this tag
};
struct FetchReply {
  ObjectId id;
  uint32_t tag = 0;
  bool found = false;
  uint64_t size = 0;
};
struct FreeObjects {
  std::vector<ObjectId> ids;
};
/// Node -> head: a pull the head assigned ended; with `stored`, this rank now has a copy.
struct AddLocation {
  ObjectId id;
  bool stored = true;
};
/// Node -> head: handle.Kill(no_restart).
struct KillActorRequest {
  ObjectId actor;
  bool no_restart = true;
};
/// Head -> the actor's node: destroy the instance and fail its queued calls with `cause`;
/// if `restart`, a new creation follows.
struct KillActor {
  ObjectId actor;
  bool restart = false;
  std::string cause;
};
/// Actor's node -> head: the actor ended itself (ExitActor) or its factory threw.
struct ActorDied {
  ObjectId actor;
  std::string cause;
};
/// The control-plane calls any rank can make of the head (GCS tables, KV, placement
/// groups, actor lookup). Arguments and results are serialized with prism::internal::
/// Serialize as the tuple / value listed; the head answers each HeadCall with one HeadReply.
enum class HeadOp : uint16_t {
  kLookupActor,        // (name) -> pair<ObjectId, class_name>; nil id if none
  kAvailable,          // () -> map<string, double>
  kCreatePlacementGroup,  // (PlacementGroup with options, no id) -> id
  kRemovePlacementGroup,  // (id) -> bool found
  kPlacementGroupState,   // (id) -> int: 0 unknown, 1 pending, 2 created
  kGetPlacementGroups,    // (name, id) -> vector<PlacementGroup> (empty filters: all)
  kKvPut,     // (key, value, overwrite) -> bool existed
  kKvGet,     // (key) -> optional<string>
  kKvExists,  // (key) -> bool
  kKvDelete,  // (key, by_prefix) -> int64 deleted
  kKvList,    // (prefix) -> vector<string> keys
  kListNodes, kListActors, kListTasks, kListPlacementGroups, kSummarizeTasks, kListJobs,
  kListWorkers, kListErrors,  // state API: (filter or limit) -> vector<prism::state::...>
};
/// Node -> head: a control-plane call, answered by HeadReply with the same request id.
struct HeadCall {
  uint64_t request = 0;
  uint16_t op = 0;  // HeadOp
  Payload args;
};
struct HeadReply {
  uint64_t request = 0;
  bool ok = true;
  std::string error_type;  // "ResourceError" or "Error" when !ok
  std::string error;
  Payload result;
};
struct Heartbeat {};
struct Stop {
  int exit_code = 0;
  std::string reason;
};

using Message = std::variant<SubmitTask, DispatchTask, TaskDone, TaskBlocked, PutObject,
                             RefUpdate, Subscribe, ObjectReady, FetchRequest, FetchReply,
                             FreeObjects, AddLocation, Heartbeat, Stop, KillActorRequest,
                             KillActor, ActorDied, HeadCall, HeadReply>;

/// True for kinds the head handles; the rest go to the node manager.
bool IsForHead(const Message& m);
const char* KindName(const Message& m);

/// Appends one message to a batch.
void EncodeMessage(const Message& m, Buffer& batch);
/// Decodes every message of a batch. Throws SerializationError on corrupt input.
std::vector<Message> DecodeBatch(const char* data, size_t size);

}  // namespace prism::internal
