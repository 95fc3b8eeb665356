#pragma once
// prism::Task(f).SetName("x").SetResource("CPU", 2).Remote(args...) -> ObjectRef<R>
// prism::Task(g).SetNumReturns(2).Remote(args...) -> std::tuple<ObjectRef<A>, ObjectRef<B>>
//   (g returns std::tuple<A, B>; a std::pair<A, B> gives a std::pair of refs)
// prism::Task(h).SetNumReturns(n).Remote(args...) -> std::vector<ObjectRef<T>> of n refs
//   (h returns std::vector<T> of exactly n elements)
// prism::Task(gen).SetGeneratorBackpressure(8).Remote(args...) -> ObjectRefGenerator<T>
//   (gen is void(prism::StreamWriter<T>&, Args...): a streaming generator)

#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "prism/generator.h"
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
  static constexpr bool kGenerator = false;
  using Yielded = void;
};
/// A streaming generator: its StreamWriter is not an argument the caller passes.
template <typename T, typename... Args>
struct FunctionTraits<void (*)(StreamWriter<T>&, Args...)> {
  using Return = void;
  using Params = std::tuple<std::decay_t<Args>...>;
  static constexpr size_t kArity = sizeof...(Args);
  static constexpr bool kGenerator = true;
  using Yielded = T;
};

/// The refs of a call whose tuple or pair of return values are objects of their own.
template <typename R>
struct ReturnParts;
template <typename... Ts>
struct ReturnParts<std::tuple<Ts...>> {
  static constexpr int kCount = sizeof...(Ts);
  using Refs = std::tuple<ObjectRef<Ts>...>;
  static Refs Make(ObjectId task, int /*n*/) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return Refs(ObjectRef<Ts>(ReturnId(task, static_cast<int>(I)), ObjectRefBase::Adopt{})...);
    }(std::index_sequence_for<Ts...>{});
  }
};
template <typename A, typename B>
struct ReturnParts<std::pair<A, B>> {
  static constexpr int kCount = 2;
  using Refs = std::pair<ObjectRef<A>, ObjectRef<B>>;
  static Refs Make(ObjectId task, int /*n*/) {
    return Refs(ObjectRef<A>(ReturnId(task, 0), ObjectRefBase::Adopt{}),
                ObjectRef<B>(ReturnId(task, 1), ObjectRefBase::Adopt{}));
  }
};

template <typename T, typename Alloc>
struct ReturnParts<std::vector<T, Alloc>> {
  using Refs = std::vector<ObjectRef<T>>;
  static Refs Make(ObjectId task, int n) {
    Refs refs;
    refs.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) refs.emplace_back(ReturnId(task, i), ObjectRefBase::Adopt{});
    return refs;
  }
};

/// Checks SetNumReturns(n) against what the function returns: a tuple's size, or for a
/// std::vector any n of at least 1 (the task then must return exactly n elements).
template <typename R>
void CheckNumReturns(const std::string& function, int n) {
  static_assert(kSplittable<R>,
                "prism: SetNumReturns(n) needs a function (or method) returning a std::tuple, "
                "a std::pair or a std::vector of values");
  if constexpr (IsVector<R>::value) {
    if (n < 1) {
      throw Error("prism: SetNumReturns(" + std::to_string(n) + ") on " + function +
                  ": n is how many elements the returned std::vector has, at least 1");
    }
    return;
  }
  const int tuple_size = static_cast<int>(NumParts<R>());
  if (n != tuple_size) {
    throw Error("prism: SetNumReturns(" + std::to_string(n) + ") on " + function +
                ", which returns " + std::to_string(tuple_size) +
                " values: n must be the size of the returned std::tuple or std::pair (without "
                "SetNumReturns the whole tuple is one object)");
  }
}

/// Checks SetGeneratorBackpressure(n) and returns the limit the task carries (0: none).
inline uint64_t GeneratorBackpressure(int64_t n) {
  if (n == 0) {
    throw Error("prism: SetGeneratorBackpressure(0) would never let the generator yield: give "
                "the most values it may run ahead of the caller (>= 1), or -1 for no limit");
  }
  return n < 0 ? 0 : static_cast<uint64_t>(n);
}

