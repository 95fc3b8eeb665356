#pragma once
// Data's own errors (internal). A Data task that fails throws an OpError whose message
// already says which operator failed on which block and why; the driver tells it from any
// other failure by its type (TaskError::OriginalType()), not by reading the message.

#include <string>
#include <typeinfo>

#include "prism/errors.h"
#include "prism/platform/invoke.h"

namespace prism::data::internal {

/// A Data operator's failure, its message complete: "prism::data: <operator> failed on
/// block <index>: <type>: <message>". Thrown inside Data's tasks (stages, reads, Zip, actor
/// calls, all-to-all members); the driver recognizes it by type (IsOpError) and shows its
/// message as it is, where any other error gets the operator and block put in front.
/// Internal: the user catches the prism::Error the executor throws, as a Ray user gets the
/// UDF's error wrapped.
class OpError : public Error {
 public:
  using Error::Error;
};
/// An OpError that its operator's options say to retry (thrown by ApplyStage and the actor
/// pool's calls): the executor runs the block again.
class RetryableError : public OpError {
 public:
  using OpError::OpError;
};
/// Whether a failed task threw a RetryableError / an OpError (a RetryableError included):
/// by TaskError::OriginalType(), the thrown exception's type name. Thread-safe.
/// IsOpErrorType takes the type name itself (a WorkerEvent's error_type).
inline bool IsRetryableError(const TaskError& e) {
  static const std::string retryable = platform::TypeName(typeid(RetryableError));
  return e.OriginalType() == retryable;
}
inline bool IsOpErrorType(const std::string& type) {
  static const std::string op_error = platform::TypeName(typeid(OpError));
  static const std::string retryable = platform::TypeName(typeid(RetryableError));
  return type == op_error || type == retryable;
}
inline bool IsOpError(const TaskError& e) { return IsOpErrorType(e.OriginalType()); }

}  // namespace prism::data::internal
