#include "head/head.h"

#include "common/log.h"
#include "scheduler/bundle_placement.h"

namespace prism::internal {

namespace {
ErrorInfo LostError(ObjectId id, const std::string& task_name) {
  return ErrorInfo::Of(ErrorKind::kObjectLost,
          "object " + id.Hex() + " is gone: it was freed after its last ObjectRef was dropped",
          task_name, -1);
}
}  // namespace

Head::Head(std::vector<ResourceSet> capacities, SendFn send, std::vector<std::string> node_of_rank)
    : send_(std::move(send)), scheduler_(std::move(capacities)), node_of_rank_(std::move(node_of_rank)) {
  actors_per_rank_.assign(scheduler_.NumRanks(), 0);
  finished_per_rank_.assign(scheduler_.NumRanks(), 0);
  if (node_of_rank_.empty()) {
    for (int r = 0; r < scheduler_.NumRanks(); ++r) node_of_rank_.push_back("rank-" + std::to_string(r));
  }
}

void Head::Handle(int from, Message&& msg) {
  if (auto* call = std::get_if<HeadCall>(&msg)) {
    OnHeadCall(from, std::move(*call));  // locks per call
    return;
  }
  Locked lock(*this);
  HandleLocked(from, std::move(msg));
}

void Head::Post(int from, Message&& msg) {
  if (auto* call = std::get_if<HeadCall>(&msg)) {
    OnHeadCall(from, std::move(*call));  // its caller waits for the answer anyway
    return;
  }
  {
    std::lock_guard<AdaptiveMutex> lock(posted_mu_);
    posted_.emplace_back(from, std::move(msg));
    has_posted_.store(true, std::memory_order_seq_cst);
  }
  if (mu_.try_lock()) UnlockAndDrain();
}

void Head::DrainPosted() {
  while (has_posted_.load(std::memory_order_acquire)) {
    {
      std::lock_guard<AdaptiveMutex> lock(posted_mu_);
      draining_.swap(posted_);
      has_posted_.store(false, std::memory_order_seq_cst);
    }
    for (auto& [from, msg] : draining_) HandleLocked(from, std::move(msg));
    draining_.clear();
  }
}

void Head::UnlockAndDrain() {
  for (;;) {
    DrainPosted();
    mu_.unlock();
    // A message posted after the drain found the lock taken and left it to us: look again.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!has_posted_.load(std::memory_order_seq_cst) || !mu_.try_lock()) return;
  }
}

void Head::HandleLocked(int from, Message&& msg) {
  std::visit(
      [&](auto&& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, SubmitTask>) {
          OnSubmit(from, std::move(m.spec));
        } else if constexpr (std::is_same_v<T, TaskDone>) {
          OnTaskDone(from, std::move(m));
        } else if constexpr (std::is_same_v<T, TaskBlocked>) {
          OnTaskBlocked(from, m);
        } else if constexpr (std::is_same_v<T, PutObject>) {
          OnPut(from, std::move(m));
        } else if constexpr (std::is_same_v<T, RefUpdate>) {
          OnRefUpdate(from, m);
        } else if constexpr (std::is_same_v<T, Subscribe>) {
          OnSubscribe(from, m);
        } else if constexpr (std::is_same_v<T, AddLocation>) {
          OnPullDone(from, m);
        } else if constexpr (std::is_same_v<T, KillActorRequest>) {
          OnKillRequest(m);
        } else if constexpr (std::is_same_v<T, ActorDied>) {
          ActorDead(m.actor, m.cause);
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          // Liveness is tracked by the transport; nothing to do here.
        } else {
          PRISM_LOG_ERROR("head got a " << KindName(msg) << " from rank " << from);
        }
      },
      std::move(msg));
}

std::string Head::ClassKey(const TaskSpec& spec) {
  std::string key = spec.function;
  if (!spec.placement_group.empty()) {
    key += "|pg=" + spec.placement_group + "/" + std::to_string(spec.bundle_index);
  }
  for (const auto& [name, units] : spec.demand.Entries()) {
    key += '|';
    key += name;
    key += '=';
    key += std::to_string(units);
  }
  return key;
}