/// What Remote returns: the generator of a streaming generator, the refs of each value of
/// a split tuple, else the ref of the one result. Adopts the local references Submit made.
template <typename Traits, bool kSplit>
auto RemoteResult(ObjectId id, int num_returns) {
  if constexpr (Traits::kGenerator) {
    return ObjectRefGenerator<typename Traits::Yielded>(id, ObjectRefBase::Adopt{});
  } else if constexpr (kSplit) {
    return ReturnParts<typename Traits::Return>::Make(id, num_returns);
  } else {
    return ObjectRef<typename Traits::Return>(id, ObjectRefBase::Adopt{});
  }
}

template <typename T>
struct RefValue {
  using type = T;
};
template <typename T>
struct RefValue<ObjectRef<T>> {
  using type = T;
};

/// Packs one argument. For a parameter of type ObjectRef<T>, the reference itself travels
/// (Ray's rule: the task gets the ref, not the value; it may Get or pass it on). Else an
/// ObjectRef argument travels as a reference the task waits for and gets the value of, and
/// anything else is converted to the parameter type and serialized.
template <typename Param, typename Arg>
void PackArg(TaskRequest& request, Arg&& arg) {
  using A = std::decay_t<Arg>;
  TaskArg packed;
  if constexpr (IsObjectRef<Param>::value) {
    static_assert(std::is_same_v<A, Param>,
                  "prism: this parameter is an ObjectRef<T>: pass an ObjectRef<T> of the same T "
                  "(the task receives the reference itself, as in Ray)");
    packed.value = Serialize(static_cast<const Param&>(arg));  // recorded as contained: kept alive
  } else if constexpr (IsObjectRef<A>::value) {
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
/// build. kSplitReturns: made by SetNumReturns, Remote returns one ref per tuple element.
template <typename F, bool kSplitReturns = false>
class TaskCaller : public internal::CallOptions<TaskCaller<F, kSplitReturns>> {
 public:
  using Traits = internal::FunctionTraits<F>;
  using ReturnType = typename Traits::Return;

  explicit TaskCaller(F f) {
    request_.function =
        internal::FunctionRegistry::Instance().NameOf(internal::FunctionKey(f), "Task");
    request_.streaming = Traits::kGenerator;
  }
  /// The same options (SetNumReturns's result).
  explicit TaskCaller(const internal::TaskRequest& request) { request_ = request; }

  /// Makes each element of the returned std::tuple, std::pair or std::vector an object of
  /// its own (Ray's num_returns): Remote then returns a std::tuple (std::pair) of
  /// ObjectRefs, or a std::vector of n ObjectRefs, each with its own lifetime. For a tuple n
  /// must equal its size (Error here, where the count is written); a vector may have any n
  /// from 1 to 100,000, and a task that returns another count fails every ref saying so. A
  /// failed task fails every ref with the same error; retries keep the refs.
  TaskCaller<F, true> SetNumReturns(int n) const {
    internal::CheckNumReturns<ReturnType>(request_.function, n);
    internal::TaskRequest request = request_;
    request.num_returns = n;
    return TaskCaller<F, true>(request);
  }
  /// For streaming generators: the most values the generator may have yielded that the
  /// caller has not taken with Next() yet; past that its Yield waits (Ray's
  /// _generator_backpressure_num_objects). Default 64 (kDefaultGeneratorBackpressure); -1:
  /// no limit (Ray's default; a producer faster than its caller then grows memory without
  /// bound). 0 is an Error.
  TaskCaller& SetGeneratorBackpressure(int64_t num_objects) {
    static_assert(Traits::kGenerator,
                  "prism: SetGeneratorBackpressure is for streaming generators (functions whose "
                  "first parameter is a prism::StreamWriter<T>&)");
    request_.generator_backpressure = internal::GeneratorBackpressure(num_objects);
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
  /// they are ready and receives their values); a streaming generator's StreamWriter is
  /// not one of them. Returns ObjectRef<R>; after SetNumReturns a tuple (pair) of refs; for
  /// a streaming generator an ObjectRefGenerator<T>. Throws ResourceError if no rank can
  /// ever run it, RuntimeError if Prism is not initialized.
  template <typename... Args>
  auto Remote(Args&&... args) {
    static_assert(sizeof...(Args) == Traits::kArity,
                  "prism: Remote() got a different number of arguments than the function "
                  "takes");
    ObjectId id = internal::SubmitRequest<typename Traits::Params>(request_, "Task(...).Remote",
                                                                   std::forward<Args>(args)...);
    return internal::RemoteResult<Traits, kSplitReturns>(id, request_.num_returns);
  }

 private:
  using internal::CallOptions<TaskCaller<F, kSplitReturns>>::request_;
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
