#pragma once
// Actors (Ray's): a class instance living on one rank, whose methods are called remotely.
//
//   class Counter {
//    public:
//     static Counter* FactoryCreate(int start) { return new Counter(start); }
//     int Add(int x) { return value_ += x; }
//    ...
//   };
//   PRISM_REMOTE(Counter::FactoryCreate, &Counter::Add);
//   auto counter = prism::Actor(Counter::FactoryCreate).SetName("c").Remote(10);
//   auto ref = counter.Task(&Counter::Add).Remote(5);   // ObjectRef<int>
//
// Calls from one caller run in submission order (with SetMaxConcurrency(n) > 1, up to n
// run at once, in no set order). An actor lives while any handle to it does, except named
// actors, which live until killed or the job ends.

#include <map>
#include <optional>
#include <string>
#include <typeinfo>

#include "prism/internal/call_options.h"
#include "prism/placement_group.h"
#include "prism/task_caller.h"

namespace prism {

namespace internal {
template <typename M>
struct MethodTraits;
template <typename C, typename R, typename... Args>
struct MethodTraits<R (C::*)(Args...)> {
  using Class = C;
  using Return = R;
  using Params = std::tuple<std::decay_t<Args>...>;
  static constexpr size_t kArity = sizeof...(Args);
  static constexpr bool kGenerator = false;
  using Yielded = void;
};
/// A streaming generator method: its StreamWriter is not an argument the caller passes.
template <typename C, typename T, typename... Args>
struct MethodTraits<void (C::*)(StreamWriter<T>&, Args...)> {
  using Class = C;
  using Return = void;
  using Params = std::tuple<std::decay_t<Args>...>;
  static constexpr size_t kArity = sizeof...(Args);
  static constexpr bool kGenerator = true;
  using Yielded = T;
};
template <typename C, typename R, typename... Args>
struct MethodTraits<R (C::*)(Args...) const> : MethodTraits<R (C::*)(Args...)> {};

/// A method of a base class B called on an actor of class D (Ray's virtual functions on a
/// derived actor): the actor's instance is used as a B, which Prism (as Ray) does without
/// knowing D where the call runs, so B must sit at the start of D. Throws Error otherwise
/// (register and call a method of D instead).
template <typename D, typename B>
void RequireBaseAtStart(const std::string& method) {
  static_assert(requires(B* b) { static_cast<D*>(b); },
                "prism: a method of a virtual base class cannot be called on the actor: "
                "register and call a method of the actor's own class");
  alignas(D) static unsigned char storage[sizeof(D)];
  D* derived = reinterpret_cast<D*>(storage);
  if (static_cast<void*>(static_cast<B*>(derived)) != static_cast<void*>(derived)) {
    throw Error("prism: " + method + " is a method of a base class that is not the first base of the "
                "actor's class: register and call a method of the actor's own class");
  }
}
}  // namespace internal

template <typename M, bool kSplitReturns = false>
class ActorTaskCaller;

/// Handle to an actor. Cheap copyable value; pass it to tasks and other actors. Thread-safe.
template <typename C>
class ActorHandle {
 public:
  ActorHandle() = default;
  explicit ActorHandle(ObjectRef<void> creation) : creation_(std::move(creation)) {}

  /// The actor's id.
  ObjectId ID() const { return creation_.ID(); }
  /// Starts a call of a method registered with PRISM_REMOTE(&C::Method), or of a base
  /// class's (PRISM_REMOTE(&Base::Method); virtual methods run C's override, as in Ray).
  template <typename M>
  ActorTaskCaller<M> Task(M method) const {
    using Owner = typename internal::MethodTraits<M>::Class;
    static_assert(std::is_base_of_v<Owner, C>,
                  "prism: this method belongs to another class than the actor (nor to one of its bases)");
    ActorTaskCaller<M> caller(ID(), method);
    if constexpr (!std::is_same_v<Owner, C>) internal::RequireBaseAtStart<C, Owner>(caller.Function());
    return caller;
  }
  /// Kills the actor. no_restart=false restarts it (from its factory, with the original
  /// arguments) if SetMaxRestarts allows. Queued and later calls fail with ActorError.
  void Kill(bool no_restart = true) const {
    internal::RequireCore("ActorHandle::Kill").KillActor(ID(), no_restart);
  }

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & creation_;
  }

