// serve::Run, Status, Shutdown, RunUntilStopped, and the routing of handle calls.
//
// On rank 0 one ServeState (never destroyed: completion callbacks may still name it after
// Shutdown) holds the controller, the HTTP ingress and the applications. Handle calls on
// rank 0 go to the controller's routers. On other ranks (a replica calling another
// deployment) RemoteRouters keeps one router per deployment, fed from the replica table the
// controller publishes in the KV store and refreshed every kRefreshS by one thread, which
// also reports the load of autoscaling deployments' routers back to the controller.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "prism/api.h"
#include "prism/kv.h"
#include "prism/platform/panel.h"
#include "prism/platform/preemption.h"
#include "prism/preemption.h"
#include "prism/serve.h"
#include "serve/controller.h"
#include "serve/ingress.h"
#include "serve/serve_log.h"

namespace prism::serve {

const char* StateName(ReplicaState state) {
  switch (state) {
    case ReplicaState::kStarting: return "STARTING";
    case ReplicaState::kRunning: return "RUNNING";
    case ReplicaState::kStopping: return "STOPPING";
  }
  return "UNKNOWN";
}

const char* HealthName(DeploymentHealth health) {
  switch (health) {
    case DeploymentHealth::kUpdating: return "UPDATING";
    case DeploymentHealth::kHealthy: return "HEALTHY";
    case DeploymentHealth::kUnhealthy: return "UNHEALTHY";
  }
  return "UNKNOWN";
}

nlohmann::json ServeStatus::ToJson() const {
  nlohmann::json j;
  j["endpoint"] = endpoint;
  j["applications"] = applications;
  j["deployments"] = nlohmann::json::array();
  for (const auto& d : deployments) {
    nlohmann::json dj{{"name", d.name},
                      {"application", d.application},
                      {"status", HealthName(d.status)},
                      {"message", d.message},
                      {"target_replicas", d.target_replicas},
                      {"queued_requests", d.queued_requests},
                      {"replicas", nlohmann::json::array()}};
    for (const auto& r : d.replicas) {
      dj["replicas"].push_back(
          {{"replica_id", r.replica_id}, {"state", StateName(r.state)}, {"rank", r.rank}, {"ongoing_requests", r.ongoing_requests}});
    }
    j["deployments"].push_back(std::move(dj));
  }
  return j;
}

namespace internal {
namespace {

struct ServeState {
  std::mutex mu;  // Run / Shutdown, and the fields below
  Controller controller;
  std::unique_ptr<Ingress> ingress;
  std::map<std::string, std::string> applications;  // name -> route prefix
  std::string endpoint;
  // RunUntilStopped's wake-up: a stop signal, or Shutdown.
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  int stop_signal = 0;
  bool shutdown_requested = false;
};

ServeState& State() {
  static ServeState* state = new ServeState();  // never destroyed (see the top)
  return *state;
}

class RemoteRouters {
 public:
  static constexpr double kRefreshS = 0.2;
  static RemoteRouters& Instance() {
    static RemoteRouters* instance = new RemoteRouters();  // its thread outlives statics
    return *instance;
  }
  /// The router of `deployment`, or nullptr when none is published. One KV round trip the
  /// first time per deployment.
  std::shared_ptr<Router> Get(const std::string& deployment) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = routers_.find(deployment);
      if (it != routers_.end()) return it->second;
    }
    auto bytes = prism::kv::Get(kReplicaSetKeyPrefix + deployment);
    if (!bytes) return nullptr;
    auto router = std::make_shared<Router>(deployment);
    router->Update(platform::FromBytes<ReplicaSet>(*bytes));
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = routers_.emplace(deployment, router);
    if (!thread_started_) {
      thread_started_ = true;
      std::thread([this] { Refresh(); }).detach();
    }
    return it->second;
  }

 private:
  // For the life of the process (detached: a worker rank exits from inside Init, without a
  // hook to stop it): every kRefreshS, reads each router's replica set; as often as the
  // most frequent autoscaling deployment measures (its metrics_interval_s), reports each
  // such router's calls in flight + queued to the controller (a KV key per deployment and
  // rank, written when the count changed).
  void Refresh() {
    using Clock = std::chrono::steady_clock;
    auto last_refresh = Clock::now();
    std::map<std::string, std::string> reported;  // deployment -> the last value written
    for (;;) {
      double sleep_s = kRefreshS;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& [name, router] : routers_) {
          const double interval = router->load_report_interval_s();
          if (interval > 0) sleep_s = std::min(sleep_s, interval);
        }
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
      if (!prism::IsInitialized()) continue;
      std::map<std::string, std::shared_ptr<Router>> routers;
      {
        std::lock_guard<std::mutex> lock(mu_);
        routers = routers_;
      }
      if (Clock::now() - last_refresh >= std::chrono::duration<double>(kRefreshS * 0.99)) {
        last_refresh = Clock::now();
        RefreshSets(routers, reported);
      }
      ReportLoads(routers, reported);
    }
  }

