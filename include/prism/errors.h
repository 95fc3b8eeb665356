#pragma once
// Every exception Prism throws derives from prism::Error (a std::runtime_error), so
// `catch (const prism::Error&)` catches all of them. Errors that happen on another rank
// travel as data (type name, message, task name, rank) and are rethrown where the result
// is read, as prism::TaskError.

#include <stdexcept>
#include <string>

namespace prism {

/// Base of every Prism exception.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// An exception escaped a remote task. what() names the original exception type, its
/// message, the task's name and the rank it ran on. Thrown by Get (and by Get on every
/// task that depended on the failed one).
class TaskError : public Error {
 public:
  TaskError(std::string original_type, std::string original_message, std::string task_name,
            int rank, const std::string& what)
      : Error(what),
        original_type_(std::move(original_type)),
        original_message_(std::move(original_message)),
        task_name_(std::move(task_name)),
        rank_(rank) {}
  /// Demangled type of the exception the task threw, e.g. "std::out_of_range".
  const std::string& OriginalType() const { return original_type_; }
  /// what() of the exception the task threw.
  const std::string& OriginalMessage() const { return original_message_; }
  /// Name of the task that threw (its SetName, else the function's name).
  const std::string& TaskName() const { return task_name_; }
  /// Rank the failing task ran on.
  int Rank() const { return rank_; }

 private:
  std::string original_type_, original_message_, task_name_;
  int rank_;
};

/// The task was cancelled (prism::Cancel, or its SetTimeout deadline passed) before it
/// finished: thrown by Get on its ObjectRef, and inside the cancelled task by its next
/// Get/Wait. A TaskError, so code that catches failed tasks catches it too (Ray's
/// TaskCancelledError). what() says whether a timeout cancelled it.
class TaskCancelledError : public TaskError {
 public:
  using TaskError::TaskError;
};

/// Get or Wait did not finish within its timeout.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

/// Task(f) was called with a function that no PRISM_REMOTE registered.
class FunctionNotFound : public Error {
 public:
  using Error::Error;
};

/// A resource request that no rank of the cluster can ever satisfy (GPUs where there are
/// none, more CPUs than any rank has, an unknown custom resource).
class ResourceError : public Error {
 public:
  using Error::Error;
};

/// A call on an actor that is dead: killed, exited with ExitActor, or whose factory threw
/// (what() names the cause).
class ActorError : public Error {
 public:
  using Error::Error;
};

/// A value could not be (de)serialized: truncated or corrupted bytes, or a type mismatch
/// between the ObjectRef's type and the stored value.
class SerializationError : public Error {
 public:
  using Error::Error;
};

/// An object is gone: freed after its last reference was dropped, or lost with its rank.
class ObjectLostError : public Error {
 public:
  using Error::Error;
};

/// A rank's object store is full (object_store_memory) and nothing more could be spilled
/// to disk to make room: the message gives the sizes involved. Free some ObjectRefs, raise
/// object_store_memory, or use fewer ranks per node.
class ObjectStoreFullError : public Error {
 public:
  using Error::Error;
};

/// The runtime is not in a state for this call (Init twice, a call before Init or after
/// Shutdown, a bad configuration value).
class RuntimeError : public Error {
 public:
  using Error::Error;
};

}  // namespace prism