 private:
  ObjectRef<void> creation_;  // keeps the actor alive while any handle lives
};

/// Builder for one actor method call. Not thread-safe; cheap. kSplitReturns: made by
/// SetNumReturns.
/// SetName, SetResources and SetResource come from RequestOptions. Resources of a call are
/// as Ray's ActorTaskCaller takes them: checked like a task's (a request no rank can ever
/// hold is a ResourceError at Remote()), but, as in Ray, a call runs on its actor's rank
/// with what the actor holds: nothing more is reserved.
template <typename M, bool kSplitReturns>
class ActorTaskCaller : public internal::RequestOptions<ActorTaskCaller<M, kSplitReturns>> {
 public:
  using Traits = internal::MethodTraits<M>;
  using ReturnType = typename Traits::Return;
  ActorTaskCaller(ObjectId actor, M method) {
    request_.kind = internal::TaskRequest::Kind::kActorCall;
    request_.actor = actor;
    request_.function = internal::FunctionRegistry::Instance().NameOf(internal::FunctionKey(method),
                                                                      "actor method");
    request_.resources["CPU"] = 0;  // methods run on the actor's own threads
    request_.max_retries = 0;
    request_.streaming = Traits::kGenerator;
  }
  /// The same options (SetNumReturns's result).
  explicit ActorTaskCaller(const internal::TaskRequest& request) { request_ = request; }
  /// The method's registered name.
  const std::string& Function() const { return request_.function; }
  /// As TaskCaller::SetNumReturns: one ref per element of the returned tuple, pair or
  /// vector.
  ActorTaskCaller<M, true> SetNumReturns(int n) const {
    internal::CheckNumReturns<ReturnType>(request_.function, n);
    internal::TaskRequest request = request_;
    request.num_returns = n;
    return ActorTaskCaller<M, true>(request);
  }
  /// As TaskCaller::SetGeneratorBackpressure, for a streaming generator method.
  ActorTaskCaller& SetGeneratorBackpressure(int64_t num_objects) {
    static_assert(Traits::kGenerator,
                  "prism: SetGeneratorBackpressure is for streaming generators (methods whose "
                  "first parameter is a prism::StreamWriter<T>&)");
    request_.generator_backpressure = internal::GeneratorBackpressure(num_objects);
    return *this;
  }
  /// Submits the call. Arguments as for tasks. A call on a dead actor fails (Get throws
  /// ActorError). Returns what TaskCaller::Remote would: a ref, a tuple of refs after
  /// SetNumReturns, or an ObjectRefGenerator for a streaming generator method.
  template <typename... Args>
  auto Remote(Args&&... args) {
    static_assert(sizeof...(Args) == Traits::kArity,
                  "prism: Remote() got a different number of arguments than the method takes");
    ObjectId id = internal::SubmitRequest<typename Traits::Params>(
        request_, "actor Task(...).Remote", std::forward<Args>(args)...);
    return internal::RemoteResult<Traits, kSplitReturns>(id, request_.num_returns);
  }

 private:
  using internal::RequestOptions<ActorTaskCaller<M, kSplitReturns>>::request_;
};

/// Builder for creating an actor from a factory `static C* Create(Args...)`.
template <typename F>
class ActorCreator : public internal::CallOptions<ActorCreator<F>> {
 public:
  using Traits = internal::FunctionTraits<F>;
  using Class = std::remove_pointer_t<typename Traits::Return>;
  static_assert(std::is_pointer_v<typename Traits::Return>,
                "prism::Actor takes a factory returning a pointer to the new instance");