void Head::OnSubmit(int from, TaskSpec&& spec) {
  TaskId id = spec.id;
  objects_.Create(id, from, /*producer_pending=*/true);
  for (ObjectId c : spec.contained) objects_.AddTaskUse(c);
  TaskEntry& task = tasks_[id];
  task.spec = std::make_shared<TaskSpec>(std::move(spec));
  task.times[static_cast<size_t>(TaskPhase::kPendingArgs)] = WallNowNs();
  // Count every use first: however the task ends, Complete drops exactly these.
  for (const auto& arg : task.spec->args) {
    if (arg.is_ref) objects_.AddTaskUse(arg.ref);
  }
  if (task.spec->kind == TaskKind::kActorCall) {
    // Calls never wait here: the actor's node resolves their arguments, in call order.
    RouteActorCall(task);
    return;
  }
  std::vector<ObjectId> seen;
  for (const auto& arg : task.spec->args) {
    if (!arg.is_ref) continue;
    ObjectEntry* e = objects_.Find(arg.ref);
    if (e == nullptr) {
      FailTask(id, LostError(arg.ref, task.spec->name));
      return;
    }
    if (e->state == ObjectEntry::State::kFailed) {
      FailTask(id, *e->error);
      return;
    }
    if (e->state == ObjectEntry::State::kPending &&
        std::find(seen.begin(), seen.end(), arg.ref) == seen.end()) {
      e->dependents.push_back(id);
      ++task.unresolved;
      seen.push_back(arg.ref);
    }
  }
  if (task.spec->kind == TaskKind::kActorCreation) {
    ActorEntry& actor = actors_[id];
    actor.creation = task.spec;
    actor.name = task.spec->actor_name;
    if (!actor.name.empty()) {
      if (actor_names_.count(actor.name)) {
        ActorDead(id, "an actor named \"" + actor.name + "\" already exists");
        FailTask(id, ErrorInfo::Of(ErrorKind::kActorError, "an actor named \"" + actor.name + "\" already exists",
                      task.spec->name, -1));
        return;
      }
      actor_names_[actor.name] = id;
      objects_.AddHolder(id, -1);  // named actors outlive their handles
    }
  }
  if (!task.spec->placement_group.empty()) {
    auto g = groups_.find(task.spec->placement_group);
    ErrorInfo bad = ErrorInfo::Of(ErrorKind::kResourceError, "", task.spec->name);
    if (g == groups_.end()) {
      bad.message = "placement group " + task.spec->placement_group + " does not exist (removed?)";
    } else {
      int b = task.spec->bundle_index;
      const auto& bundles = g->second.bundles;
      if (b >= static_cast<int>(bundles.size()) || b < -1) {
        bad.message = "bundle index " + std::to_string(b) + " out of range: placement group " +
                      task.spec->placement_group + " has " + std::to_string(bundles.size()) +
                      " bundles";
      } else if (std::none_of(bundles.begin(), bundles.end(), [&](const ResourceSet& bs) {
                   return (b < 0 || &bs == &bundles[b]) && task.spec->demand.FitsIn(bs);
                 })) {
        bad.message = "task asks for " + task.spec->demand.ToString() +
                      ", more than its placement group bundle holds";
      }
    }
    if (!bad.message.empty()) {
      FailTask(id, bad);
      return;
    }
  }
  if (task.unresolved == 0) Enqueue(id);
}

void Head::Enqueue(TaskId id) {
  TaskEntry& task = tasks_.at(id);
  task.times[static_cast<size_t>(TaskPhase::kPendingNode)] = WallNowNs();
  if (queued_ == 0 && TryDispatch(task)) return;  // common case: nothing ahead of it
  auto key = ClassKey(*task.spec);
  auto it = queues_.find(key);
  if ((it == queues_.end() || it->second.empty()) && TryDispatch(task)) return;
  queues_[key].push_back(id);
  ++queued_;
}

ArgLocation Head::ArgLocationOf(ObjectId id, const ObjectEntry* e) {
  ArgLocation loc;
  loc.id = id;
  if (e != nullptr && e->state == ObjectEntry::State::kReady) loc.inline_value = e->inline_value;
  return loc;
}

