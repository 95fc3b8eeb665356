#pragma once
// A task as the head and the nodes know it: what to run, with which arguments, needing
// which resources. The transport encodes it (transport/codec.cc); nothing here knows MPI.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/resources.h"
#include "prism/internal/core_api.h"
#include "prism/internal/ids.h"

namespace prism::internal {

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
  int depth = 1;                // nesting: 1 from the driver, a task's children its depth + 1
  TaskId parent;                // the task that submitted it (nil: the driver); recursive Cancel
  // Ray compatibility (issue 15):
  SchedulingStrategy strategy;  // where it may run (DEFAULT, SPREAD, node affinity)
  std::string actor_namespace;  // creation of a named actor: its namespace (never "")
  int max_task_retries = 0;     // creation: resends of calls failed by a restart; -1: no limit
  int num_returns = 1;          // its objects: ReturnId(id, 0..num_returns-1)
  bool streaming = false;       // a streaming generator: values reported as they are yielded
  uint64_t generator_backpressure = 0;  // streaming: most unconsumed values, 0 = no limit
};

/// A by-reference argument as the head knows it at dispatch time: small objects travel
/// along; for large ones the executing rank asks the head where to pull from (Subscribe).
struct ArgLocation {
  ObjectId id;
  Payload inline_value;  // set for small, ready objects
};

}  // namespace prism::internal
