#pragma once
// prism::Task(f).SetName("x").SetResource("CPU", 2).Remote(args...) -> ObjectRef<R>

#include <map>
#include <string>
#include <type_traits>
#include <utility>

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

}  // namespace internal

/// Builder for one remote call of a registered function. Options chain; Remote submits.
/// Not thread-safe (make one per call); cheap to build.
template <typename F>
class TaskCaller {
 public:
  using Traits = internal::FunctionTraits<F>;
  using ReturnType = typename Traits::Return;

  explicit TaskCaller(F f) {
    request_.function =
        internal::FunctionRegistry::Instance().NameOf(internal::FunctionKey(f), "Task");
  }

  /// Name shown in errors, logs and the state API (default: the function's name).
  TaskCaller& SetName(std::string name) {
    request_.name = std::move(name);
    return *this;
  }
  /// Resources the task holds while it runs, e.g. {{"CPU", 2}, {"GPU", 1}}. CPU defaults to 1
  /// unless given. Amounts below 1 may be fractional. Use {"rank:N", 0.01} to pin to rank N.
  TaskCaller& SetResources(const std::map<std::string, double>& resources) {
    for (const auto& [k, v] : resources) request_.resources[k] = v;
    return *this;
  }
  TaskCaller& SetResource(const std::string& name, double amount) {
    request_.resources[name] = amount;
    return *this;
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
  /// Runs the task inside bundle `bundle_index` of `group` (-1: any of its bundles), using
  /// the bundle's reserved resources. The task waits until the group is created; it fails
  /// if the group is removed first or its demand exceeds the bundle.
  TaskCaller& SetPlacementGroup(const PlacementGroup& group, int bundle_index = -1) {
    request_.placement_group = group.GetID();
    request_.bundle_index = bundle_index;
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
    internal::CoreApi& core = internal::RequireCore("Task(...).Remote");
    internal::PackArgs<typename Traits::Params>(request_, std::forward<Args>(args)...);
    ObjectId id = core.Submit(std::move(request_));
    return ObjectRef<ReturnType>(id, internal::ObjectRefBase::Adopt{});
  }

 private:
  internal::TaskRequest request_;
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
