#include "runtime/head.h"

#include "common/log.h"

namespace prism::internal {

namespace {
ErrorInfo LostError(ObjectId id, const std::string& task_name) {
  return {"ObjectLost",
          "object " + id.Hex() + " is gone: it was freed after its last ObjectRef was dropped",
          task_name, -1};
}
}  // namespace

Head::Head(std::vector<ResourceSet> capacities, SendFn send)
    : send_(std::move(send)), scheduler_(std::move(capacities)) {}

void Head::Handle(int from, Message&& msg) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
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
          if (objects_.Find(m.id) != nullptr) {
            objects_.AddLocation(m.id, from);
          } else {
            // Freed while that copy was in flight: nobody else will ever tell it to go.
            send_(from, FreeObjects{{m.id}});
          }
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
  // Count every use first: however the task ends, Complete drops exactly these.
  for (const auto& arg : task.spec->args) {
    if (arg.is_ref) objects_.AddTaskUse(arg.ref);
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
  if (task.unresolved == 0) Enqueue(id);
}

void Head::Enqueue(TaskId id) {
  TaskEntry& task = tasks_.at(id);
  if (queued_ == 0 && TryDispatch(task)) return;  // common case: nothing ahead of it
  auto key = ClassKey(*task.spec);
  auto it = queues_.find(key);
  if ((it == queues_.end() || it->second.empty()) && TryDispatch(task)) return;
  queues_[key].push_back(id);
  ++queued_;
}

bool Head::TryDispatch(TaskEntry& task) {
  const TaskSpec& spec = *task.spec;
  DispatchTask out;
  std::vector<uint64_t> bytes_on_rank;
  for (const auto& arg : spec.args) {
    if (!arg.is_ref) continue;
    ObjectEntry* e = objects_.Find(arg.ref);
    ArgLocation loc;
    loc.id = arg.ref;
    if (e != nullptr) {
      loc.inline_value = e->inline_value;
      loc.size = e->size;
      if (!e->inline_value) {
        loc.holders = e->locations;
        if (bytes_on_rank.empty()) bytes_on_rank.resize(scheduler_.NumRanks());
        for (int r : e->locations) bytes_on_rank[r] += e->size;
      }
    }
    out.refs.push_back(std::move(loc));
  }
  int rank = scheduler_.Place(spec.function, spec.demand, spec.submitter, bytes_on_rank);
  if (rank < 0) return false;
  scheduler_.Commit(rank, spec.demand);
  task.rank = rank;
  out.spec = task.spec;
  send_(rank, std::move(out));
  return true;
}

void Head::DrainQueues() {
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
  if (it == tasks_.end() || it->second.spec->attempt != done.attempt) return;
  TaskEntry& task = it->second;
  ResourceSet held = task.spec->demand;
  if (task.blocked) held.Set("CPU", 0);
  scheduler_.Release(task.rank, held);
  scheduler_.RecordRunTime(task.spec->function, done.exec_ns);
  if (!done.ok && task.spec->retry_exceptions && task.spec->attempt < task.spec->max_retries) {
    task.spec = std::make_shared<TaskSpec>(*task.spec);  // the old one may still be in flight
    ++task.spec->attempt;
    PRISM_LOG_WARN("task " << task.spec->name << " failed on rank " << from << " ("
                            << done.error.Render() << "); retry " << task.spec->attempt << "/"
                            << task.spec->max_retries);
    task.rank = -1;
    task.blocked = false;
    Enqueue(done.id);
  } else {
    Complete(done.id, std::move(done), from);
  }
  DrainQueues();
}

void Head::Complete(TaskId id, TaskDone&& done, int from) {
  std::vector<FreedObject> freed;
  std::vector<TaskId> failed_dependents;
  ErrorInfo failure = done.error;
  {
    auto node = tasks_.extract(id);
    const TaskSpec& spec = *node.mapped().spec;
    ObjectEntry* e = objects_.Find(id);
    if (e != nullptr) {
      if (done.ok) {
        e->state = ObjectEntry::State::kReady;
        e->size = done.size;
        e->inline_value = std::move(done.inline_value);
        if (!e->inline_value) e->locations.push_back(from);
      } else {
        e->state = ObjectEntry::State::kFailed;
        e->error = std::make_shared<ErrorInfo>(std::move(done.error));
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
  for (TaskId dep : failed_dependents) FailTask(dep, failure);
  SendFrees(freed);
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
  for (int rank : e.subscribers) {
    // A rank sent an inline value keeps a cached copy: it must hear when it is freed.
    if (e.inline_value && std::find(e.locations.begin(), e.locations.end(), rank) ==
                              e.locations.end()) {
      e.locations.push_back(rank);
    }
    send_(rank, ReadyMessage(id, e));
  }
  e.subscribers.clear();
}

void Head::OnTaskBlocked(int from, const TaskBlocked& m) {
  auto it = tasks_.find(m.id);
  if (it == tasks_.end() || it->second.rank < 0 || it->second.blocked == m.blocked) return;
  TaskEntry& task = it->second;
  ResourceSet cpu;
  cpu.Set("CPU", task.spec->demand.Get("CPU"));
  task.blocked = m.blocked;
  if (m.blocked) {
    scheduler_.Release(task.rank, cpu);
    DrainQueues();
  } else {
    scheduler_.Commit(task.rank, cpu);
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
  std::lock_guard<AdaptiveMutex> lock(mu_);
  ResourceSet total;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) {
    ResourceSet free = scheduler_.Capacity(r);
    ResourceSet used = scheduler_.Committed(r);
    for (const auto& [name, units] : used.Entries()) {
      free.Set(name, std::max<int64_t>(0, free.Get(name) - units));
    }
    total.Add(free);
  }
  return total.ToMap();
}

size_t Head::NumObjects() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return objects_.Size();
}

size_t Head::NumTasks() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return tasks_.size();
}

}  // namespace prism::internal
