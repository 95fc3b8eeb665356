#include "serve/controller.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "prism/api.h"
#include "prism/kv.h"
#include "prism/platform/panel.h"
#include "prism/state.h"
#include "serve/registry.h"
#include "serve/replica_placement.h"

namespace prism::serve::internal {
namespace {

constexpr double kTickS = 0.02;
// A STOPPING replica is killed no sooner than this after it left the replica set, so that
// other ranks' routers (which refresh every RemoteRouters::kRefreshS) stop choosing it.
constexpr double kMinDrainS = 0.5;
constexpr int kMaxStartFailures = 3;
// How often the controller reads which ranks are lost (state::ListNodes: one call into
// rank 0's head, N entries). Replicas with traffic are replaced sooner, on the router's word.
constexpr double kLostRankPollS = 0.25;

int InitialTarget(const DeploymentConfig& c) {
  if (c.autoscaling) return c.autoscaling->initial_replicas.value_or(c.autoscaling->min_replicas);
  return c.num_replicas;
}

std::string Dump(const std::optional<nlohmann::json>& j) { return j ? j->dump() : std::string(); }

}  // namespace

Controller::Controller() = default;

Controller::~Controller() { Stop(); }

double Controller::Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Controller::Deploy(const Application& app, const std::string& app_name, double ready_timeout_s) {
  std::vector<std::pair<ActorHandle<ReplicaActor>, std::string>> reconfigure;  // replica, config
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const DeploymentSpec& spec : app.Deployments()) {
      const ClassEntry* entry = FindClass(spec.class_key);
      if (entry == nullptr) throw DeploymentError("serve: deployment \"" + spec.name + "\": class not registered");
      if (spec.config.user_config && !entry->reconfigure) {
        throw DeploymentError("serve: deployment \"" + spec.name +
                              "\" has a user_config but its class has no void Reconfigure(const nlohmann::json&)");
      }
      auto it = deployments_.find(spec.name);
      if (it != deployments_.end() && it->second.app != app_name) {
        throw DeploymentError("serve: a deployment named \"" + spec.name + "\" already belongs to application \"" +
                              it->second.app + "\"; pick another name");
      }
    }
    for (const DeploymentSpec& spec : app.Deployments()) {
      auto [it, fresh] = deployments_.try_emplace(spec.name);
      DeploymentState& d = it->second;
      const double now = Now();
      if (fresh) {
        d.spec = spec;
        d.app = app_name;
        d.router = std::make_shared<Router>(
            spec.name, platform::DashboardOn() ? request_metrics_ : nullptr,
            [this, name = spec.name](const std::string& id, const std::string& why) { OnReplicaDied(name, id, why); });
        // Unique within the job (the clock at the first deployment, then counted), so that a
        // later deployment of the same name never reads this one's load reports.
        if (next_incarnation_ == 0) {
          next_incarnation_ = static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count());
        }
        d.incarnation = ++next_incarnation_;
      } else if (d.spec.class_key == spec.class_key && d.spec.init_args == spec.init_args) {
        // Same code and arguments: update in place.
        if (Dump(d.spec.config.user_config) != Dump(spec.config.user_config) && spec.config.user_config) {
          for (const Replica& r : d.replicas) {
            if (r.state == ReplicaState::kRunning) reconfigure.emplace_back(r.actor, spec.config.user_config->dump());
          }
        }
        d.spec = spec;
      } else {
        // New code or arguments: replace every replica (the old ones drain).
        for (Replica& r : d.replicas) {
          if (r.state != ReplicaState::kStopping) {
            r.state = ReplicaState::kStopping;
            r.state_since = now;
          }
        }
        d.spec = spec;
      }
      d.target = InitialTarget(spec.config);
      if (spec.config.autoscaling) {
        d.decider = std::make_unique<AutoscalingDecider>(*spec.config.autoscaling);
        d.window = LoadWindow();
      } else {
        d.decider.reset();
      }
      d.start_failures = 0;
      d.placement_error = false;
      d.message.clear();
      d.status = DeploymentHealth::kUpdating;
      d.dirty = true;
    }
    stop_ = false;
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  }
  wake_.notify_all();

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(ready_timeout_s);
  for (auto& [actor, config] : reconfigure) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    try {
      actor.Task(&ReplicaActor::Reconfigure).Remote(config).Get(static_cast<int>(std::max(0.0, left) * 1000));
    } catch (const std::exception& e) {
      throw DeploymentError(std::string("serve: Reconfigure with the new user_config failed: ") + e.what());
    }
  }

  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::string pending;
    for (const DeploymentSpec& spec : app.Deployments()) {
      const DeploymentState& d = deployments_.at(spec.name);
      if (d.status == DeploymentHealth::kUnhealthy) {
        throw DeploymentError("serve: deployment \"" + spec.name + "\" cannot start: " + d.message);
      }
      int running = 0;
      for (const Replica& r : d.replicas) running += r.state == ReplicaState::kRunning;
      const bool published = !d.dirty;
      if (running < d.target || !published) {
        pending += (pending.empty() ? "" : ", ") + spec.name + " (" + std::to_string(running) + "/" +
                   std::to_string(d.target) + " replicas running)";
      }
    }
    if (pending.empty()) {
      panel_due_ = true;  // the dashboard shows the deployments ready at the next tick
      wake_.notify_all();
      return;
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      throw DeploymentError("serve: not every replica is up after " + std::to_string(ready_timeout_s) +
                            " s: " + pending +
                            ". The job's ranks may lack the resources per replica (RayActorOptions): "
                            "ask for fewer replicas or resources, or more ranks");
    }
  }
}

