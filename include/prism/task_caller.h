#pragma once
// prism::Task(f).SetName("x").SetResource("CPU", 2).Remote(args...) -> ObjectRef<R>

#include <map>
#include <string>
#include <type_traits>
#include <utility>

#include "prism/internal/call_options.h"
#include "prism/object_ref.h"
#include "prism/placement_group.h"
#include "prism/remote.h"

namespace prism {

namespace internal {

template <typename F>
struct FunctionTraits;
template <typename R, typename... Args>
struct FunctionTraits<R (*)(Args...)> {
  using Return = R;
  using Params = std::tuple<std::decay_t<Args>...>;
  static constexpr size_t kArity = sizeof...(Args);
};

template <typename T>
struct RefValue {
  using type = T;
};
template <typename T>
struct RefValue<ObjectRef<T>> {
  using type = T;
};

/// Packs one argument: an ObjectRef travels as a reference (the task waits for it and gets
/// its value); anything else is converted to the parameter type and serialized.
template <typename Param, typename Arg>
void PackArg(TaskRequest& request, Arg&& arg) {
  using A = std::decay_t<Arg>;
  TaskArg packed;
  if constexpr (IsObjectRef<A>::value) {
    static_assert(std::is_convertible_v<typename A::ValueType, Param>,
                  "prism: an ObjectRef<T> argument must hold a type convertible to the "
                  "function's parameter type");
    packed.is_ref = true;
    packed.ref = arg.ID();
  } else {
    static_assert(std::is_convertible_v<Arg&&, Param>,
                  "prism: argument type does not convert to the remote function's parameter "
                  "type");
    const Param& converted = static_cast<const Param&>(Param(std::forward<Arg>(arg)));
    packed.value = Serialize(converted);
  }
  request.args.push_back(std::move(packed));
}

/// Packs every argument against the parameter types in tuple `Params`, and records the
/// ObjectRefs nested in argument values.
template <typename Params, typename... Args>
void PackArgs(TaskRequest& request, Args&&... args) {
  ContainedRefScope scope;
  request.args.reserve(sizeof...(Args));
  [&]<size_t... I>(std::index_sequence<I...>) {
    (PackArg<std::tuple_element_t<I, Params>>(request, std::forward<Args>(args)), ...);
  }(std::index_sequence_for<Args...>{});
  request.contained = scope.Take();
}

/// Packs `args` into `request` and submits it; returns the new object's id, whose local
/// reference the caller's ObjectRef adopts. `what` names the call in the not-initialized
/// error.
template <typename Params, typename... Args>
ObjectId SubmitRequest(const TaskRequest& options, const char* what, Args&&... args) {
  CoreApi& core = RequireCore(what);
  TaskRequest request = options;  // the builder stays usable for more calls
  PackArgs<Params>(request, std::forward<Args>(args)...);
  return core.Submit(std::move(request));
}

}  // namespace internal

/// Builder for remote calls of a registered function. Options chain; Remote submits, and
/// can be called again for more calls with the same options. Not thread-safe; cheap to
/// build.
template <typename F>
class TaskCaller : public internal::CallOptions<TaskCaller<F>> {
 public:
  using Traits = internal::FunctionTraits<F>;
  using ReturnType = typename Traits::Return;

  explicit TaskCaller(F f) {
    request_.function =
        internal::FunctionRegistry::Instance().NameOf(internal::FunctionKey(f), "Task");
  }

  /// Retries after a system failure; with SetRetryExceptions(true) also after an exception.
  /// Default 3 (Ray's).
  TaskCaller& SetMaxRetries(int n) {
    request_.max_retries = n;
    return *this;
  }
  TaskCaller& SetRetryExceptions(bool retry) {
    request_.retry_exceptions = retry;
    return *this;
  }
  /// Cancels the task (as prism::Cancel, recursively) if it has not finished timeout_ms
  /// milliseconds after Remote() submitted it; Get then throws TaskCancelledError saying it
  /// timed out. The submitting rank times it, with one timer thread for all such tasks.
  /// Throws Error for a negative timeout. A Prism extension (Ray has none per task).
  TaskCaller& SetTimeout(int64_t timeout_ms) {
    if (timeout_ms < 0) {
      throw Error("prism: SetTimeout(" + std::to_string(timeout_ms) +
                  "): the timeout is in milliseconds and must be >= 0");
    }
    request_.timeout_ms = timeout_ms;
    return *this;
  }
  /// Submits the task. Arguments are values (copied now) or ObjectRefs (the task runs once
  /// they are ready and receives their values). Throws ResourceError if no rank can ever run
  /// it, RuntimeError if Prism is not initialized.
  template <typename... Args>
  ObjectRef<ReturnType> Remote(Args&&... args) {
    static_assert(sizeof...(Args) == Traits::kArity,
                  "prism: Remote() got a different number of arguments than the function "
                  "takes");
    ObjectId id = internal::SubmitRequest<typename Traits::Params>(request_, "Task(...).Remote",
                                                                   std::forward<Args>(args)...);
    return ObjectRef<ReturnType>(id, internal::ObjectRefBase::Adopt{});
  }

 private:
  using internal::CallOptions<TaskCaller<F>>::request_;
};

/// Starts building a remote call of a function registered with PRISM_REMOTE. Throws
/// FunctionNotFound if it was not registered.
template <typename F>
TaskCaller<F> Task(F f) {
  static_assert(std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>,
                "prism::Task takes a function; for actor methods use handle.Task(&C::M)");
  return TaskCaller<F>(f);
}

}  // namespace prism
