#include "head/actor_manager.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>

#include "common/log.h"
#include "head/task_manager.h"

namespace prism::internal {

bool ActorManager::OnCreationSubmitted(const std::shared_ptr<TaskSpec>& creation, ErrorInfo* error) {
  const ObjectId id = creation->id;
  Actor& actor = actors_[id];
  actor.creation = creation;
  actor.name = creation->options->actor_name;
  if (actor.name.empty()) return true;
  const auto key = std::make_pair(creation->options->actor_namespace, actor.name);
  if (names_.count(key)) {
    const std::string cause = "an actor named \"" + actor.name + "\" already exists in namespace \"" +
                              creation->options->actor_namespace + "\"";
    ActorDead(id, cause);
    *error = ErrorInfo::Of(ErrorKind::kActorError, cause, creation->options->name, -1);
    return false;
  }
  names_[key] = id;
  objects_.AddHolder(id, -1);  // named actors outlive their handles
  return true;
}

int ActorManager::PickRank(const ResourceSet& demand, const SchedulingStrategy& strategy) const {
  // Committed plus demand within capacity, entry by entry (no copy of the rank's sets).
  auto fits = [&](int r) {
    if (scheduler_.IsLost(r)) return false;
    const ResourceSet& used = scheduler_.Committed(r);
    const ResourceSet& cap = scheduler_.Capacity(r);
    for (const auto& [name, units] : used.Entries()) {
      if (units + demand.Get(name) > cap.Get(name)) return false;
    }
    for (const auto& [name, units] : demand.Entries()) {
      if (used.Get(name) == 0 && units > cap.Get(name)) return false;
    }
    return true;
  };
  if (strategy.kind == SchedulingStrategy::Kind::kNodeAffinity) {
    const bool exists = strategy.rank >= 0 && strategy.rank < scheduler_.NumRanks();
    if (exists && fits(strategy.rank)) return strategy.rank;
    if (!strategy.soft) return -1;  // waits for its rank (the node checked it exists)
  }
  if (!scheduler_.MayHaveRoom(demand)) return -1;
  for (const auto& [count, r] : by_count_) {
    if (fits(r)) return r;
  }
  return -1;
}

void ActorManager::Count(int rank, int delta) {
  auto node = by_count_.extract({per_rank_[rank], rank});  // reuses the node
  per_rank_[rank] += delta;
  node.value().first = per_rank_[rank];
  by_count_.insert(std::move(node));
}

std::vector<DispatchTask> ActorManager::OnCreationPlaced(ObjectId id, int rank, int bundle) {
  auto a = actors_.find(id);
  if (a == actors_.end() || rank < 0) return {};
  a->second.rank = rank;
  a->second.bundle = bundle;
  Count(rank, +1);
  std::erase(to_place_, id);
  std::vector<DispatchTask> calls;
  calls.swap(a->second.waiting_calls);
  return calls;
}

bool ActorManager::OnCreationDone(ObjectId id, const TaskDone& done, const TaskSpec& creation) {
  auto a = actors_.find(id);
  if (a == actors_.end()) return true;
  Actor& actor = a->second;
  if (actor.state == Actor::State::kDead) {
    return actor.rank < 0;  // killed while starting: ActorDead gave back what it held
  }
  if (done.ok) {
    actor.state = Actor::State::kAlive;
    return false;  // a live actor keeps what it holds
  }
  // The caller releases what the creation held; ActorDead must not release a second time.
  if (actor.rank >= 0) Count(actor.rank, -1);
  actor.rank = -1;
  ActorDead(id, "the actor's factory " + creation.options->function + " threw " + done.error.type + ": " +
                    done.error.message);
  return true;
}

void ActorManager::OnRestartDone(ObjectId id, const TaskDone& done) {
  auto a = actors_.find(id);
  if (a == actors_.end() || a->second.state != Actor::State::kRestarting) return;
  if (done.ok) {
    a->second.state = Actor::State::kAlive;
    return;
  }
  ActorDead(id, "its factory " + a->second.creation->options->function + " threw when it restarted on rank " +
                    std::to_string(a->second.rank) + ": " + done.error.type + ": " + done.error.message);
}

ActorManager::Route ActorManager::RouteCall(ObjectId id) const {
  Route route;
  auto a = actors_.find(id);
  if (a == actors_.end() || a->second.state == Actor::State::kDead) {
    route.cause = a == actors_.end() ? "actor " + id.Hex() + " is unknown (dead)" : a->second.cause;
    return route;
  }
  route.rank = a->second.rank;
  route.result = route.rank < 0 ? Route::kWaiting : Route::kSend;
  return route;
}

void ActorManager::AddWaitingCall(ObjectId id, DispatchTask&& call) {
  actors_.at(id).waiting_calls.push_back(std::move(call));
}

bool ActorManager::RetryCall(ObjectId id, int attempts) const {
  auto a = actors_.find(id);
  if (a == actors_.end() || a->second.state == Actor::State::kDead) return false;
  // Only a restart fails the calls of an actor that lives on.
  if (a->second.restarts == 0) return false;
  const int limit = a->second.creation->options->max_task_retries;
  return limit < 0 || attempts < limit;
}

bool ActorManager::MayRestart(const Actor& actor) {
  const int max_restarts = actor.creation->options->max_restarts;
  return (max_restarts < 0 || actor.restarts < max_restarts) && actor.rank >= 0;
}

void ActorManager::Restart(ObjectId id, Actor& actor, const std::string& cause) {
  ++actor.restarts;
  actor.state = Actor::State::kRestarting;
  PRISM_LOG_INFO("restarting actor " << id.Hex() << " (" << actor.restarts << "/"
                                     << actor.creation->options->max_restarts << "): " << cause);
  send_(actor.rank, KillActor{id, /*restart=*/true, cause});
  DispatchTask again;
  again.spec = actor.creation;
  send_(actor.rank, std::move(again));
}

void ActorManager::OnCrashed(ObjectId id, const std::string& cause) {
  auto a = actors_.find(id);
  // A crash of an incarnation the head already ended or is replacing changes nothing.
  if (a == actors_.end() || a->second.state != Actor::State::kAlive) return;
  if (MayRestart(a->second)) {
    Restart(id, a->second, cause + "; the actor is restarting");
    return;
  }
  ActorDead(id, cause);
}

void ActorManager::OnKillRequest(const KillActorRequest& m) {
  auto a = actors_.find(m.actor);
  if (a == actors_.end() || a->second.state == Actor::State::kDead) return;
  Actor& actor = a->second;
  if (!m.no_restart && MayRestart(actor)) {
    Restart(m.actor, actor, "the actor was killed and is restarting");
    return;
  }
  if (tasks_.IsWaitingForRank(m.actor)) {  // creation not placed yet
    ActorDead(m.actor, "killed by ActorHandle::Kill() before it started");
    tasks_.Fail(m.actor, ErrorInfo::Of(ErrorKind::kActorError, "killed before it started", actor.creation->options->name));
    return;
  }
  ActorDead(m.actor, "killed by ActorHandle::Kill()");
}

void ActorManager::ActorDead(ObjectId id, const std::string& cause) {
  auto a = actors_.find(id);
  if (a == actors_.end() || a->second.state == Actor::State::kDead) return;
  Actor& actor = a->second;
  actor.state = Actor::State::kDead;
  actor.cause = cause;
  tables_.RecordError("ACTOR_DIED",
                      "actor " + id.Hex() + (actor.name.empty() ? "" : " (\"" + actor.name + "\")") +
                          " died: " + cause,
                      id, actor.rank);
  if (actor.rank >= 0) {
    send_(actor.rank, KillActor{id, /*restart=*/false, cause});
    // Give back what the live actor held (a failed creation gave it back already).
    groups_.Release({actor.rank, actor.creation->options->placement_group, actor.bundle}, actor.creation->options->demand);
    Count(actor.rank, -1);
  }
  for (auto& call : actor.waiting_calls) {
    tasks_.Fail(call.spec->id, ErrorInfo::Of(ErrorKind::kActorError, cause, call.spec->options->name));
  }
  actor.waiting_calls.clear();
  auto named = names_.find({actor.creation->options->actor_namespace, actor.name});
  if (!actor.name.empty() && named != names_.end() && named->second == id) {
    names_.erase(named);
    FreedList freed;
    objects_.RemoveHolder(id, -1, freed);
    objects_.Free(freed);
  }
  tasks_.DrainQueues();
}

void ActorManager::OnRankLost(int rank, const std::string& why) {
  std::vector<ObjectId> there;
  for (auto& [id, actor] : actors_) {
    if (actor.rank == rank && actor.state != Actor::State::kDead) there.push_back(id);
  }
  std::sort(there.begin(), there.end());  // restarted in a stable order
  const std::string cause = "its rank " + std::to_string(rank) + " was lost (" + why + ")";
  for (ObjectId id : there) {
    Actor& actor = actors_.at(id);
    if (actor.bundle >= 0) {  // rescheduling a lost bundle is not built: say so
      ActorDead(id, cause + "; it lived in a bundle of placement group " +
                        actor.creation->options->placement_group + " on that rank");
      continue;
    }
    if (!MayRestart(actor)) {
      ActorDead(id, cause);
      continue;
    }
    ++actor.restarts;
    actor.state = Actor::State::kRestarting;
    Count(rank, -1);  // its hold there went with the rank (Scheduler::RemoveRank)
    actor.rank = -1;
    to_place_.push_back(id);
    PRISM_LOG_WARN("restarting actor " << id.Hex() << (actor.name.empty() ? "" : " \"" + actor.name + "\"")
                                       << " on a live rank (" << actor.restarts << "/"
                                       << actor.creation->options->max_restarts << "): " << cause);
  }
}

std::vector<std::shared_ptr<TaskSpec>> ActorManager::RestartsToPlace() {
  std::erase_if(to_place_, [&](ObjectId id) {
    auto a = actors_.find(id);
    return a == actors_.end() || a->second.state != Actor::State::kRestarting || a->second.rank >= 0;
  });
  std::vector<std::shared_ptr<TaskSpec>> out;
  for (ObjectId id : to_place_) out.push_back(actors_.at(id).creation);
  return out;
}

void ActorManager::OnHandleFreed(ObjectId id) {
  auto a = actors_.find(id);
  if (a != actors_.end() && a->second.state != Actor::State::kDead) {
    ActorDead(id, "every handle to the actor went out of scope");
  }
}

std::vector<ObjectId> ActorManager::InGroup(const std::string& group) const {
  std::vector<ObjectId> out;
  for (const auto& [id, actor] : actors_) {
    if (actor.state != Actor::State::kDead && actor.creation->options->placement_group == group) out.push_back(id);
  }
  return out;
}

std::pair<uint64_t, std::string> ActorManager::Lookup(const std::string& ray_namespace,
                                                      const std::string& name) const {
  auto it = names_.find({ray_namespace, name});
  if (it == names_.end()) return {0, ""};
  return {it->second.Value(), actors_.at(it->second).creation->options->class_name};
}

namespace {
/// A C++ class's typeid name demangled ("7Counter" -> "Counter"); a Python class's
/// qualified name ("python:app.Counter" -> "app.Counter").
std::string DisplayClassName(const std::string& name) {
  if (name.starts_with("python:")) return name.substr(7);
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string shown = status == 0 && out != nullptr ? out : name;
  std::free(out);
  return shown;
}
}  // namespace

std::vector<LastingHold> ActorManager::Holds() const {
  std::vector<LastingHold> out;
  for (const auto& [id, a] : actors_) {
    if (a.state == Actor::State::kDead || a.rank < 0 || a.bundle >= 0) continue;
    const auto& o = *a.creation->options;
    std::string by = "actor " + (o.class_name.empty() ? o.name : DisplayClassName(o.class_name));
    if (!o.actor_name.empty()) by += " \"" + o.actor_name + "\"";
    out.push_back({a.rank, std::move(by), o.demand});
  }
  return out;
}

std::vector<state::ActorState> ActorManager::List() const {
  static const char* const kStates[] = {"PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD"};
  std::vector<state::ActorState> out;
  for (const auto& [id, a] : actors_) {
    state::ActorState s;
    s.actor_id = id.Hex();
    s.class_name = a.creation->options->class_name;
    s.name = a.creation->options->actor_name;
    s.state = kStates[static_cast<int>(a.state)];
    s.rank = a.rank;
    s.num_restarts = a.restarts;
    s.max_restarts = a.creation->options->max_restarts;
    s.death_cause = a.cause;
    s.placement_group_id = a.creation->options->placement_group;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.actor_id < y.actor_id; });
  return out;
}

}  // namespace prism::internal