bool Head::TryDispatch(TaskEntry& task) {
  const TaskSpec& spec = *task.spec;
  DispatchTask out;
  std::vector<uint64_t> bytes_on_rank;
  for (const auto& arg : spec.args) {
    if (!arg.is_ref) continue;
    ObjectEntry* e = objects_.Find(arg.ref);
    if (e != nullptr && !e->inline_value) {
      if (bytes_on_rank.empty()) bytes_on_rank.resize(scheduler_.NumRanks());
      for (int r : e->locations) bytes_on_rank[r] += e->size;
    }
    out.refs.push_back(ArgLocationOf(arg.ref, e));
  }
  if (!spec.placement_group.empty()) {
    switch (TryDispatchInGroup(task, out)) {
      case GroupDispatch::kWait: return false;
      case GroupDispatch::kFailed: return true;  // handled: the task is gone
      case GroupDispatch::kSent: break;
    }
  } else {
    int rank = spec.kind == TaskKind::kActorCreation
                   ? PickActorRank(spec.demand)
                   : scheduler_.Place(spec.function, spec.demand, spec.submitter, bytes_on_rank);
    if (rank < 0) return false;
    scheduler_.Commit(rank, spec.demand);
    task.rank = rank;
    out.spec = task.spec;
    send_(rank, std::move(out));
  }
  const int64_t now = WallNowNs();
  task.times[static_cast<size_t>(TaskPhase::kSubmitted)] = now;
  if (spec.kind == TaskKind::kActorCreation) {
    // The creation is on its way: calls that waited for a rank follow it, in order.
    auto a = actors_.find(spec.id);
    if (a != actors_.end() && task.rank >= 0) {
      a->second.rank = task.rank;
      a->second.bundle = task.bundle;
      ++actors_per_rank_[task.rank];
      for (auto& call : a->second.waiting_calls) {
        auto c = tasks_.find(call.spec->id);
        if (c != tasks_.end()) {
          c->second.rank = task.rank;
          c->second.times[static_cast<size_t>(TaskPhase::kSubmitted)] = now;
        }
        send_(task.rank, std::move(call));
      }
      a->second.waiting_calls.clear();
    }
  }
  return true;
}

Head::GroupDispatch Head::TryDispatchInGroup(TaskEntry& task, DispatchTask& out) {
  const TaskSpec& spec = *task.spec;
  auto g = groups_.find(spec.placement_group);
  if (g == groups_.end()) {
    FailTask(spec.id, ErrorInfo::Of(ErrorKind::kPlacementGroupRemoved,
                       "placement group " + spec.placement_group + " was removed", spec.name, -1));
    return GroupDispatch::kFailed;
  }
  PgEntry& pg = g->second;
  if (!pg.created) return GroupDispatch::kWait;
  int chosen = -1;
  for (int b = 0; b < static_cast<int>(pg.bundles.size()); ++b) {
    if (spec.bundle_index >= 0 && b != spec.bundle_index) continue;
    if (!spec.demand.FitsIn(pg.free[b])) continue;
    if (chosen < 0 || pg.ranks[b] == spec.submitter) chosen = b;
  }
  if (chosen < 0) return GroupDispatch::kWait;
  pg.free[chosen].Subtract(spec.demand);
  task.bundle = chosen;
  task.rank = pg.ranks[chosen];
  out.spec = task.spec;
  send_(task.rank, std::move(out));
  return GroupDispatch::kSent;
}

void Head::AdjustHeld(TaskEntry& task, const ResourceSet& amount, bool release) {
  if (amount.Empty() || task.rank < 0) return;
  if (task.bundle >= 0) {  // accounted inside its placement group bundle
    auto g = groups_.find(task.spec->placement_group);
    if (g == groups_.end()) return;
    ResourceSet& free = g->second.free[task.bundle];
    release ? free.Add(amount) : free.Subtract(amount);
  } else {
    release ? scheduler_.Release(task.rank, amount) : scheduler_.Commit(task.rank, amount);
  }
}

void Head::DrainQueues() {
  PlacePendingGroups();
  if (queued_ == 0) return;
  for (auto& [key, queue] : queues_) {
    while (!queue.empty()) {
      auto it = tasks_.find(queue.front());
      if (it == tasks_.end()) {  // failed while queued
        queue.pop_front();
        --queued_;
        continue;
      }
      if (!TryDispatch(it->second)) break;
      queue.pop_front();
      --queued_;
    }
  }
}