  void RefreshSets(std::map<std::string, std::shared_ptr<Router>>& routers,
                   std::map<std::string, std::string>& reported) {
    for (auto it = routers.begin(); it != routers.end();) {
      const std::string name = it->first;
      const std::shared_ptr<Router> router = it->second;
      try {
        auto bytes = prism::kv::Get(kReplicaSetKeyPrefix + name);
        if (!bytes) {
          router->Close(std::make_exception_ptr(DeploymentError("serve: deployment \"" + name + "\" was deleted")));
          {
            std::lock_guard<std::mutex> lock(mu_);
            routers_.erase(name);
          }
          it = routers.erase(it);
          if (reported.erase(name)) {
            try {
              prism::kv::Delete(LoadKey(name));
            } catch (const std::exception&) {
              // The controller deletes every report when Serve stops.
            }
          }
          continue;
        }
        ReplicaSet set = platform::FromBytes<ReplicaSet>(*bytes);
        if (set.version != router->version() || set.incarnation != router->incarnation()) router->Update(set);
      } catch (const std::exception&) {
        // The runtime is shutting down, or the head is busy: try again next round.
      }
      ++it;
    }
  }

  void ReportLoads(const std::map<std::string, std::shared_ptr<Router>>& routers,
                   std::map<std::string, std::string>& reported) {
    for (const auto& [name, router] : routers) {
      if (router->load_report_interval_s() <= 0) continue;
      const std::string value = LoadReport(router->incarnation(), router->Ongoing());
      auto it = reported.find(name);
      if (it != reported.end() && it->second == value) continue;
      try {
        prism::kv::Put(LoadKey(name), value);
        reported[name] = value;
      } catch (const std::exception&) {
        // As above: the next round writes it.
      }
    }
  }

  static std::string LoadKey(const std::string& deployment) {
    return kRouterLoadKeyPrefix + deployment + "/" + std::to_string(prism::GetRuntimeContext().GetRank());
  }

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Router>> routers_;
  bool thread_started_ = false;
};

void RequireDriver(const char* what) {
  if (!prism::IsInitialized()) throw RuntimeError(std::string("serve::") + what + ": call prism::Init first");
  if (prism::GetRuntimeContext().GetRank() != 0) {
    throw Error(std::string("serve::") + what + " runs on the driver (rank 0) only");
  }
}

}  // namespace

void SubmitCall(const std::string& deployment, const std::string& method_key, std::string args, CallDone done) {
  std::shared_ptr<Router> router = State().controller.RouterOf(deployment);
  try {
    if (!router) router = RemoteRouters::Instance().Get(deployment);
  } catch (...) {
    done(CallResult{{}, std::current_exception()});
    return;
  }
  if (!router) {
    done(CallResult{{}, std::make_exception_ptr(DeploymentError("serve: no deployment named \"" + deployment +
                                                                "\" is running (serve::Run it first)"))});
    return;
  }
  router->Submit(method_key, std::move(args), std::move(done));
}

bool DeploymentExists(const std::string& deployment) {
  if (State().controller.Has(deployment)) return true;
  return prism::kv::Exists(kReplicaSetKeyPrefix + deployment);
}

}  // namespace internal

