#pragma once
// Deployments, applications, handles and responses (Ray Serve's @serve.deployment, .bind,
// DeploymentHandle and DeploymentResponse). See prism/serve.h for the whole picture.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "prism/actor.h"
#include "prism/errors.h"
#include "prism/platform/invoke.h"
#include "prism/serve/config.h"
#include "prism/serve/http.h"

namespace prism::serve {

class Application;
template <typename C>
class DeploymentHandle;
template <typename T>
class DeploymentResponse;

namespace internal {

/// A deployment class with its erased constructor, lifecycle hooks and HTTP handler: what a
/// replica on any rank needs to build and run one. Registered at static initialisation
/// (every rank runs the same binary) by ClassRegistrar below.
struct ClassEntry {
  std::string class_name;  // typeid(C).name(), for messages
  std::function<void*(const std::string& init_args)> create;
  std::function<void(void*)> destroy;
  std::function<void(void*, const nlohmann::json&)> reconfigure;  // empty: no Reconfigure
  std::function<void(void*)> check_health;                        // empty: no CheckHealth
  std::function<std::string(void*, const std::string&)> http;     // empty: no operator()
};
/// A typed method of a deployment class: serialized arguments in, serialized result out.
using MethodInvoker = std::function<std::string(void* self, const std::string& args)>;

/// Registers a deployment class (returns true; for static initialisers). Thread-compatible:
/// called only during static initialisation.
bool RegisterClass(const std::string& key, ClassEntry entry);
/// Registers a typed method by key. As RegisterClass.
bool RegisterMethod(const std::string& key, MethodInvoker invoker);

/// The result of one call through a router: the serialized value, or the error.
struct CallResult {
  std::string bytes;
  std::exception_ptr error;
};
using CallDone = std::function<void(CallResult)>;

/// The method key of a deployment's HTTP handler (operator()(const Request&)).
inline const std::string kHttpMethod = "__call__";

/// Sends one call to a replica of `deployment` through this rank's router (the driver's
/// on rank 0, else one fed from the controller's replica table); `done` runs exactly once,
/// on a completion thread (or on the calling thread when the call fails at once: unknown
/// deployment, back pressure). Never blocks on the replica. Thread-safe.
void SubmitCall(const std::string& deployment, const std::string& method_key, std::string args,
                CallDone done);
/// Whether a deployment of that name is deployed (one round trip to the head off rank 0).
bool DeploymentExists(const std::string& deployment);

/// The shared state behind a DeploymentResponse: set once, read by many. Thread-safe.
class ResponseState {
 public:
  /// Sets the result and runs the callbacks (on this thread). Later calls are ignored.
  void Complete(CallResult result) {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return;
      result_ = std::move(result);
      done_ = true;
      callbacks.swap(callbacks_);
    }
    cv_.notify_all();
    for (auto& cb : callbacks) cb();
  }
  void Fail(std::exception_ptr error) { Complete(CallResult{{}, std::move(error)}); }
  /// Runs `cb` once the result is set: now, on this thread, if it already is.
  void OnDone(std::function<void()> cb) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!done_) {
        callbacks_.push_back(std::move(cb));
        return;
      }
    }
    cb();
  }
  /// Waits up to `timeout_s` (< 0: without limit) for the result; true when it is set.
  bool Wait(double timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    if (timeout_s < 0) {
      cv_.wait(lock, [this] { return done_; });
      return true;
    }
    return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return done_; });
  }
  bool Done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  /// The result; only after Done().
  const CallResult& Result() const { return result_; }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  CallResult result_;
  std::vector<std::function<void()>> callbacks_;
};

/// Stands for a bound Application among Bind's arguments: the replica's constructor gets a
/// DeploymentHandle to that application's ingress deployment in its place.
struct HandleArg {
  std::string deployment;
  template <typename C>
  operator DeploymentHandle<C>() const {  // NOLINT: implicit on purpose
    return DeploymentHandle<C>(deployment);
  }
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & deployment;
  }
};

template <typename T>
struct IsResponse : std::false_type {};
template <typename T>
struct IsResponse<DeploymentResponse<T>> : std::true_type {};

