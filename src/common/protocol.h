#pragma once
// The control-plane protocol: every message kind and its fields, in one place. A message is
// a plain struct; Message is a variant over all of them. Between ranks, messages travel in
// batches (several per MPI send); inside rank 0, node and head pass them without encoding.
//
// Who sends what (W = any rank's node manager, H = the head on rank 0):
//   W->H  SubmitTask, TaskDone, TaskBlocked, PutObject, RefUpdate, Subscribe, AddLocation,
//         Heartbeat, KillActorRequest, ActorDied, HeadCall, Publish, CancelTask,
//         GeneratorItem, GeneratorConsumed
//   H->W  DispatchTask, ObjectReady, FreeObjects, Stop, KillActor, HeadReply, Deliver,
//         CancelDispatched, PlacementGroupChanged, GeneratorReport, GeneratorAck, RankLost
//   W->W  FetchRequest, FetchReply (+ data frames on their own tag, see mpi_transport.h)
//
// A streaming generator (TaskSpec::streaming), step by step: the producer sends each
// yielded value as a GeneratorItem (its index in the stream; large values stay in its
// store); the head makes it an object held by the consumer (the submitter) and sends it on
// as a GeneratorReport, in order; the task's end (TaskDone) becomes a last GeneratorReport
// with `end` and the error if it failed. With backpressure, the consumer reports each
// value it takes (GeneratorConsumed) and the head passes the count to the producer
// (GeneratorAck) when it may be waiting; a dropped generator is a GeneratorConsumed with
// `dropped`, and the producer hears `stop`.

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/error_info.h"
#include "common/task_spec.h"
#include "prism/internal/buffer.h"
#include "prism/internal/core_api.h"
#include "prism/internal/ids.h"