std::shared_ptr<Router> Controller::RouterOf(const std::string& deployment) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = deployments_.find(deployment);
  return it == deployments_.end() ? nullptr : it->second.router;
}

bool Controller::Has(const std::string& deployment) {
  std::lock_guard<std::mutex> lock(mu_);
  return deployments_.count(deployment) > 0;
}

void Controller::FillStatus(ServeStatus& status) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, d] : deployments_) {
    DeploymentStatus s;
    s.name = name;
    s.application = d.app;
    s.status = d.status;
    s.message = d.message;
    s.target_replicas = d.target;
    s.queued_requests = d.router->Queued();
    for (const Replica& r : d.replicas) {
      s.replicas.push_back({r.id, r.state, r.rank, d.router->InFlight(r.id)});
    }
    status.deployments.push_back(std::move(s));
  }
}

double Controller::GracefulTimeout() {
  std::lock_guard<std::mutex> lock(mu_);
  double t = 0;
  for (const auto& [name, d] : deployments_) t = std::max(t, d.spec.config.graceful_shutdown_timeout_s);
  return t;
}

bool Controller::DrainRouters(double timeout_s) {
  std::vector<std::shared_ptr<Router>> routers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, d] : deployments_) routers.push_back(d.router);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int ongoing = 0;
    for (const auto& r : routers) ongoing += r->Ongoing();
    if (ongoing == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Controller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::map<std::string, DeploymentState> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone.swap(deployments_);
  }
  auto error = std::make_exception_ptr(DeploymentError("serve: Serve was shut down"));
  for (auto& [name, d] : gone) {
    d.router->Close(error);
    for (Replica& r : d.replicas) {
      try {
        r.actor.Kill(true);
      } catch (const std::exception&) {
      }
    }
  }
  if (!gone.empty() && prism::IsInitialized()) {
    try {
      prism::kv::Delete(kReplicaSetKeyPrefix, true);
      prism::kv::Delete(kRouterLoadKeyPrefix, true);
    } catch (const std::exception&) {
    }
  }
  changed_.notify_all();
}

// Waits kTickS between ticks, or less when woken by a reply or a Deploy.
void Controller::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    Tick(Now());
    PublishPanel(Now());
    lock.lock();
    if (stop_) break;
    wake_.wait_for(lock, std::chrono::duration<double>(kTickS));
  }
}