void Head::OnTaskDone(int from, TaskDone&& done) {
  auto it = tasks_.find(done.id);
  if (it == tasks_.end()) {
    // A restarted actor's creation (its first one completed long ago).
    auto a = actors_.find(done.id);
    if (a != actors_.end() && done.ok && a->second.state == ActorEntry::State::kRestarting) {
      a->second.state = ActorEntry::State::kAlive;
    }
    return;
  }
  if (it->second.spec->attempt != done.attempt) return;
  TaskEntry& task = it->second;
  ResourceSet held = task.spec->demand;
  if (task.blocked) held.Set("CPU", 0);
  bool release = true;
  if (task.spec->kind == TaskKind::kActorCreation) {
    auto a = actors_.find(done.id);
    if (a != actors_.end()) {
      ActorEntry& actor = a->second;
      if (actor.state == ActorEntry::State::kDead) {
        release = actor.rank < 0;  // killed while starting: ActorDead gave back what it held
      } else if (done.ok) {
        actor.state = ActorEntry::State::kAlive;
        release = false;  // a live actor keeps what it holds
      } else {
        // Released just below; ActorDead must not release a second time.
        if (actor.rank >= 0) --actors_per_rank_[actor.rank];
        actor.rank = -1;
        ActorDead(done.id, "the actor's factory " + task.spec->function + " threw " +
                               done.error.type + ": " + done.error.message);
      }
    }
  }
  if (release) AdjustHeld(task, held, /*release=*/true);
  task.bundle = -1;
  scheduler_.RecordRunTime(task.spec->function, done.exec_ns);
  if (!done.ok && task.spec->retry_exceptions && task.spec->attempt < task.spec->max_retries) {
    task.spec = std::make_shared<TaskSpec>(*task.spec);  // the old one may still be in flight
    ++task.spec->attempt;
    PRISM_LOG_WARN("task " << task.spec->name << " failed on rank " << from << " ("
                            << done.error.Render() << "); retry " << task.spec->attempt << "/"
                            << task.spec->max_retries);
    task.rank = -1;
    task.blocked = false;
    task.times[static_cast<size_t>(TaskPhase::kBlocked)] = 0;
    Enqueue(done.id);
  } else {
    Complete(done.id, std::move(done), from);
  }
  DrainQueues();
}

void Head::Complete(TaskId id, TaskDone&& done, int from) {
  std::vector<FreedObject> freed;
  std::vector<TaskId> failed_dependents;
  std::shared_ptr<ErrorInfo> failure;
  if (!done.ok) failure = std::make_shared<ErrorInfo>(std::move(done.error));
  {
    auto node = tasks_.extract(id);
    const TaskSpec& spec = *node.mapped().spec;
    RecordEnded(node.mapped(), done, failure, from);
    ObjectEntry* e = objects_.Find(id);
    if (e != nullptr) {
      if (done.ok) {
        e->state = ObjectEntry::State::kReady;
        e->size = done.size;
        e->inline_value = std::move(done.inline_value);
        if (!e->inline_value) e->locations.push_back(from);
      } else {
        e->state = ObjectEntry::State::kFailed;
        e->error = failure;
      }
      objects_.SetContained(id, std::move(done.contained));
      // Small results go straight to the submitter while it holds a ref (Ray's owner), so
      // its Get finds them locally without asking.
      if ((e->inline_value || !done.ok) &&
          std::find(e->holders.begin(), e->holders.end(), spec.submitter) != e->holders.end() &&
          std::find(e->subscribers.begin(), e->subscribers.end(), spec.submitter) ==
              e->subscribers.end()) {
        e->subscribers.push_back(spec.submitter);
      }
      NotifyReady(id, *e);
      for (TaskId dep : e->dependents) {
        auto dit = tasks_.find(dep);
        if (dit == tasks_.end()) continue;
        if (!done.ok) {
          failed_dependents.push_back(dep);
        } else if (--dit->second.unresolved == 0) {
          Enqueue(dep);
        }
      }
      e->dependents.clear();
    } else if (!done.ok) {
      PRISM_LOG_DEBUG("result of failed task " << spec.name << " dropped: no refs left");
    }
    for (const auto& arg : spec.args) {
      if (arg.is_ref) objects_.RemoveTaskUse(arg.ref, freed);
    }
    for (ObjectId c : spec.contained) objects_.RemoveTaskUse(c, freed);
    objects_.ProducerDone(id, freed);
  }
  for (TaskId dep : failed_dependents) FailTask(dep, *failure);
  SendFrees(freed);
}

void Head::RecordEnded(const TaskEntry& task, const TaskDone& done,
                       const std::shared_ptr<ErrorInfo>& failure, int from) {
  const TaskSpec& spec = *task.spec;
  TaskRecord r;
  r.id = spec.id;
  r.kind = spec.kind;
  r.phase = done.ok ? TaskPhase::kFinished : TaskPhase::kFailed;
  r.actor = spec.kind == TaskKind::kActorCall ? spec.actor : ObjectId();
  if (spec.kind == TaskKind::kActorCreation) r.actor = spec.id;
  r.function = task_table_.Intern(spec.function);
  if (spec.name != spec.function) r.name = spec.name;
  r.placement_group = spec.placement_group;
  r.rank = from >= 0 ? from : task.rank;
  r.attempt = spec.attempt;
  r.times = task.times;
  const int64_t now = WallNowNs();
  r.times[static_cast<size_t>(r.phase)] = now;
  if (done.exec_ns > 0) r.times[static_cast<size_t>(TaskPhase::kRunning)] = now - done.exec_ns;
  r.error = failure;
  if (from >= 0) ++finished_per_rank_[from];
  if (failure) RecordError("TASK_FAILED", failure->Render(), spec.id, r.rank);
  task_table_.Ended(std::move(r));
}