/// Registers class C constructed from arguments of types A... (Bind's arguments, with
/// Applications replaced by HandleArgs).
template <typename C, typename... A>
struct ClassRegistrar {
  static std::string Key() { return typeid(ClassRegistrar).name(); }
  static ClassEntry MakeEntry() {
    ClassEntry e;
    e.class_name = typeid(C).name();
    e.create = [](const std::string& init_args) -> void* {
      auto parts = platform::FromBytes<std::vector<std::string>>(init_args);
      if (parts.size() != sizeof...(A)) {
        throw Error("serve: constructor arguments do not match the deployment class (binary mismatch?)");
      }
      return [&]<size_t... I>(std::index_sequence<I...>) -> void* {
        return new C(platform::FromBytes<A>(parts[I])...);
      }(std::index_sequence_for<A...>{});
    };
    e.destroy = [](void* p) { delete static_cast<C*>(p); };
    if constexpr (requires(C& c, const nlohmann::json& j) { c.Reconfigure(j); }) {
      e.reconfigure = [](void* p, const nlohmann::json& j) { static_cast<C*>(p)->Reconfigure(j); };
    }
    if constexpr (requires(C& c) { c.CheckHealth(); }) {
      e.check_health = [](void* p) { static_cast<C*>(p)->CheckHealth(); };
    }
    if constexpr (requires(C& c, const Request& r) { { c(r) } -> std::convertible_to<Response>; }) {
      e.http = [](void* p, const std::string& bytes) {
        Request request = platform::FromBytes<Request>(bytes);
        Response response = (*static_cast<C*>(p))(request);
        return platform::ToBytes(response);
      };
    }
    return e;
  }
  static inline const bool registered = RegisterClass(Key(), MakeEntry());
};

/// Registers the typed method M (a pointer to member) for handle calls.
template <auto M>
struct MethodRegistrar {
  using Traits = prism::internal::MethodTraits<decltype(M)>;
  using C = typename Traits::Class;
  using Params = typename Traits::Params;
  using R = std::decay_t<typename Traits::Return>;
  static std::string Key() { return typeid(MethodRegistrar).name(); }
  static std::string Invoke(void* self, const std::string& args) {
    auto parts = platform::FromBytes<std::vector<std::string>>(args);
    if (parts.size() != Traits::kArity) {
      throw Error("serve: a handle call carried " + std::to_string(parts.size()) + " arguments for a method of " +
                  std::to_string(Traits::kArity));
    }
    return [&]<size_t... I>(std::index_sequence<I...>) -> std::string {
      Params values{platform::FromBytes<std::tuple_element_t<I, Params>>(parts[I])...};
      C* c = static_cast<C*>(self);
      if constexpr (std::is_void_v<R>) {
        (c->*M)(std::move(std::get<I>(values))...);
        return std::string();
      } else {
        return platform::ToBytes<R>((c->*M)(std::move(std::get<I>(values))...));
      }
    }(std::make_index_sequence<Traits::kArity>{});
  }
  static inline const bool registered = RegisterMethod(Key(), &Invoke);
};

/// The bytes of argument `a` as a parameter of type P (a DeploymentResponse: its result).
template <typename P, typename A>
std::string ArgBytes(const A& a) {
  if constexpr (IsResponse<A>::value) {
    using T = typename A::ValueType;
    if constexpr (std::is_same_v<std::decay_t<T>, P>) {
      return a.state()->Result().bytes;  // already P's bytes
    } else {
      return platform::ToBytes<P>(P(platform::FromBytes<T>(a.state()->Result().bytes)));
    }
  } else {
    return platform::ToBytes<P>(P(a));
  }
}

/// Runs `then` once every state in `deps` is done; if one failed, fails `out` with its
/// error instead. Never blocks.
inline void WhenAll(std::vector<std::shared_ptr<ResponseState>> deps, std::function<void()> then,
                    std::shared_ptr<ResponseState> out) {
  if (deps.empty()) {
    then();
    return;
  }
  auto left = std::make_shared<std::atomic<size_t>>(deps.size());
  auto shared_then = std::make_shared<std::function<void()>>(std::move(then));
  for (auto& d : deps) {
    d->OnDone([left, shared_then, deps, out] {
      if (left->fetch_sub(1) != 1) return;
      for (auto& dep : deps) {
        if (dep->Result().error) {
          out->Fail(dep->Result().error);
          return;
        }
      }
      (*shared_then)();
    });
  }
}