  explicit ActorCreator(F factory) {
    request_.kind = internal::TaskRequest::Kind::kActorCreation;
    request_.function =
        internal::FunctionRegistry::Instance().NameOf(internal::FunctionKey(factory), "Actor");
    request_.class_name = typeid(Class).name();
    request_.resources["CPU"] = 0;  // Ray's default: an actor holds no CPU while it lives
    request_.max_retries = 0;
  }
  // SetName (a named actor is found by GetActor<C>(name) and lives without handles until
  // killed or the job ends), SetResources, SetResource, SetPlacementGroup,
  // SetSchedulingStrategy, SetRuntimeEnv: see CallOptions.
  using internal::CallOptions<ActorCreator<F>>::SetName;
  /// Names the actor in namespace `ray_namespace` ("" = the job's, GetNamespace()):
  /// GetActor<C>(name, ray_namespace) finds it. One name may be used once per namespace.
  ActorCreator& SetName(std::string name, std::string ray_namespace) {
    request_.name = std::move(name);
    request_.ray_namespace = std::move(ray_namespace);
    return *this;
  }
  /// How often a killed (Kill(false)) actor is re-created. Default 0; -1: without limit.
  ActorCreator& SetMaxRestarts(int n) {
    if (n < -1) throw Error("prism: SetMaxRestarts needs n >= -1, got " + std::to_string(n));
    request_.max_restarts = n;
    return *this;
  }
  /// How often a call that failed because the actor was restarting is sent again, to the
  /// restarted actor, instead of failing with ActorError (Ray's max_task_retries). Default
  /// 0; -1: as long as the actor restarts. Calls of an actor that died for good still fail.
  ActorCreator& SetMaxTaskRetries(int n) {
    if (n < -1) throw Error("prism: SetMaxTaskRetries needs n >= -1, got " + std::to_string(n));
    request_.max_task_retries = n;
    return *this;
  }
  /// Up to n method calls at once (a threaded actor). Default 1: calls run one by one.
  ActorCreator& SetMaxConcurrency(int n) {
    if (n < 1) throw Error("prism: SetMaxConcurrency needs n >= 1, got " + std::to_string(n));
    request_.max_concurrency = n;
    return *this;
  }
  /// Creates the actor (asynchronously: calls queue until it is up). Throws ResourceError
  /// if no rank can hold it, Error if the name is taken.
  template <typename... Args>
  ActorHandle<Class> Remote(Args&&... args) {
    static_assert(sizeof...(Args) == Traits::kArity,
                  "prism: Remote() got a different number of arguments than the factory takes");
    ObjectId id = internal::SubmitRequest<typename Traits::Params>(request_, "Actor(...).Remote",
                                                                   std::forward<Args>(args)...);
    return ActorHandle<Class>(ObjectRef<void>(id, internal::ObjectRefBase::Adopt{}));
  }

 private:
  using internal::CallOptions<ActorCreator<F>>::request_;
};

/// Starts building an actor from a factory registered with PRISM_REMOTE.
template <typename F>
ActorCreator<F> Actor(F factory) {
  return ActorCreator<F>(factory);
}

/// The live actor named `name` in namespace `ray_namespace` ("" = the job's), if any.
/// Throws Error if it is of another class. Thread-safe; one round trip to the head.
template <typename C>
std::optional<ActorHandle<C>> GetActor(const std::string& name, const std::string& ray_namespace = "") {
  auto [id, class_name] = internal::RequireCore("GetActor").LookupActor(name, ray_namespace);
  if (id.IsNil()) return std::nullopt;
  if (class_name != typeid(C).name()) {
    throw Error("prism: GetActor: actor \"" + name + "\" is of another class");
  }
  return ActorHandle<C>(ObjectRef<void>(id));
}

/// The job's namespace: Config::ray_namespace, else an anonymous one of this job (Ray's
/// default). Named actors live in a namespace; GetActor looks in this one unless told.
inline std::string GetNamespace() { return internal::RequireCore("GetNamespace").Namespace(); }

/// Inside an actor method: ends the actor after this call (no restart). The call itself
/// fails with ActorError, as do queued ones.
[[noreturn]] inline void ExitActor() { throw internal::ExitActorSignal{}; }

/// Inside an actor method: true if this actor was restarted at least once.
inline bool WasCurrentActorRestarted() { return internal::CurrentActorRestarted(); }

}  // namespace prism
