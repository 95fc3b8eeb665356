#pragma once
// A task as the head and the nodes know it: what to run, with which arguments, needing
// which resources. The transport encodes it (transport/codec.cc); nothing here knows MPI.

#include <algorithm>
#include <array>
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

/// What the tasks of one caller with one set of options share: the function, its
/// resources, where it may run, its retries and, for an actor's creation, the actor's
/// settings. Immutable once a spec points to it: a caller's tasks share one (a million
/// queued tasks of one function carry one copy): the submitting node and the codec each
/// reuse a recent copy that equals them (RecentOptions). The wire still carries every
/// field with every task. Change one spec's options with TaskSpec::Edit.
struct TaskOptions {
  std::string function;
  std::string name;  // display name (SetName, else function)
  ResourceSet demand;
  SchedulingStrategy strategy;  // where it may run (DEFAULT, SPREAD, node affinity)
  std::string placement_group;  // empty: none
  int bundle_index = -1;        // -1: any bundle of the group
  int max_retries = 3;
  bool retry_exceptions = false;
  bool streaming = false;               // a streaming generator: values reported as they are yielded
  uint64_t generator_backpressure = 0;  // streaming: most unconsumed values, 0 = no limit
  // An actor's creation:
  std::string actor_name;       // SetName (named actors outlive their handles)
  std::string actor_namespace;  // a named actor's namespace (never "")
  std::string class_name;       // typeid name of the class
  int max_restarts = 0;
  int max_concurrency = 1;
  int max_task_retries = 0;  // resends of calls failed by a restart; -1: no limit

  bool operator==(const TaskOptions&) const = default;
};

/// The options of a spec made without any (shared; never changed).
const std::shared_ptr<const TaskOptions>& DefaultTaskOptions();

/// The last few options one thread made or decoded, newest first, so that tasks keep
/// sharing their caller's copy when callers take turns (a pipeline's stages, a tuner's
/// trials). Not thread-safe: one per thread.
class RecentOptions {
 public:
  /// The newest options for which `same(options)` holds (moved to the front), else null.
  template <typename Same>
  std::shared_ptr<const TaskOptions> Find(Same&& same) {
    for (size_t i = 0; i < size_; ++i) {
      if (!same(*recent_[i])) continue;
      std::rotate(recent_.begin(), recent_.begin() + i, recent_.begin() + i + 1);
      return recent_[0];
    }
    return nullptr;
  }
  /// The recent copy equal to `options`, else a new copy of them, kept as the newest.
  std::shared_ptr<const TaskOptions> Share(const TaskOptions& options) {
    if (auto same = Find([&](const TaskOptions& r) { return r == options; })) return same;
    auto copy = std::make_shared<const TaskOptions>(options);
    Add(copy);
    return copy;
  }
  /// Keeps `options` as the newest, dropping the oldest when full.
  void Add(std::shared_ptr<const TaskOptions> options) {
    std::move_backward(recent_.begin(), recent_.end() - 1, recent_.end());
    recent_[0] = std::move(options);
    size_ = std::min(size_ + 1, recent_.size());
  }
  void Clear() {
    recent_ = {};
    size_ = 0;
  }

 private:
  std::array<std::shared_ptr<const TaskOptions>, 4> recent_;
  size_t size_ = 0;
};

struct TaskSpec {
  TaskId id;
  ObjectId actor;  // actor calls: the actor (= id of its creation task)
  std::shared_ptr<const TaskOptions> options = DefaultTaskOptions();  // never null
  std::vector<TaskSpecArg> args;
  std::vector<ObjectId> contained;  // refs nested in argument values
  TaskId parent;                    // the task that submitted it (nil: the driver); recursive Cancel
  int submitter = 0;
  int attempt = 0;
  int num_returns = 1;  // its objects: ReturnId(id, 0..num_returns-1)
  int16_t depth = 1;    // nesting: 1 from the driver, a task's children its depth + 1 (<= kMaxTaskDepth)
  TaskKind kind = TaskKind::kTask;

  /// This spec's options, to change: copied first unless this spec is their only user.
  TaskOptions& Edit() {
    if (options.use_count() != 1) options = std::make_shared<TaskOptions>(*options);
    return const_cast<TaskOptions&>(*options);
  }
};

/// A by-reference argument as the head knows it at dispatch time: small objects travel
/// along; for large ones the executing rank asks the head where to pull from (Subscribe).
struct ArgLocation {
  ObjectId id;
  Payload inline_value;  // set for small, ready objects
};

}  // namespace prism::internal