/// Maps one Bind argument to what travels: an Application becomes a HandleArg.
template <typename T>
struct BindArg {
  using type = std::decay_t<T>;
};
template <typename T>
  requires std::is_same_v<std::decay_t<T>, Application>
struct BindArg<T> {
  using type = HandleArg;
};

/// One deployment of an application, ready to deploy.
struct DeploymentSpec {
  std::string name;
  std::string class_key;
  std::string class_name;
  std::string init_args;  // serialized constructor arguments
  DeploymentConfig config;
  bool has_http = false;
};

}  // namespace internal

/// The result of a handle call (Ray's DeploymentResponse): await it with Result(timeout),
/// react with OnReady, or pass it as an argument to another handle call, which then runs
/// once this one finished, without blocking any thread. Cheap copyable value. Thread-safe.
template <typename T>
class DeploymentResponse {
 public:
  using ValueType = T;
  explicit DeploymentResponse(std::shared_ptr<internal::ResponseState> state) : state_(std::move(state)) {}

  /// The value, waiting up to `timeout_s` seconds for it (< 0: without limit, for callers
  /// that know the call ends). Throws TimeoutError when the wait ends first, and the
  /// call's error otherwise: BackPressureError, prism::TaskError for an exception the
  /// replica's method threw (its message inside), DeploymentError.
  T Result(double timeout_s) const {
    if (!state_->Wait(timeout_s)) {
      throw TimeoutError("serve: DeploymentResponse::Result: no result within " + std::to_string(timeout_s) + " s");
    }
    const internal::CallResult& r = state_->Result();
    if (r.error) std::rethrow_exception(r.error);
    if constexpr (!std::is_void_v<T>) return platform::FromBytes<T>(r.bytes);
  }
  /// Whether the result (or error) is there.
  bool Ready() const { return state_->Done(); }
  /// Runs `callback` once the result is there: at once on this thread if it already is,
  /// else on the thread that completes it (keep it short; Result(0) inside returns at once).
  void OnReady(std::function<void()> callback) const { state_->OnDone(std::move(callback)); }
  /// The shared state (for chaining).
  const std::shared_ptr<internal::ResponseState>& state() const { return state_; }

 private:
  std::shared_ptr<internal::ResponseState> state_;
};

/// A handle to a deployment (Ray's DeploymentHandle): calls go to its replicas through a
/// router that keeps at most max_ongoing_requests in flight per replica. Cheap copyable,
/// serializable value (pass it to a constructor with Bind, or to tasks); usable on any rank.
/// Thread-safe.
template <typename C>
class DeploymentHandle {
 public:
  DeploymentHandle() = default;
  explicit DeploymentHandle(std::string deployment) : deployment_(std::move(deployment)) {}
  /// The deployment's name.
  const std::string& DeploymentName() const { return deployment_; }

  /// Calls the deployment's HTTP handler, operator()(const Request&), with `request`.
  DeploymentResponse<Response> Remote(Request request) const {
    static_assert(requires(C& c, const Request& r) { { c(r) } -> std::convertible_to<Response>; },
                  "serve: Remote(request) needs a deployment class with Response operator()(const Request&)");
    auto out = std::make_shared<internal::ResponseState>();
    Submit(internal::kHttpMethod, platform::ToBytes(request), out);
    return DeploymentResponse<Response>(out);
  }