void Head::RecordError(const char* type, const std::string& message, ObjectId id, int rank) {
  constexpr size_t kMaxErrors = 1000;
  if (errors_.size() == kMaxErrors) errors_.pop_front();
  errors_.push_back({WallNowNs(), type, message, id.Hex(), rank});
}

void Head::FailTask(TaskId id, const ErrorInfo& error) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return;
  TaskDone done;
  done.id = id;
  done.ok = false;
  done.error = error;
  Complete(id, std::move(done), -1);
}

ObjectReady Head::ReadyMessage(ObjectId id, const ObjectEntry& e) const {
  ObjectReady r;
  r.id = id;
  r.size = e.size;
  r.inline_value = e.inline_value;
  if (!e.inline_value) r.holders = e.locations;
  if (e.state == ObjectEntry::State::kFailed) {
    r.failed = true;
    r.error = *e.error;
  }
  return r;
}

void Head::NotifyReady(ObjectId id, ObjectEntry& e) {
  const bool pulled = e.state == ObjectEntry::State::kReady && !e.inline_value && !e.locations.empty();
  for (int rank : e.subscribers) {
    if (pulled) {
      AssignPull(id, e, rank);
      continue;
    }
    // A rank sent an inline value keeps a cached copy: it must hear when it is freed.
    if (e.inline_value && std::find(e.locations.begin(), e.locations.end(), rank) ==
                              e.locations.end()) {
      e.locations.push_back(rank);
    }
    send_(rank, ReadyMessage(id, e));
  }
  e.subscribers.clear();
}

void Head::AssignPull(ObjectId id, ObjectEntry& e, int reader) {
  auto pulling = [&](int rank) {
    return std::any_of(e.pulls.begin(), e.pulls.end(), [&](const auto& p) { return p.first == rank; });
  };
  if (pulling(reader)) return;  // one pull per rank at a time
  ObjectReady ready = ReadyMessage(id, e);
  if (std::find(e.locations.begin(), e.locations.end(), reader) != e.locations.end()) {
    send_(reader, std::move(ready));  // it has a copy already
    return;
  }
  // The copy serving the fewest readers, if it has room: each copy serves at most
  // kMaxPullsPerCopy readers at once, and every finished reader becomes a copy, so a
  // broadcast spreads as a tree instead of queueing on the first holder.
  int source = -1;
  size_t load = 0;
  for (int rank : e.locations) {
    size_t n = static_cast<size_t>(std::count_if(e.pulls.begin(), e.pulls.end(),
                                                 [&](const auto& p) { return p.second == rank; }));
    if (source < 0 || n < load) {
      source = rank;
      load = n;
    }
  }
  if (source < 0 || load >= kMaxPullsPerCopy) {
    e.waiting_readers.push_back(reader);
    return;
  }
  e.pulls.emplace_back(reader, source);
  ready.holders = {source};
  send_(reader, std::move(ready));
}

void Head::OnPullDone(int from, const AddLocation& m) {
  ObjectEntry* e = objects_.Find(m.id);
  if (e == nullptr) {
    // Freed while that copy was in flight: nobody else will ever tell it to go.
    if (m.stored) send_(from, FreeObjects{{m.id}});
    return;
  }
  if (m.stored) objects_.AddLocation(m.id, from);
  e->pulls.erase(std::remove_if(e->pulls.begin(), e->pulls.end(),
                                [&](const auto& p) { return p.first == from; }),
                 e->pulls.end());
  std::vector<int> waiting;
  waiting.swap(e->waiting_readers);
  for (int reader : waiting) AssignPull(m.id, *e, reader);
}

void Head::OnTaskBlocked(int from, const TaskBlocked& m) {
  auto it = tasks_.find(m.id);
  if (it == tasks_.end() || it->second.rank < 0 || it->second.blocked == m.blocked) return;
  TaskEntry& task = it->second;
  ResourceSet cpu;
  cpu.Set("CPU", task.spec->demand.Get("CPU"));
  task.blocked = m.blocked;
  task.times[static_cast<size_t>(TaskPhase::kBlocked)] = m.blocked ? WallNowNs() : 0;
  if (m.blocked) {
    AdjustHeld(task, cpu, /*release=*/true);
    DrainQueues();
  } else {
    AdjustHeld(task, cpu, /*release=*/false);
  }
}