void Controller::PublishPanel(double now) {
  constexpr double kPanelS = 2;
  if (!panel_due_.exchange(false) && last_panel_ >= 0 && now - last_panel_ < kPanelS) return;
  last_panel_ = now;
  if (!platform::DashboardOn()) return;
  try {
    ServeStatus status;
    FillStatus(status);
    platform::Panel p;
    p.title = "Serve";
    char when[32];
    const std::time_t t = std::time(nullptr);
    std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&t));
    p.lines.push_back(std::to_string(status.deployments.size()) + " deployments, as of " + when);
    p.columns = {"deployment", "application", "status", "replicas (running/target)", "on ranks",
                 "ongoing requests", "queued requests", "calls (rank 0)", "calls/s", "mean latency", "message"};
    std::map<std::string, std::string> application_of;
    for (const DeploymentStatus& d : status.deployments) {
      application_of[d.name] = d.application;
      for (const ReplicaStatus& r : d.replicas) {
        platform::PanelMetric healthy;
        healthy.name = "ray_serve_deployment_replica_healthy";
        healthy.type = "gauge";
        healthy.help = "1 while the replica is RUNNING (its health checks pass), else 0.";
        healthy.labels = {{"deployment", d.name}, {"replica", r.replica_id}, {"application", d.application}};
        healthy.value = r.state == ReplicaState::kRunning ? 1 : 0;
        p.metrics.push_back(std::move(healthy));
      }
    }
    for (auto& m : request_metrics_->Metrics(application_of)) p.metrics.push_back(std::move(m));
    for (const DeploymentStatus& d : status.deployments) {
      int running = 0, ongoing = 0;
      std::string ranks;
      for (const ReplicaStatus& r : d.replicas) {
        running += r.state == ReplicaState::kRunning;
        ongoing += r.ongoing_requests;
        ranks += (ranks.empty() ? "" : ",") + std::to_string(r.rank);
      }
      // Calls through rank 0's routers (the ingress's and the driver's handles): their rate
      // since the last panel and their mean time from send to reply.
      const RequestMetrics::Totals calls = request_metrics_->DeploymentTotals(d.name);
      auto& [then, calls_then] = panel_calls_[d.name];
      char rate[32] = "", mean[32] = "";
      if (then > 0 && now > then && calls.calls >= calls_then) {
        std::snprintf(rate, sizeof rate, "%.1f", static_cast<double>(calls.calls - calls_then) / (now - then));
      }
      if (calls.calls > 0) std::snprintf(mean, sizeof mean, "%.2f ms", calls.sum_ms / static_cast<double>(calls.calls));
      then = now;
      calls_then = calls.calls;
      p.rows.push_back({d.name, d.application, HealthName(d.status),
                        std::to_string(running) + "/" + std::to_string(d.target_replicas), ranks,
                        std::to_string(ongoing), std::to_string(d.queued_requests), std::to_string(calls.calls),
                        rate, mean, d.message});
    }
    platform::PublishPanel("serve", p);
  } catch (const std::exception& e) {
    PRISM_SERVE_LOG("the dashboard's Serve panel was not updated: " << e.what());
  }
}

int Controller::RemoteLoad(const std::string& deployment, uint64_t incarnation) {
  int total = 0;
  try {
    for (const std::string& key : prism::kv::List(kRouterLoadKeyPrefix + deployment + "/")) {
      if (auto value = prism::kv::Get(key)) total += ParseLoadReport(*value, incarnation);
    }
  } catch (const std::exception& e) {
    PRISM_SERVE_LOG("cannot read other ranks' load of " << deployment << " (counting the driver's only): "
                                                        << e.what());
  }
  return total;
}

std::vector<std::string> Controller::DeleteApp(const std::string& app) {
  std::vector<std::shared_ptr<Router>> routers;
  double timeout = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, d] : deployments_) {
      if (d.app != app) continue;
      routers.push_back(d.router);
      timeout = std::max(timeout, d.spec.config.graceful_shutdown_timeout_s);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  for (;;) {
    int ongoing = 0;
    for (const auto& r : routers) ongoing += r->Ongoing();
    if (ongoing == 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::vector<std::string> names;
  std::lock_guard<std::mutex> publish_lock(publish_mu_);
  std::vector<DeploymentState> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = deployments_.begin(); it != deployments_.end();) {
      if (it->second.app != app) {
        ++it;
        continue;
      }
      names.push_back(it->first);
      gone.push_back(std::move(it->second));
      it = deployments_.erase(it);
    }
  }
  auto error = std::make_exception_ptr(DeploymentError("serve: application \"" + app + "\" was deleted"));
  for (DeploymentState& d : gone) {
    d.router->Close(error);
    for (Replica& r : d.replicas) {
      try {
        r.actor.Kill(true);
      } catch (const std::exception&) {
      }
    }
    try {
      prism::kv::Delete(kReplicaSetKeyPrefix + d.spec.name);
      prism::kv::Delete(kRouterLoadKeyPrefix + d.spec.name + "/", true);
    } catch (const std::exception& e) {
      PRISM_SERVE_LOG("cannot delete the replica set of " << d.spec.name << ": " << e.what());
    }
  }
  changed_.notify_all();
  return names;
}