namespace prism::internal {

struct SubmitTask {
  SubmitTask() = default;
  explicit SubmitTask(TaskSpec s) : spec(std::make_shared<TaskSpec>(std::move(s))) {}
  explicit SubmitTask(std::shared_ptr<TaskSpec> s) : spec(std::move(s)) {}
  // Made once by the submitting node and kept by the head's task table: a message holding
  // the spec itself would move its many fields at every hand-over.
  std::shared_ptr<TaskSpec> spec;
};
struct DispatchTask {
  std::shared_ptr<const TaskSpec> spec;  // shared with the head's task table: no copy
  std::vector<ArgLocation> refs;  // one per by-reference arg, in order
};
/// Return 1..n-1 of a task with SetNumReturns(n) (return 0 is TaskDone's own fields).
struct ReturnValue {
  Payload inline_value;  // if small; large ones stay on the executing rank
  uint64_t size = 0;
  std::vector<ObjectId> contained;
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
  std::vector<ReturnValue> more_returns;  // num_returns > 1: returns 1..n-1, when ok
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
  // A large result, ready, told to its submitter (which does not subscribe to its own
  // results: ObjectPuller::ExpectResults): no value, no holders; subscribe to read it.
  bool notice = false;
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
/// In recovery mode a pull that failed names its source (`failed_from`): the reader waits
/// for the head's next word on the object (another copy, its rebuilt value, or an error)
/// instead of failing, since the source may be a rank about to be declared lost.
struct AddLocation {
  ObjectId id;
  bool stored = true;
  int32_t failed_from = -1;
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
/// Actor's node -> head: the actor ended itself (ExitActor) or its factory threw; or, with
/// `crashed`, a call ended the actor's process (Python's os._exit): the head restarts it if
/// its max_restarts allow, as Ray restarts an actor whose worker died.
struct ActorDied {
  ObjectId actor;
  std::string cause;
  bool crashed = false;
};
/// Node -> head: a control-plane call, answered by HeadReply with the same request id.
struct HeadCall {
  uint64_t request = 0;
  uint16_t op = 0;  // HeadOp (common/head_calls.h: its argument and result types)
  Payload args;
};
struct HeadReply {
  uint64_t request = 0;
  bool ok = true;
  ErrorKind error_kind = ErrorKind::kError;  // when !ok: kResourceError or kError
  std::string error;
  Payload result;
};
/// Any rank -> head -> the rank that opened the channel (Deliver, with the sender's rank).
struct Publish {
  std::string channel;
  Payload bytes;
};
struct Deliver {
  std::string channel;
  Payload bytes;
  int from = -1;
};
/// Node -> head: prism::Cancel(ref), or (timeout_ms > 0) the submitter's SetTimeout deadline
/// passed. The head drops the task if it waits for arguments or a rank, else tells its
/// rank (CancelDispatched); with `recursive`, the tasks it submitted go too.
struct CancelTask {
  TaskId id;
  bool recursive = true;
  uint64_t timeout_ms = 0;
};
/// Head -> the rank a cancelled task or actor call was sent to: drop it if it has not
/// started (and report it failed with `error`), else flag a running plain task cancelled
/// (its Get/Wait throw; a running actor call is left to finish).
struct CancelDispatched {
  TaskId id;
  ObjectId actor;  // nil for a plain task
  ErrorInfo error;
};
/// Head -> a rank that watches a pending placement group (HeadOp kWatchPlacementGroup): it
/// was created or removed. `status` is a PlacementGroupStatus (common/head_calls.h).
struct PlacementGroupChanged {
  std::string group;
  uint8_t status = 0;
};
/// Producer's node -> head: value `index` (0, 1, ...) a streaming generator yielded in
/// attempt `attempt`, as object `item` (minted by the producer).
struct GeneratorItem {
  TaskId task;
  int attempt = 0;
  uint64_t index = 0;
  ObjectId item;
  Payload inline_value;  // if small; large values stay in the producer's store
  uint64_t size = 0;
  std::vector<ObjectId> contained;
};
/// Head -> the consumer (the generator task's submitter): the next value, in order (its
/// ref is counted for the consumer already), or with `end` the stream's end after `index`
/// values, and the error if the task failed.
struct GeneratorReport {
  TaskId task;
  uint64_t index = 0;
  ObjectId item;
  Payload inline_value;
  uint64_t size = 0;
  bool end = false;
  bool failed = false;
  ErrorInfo error;
};
/// Consumer's node -> head: how many values it took so far (with backpressure), or that
/// its ObjectRefGenerator is gone (`dropped`).
struct GeneratorConsumed {
  TaskId task;
  uint64_t consumed = 0;
  bool dropped = false;
};
/// Head -> the producer's node: the consumer took `consumed` values; `stop`: it is gone.
struct GeneratorAck {
  TaskId task;
  uint64_t consumed = 0;
  bool stop = false;
};
struct Heartbeat {};
/// Head -> every live rank (recovery mode): `rank` was lost; its data plane fails fetches
/// from it instead of waiting for a dead peer.
struct RankLost {
  int32_t rank = -1;
};
struct Stop {
  int exit_code = 0;
  std::string reason;
  /// Recovery mode after a lost rank: end the process after the session (the ranks
  /// cannot wait for a next one on MPI_COMM_WORLD, which holds the lost rank).
  bool end_process = false;
};

using Message = std::variant<SubmitTask, DispatchTask, TaskDone, TaskBlocked, PutObject,
                             RefUpdate, Subscribe, ObjectReady, FetchRequest, FetchReply,
                             FreeObjects, AddLocation, Heartbeat, Stop, KillActorRequest,
                             KillActor, ActorDied, HeadCall, HeadReply, Publish, Deliver,
                             CancelTask, CancelDispatched, PlacementGroupChanged,
                             GeneratorItem, GeneratorReport, GeneratorConsumed, GeneratorAck,
                             RankLost>;

/// True for kinds the head handles; the rest go to the node manager.
bool IsForHead(const Message& m);
const char* KindName(const Message& m);

}  // namespace prism::internal