void Head::OnPut(int from, PutObject&& put) {
  ObjectEntry& e = objects_.Create(put.id, from, /*producer_pending=*/false);
  e.state = ObjectEntry::State::kReady;
  e.size = put.size;
  e.inline_value = std::move(put.inline_value);
  e.locations.push_back(from);
  objects_.SetContained(put.id, std::move(put.contained));
}

void Head::OnRefUpdate(int from, const RefUpdate& m) {
  for (ObjectId id : m.add) objects_.AddHolder(id, from);
  std::vector<FreedObject> freed;
  for (ObjectId id : m.remove) objects_.RemoveHolder(id, from, freed);
  SendFrees(freed);
}

void Head::OnSubscribe(int from, const Subscribe& m) {
  for (ObjectId id : m.ids) {
    ObjectEntry* e = objects_.Find(id);
    if (e == nullptr) {
      ObjectReady r;
      r.id = id;
      r.failed = true;
      r.error = LostError(id, "");
      send_(from, std::move(r));
    } else if (e->state == ObjectEntry::State::kPending) {
      e->subscribers.push_back(from);
    } else {
      e->subscribers.push_back(from);
      NotifyReady(id, *e);
    }
  }
}

void Head::SendFrees(std::vector<FreedObject>& freed) {
  if (freed.empty()) return;
  if (!actors_.empty()) {
    for (const auto& f : freed) {
      auto a = actors_.find(f.id);
      if (a != actors_.end() && a->second.state != ActorEntry::State::kDead) {
        ActorDead(f.id, "every handle to the actor went out of scope");
      }
    }
  }
  // Usually one object on one rank: a small vector beats a map here.
  std::vector<std::pair<int, FreeObjects>> per_rank;
  for (auto& f : freed) {
    for (int r : f.locations) {
      auto it = std::find_if(per_rank.begin(), per_rank.end(),
                             [r](const auto& p) { return p.first == r; });
      if (it == per_rank.end()) it = per_rank.insert(per_rank.end(), {r, FreeObjects{}});
      it->second.ids.push_back(f.id);
    }
  }
  for (auto& [rank, msg] : per_rank) send_(rank, std::move(msg));
  freed.clear();
}

std::map<std::string, double> Head::Available() {
  Locked lock(*this);
  ResourceSet total;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) total.Add(scheduler_.Free(r));
  return total.ToMap();
}

size_t Head::NumObjects() {
  Locked lock(*this);
  return objects_.Size();
}

size_t Head::NumTasks() {
  Locked lock(*this);
  return tasks_.size();
}

}  // namespace prism::internal

namespace prism::internal {

// ---- Placement groups --------------------------------------------------------------------

std::string Head::CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  if (options.bundles.empty()) {
    throw Error("prism: CreatePlacementGroup: no bundles given");
  }
  std::vector<ResourceSet> bundles;
  for (size_t i = 0; i < options.bundles.size(); ++i) {
    std::map<std::string, double> amounts(options.bundles[i].begin(), options.bundles[i].end());
    bool any = false;
    for (const auto& [name, amount] : amounts) {
      if (!(amount >= 0)) {
        throw Error("prism: CreatePlacementGroup: bundle " + std::to_string(i) + " asks for " +
                    name + " = " + std::to_string(amount) + "; amounts must be >= 0");
      }
      any |= amount > 0;
    }
    if (!any) {
      throw Error("prism: CreatePlacementGroup: bundle " + std::to_string(i) +
                  " is empty; every bundle must reserve something");
    }
    bundles.emplace_back(amounts);
  }
  Locked lock(*this);
  if (!options.name.empty()) {
    for (const auto& [id, g] : groups_) {
      if (g.options.name == options.name) {
        throw Error("prism: a placement group named \"" + options.name + "\" already exists (" +
                    id + ")");
      }
    }
  }
  std::vector<ResourceSet> capacities;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) capacities.push_back(scheduler_.Capacity(r));
  if (PlaceBundles(bundles, options.strategy, capacities, node_of_rank_).empty()) {
    std::string listed;
    for (const auto& b : bundles) listed += " " + b.ToString();
    static const char* const kNames[] = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"};
    throw ResourceError("prism: placement group" +
                        (options.name.empty() ? std::string() : " \"" + options.name + "\"") +
                        " can never be placed: bundles" + listed + " with strategy " +
                        kNames[static_cast<int>(options.strategy)] +
                        " do not fit even an idle cluster (" + scheduler_.DescribeInfeasible(bundles[0]) + ")");
  }
  char id[32];
  std::snprintf(id, sizeof id, "pg-%06llx", static_cast<unsigned long long>(++next_group_));
  PgEntry& g = groups_[id];
  g.options = options;
  g.bundles = std::move(bundles);
  pending_groups_.push_back(id);
  PlacePendingGroups();
  DrainQueues();
  return id;
}

