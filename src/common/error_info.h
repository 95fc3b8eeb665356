#pragma once
// An error as data: how a failure travels between ranks and is rethrown where a result is
// read. `kind` decides which prism exception the reader throws (node/node.cc ThrowStored);
// `type` is for people: the demangled C++ type of a task's exception, else the kind's name.

#include <cstdint>
#include <string>

namespace prism::internal {

/// What failed. Travels as one byte; a value a rank does not know is a decode error.
enum class ErrorKind : uint8_t {
  kTaskException = 0,   // the task (or actor method) threw: TaskError with its type
  kObjectLost,          // the object was freed or its last copy is gone: ObjectLostError
  kActorError,          // the actor is dead, or its factory threw: ActorError
  kObjectStoreFull,     // the result did not fit its rank's store: ObjectStoreFullError
  kCopyDidNotFit,       // a fetched copy did not fit this rank's store (read once, refetched)
  kResourceError,       // impossible demand for a placement group bundle: TaskError
  kPlacementGroupRemoved,  // the task's placement group went away: TaskError
  kError,               // a control call failed for another reason: prism::Error
  kTaskCancelled,       // prism::Cancel or a SetTimeout deadline: TaskCancelledError
  kWorkerCrashed,       // the task ended its process (Python's os._exit): retried up to
                        // max_retries like a lost worker, then TaskError (Ray's WorkerCrashedError)
};
inline constexpr uint8_t kNumErrorKinds = 10;

/// Where a language binding's machine-readable attachment starts in an error message (the
/// Python binding's pickled exception): what comes before it is the text for people.
inline constexpr const char* kErrorAttachmentMarker = "\n[prism-python-exception:";

/// "TaskException", "ObjectLost", ...: the name a kind shows in messages and the state API.
const char* ErrorKindName(ErrorKind kind);

struct ErrorInfo {
  ErrorKind kind = ErrorKind::kTaskException;
  std::string type;     // demangled exception type (kTaskException), else ErrorKindName(kind)
  std::string message;  // its what()
  std::string task_name;
  int rank = -1;

  /// An error of a Prism kind (type = the kind's name).
  static ErrorInfo Of(ErrorKind kind, std::string message, std::string task_name = "", int rank = -1);
  /// A task's own exception, of the demangled C++ type `type`.
  static ErrorInfo Exception(std::string type, std::string message, std::string task_name, int rank);
  /// The what() of the rethrown TaskError.
  std::string Render() const;
  /// Render() without a binding's attachment (kErrorAttachmentMarker on): for logs.
  std::string RenderText() const;
};

}  // namespace prism::internal