  /// Calls method M of the deployment class with `args`: values or DeploymentResponses of
  /// earlier calls (the call is sent once they are ready; if one failed, this one fails
  /// with its error). Returns at once.
  template <auto M, typename... Args>
  auto Method(Args&&... args) const {
    using Traits = prism::internal::MethodTraits<decltype(M)>;
    using Params = typename Traits::Params;
    using R = std::decay_t<typename Traits::Return>;
    static_assert(std::is_same_v<typename Traits::Class, C>,
                  "serve: Method<&X::F>: F belongs to another class than the handle's deployment");
    static_assert(!Traits::kGenerator, "serve: streaming methods are not supported through handles");
    static_assert(sizeof...(Args) == Traits::kArity,
                  "serve: Method<...>(args): a different number of arguments than the method takes");
    (void)internal::MethodRegistrar<M>::registered;
    auto out = std::make_shared<internal::ResponseState>();
    std::vector<std::shared_ptr<internal::ResponseState>> deps;
    auto collect = [&deps](const auto& a) {
      if constexpr (internal::IsResponse<std::decay_t<decltype(a)>>::value) deps.push_back(a.state());
    };
    (collect(args), ...);
    (void)collect;  // Method<M>() without arguments uses it nowhere
    auto captured = std::make_shared<std::tuple<std::decay_t<Args>...>>(std::forward<Args>(args)...);
    DeploymentHandle self = *this;
    internal::WhenAll(
        std::move(deps),
        [self, captured, out] {
          std::string bytes;
          try {
            bytes = [&]<size_t... I>(std::index_sequence<I...>) {
              std::vector<std::string> parts{
                  internal::ArgBytes<std::tuple_element_t<I, Params>>(std::get<I>(*captured))...};
              return platform::ToBytes(parts);
            }(std::make_index_sequence<Traits::kArity>{});
          } catch (...) {
            out->Fail(std::current_exception());
            return;
          }
          self.Submit(internal::MethodRegistrar<M>::Key(), std::move(bytes), out);
        },
        out);
    return DeploymentResponse<R>(out);
  }

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & deployment_;
  }

 private:
  void Submit(const std::string& method, std::string bytes, const std::shared_ptr<internal::ResponseState>& out) const {
    if (deployment_.empty()) {
      out->Fail(std::make_exception_ptr(DeploymentError("serve: a call on an empty DeploymentHandle")));
      return;
    }
    internal::SubmitCall(deployment_, method, std::move(bytes),
                         [out](internal::CallResult r) { out->Complete(std::move(r)); });
  }
  std::string deployment_;
};

/// A bound deployment and the deployments its constructor arguments bind (Ray's
/// Application): what serve::Run deploys. Cheap copyable value.
class Application {
 public:
  /// The ingress deployment's name (the one Bind was called on).
  const std::string& IngressName() const { return deployments_.back().name; }
  /// Every deployment, dependencies first, the ingress last.
  const std::vector<internal::DeploymentSpec>& Deployments() const { return deployments_; }
  /// Adds `dependency`'s deployments that this application lacks, ahead of its ingress: how
  /// a front end whose constructor arguments carry handles by name (prism.serve, where
  /// Bind's arguments are Python values) composes an application at run time. Throws Error
  /// when a deployment of the same name but other code, arguments or options is already in
  /// it. Returns *this. Not thread-safe (a builder).
  Application& Include(const Application& dependency) {
    for (const auto& d : dependency.deployments_) {
      bool seen = false;
      for (const auto& e : deployments_) {
        if (e.name != d.name) continue;
        if (e.class_key != d.class_key || e.init_args != d.init_args) {
          throw Error("serve: two different deployments named \"" + d.name + "\" in one application");
        }
        seen = true;
      }
      if (!seen) deployments_.insert(deployments_.empty() ? deployments_.end() : deployments_.end() - 1, d);
    }
    return *this;
  }

 private:
  template <typename C>
  friend class Deployment;
  std::vector<internal::DeploymentSpec> deployments_;
};

