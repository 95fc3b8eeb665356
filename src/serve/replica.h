#pragma once
// A replica: the Prism actor that holds one instance of a deployment's class on a worker
// rank. Its calls run on up to max_ongoing_requests + 1 actor threads (the router sends at
// most max_ongoing_requests requests; the extra thread keeps health checks and
// reconfigures from waiting behind a full replica).

#include <memory>
#include <string>

#include "prism/actor.h"
#include "prism/serve/deployment.h"

namespace prism::serve::internal {

class ReplicaActor {
 public:
  /// Builds the user's instance from its registered class, then applies `user_config`
  /// (JSON text; "" for none) through Reconfigure. Throws what the constructor throws, or
  /// DeploymentError when the class is not registered in this binary.
  static ReplicaActor* Create(std::string deployment, std::string replica_id, std::string class_key,
                              std::string init_args, std::string user_config);
  ~ReplicaActor();
  ReplicaActor(const ReplicaActor&) = delete;
  ReplicaActor& operator=(const ReplicaActor&) = delete;

  /// Runs one request: the HTTP handler (method kHttpMethod) or a typed method, on
  /// serialized arguments; returns the serialized result. Throws what the handler throws.
  std::string Call(std::string method, std::string args);
  /// The rank this replica runs on (called once after creation: the replica is up).
  int Ready();
  /// Applies a new user_config (JSON text).
  void Reconfigure(std::string user_config);
  /// The class's CheckHealth, if it has one (else nothing: the call itself shows the
  /// replica is alive).
  void CheckHealth();

 private:
  ReplicaActor(std::string deployment, std::string replica_id, const ClassEntry* entry, void* instance);
  std::string deployment_;
  std::string replica_id_;
  const ClassEntry* entry_;
  void* instance_;
};

/// A replica as routers know it.
struct ReplicaRef {
  std::string id;
  prism::ActorHandle<ReplicaActor> actor;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & id & actor;
  }
};

/// What a router needs of a deployment: its running replicas and its limits. The
/// controller publishes it (to the driver's router directly, to other ranks' routers
/// through the KV store under kReplicaSetKeyPrefix + name).
struct ReplicaSet {
  uint64_t version = 0;
  int max_ongoing_requests = 5;
  int max_queued_requests = -1;
  std::vector<ReplicaRef> replicas;
  /// Names this deployment's life (a fresh one for each deployment the controller creates
  /// under this name): load reports carry it, so a stale one from an earlier life is ignored.
  uint64_t incarnation = 0;
  /// > 0 for an autoscaling deployment: how often other ranks' routers report their load
  /// (its metrics_interval_s); 0: they report nothing.
  double load_report_interval_s = 0;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & version & max_ongoing_requests & max_queued_requests & replicas & incarnation & load_report_interval_s;
  }
};

inline const std::string kReplicaSetKeyPrefix = "serve/replicas/";
/// A router off rank 0 reports its calls in flight + queued under
/// kRouterLoadKeyPrefix + deployment + "/" + rank, as "<incarnation> <ongoing>", every
/// load_report_interval_s while it changes; the controller adds them to its own router's.
inline const std::string kRouterLoadKeyPrefix = "serve/load/";

/// The value of a load report.
std::string LoadReport(uint64_t incarnation, int ongoing);
/// The ongoing count of a load report of `incarnation`; 0 for another incarnation or bad text.
int ParseLoadReport(const std::string& value, uint64_t incarnation);

}  // namespace prism::serve::internal
