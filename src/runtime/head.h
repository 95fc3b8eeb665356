#pragma once
// The head (rank 0): GCS object table + scheduler, driven by messages from every rank's
// node manager (rank 0's own node calls in directly). One mutex serialises all of it;
// messages it sends go through `send`, which must not call back into the head (it queues
// to the transport, or hands rank 0's messages to its node, which never calls back while
// the head's lock is held).

#include <deque>
#include <functional>
#include <map>
#include <mutex>

#include "common/adaptive_mutex.h"
#include <string>
#include <unordered_map>
#include <vector>

#include "gcs/object_directory.h"
#include "scheduler/scheduler.h"
#include "transport/messages.h"

namespace prism::internal {

class Head {
 public:
  using SendFn = std::function<void(int dest, Message&& msg)>;
  Head(std::vector<ResourceSet> capacities, SendFn send);

  /// Handles one message from `from`'s node manager. Thread-safe.
  void Handle(int from, Message&& msg);

  std::map<std::string, double> Available();
  size_t NumObjects();
  size_t NumTasks();

 private:
  struct TaskEntry {
    std::shared_ptr<TaskSpec> spec;
    int unresolved = 0;
    int rank = -1;       // where it was dispatched, -1 while waiting
    bool blocked = false;
  };

  void OnSubmit(int from, TaskSpec&& spec);
  void OnTaskDone(int from, TaskDone&& done);
  void OnTaskBlocked(int from, const TaskBlocked& m);
  void OnPut(int from, PutObject&& put);
  void OnRefUpdate(int from, const RefUpdate& m);
  void OnSubscribe(int from, const Subscribe& m);

  void Enqueue(TaskId id);
  bool TryDispatch(TaskEntry& task);
  void DrainQueues();
  /// Marks the task's return object ready/failed and finishes the task's bookkeeping.
  void Complete(TaskId id, TaskDone&& done, int from);
  void FailTask(TaskId id, const ErrorInfo& error);
  void NotifyReady(ObjectId id, ObjectEntry& e);
  ObjectReady ReadyMessage(ObjectId id, const ObjectEntry& e) const;
  void SendFrees(std::vector<FreedObject>& freed);
  static std::string ClassKey(const TaskSpec& spec);

  AdaptiveMutex mu_;
  SendFn send_;
  ObjectDirectory objects_;
  Scheduler scheduler_;
  std::unordered_map<TaskId, TaskEntry> tasks_;
  // Ready tasks that found no room, FIFO per scheduling class (function + demand).
  std::map<std::string, std::deque<TaskId>> queues_;
  size_t queued_ = 0;
};

}  // namespace prism::internal