/// A deployment of class C (Ray's @serve.deployment): options, then Bind(constructor
/// arguments) -> Application. C is constructed once per replica with those arguments (an
/// Application argument becomes a DeploymentHandle of its ingress). Handlers (see
/// prism/serve.h): `Response operator()(const Request&)` for HTTP, any method for handle
/// calls; optional `void Reconfigure(const nlohmann::json&)` and `void CheckHealth()`.
/// Setters throw Error on a value out of range. Not thread-safe (a builder).
template <typename C>
class Deployment {
 public:
  /// Throws Error on an empty name or one holding '#' or '/'.
  explicit Deployment(std::string name) : name_(std::move(name)) {
    if (name_.empty() || name_.find_first_of("#/") != std::string::npos) {
      throw Error("serve::Deployment: the name must be non-empty without '#' or '/', got \"" + name_ + "\"");
    }
  }
  /// Fixed replica count (ignored with Autoscaling).
  Deployment& NumReplicas(int n) {
    Require(n >= 0, "NumReplicas", "n >= 0", n);
    config_.num_replicas = n;
    return *this;
  }
  /// Requests in flight per replica (Ray's max_ongoing_requests, default 5).
  Deployment& MaxOngoingRequests(int n) {
    Require(n >= 1, "MaxOngoingRequests", "n >= 1", n);
    config_.max_ongoing_requests = n;
    return *this;
  }
  /// Requests waiting at a router when every replica is full; more: BackPressureError.
  /// -1 (default): no limit.
  Deployment& MaxQueuedRequests(int n) {
    Require(n >= -1, "MaxQueuedRequests", "n >= -1", n);
    config_.max_queued_requests = n;
    return *this;
  }
  /// Resources each replica holds (Ray's ray_actor_options: {"CPU": 1} by default).
  Deployment& RayActorOptions(std::map<std::string, double> resources) {
    for (auto& [k, v] : resources) {
      if (v < 0) throw Error("serve::Deployment(\"" + name_ + "\").RayActorOptions: resource " + k + " is negative");
    }
    config_.resources = std::move(resources);
    return *this;
  }
  /// The user_config handed to Reconfigure at start and on every change (Run again with
  /// another one: replicas are reconfigured, not restarted).
  Deployment& UserConfig(nlohmann::json config) {
    config_.user_config = std::move(config);
    return *this;
  }
  Deployment& HealthCheckPeriodS(double s) {
    Require(s > 0, "HealthCheckPeriodS", "s > 0", s);
    config_.health_check_period_s = s;
    return *this;
  }
  Deployment& HealthCheckTimeoutS(double s) {
    Require(s > 0, "HealthCheckTimeoutS", "s > 0", s);
    config_.health_check_timeout_s = s;
    return *this;
  }
  Deployment& GracefulShutdownTimeoutS(double s) {
    Require(s >= 0, "GracefulShutdownTimeoutS", "s >= 0", s);
    config_.graceful_shutdown_timeout_s = s;
    return *this;
  }
  /// Scales the replica count with the load (see AutoscalingConfig). Throws Error on
  /// min > max, a negative min, initial outside [min, max] or a target <= 0.
  Deployment& Autoscaling(AutoscalingConfig a) {
    if (a.min_replicas < 0 || a.max_replicas < 1 || a.min_replicas > a.max_replicas) {
      throw Error("serve::Deployment(\"" + name_ + "\").Autoscaling: need 0 <= min_replicas <= max_replicas, max >= 1; got min " +
                  std::to_string(a.min_replicas) + ", max " + std::to_string(a.max_replicas));
    }
    if (a.initial_replicas && (*a.initial_replicas < a.min_replicas || *a.initial_replicas > a.max_replicas)) {
      throw Error("serve::Deployment(\"" + name_ + "\").Autoscaling: initial_replicas must be within [min_replicas, max_replicas]");
    }
    if (!(a.target_ongoing_requests > 0) || a.upscale_delay_s < 0 || a.downscale_delay_s < 0 ||
        !(a.look_back_period_s > 0) || !(a.metrics_interval_s > 0)) {
      throw Error("serve::Deployment(\"" + name_ + "\").Autoscaling: target_ongoing_requests, look_back_period_s and "
                  "metrics_interval_s must be > 0, the delays >= 0");
    }
    config_.autoscaling = a;
    return *this;
  }
  /// The options so far.
  const DeploymentConfig& Config() const { return config_; }

