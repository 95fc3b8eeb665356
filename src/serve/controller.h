#pragma once
// The controller (Ray Serve's ServeController), on rank 0: owns every deployment's
// replicas and the driver's routers, and runs one control thread ("serve-control") that
// every ~20 ms
//   - measures each autoscaling deployment's load every metrics_interval_s: the calls in
//     flight + queued at every router, the driver's and those of other ranks (which report
//     theirs in the KV store under kRouterLoadKeyPrefix at that interval), and applies
//     AutoscalingDecider's decision,
//   - starts replicas up to the target and drains the surplus (STOPPING: no new calls;
//     killed once its calls finished, or after graceful_shutdown_timeout_s),
//   - sends CheckHealth to each RUNNING replica every health_check_period_s, and replaces a
//     replica whose check throws or takes longer than health_check_timeout_s,
//   - replaces at once a replica known dead before its next check: one whose call failed
//     with ActorError at the driver's router (Router::ReplicaDied), and, every
//     kLostRankPollS, any on a rank the state API shows DEAD (lost under mpirun
//     --enable-recovery; no replica is placed there again, see replica_placement.h),
//   - publishes each changed replica set to the routers (the driver's directly, other
//     ranks' through the KV store),
//   - every 2 s, with the job's dashboard on, shows the deployments on it (a panel), with
//     Serve's metrics under Ray's names (request_metrics.h, replicas' health).
// Replica readiness and health replies arrive on completion callbacks (OnReady); nothing
// blocks on a replica.

#include <atomic>
#include <condition_variable>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "prism/serve/deployment.h"
#include "serve/autoscaling_policy.h"
#include "serve/replica.h"
#include "serve/request_metrics.h"
#include "serve/router.h"
#include "serve/serve_log.h"

namespace prism::serve::internal {

class Controller {
 public:
  Controller();
  ~Controller();  // Shutdown(0)
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  /// Deploys or updates the application's deployments (see serve::Run) and waits up to
  /// `ready_timeout_s` for their replicas. Throws DeploymentError.
  void Deploy(const Application& app, const std::string& app_name, double ready_timeout_s);
  /// Request counts and latencies of the ingress and the driver's routers (the dashboard's
  /// /metrics shows them with the Serve panel).
  std::shared_ptr<RequestMetrics> request_metrics() const { return request_metrics_; }
  /// The driver's router of `deployment`, or nullptr.
  std::shared_ptr<Router> RouterOf(const std::string& deployment);
  bool Has(const std::string& deployment);
  /// Fills the deployments part of a status.
  void FillStatus(ServeStatus& status);
  /// The longest graceful_shutdown_timeout_s of the deployments.
  double GracefulTimeout();
  /// Waits up to `timeout_s` until no call is in flight or queued at the driver's routers.
  bool DrainRouters(double timeout_s);
  /// Fails queued calls, kills every replica, stops the control thread, forgets all.
  void Stop();
  /// serve::Delete's part: waits up to the deployments' graceful_shutdown_timeout_s for the
  /// calls in flight at the driver's routers of application `app`, then closes those
  /// routers, kills the replicas, deletes the KV entries (other ranks' routers close at
  /// their next refresh) and forgets the deployments. Returns their names.
  std::vector<std::string> DeleteApp(const std::string& app);

 private:
  struct Replica {
    std::string id;
    prism::ActorHandle<ReplicaActor> actor;
    ReplicaState state = ReplicaState::kStarting;
    int rank = -1;
    double state_since = 0;
    bool health_pending = false;
    double health_started = 0;
    double last_health = 0;
    uint64_t health_seq = 0;  // which check a reply belongs to
  };
  struct DeploymentState {
    DeploymentSpec spec;
    std::string app;
    std::shared_ptr<Router> router;
    std::vector<Replica> replicas;
    int target = 0;
    int next_index = 0;
    uint64_t version = 0;
    bool dirty = true;  // the replica set changed since it was published
    int start_failures = 0;  // constructor failures in a row
    bool placement_error = false;  // no rank can ever hold a replica (ResourceError)
    DeploymentHealth status = DeploymentHealth::kUpdating;
    std::string message;
    std::unique_ptr<AutoscalingDecider> decider;
    LoadWindow window;
    double last_metric = -1;
    uint64_t incarnation = 0;  // see ReplicaSet::incarnation
  };

  void Loop();
  void Tick(double now);
  /// The deployments on the job's dashboard (platform::PublishPanel "serve"), every
  /// kPanelS on the control thread while the dashboard is on. Never throws.
  void PublishPanel(double now);
  void Reconcile(DeploymentState& d, double now);
  /// The rank for a new replica needing `resources`, or -1 with the reason in `why`.
  int PickRank(const std::map<std::string, double>& resources, std::string& why);
  /// Creates one replica (STARTING); false when it cannot (the reason in d.message).
  bool StartReplica(DeploymentState& d, double now);
  void OnReplicaReady(const std::string& deployment, const std::string& id, ObjectRef<int> ref);
  void OnHealthReply(const std::string& deployment, const std::string& id, uint64_t seq, ObjectRef<void> ref);
  /// A driver's router saw replica `id` of `deployment` die: noted for the next tick
  /// (called on a completion thread; takes only died_mu_, the control thread acts).
  void OnReplicaDied(const std::string& deployment, const std::string& id, const std::string& why);
  /// Removes the replicas known dead: those the routers reported and those on `lost_ranks`
  /// (under the lock).
  void RemoveDead(DeploymentState& d, const std::map<std::string, std::string>& died, const std::set<int>& lost_ranks);
  /// The ranks the state API shows DEAD; empty if it cannot be read. Not under the lock.
  static std::set<int> LostRanks();
  /// Kills replica `id` and removes it; the next Reconcile starts a replacement.
  void Remove(DeploymentState& d, const std::string& id, const std::string& why);
  /// The replica set to publish, if it changed (under the lock).
  std::optional<std::pair<std::string, ReplicaSet>> TakePublish(DeploymentState& d);
  static double Now();
  /// The calls in flight + queued that other ranks' routers of `deployment` report (their
  /// reports of this incarnation). Calls the KV store: not under the lock.
  static int RemoteLoad(const std::string& deployment, uint64_t incarnation);

  // Held by Tick while it chooses and writes the replica sets to publish, and by DeleteApp
  // while it forgets deployments and deletes their KV entries, so that a set chosen before
  // a delete is never written after it. Taken before mu_.
  std::mutex publish_mu_;
  std::mutex mu_;
  std::condition_variable changed_;  // replica states changed (Deploy waits on it)
  std::map<std::string, DeploymentState> deployments_;
  bool stop_ = false;
  std::condition_variable wake_;
  std::thread thread_;
  uint64_t next_incarnation_ = 0;  // seeded from the clock at the first deployment
  const std::shared_ptr<RequestMetrics> request_metrics_ = std::make_shared<RequestMetrics>();
  double last_panel_ = -1;  // control thread only
  double last_rank_poll_ = -1;  // control thread only
  std::mutex died_mu_;
  std::map<std::string, std::map<std::string, std::string>> died_;  // deployment -> replica id -> why
  std::map<std::string, std::pair<double, uint64_t>> panel_calls_;  // deployment -> (when, calls) at the last panel
  std::atomic<bool> panel_due_{false};  // a Deploy finished: show it now
};

}  // namespace prism::serve::internal