void Run(const Application& app, const RunOptions& options) {
  internal::RequireDriver("Run");
  if (app.Deployments().empty()) throw Error("serve::Run: the application has no deployment (Bind one)");
  if (options.route_prefix.empty() || options.route_prefix[0] != '/') {
    throw Error("serve::Run: route_prefix must start with '/', got \"" + options.route_prefix + "\"");
  }
  if (options.route_prefix.size() > 1 && options.route_prefix.back() == '/') {
    throw Error("serve::Run: route_prefix must not end with '/' (except \"/\" itself), got \"" + options.route_prefix + "\"");
  }
  if (!(options.ready_timeout_s > 0)) throw Error("serve::Run: ready_timeout_s must be > 0");
  const std::string name = options.name.empty() ? "default" : options.name;
  auto& s = internal::State();
  std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& [other, prefix] : s.applications) {
    if (options.http && other != name && prefix == options.route_prefix) {
      throw Error("serve::Run: route_prefix \"" + prefix + "\" is taken by application \"" + other + "\"");
    }
  }
  if (options.http && !app.Deployments().back().has_http) {
    throw Error("serve::Run: the ingress deployment \"" + app.IngressName() +
                "\" has no HTTP handler (serve::Response operator()(const serve::Request&)); "
                "add one or pass RunOptions{.http = false}");
  }
  {
    std::lock_guard<std::mutex> stop_lock(s.stop_mu);
    s.shutdown_requested = false;
  }
  s.controller.Deploy(app, name, options.ready_timeout_s);
  s.applications[name] = options.http ? options.route_prefix : "";
  if (options.http) {
    if (!s.ingress) {
      s.ingress = std::make_unique<internal::Ingress>(
          options.host, options.port, platform::DashboardOn() ? s.controller.request_metrics() : nullptr);
      s.endpoint = s.ingress->endpoint();
    }
    s.ingress->SetRoute(name, options.route_prefix, app.IngressName());
    if (!options.endpoint_file.empty()) http::WriteEndpointFile(options.endpoint_file, s.endpoint);
  }
}

ServeStatus Status() {
  internal::RequireDriver("Status");
  auto& s = internal::State();
  ServeStatus status;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    status.endpoint = s.endpoint;
    status.applications = s.applications;
  }
  s.controller.FillStatus(status);
  return status;
}

bool Delete(const std::string& app_name) {
  internal::RequireDriver("Delete");
  auto& s = internal::State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.applications.count(app_name) == 0) return false;
  if (s.ingress) s.ingress->RemoveRoute(app_name);
  s.controller.DeleteApp(app_name);
  s.applications.erase(app_name);
  return true;
}

void Shutdown() {
  auto& s = internal::State();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    const double timeout = s.controller.GracefulTimeout();
    if (s.ingress) s.ingress->StopAccepting();
    const auto start = std::chrono::steady_clock::now();
    bool drained = s.controller.DrainRouters(timeout);
    if (s.ingress) {
      const double left = timeout - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      drained = s.ingress->Drain(left > 0 ? left : 0) && drained;
    }
    if (!drained) {
      PRISM_SERVE_LOG("shutdown: requests still in flight after graceful_shutdown_timeout_s (" << timeout
                                                                                             << " s); stopping anyway");
    }
    s.controller.Stop();
    if (s.ingress) {
      s.ingress->Stop();
      s.ingress.reset();
    }
    s.applications.clear();
    s.endpoint.clear();
  }
  {
    std::lock_guard<std::mutex> lock(s.stop_mu);
    s.shutdown_requested = true;
  }
  s.stop_cv.notify_all();
}

int RunUntilStopped() {
  internal::RequireDriver("RunUntilStopped");
  auto& s = internal::State();
  // SIGTERM no longer ends rank 0: we drain first. Rank 0's signal watcher prints the message.
  platform::PreemptionGuard guard(
      "Serve stops accepting requests and drains the ones in flight (graceful_shutdown_timeout_s), then "
      "serve::RunUntilStopped returns");
  platform::PreemptionHook hook([&s](int signal) {
    {
      std::lock_guard<std::mutex> lock(s.stop_mu);
      if (s.stop_signal == 0) s.stop_signal = signal;
    }
    s.stop_cv.notify_all();
  });
  int signal = 0;
  bool before = false;  // the signal came before the guard: the watcher's message did not say Serve
  {
    std::unique_lock<std::mutex> lock(s.stop_mu);
    if (s.stop_signal == 0) {
      s.stop_signal = prism::PreemptionSignal();
      before = s.stop_signal != 0;
    }
    s.stop_cv.wait(lock, [&s] { return s.stop_signal != 0 || s.shutdown_requested; });
    signal = s.stop_signal;
    s.stop_signal = 0;
  }
  if (before) {
    PRISM_SERVE_LOG(platform::SignalName(signal)
                    << " arrived before serve::RunUntilStopped: no new requests; draining the ones in flight, "
                       "then stopping");
  }
  Shutdown();
  return signal;
}

}  // namespace prism::serve