void Controller::Tick(double now) {
  std::lock_guard<std::mutex> publish_lock(publish_mu_);
  std::vector<std::pair<std::shared_ptr<Router>, std::pair<std::string, ReplicaSet>>> publish;
  // Other ranks' load of the autoscaling deployments due for a measurement, read first,
  // outside the lock.
  std::map<std::string, int> remote;
  {
    std::vector<std::pair<std::string, uint64_t>> due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [name, d] : deployments_) {
        if (d.decider && now - d.last_metric >= d.decider->config().metrics_interval_s) {
          due.emplace_back(name, d.incarnation);
        }
      }
    }
    for (const auto& [name, incarnation] : due) remote[name] = RemoteLoad(name, incarnation);
  }
  std::set<int> lost_ranks;
  if (now - last_rank_poll_ >= kLostRankPollS) {
    last_rank_poll_ = now;
    lost_ranks = LostRanks();
  }
  std::map<std::string, std::map<std::string, std::string>> died;
  {
    std::lock_guard<std::mutex> lock(died_mu_);
    died.swap(died_);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, d] : deployments_) {
      auto reported = died.find(name);
      RemoveDead(d, reported == died.end() ? std::map<std::string, std::string>{} : reported->second, lost_ranks);
      auto measured = remote.find(name);
      if (d.decider && measured != remote.end()) {
        d.window.Record(now, d.router->Ongoing() + measured->second);
        const double avg = d.window.Average(now, d.decider->config().look_back_period_s);
        d.target = d.decider->Decide(d.target, avg, now);
        d.last_metric = now;
      }
      Reconcile(d, now);
      if (auto p = TakePublish(d)) publish.emplace_back(d.router, std::move(*p));
    }
  }
  for (auto& [router, p] : publish) {
    router->Update(p.second);
    try {
      prism::kv::Put(kReplicaSetKeyPrefix + p.first, platform::ToBytes(p.second));
    } catch (const std::exception& e) {
      PRISM_SERVE_LOG("cannot publish the replicas of " << p.first << ": " << e.what());
    }
  }
  if (!publish.empty()) changed_.notify_all();
}

