#pragma once
// Options of deployments and of serve::Run, and what serve::Status() reports. Names and
// defaults are Ray Serve's.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prism::serve {

/// Ray Serve's autoscaling_config. The number of replicas follows the load:
///   desired = ceil(current * avg_ongoing_per_replica / target_ongoing_requests),
/// clamped to [min_replicas, max_replicas], where the ongoing requests (running and queued
/// at the router) are averaged over look_back_period_s; a higher count is applied once it
/// has been wanted for upscale_delay_s, a lower one after downscale_delay_s.
struct AutoscalingConfig {
  int min_replicas = 1;
  int max_replicas = 1;
  /// Replicas to start with; unset: min_replicas (at least 1).
  std::optional<int> initial_replicas;
  double target_ongoing_requests = 2.0;
  double upscale_delay_s = 30.0;
  double downscale_delay_s = 600.0;
  double look_back_period_s = 30.0;
  /// How often the controller measures the load (Ray's metrics_interval_s).
  double metrics_interval_s = 0.1;
};

/// Every option of one deployment (Deployment<C> sets them one by one).
struct DeploymentConfig {
  int num_replicas = 1;
  int max_ongoing_requests = 5;
  int max_queued_requests = -1;  // -1: no limit
  /// Resources each replica holds for its life (Ray's ray_actor_options num_cpus,
  /// resources). Ray's default: one CPU.
  std::map<std::string, double> resources{{"CPU", 1.0}};
  std::optional<nlohmann::json> user_config;
  double health_check_period_s = 10.0;
  double health_check_timeout_s = 30.0;
  double graceful_shutdown_timeout_s = 20.0;
  std::optional<AutoscalingConfig> autoscaling;
};

/// Options of serve::Run.
struct RunOptions {
  /// Requests whose path starts with this prefix go to the application's ingress
  /// deployment (the longest matching prefix wins). Must start with '/'.
  std::string route_prefix = "/";
  /// The application's name (Ray's serve.run name); "" : "default".
  std::string name;
  /// Where the HTTP server listens: loopback by default; "0.0.0.0" serves the network.
  std::string host = "127.0.0.1";
  /// 0: the kernel picks a free port (read it from Status().endpoint or the endpoint file).
  uint16_t port = 0;
  /// When set, the endpoint ("http://127.0.0.1:PORT") is written to this file (atomically)
  /// once the server listens: put it beside the job's output so a script can find it.
  std::string endpoint_file;
  /// false: deploy without HTTP (handles only).
  bool http = true;
  /// How long Run waits for every replica to be up before it throws.
  double ready_timeout_s = 60.0;
};

/// A replica's state (Ray's ReplicaState): STARTING (constructing, or waiting for
/// resources), RUNNING, STOPPING (draining, then gone).
enum class ReplicaState { kStarting, kRunning, kStopping };
/// Ray's name: "STARTING", "RUNNING", "STOPPING".
const char* StateName(ReplicaState state);

/// A deployment's health (Ray's DeploymentStatus): UPDATING (replicas starting or stopping
/// towards the target), HEALTHY (the target running), UNHEALTHY (replicas fail to start,
/// or none can be placed; DeploymentStatus::message says why).
enum class DeploymentHealth { kUpdating, kHealthy, kUnhealthy };
/// Ray's name: "UPDATING", "HEALTHY", "UNHEALTHY".
const char* HealthName(DeploymentHealth health);

/// One replica as Status() reports it.
struct ReplicaStatus {
  std::string replica_id;  // "<deployment>#<n>"
  ReplicaState state = ReplicaState::kStarting;
  int rank = -1;           // the rank it runs on (or waits for, while STARTING)
  int ongoing_requests = 0;  // sent by the driver's router and not yet answered
};

/// One deployment as Status() reports it.
struct DeploymentStatus {
  std::string name;
  std::string application;
  DeploymentHealth status = DeploymentHealth::kUpdating;
  std::string message;  // why it is not HEALTHY
  int target_replicas = 0;
  int queued_requests = 0;
  std::vector<ReplicaStatus> replicas;
};

/// What serve::Status() returns.
struct ServeStatus {
  std::string endpoint;  // "http://HOST:PORT", or "" without HTTP
  std::map<std::string, std::string> applications;  // name -> route prefix ("" without HTTP)
  std::vector<DeploymentStatus> deployments;
  /// The whole status as JSON (for logs and scripts).
  nlohmann::json ToJson() const;
};

}  // namespace prism::serve