  /// Binds constructor arguments: values (serializable) or Applications (become
  /// DeploymentHandles). C must be constructible from them.
  template <typename... Args>
  Application Bind(Args&&... args) const {
    using Registrar = internal::ClassRegistrar<C, typename internal::BindArg<Args>::type...>;
    static_assert(std::is_constructible_v<C, typename internal::BindArg<Args>::type...>,
                  "serve::Deployment<C>::Bind(args...): C has no constructor taking these arguments "
                  "(an Application argument is passed as a DeploymentHandle<...>)");
    (void)Registrar::registered;
    Application app;
    std::vector<std::string> parts;
    auto one = [&](auto&& a) {
      using A = std::decay_t<decltype(a)>;
      if constexpr (std::is_same_v<A, Application>) {
        for (const auto& d : a.deployments_) {
          bool seen = false;
          for (const auto& e : app.deployments_) seen = seen || e.name == d.name;
          if (!seen) app.deployments_.push_back(d);
        }
        parts.push_back(platform::ToBytes(internal::HandleArg{a.IngressName()}));
      } else {
        parts.push_back(platform::ToBytes(a));
      }
    };
    (one(args), ...);
    (void)one;  // Bind() without arguments uses it nowhere
    internal::DeploymentSpec spec;
    spec.name = name_;
    spec.class_key = Registrar::Key();
    spec.class_name = typeid(C).name();
    spec.init_args = platform::ToBytes(parts);
    spec.config = config_;
    spec.has_http = requires(C& c, const Request& r) { { c(r) } -> std::convertible_to<Response>; };
    for (const auto& e : app.deployments_) {
      if (e.name == name_) throw Error("serve: two deployments named \"" + name_ + "\" in one application");
    }
    app.deployments_.push_back(std::move(spec));
    return app;
  }

 private:
  template <typename V>
  void Require(bool ok, const char* what, const char* rule, V got) const {
    if (!ok) {
      throw Error("serve::Deployment(\"" + name_ + "\")." + what + ": need " + rule + ", got " + std::to_string(got));
    }
  }
  std::string name_;
  DeploymentConfig config_;
};

/// Deploys `app` (every deployment; replicas are actors on the worker ranks) and, unless
/// options.http is false, starts the HTTP ingress (one server per job, the first Run's
/// host and port) routing options.route_prefix to the app's ingress deployment. Returns
/// once every replica is up. Running again with the same deployment names updates them:
/// only user_config or the replica count changed -> reconfigure / scale in place;
/// otherwise the old replicas are drained and replaced. Rank 0 only. Throws
/// DeploymentError when a constructor throws or replicas cannot be placed within
/// ready_timeout_s, Error on bad options (a route prefix without '/', a prefix taken by
/// another application). Not thread-safe against Shutdown.
void Run(const Application& app, const RunOptions& options = {});
/// Deployments, replicas and their states. Rank 0. Thread-safe.
ServeStatus Status();
/// Deletes application `app_name` (Ray's serve.delete): its route prefix stops matching
/// (404), calls in flight to its deployments finish (up to their
/// graceful_shutdown_timeout_s), then its replicas stop and every rank forgets its
/// deployments (their handles fail with DeploymentError). Other applications keep serving.
/// Returns false for an unknown name. Rank 0. Thread-safe.
bool Delete(const std::string& app_name);
/// Stops accepting HTTP requests, drains in-flight ones (each deployment's
/// graceful_shutdown_timeout_s), then stops every replica and the server. Idempotent;
/// Run may be called again afterwards. Rank 0. Thread-safe.
void Shutdown();
/// Serves until SIGTERM or SIGUSR1 (Slurm's preemption and time-limit signals) arrives
/// or Shutdown is called from another thread, then shuts Serve down gracefully and
/// returns the signal's number (0 after Shutdown): return 0 from main. Waits without a
/// timeout on purpose: this is the server's lifetime. Rank 0, after Run.
int RunUntilStopped();

/// A handle to the deployment named `name` (Ray's serve.get_deployment_handle). Throws
/// DeploymentError if none is deployed under that name. Any rank.
template <typename C>
DeploymentHandle<C> GetDeploymentHandle(const std::string& name) {
  if (!internal::DeploymentExists(name)) {
    throw DeploymentError("serve: no deployment named \"" + name + "\" is running (serve::Run it first)");
  }
  return DeploymentHandle<C>(name);
}

}  // namespace prism::serve
