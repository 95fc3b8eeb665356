#pragma once
// A router: sends one deployment's calls to its replicas (see router_core.h for the
// choice), keeps each replica's count of calls in flight, queues calls when every replica
// is full, and hears replies through ObjectRef::OnReady: no thread waits per call.
//
// Every rank that calls a deployment has its own router for it: the driver's is fed by the
// controller directly, other ranks' from the replica table the controller publishes in the
// KV store. A call whose replica died (ActorError: killed by a health check, a downscale
// race, or its rank was lost) is sent again to another replica, up to kMaxAttempts times;
// the router sends nothing more to that replica, and tells the owner of the router (the
// controller, for the driver's) so that it replaces the replica at once instead of at its
// next health check. With no live replica left, calls wait in the queue for the next set.

#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "serve/replica.h"
#include "serve/request_metrics.h"
#include "serve/router_core.h"

namespace prism::serve::internal {

class Router : public std::enable_shared_from_this<Router> {
 public:
  static constexpr int kMaxAttempts = 3;

  /// Sends one call to `replica`; `done` gets its result, exactly once, on any thread. It
  /// either calls `done` or throws (then the router fails or resends the call itself).
  using Sender = std::function<void(const ReplicaRef& replica, const std::string& method, const std::string& args,
                                    CallDone done)>;
  /// Told once per replica that answered ActorError (it is dead): its id and the error's
  /// message. Runs on the completion thread, outside the router's lock.
  using ReplicaDied = std::function<void(const std::string& replica_id, const std::string& why)>;

  /// `metrics`: where each call's outcome and time go (the driver's routers while the
  /// job's dashboard is on), or nullptr. `died`: see ReplicaDied, or nullptr. `send`: how
  /// calls travel; nullptr: ReplicaActor::Call on the replica's actor (unit tests pass a
  /// fake).
  explicit Router(std::string deployment, std::shared_ptr<RequestMetrics> metrics = nullptr,
                  ReplicaDied died = nullptr, Sender send = nullptr);
  /// Replaces the replica set (calls in flight on replicas left out still finish). A set
  /// older than the current one (lower version, same incarnation) is ignored.
  void Update(const ReplicaSet& set);
  /// Sends or queues one call; `done` runs exactly once (see SubmitCall). Thread-safe.
  void Submit(std::string method, std::string args, CallDone done);
  /// Fails every queued call with `error` and every later Submit too. Thread-safe.
  void Close(std::exception_ptr error);

  /// Calls in flight plus queued (the autoscaling metric).
  int Ongoing() const;
  int Queued() const;
  /// Calls in flight on replica `id`.
  int InFlight(const std::string& id) const;
  uint64_t version() const;
  /// The current set's incarnation and load_report_interval_s (see ReplicaSet).
  uint64_t incarnation() const;
  double load_report_interval_s() const;

 private:
  struct Call {
    std::string method;
    std::string args;
    CallDone done;
    int attempts = 0;
    std::chrono::steady_clock::time_point sent;  // the latest attempt's
  };
  struct Send {
    ReplicaRef replica;
    Call call;
  };
  /// Takes the queued calls that can go now (under the lock).
  std::vector<Send> TakeSendable();
  int Choose();  // under the lock
  void Start(std::vector<Send> sends);
  void OnReply(const std::string& replica_id, Call call, CallResult result);

  const std::string deployment_;
  const std::shared_ptr<RequestMetrics> metrics_;
  const ReplicaDied died_;
  const Sender send_;
  mutable std::mutex mu_;
  ReplicaSet set_;
  std::map<std::string, int> in_flight_;  // by replica id, including replicas since removed
  std::set<std::string> dead_;            // replicas that answered ActorError
  std::deque<Call> queue_;
  int total_in_flight_ = 0;
  std::exception_ptr closed_;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace prism::serve::internal