void Head::PlacePendingGroups() {
  for (auto it = pending_groups_.begin(); it != pending_groups_.end();) {
    PgEntry& g = groups_.at(*it);
    std::vector<ResourceSet> free;
    for (int r = 0; r < scheduler_.NumRanks(); ++r) free.push_back(scheduler_.Free(r));
    auto ranks = PlaceBundles(g.bundles, g.options.strategy, free, node_of_rank_);
    if (ranks.empty()) {
      ++it;
      continue;
    }
    for (size_t b = 0; b < ranks.size(); ++b) scheduler_.Commit(ranks[b], g.bundles[b]);
    g.ranks = std::move(ranks);
    g.free = g.bundles;
    g.created = true;
    PRISM_LOG_INFO("placement group " << *it << " created");
    it = pending_groups_.erase(it);
  }
}

bool Head::RemovePlacementGroup(const std::string& id) {
  Locked lock(*this);
  auto g = groups_.find(id);
  if (g == groups_.end()) return false;
  std::vector<TaskId> queued;
  for (auto& [task_id, task] : tasks_) {
    if (task.spec->placement_group != id) continue;
    if (task.spec->kind == TaskKind::kActorCreation) continue;  // its actor dies below
    if (task.bundle >= 0) {
      // Still running: from now on it holds its resources as a plain task of its rank.
      ResourceSet held = task.spec->demand;
      if (task.blocked) held.Set("CPU", 0);
      scheduler_.Commit(task.rank, held);
      task.bundle = -1;
    } else if (task.rank < 0) {
      queued.push_back(task_id);
    }
  }
  std::vector<ObjectId> doomed;  // the group's actors (Ray kills them with it)
  for (const auto& [actor_id, actor] : actors_) {
    if (actor.state != ActorEntry::State::kDead && actor.creation->placement_group == id) {
      doomed.push_back(actor_id);
    }
  }
  // The whole reservation goes back at once; what its actors held inside it goes with it.
  if (g->second.created) {
    for (size_t b = 0; b < g->second.ranks.size(); ++b) {
      scheduler_.Release(g->second.ranks[b], g->second.bundles[b]);
    }
  }
  pending_groups_.erase(std::remove(pending_groups_.begin(), pending_groups_.end(), id),
                        pending_groups_.end());
  groups_.erase(g);
  const std::string cause = "its placement group " + id + " was removed";
  for (ObjectId actor_id : doomed) {
    ActorDead(actor_id, cause);
    auto creation = tasks_.find(actor_id);
    if (creation != tasks_.end() && creation->second.rank < 0) {
      FailTask(actor_id, ErrorInfo::Of(ErrorKind::kActorError, cause, creation->second.spec->name, -1));
    }
  }
  for (TaskId t : queued) {
    auto it = tasks_.find(t);
    if (it == tasks_.end()) continue;
    FailTask(t, ErrorInfo::Of(ErrorKind::kPlacementGroupRemoved, "placement group " + id + " was removed before the task ran",
                 it->second.spec->name, -1));
  }
  DrainQueues();
  return true;
}

PlacementGroupStatus Head::PlacementGroupState(const std::string& id) {
  Locked lock(*this);
  auto g = groups_.find(id);
  if (g == groups_.end()) return PlacementGroupStatus::kUnknown;
  return g->second.created ? PlacementGroupStatus::kCreated : PlacementGroupStatus::kPending;
}

std::vector<PlacementGroup> Head::PlacementGroups(const std::string& name, const std::string& id) {
  Locked lock(*this);
  std::vector<PlacementGroup> out;
  for (const auto& [gid, g] : groups_) {
    if (!name.empty() && g.options.name != name) continue;
    if (!id.empty() && gid != id) continue;
    out.emplace_back(gid, g.options);
  }
  return out;
}

