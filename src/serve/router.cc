#include "serve/router.h"

#include "prism/api.h"

namespace prism::serve::internal {

namespace {

void SendToActor(const ReplicaRef& replica, const std::string& method, const std::string& args, CallDone done) {
  ObjectRef<std::string> ref = replica.actor.Task(&ReplicaActor::Call).Remote(method, args);
  ref.OnReady([ref, done = std::move(done)] {
    CallResult result;
    try {
      result.bytes = std::move(*ref.Get(0));
    } catch (...) {
      result.error = std::current_exception();
    }
    done(std::move(result));
  });
}

}  // namespace

Router::Router(std::string deployment, std::shared_ptr<RequestMetrics> metrics, ReplicaDied died, Sender send)
    : deployment_(std::move(deployment)),
      metrics_(std::move(metrics)),
      died_(std::move(died)),
      send_(send ? std::move(send) : Sender(SendToActor)) {}

void Router::Update(const ReplicaSet& set) {
  std::vector<Send> sends;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (set.incarnation == set_.incarnation && set.version < set_.version) return;
    set_ = set;
    std::set<std::string> live;
    for (const auto& r : set_.replicas) live.insert(r.id);
    for (auto it = dead_.begin(); it != dead_.end();) it = live.count(*it) ? std::next(it) : dead_.erase(it);
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      it = (it->second == 0 && !live.count(it->first)) ? in_flight_.erase(it) : std::next(it);
    }
    sends = TakeSendable();
  }
  Start(std::move(sends));
}

int Router::Choose() {
  std::vector<ReplicaLoad> loads;
  loads.reserve(set_.replicas.size());
  for (const auto& r : set_.replicas) {
    auto it = in_flight_.find(r.id);
    loads.push_back({it == in_flight_.end() ? 0 : it->second, dead_.count(r.id) == 0});
  }
  return ChooseReplica(loads, set_.max_ongoing_requests, rng_);
}

std::vector<Router::Send> Router::TakeSendable() {
  std::vector<Send> sends;
  while (!queue_.empty()) {
    const int i = Choose();
    if (i < 0) break;
    const ReplicaRef& replica = set_.replicas[static_cast<size_t>(i)];
    ++in_flight_[replica.id];
    ++total_in_flight_;
    sends.push_back({replica, std::move(queue_.front())});
    queue_.pop_front();
  }
  return sends;
}

void Router::Submit(std::string method, std::string args, CallDone done) {
  std::vector<Send> sends;
  std::exception_ptr refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      refused = closed_;
    } else {
      const int i = queue_.empty() ? Choose() : -1;
      if (i >= 0) {
        const ReplicaRef& replica = set_.replicas[static_cast<size_t>(i)];
        ++in_flight_[replica.id];
        ++total_in_flight_;
        sends.push_back({replica, Call{std::move(method), std::move(args), std::move(done)}});
      } else if (CanQueue(queue_.size(), set_.max_queued_requests)) {
        queue_.push_back(Call{std::move(method), std::move(args), std::move(done)});
      } else {
        refused = std::make_exception_ptr(BackPressureError(
            "serve: deployment \"" + deployment_ + "\" is over capacity: " + std::to_string(set_.replicas.size()) +
            " replica(s) with " + std::to_string(set_.max_ongoing_requests) + " requests in flight each and " +
            std::to_string(queue_.size()) + " queued (max_queued_requests " +
            std::to_string(set_.max_queued_requests) + "); retry later"));
      }
    }
  }
  if (refused) {
    done(CallResult{{}, refused});
    return;
  }
  Start(std::move(sends));
}

void Router::Start(std::vector<Send> sends) {
  for (auto& s : sends) {
    std::shared_ptr<Router> self = shared_from_this();
    if (metrics_) s.call.sent = std::chrono::steady_clock::now();
    auto call = std::make_shared<Call>(std::move(s.call));
    const std::string id = s.replica.id;
    try {
      send_(s.replica, call->method, call->args,
            [self, call, id](CallResult result) { self->OnReply(id, std::move(*call), std::move(result)); });
    } catch (...) {
      OnReply(id, std::move(*call), CallResult{{}, std::current_exception()});
    }
  }
}

void Router::OnReply(const std::string& replica_id, Call call, CallResult result) {
  if (metrics_) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - call.sent).count();
    metrics_->CallEnded(deployment_, replica_id, result.error != nullptr, ms);
  }
  bool dead = false, retry = false;
  std::string why;
  if (result.error) {
    try {
      std::rethrow_exception(result.error);
    } catch (const ActorError& e) {
      dead = true;
      why = e.what();
      retry = call.attempts + 1 < kMaxAttempts;
    } catch (...) {
    }
  }
  std::vector<Send> sends;
  bool newly_dead = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(replica_id);
    if (it != in_flight_.end() && it->second > 0) --it->second;
    --total_in_flight_;
    if (dead) newly_dead = dead_.insert(replica_id).second;
    if (retry) {
      if (closed_) {
        retry = false;
      } else {
        ++call.attempts;
        queue_.push_front(std::move(call));
      }
    }
    sends = TakeSendable();
  }
  if (newly_dead && died_) died_(replica_id, why);
  if (!retry) call.done(std::move(result));
  Start(std::move(sends));
}

void Router::Close(std::exception_ptr error) {
  std::deque<Call> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = error;
    queued.swap(queue_);
  }
  for (auto& c : queued) c.done(CallResult{{}, error});
}

int Router::Ongoing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_in_flight_ + static_cast<int>(queue_.size());
}

int Router::Queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int Router::InFlight(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(id);
  return it == in_flight_.end() ? 0 : it->second;
}

uint64_t Router::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return set_.version;
}

uint64_t Router::incarnation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return set_.incarnation;
}

double Router::load_report_interval_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return set_.load_report_interval_s;
}

}  // namespace prism::serve::internal
