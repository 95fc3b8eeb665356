#include "head/task_manager.h"

#include <algorithm>

#include "common/log.h"
#include "head/actor_manager.h"
#include "head/memory_return.h"

namespace prism::internal {

std::string ClassKey(const TaskOptions& o) {
  std::string key = o.function;
  if (!o.placement_group.empty()) {
    key += "|pg=" + o.placement_group + "/" + std::to_string(o.bundle_index);
  }
  if (o.strategy.kind != SchedulingStrategy::Kind::kDefault) {
    key += "|strategy=" + std::to_string(static_cast<int>(o.strategy.kind)) + "/" +
           std::to_string(o.strategy.rank) + (o.strategy.soft ? "s" : "");
  }
  for (const auto& [name, units] : o.demand.Entries()) {
    key += '|';
    key += name;
    key += '=';
    key += std::to_string(units);
  }
  return key;
}

bool SameClass(const TaskOptions& a, const TaskOptions& b) {
  // Without a group the bundle index is not part of the key; without a strategy, its
  // rank and softness are not.
  const bool same_group = a.placement_group == b.placement_group &&
                          (a.placement_group.empty() || a.bundle_index == b.bundle_index);
  const bool same_strategy =
      a.strategy.kind == b.strategy.kind &&
      (a.strategy.kind == SchedulingStrategy::Kind::kDefault ||
       (a.strategy.rank == b.strategy.rank && a.strategy.soft == b.strategy.soft));
  return a.function == b.function && a.demand == b.demand && same_group && same_strategy;
}

void TaskManager::OnSubmit(int from, std::shared_ptr<TaskSpec> spec) {
  TaskId id = spec->id;
  // A plain task's or actor call's one result stays implicit (no entry) until it is looked
  // up or the task ends: a queued task's result costs the head nothing.
  const bool implicit = spec->num_returns == 1 && from == spec->submitter &&
                        !spec->options->streaming && spec->kind != TaskKind::kActorCreation;
  if (implicit) {
    objects_.AddImplicitResult();
  } else {
    for (int i = 0; i < spec->num_returns; ++i) objects_.CreateResult(ReturnId(id, i), from);
  }
  if (spec->options->streaming) generators_.emplace(id, Generator{});
  for (ObjectId c : spec->contained) objects_.AddTaskUse(c);
  Task& task = tasks_[id];
  task.spec = std::move(spec);
  task.implicit_result = implicit;
  const int64_t now = WallNowNs();
  task.times[static_cast<size_t>(TaskPhase::kPendingArgs)] = now;
  // Count every use first: however the task ends, Complete drops exactly these.
  for (const auto& arg : task.spec->args) {
    if (arg.is_ref) objects_.AddTaskUse(arg.ref);
  }
  if (task.spec->kind == TaskKind::kActorCall) {
    // Calls never wait here: the actor's node resolves their arguments, in call order.
    RouteActorCall(task);
    return;
  }
  if (!WaitForArgs(task)) return;
  if (task.spec->kind == TaskKind::kActorCreation) {
    ErrorInfo error;
    if (!actors_.OnCreationSubmitted(task.spec, &error)) {
      Fail(id, error);
      return;
    }
  }
  if (!task.spec->options->placement_group.empty()) {
    std::string bad = groups_.CheckTask(*task.spec);
    if (!bad.empty()) {
      Fail(id, ErrorInfo::Of(ErrorKind::kResourceError, std::move(bad), task.spec->options->name));
      return;
    }
  }
  if (ranks_lost_) {
    // The submitting node checked against every rank's capacity, lost ones included.
    std::string why = NeverPlaceable(*task.spec->options);
    if (!why.empty()) {
      const std::string what = (task.spec->kind == TaskKind::kActorCreation ? "actor " : "task ") +
                               task.spec->options->name + " can never run: " + why;
      if (task.spec->kind == TaskKind::kActorCreation) actors_.ActorDead(id, what);
      Fail(id, ErrorInfo::Of(ErrorKind::kResourceError, what, task.spec->options->name));
      return;
    }
  }
  if (task.unresolved == 0) Enqueue(id, now);
}

bool TaskManager::WaitForArgs(Task& task) {
  const TaskId id = task.spec->id;
  std::vector<ObjectId> seen;
  for (const auto& arg : task.spec->args) {
    if (!arg.is_ref) continue;
    ObjectEntry* e = objects_.Find(arg.ref);
    if (e == nullptr) {
      Fail(id, LostError(arg.ref, task.spec->options->name));
      return false;
    }
    if (e->state == ObjectEntry::State::kFailed) {
      Fail(id, *e->error());
      return false;
    }
    if (e->state == ObjectEntry::State::kPending &&
        std::find(seen.begin(), seen.end(), arg.ref) == seen.end()) {
      e->More().dependents.push_back(id);
      ++task.unresolved;
      seen.push_back(arg.ref);
    }
  }
  return true;
}

void TaskManager::Rebuild(const std::shared_ptr<const TaskSpec>& lineage, int lost_rank) {
  if (tasks_.count(lineage->id) > 0) return;  // running already
  auto spec = std::make_shared<TaskSpec>(*lineage);
  ++spec->attempt;
  PRISM_LOG_WARN("rebuilding the result of task " << spec->options->name << ": its only copy was on lost rank "
                                                  << lost_rank << "; run " << spec->attempt << "/"
                                                  << spec->options->max_retries << " of its retries");
  Task& task = tasks_[spec->id];
  task.spec = std::move(spec);
  const int64_t now = WallNowNs();
  task.times[static_cast<size_t>(TaskPhase::kPendingArgs)] = now;
  // The uses Complete drops again; the results are pending (the object manager reset them).
  for (ObjectId c : task.spec->contained) objects_.AddTaskUse(c);
  for (const auto& arg : task.spec->args) {
    if (arg.is_ref) objects_.AddTaskUse(arg.ref);
  }
  if (!WaitForArgs(task)) return;
  if (task.unresolved == 0) Enqueue(task.spec->id, now);
}

void TaskManager::RouteActorCall(Task& task) {
  const TaskSpec& spec = *task.spec;
  ActorManager::Route route = actors_.RouteCall(spec.actor);
  if (route.result == ActorManager::Route::kFailed) {
    Fail(spec.id, ErrorInfo::Of(ErrorKind::kActorError, route.cause, spec.options->name));
    return;
  }
  DispatchTask out;
  for (const auto& arg : spec.args) {
    // Not ready yet: the actor's node asks for it itself, in call order.
    if (arg.is_ref) out.refs.push_back(objects_.LocationOf(arg.ref));
  }
  out.spec = task.spec;
  if (route.result == ActorManager::Route::kWaiting) {
    actors_.AddWaitingCall(spec.actor, std::move(out));
    return;
  }
  task.rank = route.rank;
  task.times[static_cast<size_t>(TaskPhase::kSubmitted)] = task.times[0];
  send_(route.rank, std::move(out));
}

std::deque<TaskId>& TaskManager::QueueOf(const TaskSpec& spec) {
  const TaskOptions& o = *spec.options;
  const TaskOptions* last = last_class_.get();
  // Tasks of one caller share their options: the same pointer is the same class.
  const bool same = last != nullptr && (last == &o || SameClass(o, *last));
  if (!same) last_queue_ = &queues_[ClassKey(o)];
  last_class_ = spec.options;
  return *last_queue_;
}

void TaskManager::Enqueue(TaskId id, int64_t now) {
  Task& task = tasks_.at(id);
  if (now == 0) now = WallNowNs();
  task.times[static_cast<size_t>(TaskPhase::kPendingNode)] = now;
  if (queued_ == 0 && TryDispatch(task, now)) return;  // common case: nothing ahead of it
  std::deque<TaskId>& queue = QueueOf(*task.spec);
  if (queue.empty() && TryDispatch(task, now)) return;
  queue.push_back(id);
  ++queued_;
}

bool TaskManager::TryDispatch(Task& task, int64_t now) {
  const TaskSpec& spec = *task.spec;
  DispatchTask out;
  std::vector<uint64_t> bytes_on_rank;
  for (const auto& arg : spec.args) {
    if (!arg.is_ref) continue;
    objects_.AddBytesOnRanks(arg.ref, bytes_on_rank, scheduler_.NumRanks());
    out.refs.push_back(objects_.LocationOf(arg.ref));
  }
  if (!spec.options->placement_group.empty()) {
    auto reserved = groups_.Reserve(spec);
    if (reserved.result == PlacementGroupManager::Reservation::kWait) return false;
    if (reserved.result == PlacementGroupManager::Reservation::kGone) {
      Fail(spec.id, ErrorInfo::Of(ErrorKind::kPlacementGroupRemoved,
                                  "placement group " + spec.options->placement_group + " was removed", spec.options->name));
      return true;  // handled: the task is gone
    }
    task.bundle = reserved.bundle;
    task.rank = reserved.rank;
  } else {
    int rank = spec.kind == TaskKind::kActorCreation
                   ? actors_.PickRank(spec.options->demand, spec.options->strategy)
                   : scheduler_.Place(spec.options->function, spec.options->demand, spec.submitter, bytes_on_rank, spec.options->strategy);
    if (rank < 0) return false;
    scheduler_.Commit(rank, spec.options->demand);
    task.rank = rank;
  }
  out.spec = task.spec;
  send_(task.rank, std::move(out));
  if (now == 0) now = WallNowNs();
  task.times[static_cast<size_t>(TaskPhase::kSubmitted)] = now;
  if (spec.kind == TaskKind::kActorCreation) SendWaitingCalls(spec.id, task.rank, task.bundle, now);
  return true;
}

void TaskManager::SendWaitingCalls(ObjectId actor, int rank, int bundle, int64_t now) {
  // The creation is on its way: calls that waited for a rank follow it, in order.
  for (auto& call : actors_.OnCreationPlaced(actor, rank, bundle)) {
    auto c = tasks_.find(call.spec->id);
    if (c == tasks_.end()) continue;  // cancelled while it waited
    c->second.rank = rank;
    c->second.times[static_cast<size_t>(TaskPhase::kSubmitted)] = now;
    send_(rank, std::move(call));
  }
}

void TaskManager::PlaceRestarts() {
  // An actor's end below drains the queues again: the outer loop places what is left.
  if (placing_restarts_) return;
  placing_restarts_ = true;
  for (const std::shared_ptr<TaskSpec>& creation : actors_.RestartsToPlace()) {
    const TaskOptions& o = *creation->options;
    const std::string impossible = NeverPlaceable(o);
    if (!impossible.empty()) {
      actors_.ActorDead(creation->id, "it could not restart after its rank was lost: " + impossible);
      continue;
    }
    const int rank = actors_.PickRank(o.demand, o.strategy);
    if (rank < 0) continue;  // waits for room, like a new actor
    scheduler_.Commit(rank, o.demand);
    DispatchTask again;
    again.spec = creation;
    send_(rank, std::move(again));  // its TaskDone comes to OnRestartDone
    SendWaitingCalls(creation->id, rank, -1, WallNowNs());
  }
  placing_restarts_ = false;
}

std::string TaskManager::NeverPlaceable(const TaskOptions& o) const {
  const SchedulingStrategy& s = o.strategy;
  if (s.kind == SchedulingStrategy::Kind::kNodeAffinity && !s.soft && s.rank >= 0 &&
      s.rank < scheduler_.NumRanks() && scheduler_.IsLost(s.rank)) {
    return "it is pinned to rank " + std::to_string(s.rank) + " (NodeAffinitySchedulingStrategy, soft=false)";
  }
  // A placement group's bundles decide where its tasks go, not the ranks' capacities.
  if (o.placement_group.empty() && !scheduler_.Feasible(o.demand)) {
    return "no live rank can host it: " + scheduler_.DescribeInfeasible(o.demand);
  }
  return "";
}

void TaskManager::DrainQueues() {
  groups_.PlacePending();
  if (actors_.HasRestartsToPlace()) PlaceRestarts();
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

namespace {

/// "rank 0 has {CPU: 2}, held by actor A {CPU: 1}, actor B {CPU: 1}; rank 1 ...": the ranks
/// whose capacity could hold `demand` (only `pinned` if >= 0), and what holds them for good.
std::string DescribeLastingHolds(const Scheduler& scheduler, const std::vector<LastingHold>& lasting,
                                 const ResourceSet& demand, int pinned) {
  std::string out;
  int ranks_shown = 0;
  for (int r = 0; r < scheduler.NumRanks(); ++r) {
    if ((pinned >= 0 && r != pinned) || !demand.FitsIn(scheduler.Capacity(r))) continue;
    if (++ranks_shown > 3) {
      out += "; ...";
      break;
    }
    ResourceSet wanted;  // the rank's capacity of what the task asks for
    for (const auto& [name, units] : demand.Entries()) wanted.Set(name, scheduler.Capacity(r).Get(name));
    out += (out.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " has " + wanted.ToString() +
           ", held by";
    int shown = 0, more = 0;
    for (const auto& hold : lasting) {
      if (hold.rank != r) continue;
      if (++shown > 4) {
        ++more;
        continue;
      }
      out += (shown > 1 ? ", " : " ") + hold.by + " " + hold.amount.ToString();
    }
    if (shown == 0) out += " nothing that lasts";
    if (more > 0) out += " and " + std::to_string(more) + " more";
  }
  return out;
}

}  // namespace

std::vector<std::string> TaskManager::WaitingWarnings(int64_t now, int64_t bound_ns) {
  std::vector<std::string> out;
  if (bound_ns <= 0) return out;
  // What only an actor's end or a group's removal frees, and per rank what is left besides.
  std::vector<LastingHold> lasting = actors_.Holds();
  for (auto& hold : groups_.Reservations()) lasting.push_back(std::move(hold));
  std::vector<ResourceSet> open;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) open.push_back(scheduler_.Capacity(r));
  for (const auto& hold : lasting) open[static_cast<size_t>(hold.rank)].Subtract(hold.amount);

  // Each kind of waiting task once: its oldest, how long, and how many more.
  struct Waiting {
    const TaskOptions* options = nullptr;
    int64_t waited = 0;
    size_t count = 0;
    int pinned = -1;
  };
  std::map<std::string, Waiting> waiting;
  auto note = [&](const std::string& key, const TaskOptions& o, int64_t waited, size_t count, int pinned) {
    Waiting& w = waiting[key];
    if (waited > w.waited) {
      w.options = &o;
      w.waited = waited;
      w.pinned = pinned;
    }
    w.count += count;
  };
  // Queued at the head: no rank has room now. Cannot come free if, with every running task
  // ended, it still fits on no rank it may run on.
  for (auto& [key, queue] : queues_) {
    if (queue.empty()) continue;
    auto it = tasks_.find(queue.front());
    if (it == tasks_.end()) continue;  // failed while queued: DrainQueues drops it
    const TaskOptions& o = *it->second.spec->options;
    if (!o.placement_group.empty()) continue;  // its bundle's own tasks free it as they end
    const bool hard = o.strategy.kind == SchedulingStrategy::Kind::kNodeAffinity && !o.strategy.soft &&
                      o.strategy.rank >= 0 && o.strategy.rank < scheduler_.NumRanks();
    bool could_free = false;
    for (int r = 0; r < scheduler_.NumRanks() && !could_free; ++r) {
      could_free = (!hard || r == o.strategy.rank) && o.demand.FitsIn(open[static_cast<size_t>(r)]);
    }
    if (could_free) continue;
    const int64_t waited = now - it->second.times[static_cast<size_t>(TaskPhase::kPendingNode)];
    if (waited >= bound_ns) note("queued " + key, o, waited, queue.size(), hard ? o.strategy.rank : -1);
  }
  // Sent ahead to a rank (pipelined short tasks) whose lasting holds leave it no room: it
  // waits in that rank's queue, and cannot be running.
  if (!lasting.empty()) {
    for (const auto& [id, task] : tasks_) {
      const TaskSpec& spec = *task.spec;
      if (task.rank < 0 || task.blocked || spec.kind != TaskKind::kTask ||
          !spec.options->placement_group.empty() ||
          spec.options->demand.FitsIn(open[static_cast<size_t>(task.rank)])) {
        continue;
      }
      const int64_t waited = now - task.times[static_cast<size_t>(TaskPhase::kSubmitted)];
      if (waited >= bound_ns) {
        note("on rank " + std::to_string(task.rank) + " " + ClassKey(*spec.options), *spec.options, waited, 1,
             task.rank);
      }
    }
  }

  std::map<std::string, int64_t> next;  // kinds still waiting: when each warns again
  for (const auto& [key, w] : waiting) {
    const auto before = next_warning_.find(key);
    const int64_t due = before == next_warning_.end() ? bound_ns : before->second;
    next[key] = due;
    if (w.waited < due) continue;
    next[key] = std::max(due * 2, w.waited * 2);
    const TaskOptions& o = *w.options;
    out.push_back("task " + o.name +
                  (w.count > 1 ? " (and " + std::to_string(w.count - 1) + " more like it)" : "") +
                  " has waited " + std::to_string(w.waited / 1'000'000'000) + " s for " + o.demand.ToString() +
                  ", which no rank can free while its actors and placement groups live: " +
                  DescribeLastingHolds(scheduler_, lasting, o.demand, w.pinned) +
                  ". An actor holds its resources until it ends (kill it, or drop every handle to it); "
                  "a placement group until it is removed. Give actors fewer (Ray's default for an actor "
                  "is 0 CPUs), remove what is no longer used, or start more ranks");
  }
  next_warning_ = std::move(next);
  return out;
}

void TaskManager::OnTaskDone(int from, TaskDone&& done) {
  auto it = tasks_.find(done.id);
  if (it == tasks_.end()) {
    // A restarted actor's creation (its first one completed long ago).
    actors_.OnRestartDone(done.id, done);
    return;
  }
  if (it->second.spec->attempt != done.attempt) return;
  Task& task = it->second;
  if (task.cancelled) {
    // Cancelled while it ran: its result is the cancellation however it ended (Ray), and
    // it is not retried. A large result it stored on its rank is not the object's value.
    if (done.ok && !done.inline_value && done.size > 0) send_(from, FreeObjects{{done.id}});
    done.ok = false;
    done.inline_value.reset();
    done.contained.clear();
    done.error = cancel_errors_.at(done.id);
  }
  const ResourceSet* held = &task.spec->options->demand;
  ResourceSet unblocked;  // a task blocked in Get gave its CPU back already
  if (task.blocked) {
    unblocked = *held;
    unblocked.Set("CPU", 0);
    held = &unblocked;
  }
  // An actor call runs with what its actor holds: it holds nothing itself.
  bool release = task.spec->kind != TaskKind::kActorCall;
  if (task.spec->kind == TaskKind::kActorCreation) {
    release = actors_.OnCreationDone(done.id, done, *task.spec);
  }
  if (release) groups_.Release(task.holding(), *held);
  task.bundle = -1;
  scheduler_.RecordRunTime(task.spec->options->function, done.exec_ns);
  auto generator = generators_.find(done.id);
  if (generator != generators_.end() && done.ok && !generator->second.dropped &&
      generator->second.attempt_yielded < generator->second.reported) {
    // Ray's StreamingGeneratorReplayInconsistentError: the consumer would wait for values
    // this attempt never yields.
    done.ok = false;
    done.error = ErrorInfo::Exception(
        "prism::Error",
        "streaming generator " + task.spec->options->name + " yielded " +
            std::to_string(generator->second.attempt_yielded) + " values when retried, fewer than the " +
            std::to_string(generator->second.reported) +
            " it reported before it failed: a retried generator must yield the same values again",
        task.spec->options->name, from);
  }
  if (!done.ok && task.spec->kind == TaskKind::kActorCall && done.error.kind == ErrorKind::kActorError &&
      actors_.RetryCall(task.spec->actor, task.spec->attempt)) {
    // The actor restarted under this call: send it again, to the new incarnation
    // (max_task_retries). It follows the restart's creation to the actor's rank.
    task.spec = std::make_shared<TaskSpec>(*task.spec);  // the old one may still be in flight
    ++task.spec->attempt;
    PRISM_LOG_INFO("actor call " << task.spec->options->name << " failed by a restart; retry " << task.spec->attempt);
    task.rank = -1;
    RouteActorCall(task);
  } else if (!done.ok && !task.cancelled &&
             (task.spec->options->retry_exceptions || done.error.kind == ErrorKind::kWorkerCrashed) &&
             task.spec->attempt < task.spec->options->max_retries) {
    if (generator != generators_.end()) {
      // The new attempt replays from its first value: the head drops what was reported.
      generator->second.attempt_yielded = 0;
      generator->second.acked = 0;
    }
    task.spec = std::make_shared<TaskSpec>(*task.spec);  // the old one may still be in flight
    ++task.spec->attempt;
    PRISM_LOG_WARN("task " << task.spec->options->name << " failed on rank " << from << " ("
                            << done.error.RenderText() << "); retry " << task.spec->attempt << "/"
                            << task.spec->options->max_retries);
    task.rank = -1;
    task.blocked = false;
    task.times[static_cast<size_t>(TaskPhase::kBlocked)] = 0;
    Enqueue(done.id);
  } else {
    Complete(done.id, std::move(done), from);
  }
  DrainQueues();
}

void TaskManager::OnRankLost(int rank, const std::string& why) {
  ranks_lost_ = true;
  std::vector<std::pair<TaskId, int>> there;  // id, attempt
  for (const auto& [id, task] : tasks_) {
    if (task.rank == rank) there.emplace_back(id, task.spec->attempt);
  }
  std::sort(there.begin(), there.end());  // retried in a stable order
  const std::string cause = "its rank " + std::to_string(rank) + " was lost (" + why + ")";
  for (const auto& [id, attempt] : there) {
    auto it = tasks_.find(id);
    if (it == tasks_.end()) continue;  // ended by an earlier one's completion
    const TaskSpec& spec = *it->second.spec;
    TaskDone done;
    done.id = id;
    done.attempt = attempt;
    done.ok = false;
    done.error = spec.kind == TaskKind::kActorCall
                     ? ErrorInfo::Of(ErrorKind::kActorError, "the actor died: " + cause, spec.options->name, rank)
                     : ErrorInfo::Of(ErrorKind::kWorkerCrashed, "task " + spec.options->name + " ended: " + cause,
                                     spec.options->name, rank);
    OnTaskDone(rank, std::move(done));
  }
  // Queued tasks that only the lost rank could have run (its resources, a hard affinity)
  // would wait for ever: they fail, saying so.
  std::vector<std::pair<TaskId, std::string>> stranded;  // id, why
  for (const auto& [key, queue] : queues_) {
    for (TaskId id : queue) {
      auto it = tasks_.find(id);
      if (it == tasks_.end()) continue;
      std::string why = NeverPlaceable(*it->second.spec->options);
      if (!why.empty()) stranded.emplace_back(id, std::move(why));
    }
  }
  for (const auto& [id, why] : stranded) {
    const TaskOptions& o = *tasks_.at(id).spec->options;
    Fail(id, ErrorInfo::Of(ErrorKind::kResourceError, "task " + o.name + " can no longer run (" + cause + "): " + why,
                           o.name, rank));
  }
}

void TaskManager::Complete(TaskId id, TaskDone&& done, int from) {
  FreedList freed;
  std::vector<TaskId> failed_dependents;
  std::shared_ptr<ErrorInfo> failure;
  if (!done.ok) failure = std::make_shared<ErrorInfo>(std::move(done.error));
  {
    auto node = tasks_.extract(id);
    if (node.mapped().cancelled) cancel_errors_.erase(id);
    ShrinkIfSparse(tasks_);  // no iterator into tasks_ is held across Complete
    const TaskSpec& spec = *node.mapped().spec;
    if (node.mapped().implicit_result) objects_.ClaimResult(id, spec.submitter);
    RecordEnded(node.mapped(), done, failure, from);
    if (failure && objects_.Unreferenced(id) &&
        (failure->kind == ErrorKind::kTaskException || failure->kind == ErrorKind::kWorkerCrashed)) {
      // Nobody will ever read this failure (Ray's "unhandled error"): say it, or it is lost.
      PRISM_LOG_WARN("unhandled error: task " << spec.options->name << " failed and every ObjectRef to its "
                     "result was dropped, so nothing will read it: " << failure->RenderText());
    }
    if (auto g = generators_.find(id); g != generators_.end()) {
      // After every value (they were sent before): the end, with the error if it failed.
      if (!g->second.dropped) {
        GeneratorReport end;
        end.task = id;
        end.index = g->second.reported;
        end.end = true;
        end.failed = failure != nullptr;
        if (failure) end.error = *failure;
        send_(spec.submitter, std::move(end));
      }
      generators_.erase(g);
    }
    auto wake = [&](std::vector<TaskId> dependents) {
      for (TaskId dep : dependents) {
        auto dit = tasks_.find(dep);
        if (dit == tasks_.end()) continue;
        if (failure) {
          failed_dependents.push_back(dep);
        } else if (--dit->second.unresolved == 0) {
          Enqueue(dep);
        }
      }
    };
    wake(objects_.Resolve(id, done, failure, from, spec.submitter));
    for (int i = 1; i < spec.num_returns; ++i) {
      // SetNumReturns: each value is an object of its own; a failure fails them all.
      TaskDone part;
      part.ok = done.ok;
      const size_t extra = static_cast<size_t>(i - 1);
      if (done.ok && extra < done.more_returns.size()) {
        ReturnValue& r = done.more_returns[extra];
        part.inline_value = std::move(r.inline_value);
        part.size = r.size;
        part.contained = std::move(r.contained);
      }
      wake(objects_.Resolve(ReturnId(id, i), part, failure, from, spec.submitter));
    }
    if (keep_lineage_ && done.ok && from > 0 && spec.kind == TaskKind::kTask && !spec.options->streaming) {
      // Recovery mode: a value on a worker rank can be made again if that rank is lost.
      for (int i = 0; i < spec.num_returns; ++i) objects_.KeepLineage(ReturnId(id, i), node.mapped().spec);
    }
    for (const auto& arg : spec.args) {
      if (arg.is_ref) objects_.RemoveTaskUse(arg.ref, freed);
    }
    for (ObjectId c : spec.contained) objects_.RemoveTaskUse(c, freed);
    for (int i = 0; i < spec.num_returns; ++i) objects_.ProducerDone(ReturnId(id, i), freed);
  }
  for (TaskId dep : failed_dependents) Fail(dep, *failure);
  objects_.Free(freed);
}

void TaskManager::RecordEnded(const Task& task, const TaskDone& done,
                              const std::shared_ptr<ErrorInfo>& failure, int from) {
  const TaskSpec& spec = *task.spec;
  TaskRecord r;
  r.id = spec.id;
  r.kind = spec.kind;
  r.phase = done.ok ? TaskPhase::kFinished : TaskPhase::kFailed;
  r.actor = spec.kind == TaskKind::kActorCall ? spec.actor : ObjectId();
  if (spec.kind == TaskKind::kActorCreation) r.actor = spec.id;
  r.function = &spec.options->function;  // TaskTable::Ended interns it
  if (spec.options->name != spec.options->function) r.name = spec.options->name;
  r.placement_group = spec.options->placement_group;
  r.rank = from >= 0 ? from : task.rank;
  r.attempt = spec.attempt;
  r.times = AllTimes(task.times);
  const int64_t now = WallNowNs();
  r.times[static_cast<size_t>(r.phase)] = now;
  if (done.exec_ns > 0) r.times[static_cast<size_t>(TaskPhase::kRunning)] = now - done.exec_ns;
  r.error = failure;
  tables_.TaskEnded(std::move(r), from);
}

int TaskManager::ClaimResult(ObjectId id) {
  auto it = tasks_.find(id);  // an implicit result's id is its task's
  if (it == tasks_.end() || !it->second.implicit_result) return -1;
  it->second.implicit_result = false;
  return it->second.spec->submitter;
}

void TaskManager::Fail(TaskId id, const ErrorInfo& error) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return;
  TaskDone done;
  done.id = id;
  done.ok = false;
  done.error = error;
  Complete(id, std::move(done), -1);
}

void TaskManager::OnGeneratorItem(int from, GeneratorItem&& item) {
  // A value nobody will take: a large one is dropped from the producer's store.
  auto discard = [&] {
    if (!item.inline_value) send_(from, FreeObjects{{item.item}});
  };
  auto t = tasks_.find(item.task);
  auto g = generators_.find(item.task);
  if (t == tasks_.end() || g == generators_.end() || t->second.spec->attempt != item.attempt) {
    discard();
    return;
  }
  const TaskSpec& spec = *t->second.spec;
  Generator& gen = g->second;
  gen.attempt_yielded = std::max(gen.attempt_yielded, item.index + 1);
  if (gen.dropped) {
    discard();
    send_(from, GeneratorAck{item.task, gen.consumed, true});
    return;
  }
  if (item.index == gen.reported) {
    objects_.AddStreamValue(item.item, spec.submitter, from, item.inline_value, item.size,
                            std::move(item.contained));
    GeneratorReport report;
    report.task = item.task;
    report.index = item.index;
    report.item = item.item;
    report.inline_value = std::move(item.inline_value);
    report.size = item.size;
    ++gen.reported;
    send_(spec.submitter, std::move(report));
  } else {
    // A retry replaying a value reported before (Ray's semantics: skip it).
    if (item.index > gen.reported) {
      PRISM_LOG_ERROR("generator " << spec.options->name << " sent value " << item.index << " after "
                                   << gen.reported << "; dropped");
    }
    discard();
  }
  AckIfWaiting(item.task, spec, gen, from);
}

void TaskManager::OnGeneratorConsumed(int /*from*/, const GeneratorConsumed& m) {
  auto g = generators_.find(m.task);
  if (g == generators_.end()) return;  // ended meanwhile
  Generator& gen = g->second;
  gen.consumed = std::max(gen.consumed, m.consumed);
  auto t = tasks_.find(m.task);
  const int rank = t == tasks_.end() ? -1 : t->second.rank;
  if (m.dropped) {
    gen.dropped = true;
    // Not running yet: its first value hears it instead.
    if (rank >= 0) send_(rank, GeneratorAck{m.task, gen.consumed, true});
    return;
  }
  if (t != tasks_.end()) AckIfWaiting(m.task, *t->second.spec, gen, rank);
}

void TaskManager::AckIfWaiting(TaskId id, const TaskSpec& spec, Generator& g, int rank) {
  const uint64_t limit = spec.options->generator_backpressure;
  if (limit == 0 || rank < 0 || g.consumed <= g.acked) return;
  if (g.attempt_yielded < g.acked + limit) return;  // it is not waiting for this
  g.acked = g.consumed;
  send_(rank, GeneratorAck{id, g.consumed, false});
}

void TaskManager::OnTaskBlocked(int from, const TaskBlocked& m) {
  auto it = tasks_.find(m.id);
  if (it == tasks_.end() || it->second.rank < 0 || it->second.blocked == m.blocked) return;
  Task& task = it->second;
  ResourceSet cpu;
  cpu.Set("CPU", task.spec->options->demand.Get("CPU"));
  task.blocked = m.blocked;
  task.times[static_cast<size_t>(TaskPhase::kBlocked)] = m.blocked ? WallNowNs() : 0;
  if (m.blocked) {
    groups_.Release(task.holding(), cpu);
    DrainQueues();
  } else {
    groups_.Take(task.holding(), cpu);
  }
}

void TaskManager::OnCancel(const CancelTask& m) {
  auto it = tasks_.find(m.id);
  if (it == tasks_.end()) return;  // finished (or a Put object): nothing to cancel, as Ray
  const TaskSpec& spec = *it->second.spec;
  std::string why = m.timeout_ms > 0 ? "task " + spec.options->name + " timed out: not finished " +
                                           std::to_string(m.timeout_ms) +
                                           " ms after it was submitted (SetTimeout), so it was cancelled"
                                     : "task " + spec.options->name + " was cancelled (prism::Cancel)";
  Cancel(m.id, m.recursive, ErrorInfo::Of(ErrorKind::kTaskCancelled, std::move(why), spec.options->name, it->second.rank));
}

void TaskManager::Cancel(TaskId id, bool recursive, const ErrorInfo& error) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return;
  Task& task = it->second;
  const TaskSpec& spec = *task.spec;
  if (spec.kind == TaskKind::kActorCreation) {
    // An actor ends with Kill, not Cancel (Ray refuses too); users never hold its ref.
    PRISM_LOG_DEBUG("cancel of actor creation " << spec.options->name << " ignored");
    return;
  }
  std::vector<TaskId> children;
  if (recursive) {
    // Rare: a scan over the live tasks beats keeping a child list for every task.
    for (const auto& [child_id, child] : tasks_) {
      if (child.spec->parent == id) children.push_back(child_id);
    }
  }
  if (task.rank < 0) {
    Fail(id, error);  // waiting for arguments, a rank or its actor: it never runs
  } else {
    if (spec.kind == TaskKind::kTask || spec.kind == TaskKind::kActorCall) {
      task.cancelled = true;
      cancel_errors_.insert_or_assign(id, error);
    }
    send_(task.rank, CancelDispatched{id, spec.kind == TaskKind::kActorCall ? spec.actor : ObjectId(), error});
  }
  for (TaskId child : children) {
    auto c = tasks_.find(child);
    if (c == tasks_.end()) continue;
    ErrorInfo e = error;
    e.task_name = c->second.spec->options->name;
    e.message = "task " + e.task_name + " was cancelled with its parent: " + error.message;
    Cancel(child, true, e);
  }
}

std::string TaskManager::NameOf(TaskId id) const {
  auto it = tasks_.find(id);
  return it == tasks_.end() ? std::string() : it->second.spec->options->name;
}

bool TaskManager::IsWaitingForRank(TaskId id) const {
  auto it = tasks_.find(id);
  return it != tasks_.end() && it->second.rank < 0;
}

std::vector<TaskId> TaskManager::DetachFromGroup(const std::string& group) {
  std::vector<TaskId> queued;
  for (auto& [task_id, task] : tasks_) {
    if (task.spec->options->placement_group != group) continue;
    if (task.spec->kind == TaskKind::kActorCreation) continue;  // its actor dies with the group
    if (task.bundle >= 0) {
      // Still running: from now on it holds its resources as a plain task of its rank.
      ResourceSet held = task.spec->options->demand;
      if (task.blocked) held.Set("CPU", 0);
      scheduler_.Commit(task.rank, held);
      task.bundle = -1;
    } else if (task.rank < 0) {
      queued.push_back(task_id);
    }
  }
  return queued;
}

std::vector<TaskRecord> TaskManager::LiveRecords() {
  std::vector<TaskRecord> out;
  out.reserve(tasks_.size());
  for (const auto& [id, t] : tasks_) {
    const TaskSpec& spec = *t.spec;
    TaskRecord r;
    r.id = id;
    r.kind = spec.kind;
    r.phase = t.unresolved > 0 ? TaskPhase::kPendingArgs
              : t.rank < 0     ? TaskPhase::kPendingNode
              : t.blocked      ? TaskPhase::kBlocked
                               : TaskPhase::kSubmitted;
    r.actor = spec.kind == TaskKind::kActorCall     ? spec.actor
              : spec.kind == TaskKind::kActorCreation ? spec.id
                                                      : ObjectId();
    r.function = tables_.tasks().Intern(spec.options->function);
    if (spec.options->name != spec.options->function) r.name = spec.options->name;
    r.placement_group = spec.options->placement_group;
    r.rank = t.rank;
    r.attempt = spec.attempt;
    r.times = AllTimes(t.times);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace prism::internal