std::vector<int> Head::BundleRanks(const std::string& id) {
  Locked lock(*this);
  auto g = groups_.find(id);
  return g == groups_.end() ? std::vector<int>{} : g->second.ranks;
}

}  // namespace prism::internal

namespace prism::internal {

// ---- Actors ----------------------------------------------------------------------------

int Head::PickActorRank(const ResourceSet& demand) {
  // Spread actors: the rank with the fewest, among those with room.
  int best = -1;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) {
    ResourceSet after = scheduler_.Committed(r);
    after.Add(demand);
    if (!after.FitsIn(scheduler_.Capacity(r))) continue;
    if (best < 0 || actors_per_rank_[r] < actors_per_rank_[best]) best = r;
  }
  return best;
}

void Head::RouteActorCall(TaskEntry& task) {
  const TaskSpec& spec = *task.spec;
  auto a = actors_.find(spec.actor);
  if (a == actors_.end() || a->second.state == ActorEntry::State::kDead) {
    std::string cause = a == actors_.end() ? "actor " + spec.actor.Hex() + " is unknown (dead)"
                                           : a->second.cause;
    FailTask(spec.id, ErrorInfo::Of(ErrorKind::kActorError, cause, spec.name, -1));
    return;
  }
  DispatchTask out;
  for (const auto& arg : spec.args) {
    // Not ready yet: the actor's node asks for it itself, in call order.
    if (arg.is_ref) out.refs.push_back(ArgLocationOf(arg.ref, objects_.Find(arg.ref)));
  }
  out.spec = task.spec;
  ActorEntry& actor = a->second;
  if (actor.rank < 0) {
    actor.waiting_calls.push_back(std::move(out));
    return;
  }
  task.rank = actor.rank;
  task.times[static_cast<size_t>(TaskPhase::kSubmitted)] = task.times[0];
  send_(actor.rank, std::move(out));
}

void Head::OnKillRequest(const KillActorRequest& m) {
  auto a = actors_.find(m.actor);
  if (a == actors_.end() || a->second.state == ActorEntry::State::kDead) return;
  ActorEntry& actor = a->second;
  if (!m.no_restart && actor.restarts < actor.creation->max_restarts && actor.rank >= 0) {
    ++actor.restarts;
    actor.state = ActorEntry::State::kRestarting;
    PRISM_LOG_INFO("restarting actor " << m.actor.Hex() << " (" << actor.restarts << "/"
                                       << actor.creation->max_restarts << ")");
    send_(actor.rank, KillActor{m.actor, /*restart=*/true, "the actor was killed and is restarting"});
    DispatchTask again;
    again.spec = actor.creation;
    send_(actor.rank, std::move(again));
    return;
  }
  auto t = tasks_.find(m.actor);
  if (t != tasks_.end() && t->second.rank < 0) {  // creation not placed yet
    ActorDead(m.actor, "killed by ActorHandle::Kill() before it started");
    FailTask(m.actor, ErrorInfo::Of(ErrorKind::kActorError, "killed before it started", actor.creation->name, -1));
    return;
  }
  ActorDead(m.actor, "killed by ActorHandle::Kill()");
}

void Head::ActorDead(ObjectId id, const std::string& cause) {
  auto a = actors_.find(id);
  if (a == actors_.end() || a->second.state == ActorEntry::State::kDead) return;
  ActorEntry& actor = a->second;
  actor.state = ActorEntry::State::kDead;
  actor.cause = cause;
  RecordError("ACTOR_DIED", "actor " + id.Hex() + (actor.name.empty() ? "" : " (\"" + actor.name + "\")") +
                                " died: " + cause,
              id, actor.rank);
  if (actor.rank >= 0) {
    send_(actor.rank, KillActor{id, /*restart=*/false, cause});
    // Give back what the live actor held (a failed creation gave it back already).
    TaskEntry holder;
    holder.spec = actor.creation;
    holder.rank = actor.rank;
    holder.bundle = actor.bundle;
    AdjustHeld(holder, actor.creation->demand, /*release=*/true);
    --actors_per_rank_[actor.rank];
  }
  for (auto& call : actor.waiting_calls) {
    FailTask(call.spec->id, ErrorInfo::Of(ErrorKind::kActorError, cause, call.spec->name, -1));
  }
  actor.waiting_calls.clear();
  if (!actor.name.empty()) {
    actor_names_.erase(actor.name);
    std::vector<FreedObject> freed;
    objects_.RemoveHolder(id, -1, freed);
    SendFrees(freed);
  }
  DrainQueues();
}

}  // namespace prism::internal