void Controller::Reconcile(DeploymentState& d, double now) {
  // Start replicas up to the target, unless constructors keep failing.
  int alive = 0;
  for (const Replica& r : d.replicas) alive += r.state != ReplicaState::kStopping;
  while (alive < d.target && d.start_failures < kMaxStartFailures) {
    if (!StartReplica(d, now)) break;
    ++alive;
  }
  // Drain the surplus: pending replicas first, then the least loaded.
  if (alive > d.target) {
    std::vector<Replica*> candidates;
    for (Replica& r : d.replicas) {
      if (r.state != ReplicaState::kStopping) candidates.push_back(&r);
    }
    std::stable_sort(candidates.begin(), candidates.end(), [&](Replica* a, Replica* b) {
      const bool a_starting = a->state == ReplicaState::kStarting;
      if (a_starting != (b->state == ReplicaState::kStarting)) return a_starting;
      return d.router->InFlight(a->id) < d.router->InFlight(b->id);
    });
    for (int i = 0; i < alive - d.target; ++i) {
      candidates[static_cast<size_t>(i)]->state = ReplicaState::kStopping;
      candidates[static_cast<size_t>(i)]->state_since = now;
    }
    d.dirty = true;
  }
  // Health checks, and STOPPING replicas whose calls finished.
  const DeploymentConfig& c = d.spec.config;
  std::vector<std::pair<std::string, std::string>> remove;  // id, why
  for (Replica& r : d.replicas) {
    if (r.state == ReplicaState::kStopping) {
      const double stopping = now - r.state_since;
      if ((stopping >= kMinDrainS && d.router->InFlight(r.id) == 0) || stopping >= c.graceful_shutdown_timeout_s) {
        remove.emplace_back(r.id, "");
      }
    } else if (r.state == ReplicaState::kRunning) {
      if (r.health_pending && now - r.health_started > c.health_check_timeout_s) {
        remove.emplace_back(r.id, "replica " + r.id + " did not answer its health check within " +
                                      std::to_string(c.health_check_timeout_s) + " s; replaced");
      } else if (!r.health_pending && now - r.last_health >= c.health_check_period_s) {
        r.health_pending = true;
        r.health_started = now;
        const uint64_t seq = ++r.health_seq;
        try {
          ObjectRef<void> ref = r.actor.Task(&ReplicaActor::CheckHealth).Remote();
          std::string name = d.spec.name, id = r.id;
          ref.OnReady([this, name, id, seq, ref] { OnHealthReply(name, id, seq, ref); });
        } catch (const std::exception& e) {
          remove.emplace_back(r.id, std::string("health check of replica " + r.id + " failed: ") + e.what());
        }
      }
    }
  }
  for (auto& [id, why] : remove) Remove(d, id, why);

  int running = 0;
  for (const Replica& r : d.replicas) running += r.state == ReplicaState::kRunning;
  if (d.start_failures >= kMaxStartFailures || d.placement_error) {
    d.status = DeploymentHealth::kUnhealthy;
  } else if (running == d.target && alive == d.target) {
    d.status = DeploymentHealth::kHealthy;
  } else {
    d.status = DeploymentHealth::kUpdating;
  }
}

int Controller::PickRank(const std::map<std::string, double>& resources, std::string& why) {
  std::map<int, int> ours;
  for (const auto& [name, d] : deployments_) {
    for (const Replica& r : d.replicas) {
      if (r.state != ReplicaState::kStopping) ++ours[r.rank];
    }
  }
  return PickReplicaRank(state::ListNodes(), ours, resources, why);
}

bool Controller::StartReplica(DeploymentState& d, double now) {
  const DeploymentConfig& c = d.spec.config;
  std::string why;
  const int rank = PickRank(c.resources, why);
  if (rank < 0) {
    d.placement_error = true;
    d.message = why;
    return false;
  }
  const std::string id = d.spec.name + "#" + std::to_string(d.next_index++);
  try {
    auto actor = prism::Actor(&ReplicaActor::Create)
                     .SetResources(c.resources)
                     .SetMaxConcurrency(c.max_ongoing_requests + 1)
                     .SetSchedulingStrategy(NodeAffinitySchedulingStrategy{rank, false})
                     .Remote(d.spec.name, id, d.spec.class_key, d.spec.init_args, Dump(c.user_config));
    Replica r;
    r.id = id;
    r.actor = actor;
    r.rank = rank;
    r.state_since = now;
    d.replicas.push_back(r);
    ObjectRef<int> ready = actor.Task(&ReplicaActor::Ready).Remote();
    std::string name = d.spec.name;
    ready.OnReady([this, name, id, ready] { OnReplicaReady(name, id, ready); });
    return true;
  } catch (const ResourceError& e) {
    d.placement_error = true;
    d.message = std::string("cannot place a replica on any rank: ") + e.what();
  } catch (const std::exception& e) {
    ++d.start_failures;
    d.message = std::string("cannot create replica ") + id + ": " + e.what();
  }
  return false;
}

void Controller::OnReplicaReady(const std::string& deployment, const std::string& id, ObjectRef<int> ref) {
  int rank = -1;
  std::string error;
  try {
    rank = *ref.Get(0);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const std::set<int> lost = error.empty() ? std::set<int>{} : LostRanks();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = deployments_.find(deployment);
    if (it == deployments_.end()) return;
    DeploymentState& d = it->second;
    auto r = std::find_if(d.replicas.begin(), d.replicas.end(), [&](const Replica& x) { return x.id == id; });
    if (r == d.replicas.end() || r->state != ReplicaState::kStarting) return;
    if (error.empty()) {
      r->state = ReplicaState::kRunning;
      r->rank = rank;
      r->state_since = r->last_health = Now();
      d.start_failures = 0;
      d.dirty = true;
    } else if (lost.count(r->rank)) {
      // Not the constructor's fault: the next Reconcile starts it again on a live rank.
      Remove(d, id, "replica " + id + " was lost with its rank " + std::to_string(r->rank) + " while starting; replaced");
    } else {
      ++d.start_failures;
      d.message = "replica " + id + " failed to start: " + error;
      Remove(d, id, d.message);
    }
  }
  wake_.notify_all();
}

void Controller::OnReplicaDied(const std::string& deployment, const std::string& id, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(died_mu_);
    died_[deployment].emplace(id, why);
  }
  wake_.notify_all();
}

void Controller::RemoveDead(DeploymentState& d, const std::map<std::string, std::string>& died,
                            const std::set<int>& lost_ranks) {
  if (died.empty() && lost_ranks.empty()) return;
  std::vector<std::pair<std::string, std::string>> remove;  // id, why
  for (const Replica& r : d.replicas) {
    auto reported = died.find(r.id);
    if (lost_ranks.count(r.rank)) {
      remove.emplace_back(r.id, "replica " + r.id + " was lost with its rank " + std::to_string(r.rank) + "; replaced");
    } else if (reported != died.end()) {
      remove.emplace_back(r.id, "replica " + r.id + " died (" + reported->second + "); replaced");
    }
  }
  for (auto& [id, why] : remove) Remove(d, id, why);
}

std::set<int> Controller::LostRanks() {
  std::set<int> lost;
  try {
    for (const auto& n : state::ListNodes()) {
      if (n.state == "DEAD") lost.insert(n.rank);
    }
  } catch (const std::exception& e) {
    PRISM_SERVE_LOG("cannot read which ranks are lost: " << e.what());
  }
  return lost;
}

void Controller::OnHealthReply(const std::string& deployment, const std::string& id, uint64_t seq,
                               ObjectRef<void> ref) {
  std::string error;
  try {
    ref.Get(0);
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = deployments_.find(deployment);
  if (it == deployments_.end()) return;
  DeploymentState& d = it->second;
  auto r = std::find_if(d.replicas.begin(), d.replicas.end(), [&](const Replica& x) { return x.id == id; });
  if (r == d.replicas.end() || r->state != ReplicaState::kRunning || r->health_seq != seq) return;
  r->health_pending = false;
  if (error.empty()) {
    r->last_health = Now();
  } else {
    Remove(d, id, "replica " + id + " failed its health check (" + error + "); replaced");
    wake_.notify_all();
  }
}

void Controller::Remove(DeploymentState& d, const std::string& id, const std::string& why) {
  auto r = std::find_if(d.replicas.begin(), d.replicas.end(), [&](const Replica& x) { return x.id == id; });
  if (r == d.replicas.end()) return;
  try {
    r->actor.Kill(true);
  } catch (const std::exception&) {
  }
  d.replicas.erase(r);
  d.dirty = true;
  if (!why.empty()) {
    d.message = why;
    PRISM_SERVE_LOG(why);
  }
}

std::optional<std::pair<std::string, ReplicaSet>> Controller::TakePublish(DeploymentState& d) {
  if (!d.dirty) return std::nullopt;
  d.dirty = false;
  ReplicaSet set;
  set.version = ++d.version;
  set.max_ongoing_requests = d.spec.config.max_ongoing_requests;
  set.max_queued_requests = d.spec.config.max_queued_requests;
  set.incarnation = d.incarnation;
  set.load_report_interval_s = d.decider ? d.decider->config().metrics_interval_s : 0;
  for (const Replica& r : d.replicas) {
    if (r.state == ReplicaState::kRunning) set.replicas.push_back({r.id, r.actor});
  }
  return std::make_pair(d.spec.name, std::move(set));
}

}  // namespace prism::serve::internal
