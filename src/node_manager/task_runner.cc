#include "node_manager/task_runner.h"
#include "prism/internal/cancel_hook.h"

#include <chrono>
#include <cstdlib>
#include <typeinfo>

#include "common/demangle.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "prism/errors.h"
#include "prism/remote.h"
#include "prism/serialization.h"

namespace prism::internal {

namespace {

using Clock = std::chrono::steady_clock;

/// The task running on this thread, if any.
struct ThreadTask {
  bool active = false;
  bool in_actor = false;  // actor threads hold no executor slot: nothing to give back
  bool actor_restarted = false;
  int depth = 0;
  TaskId id;
  const std::string* name = nullptr;  // the running spec's
  const ResourceSet* demand = nullptr;  // the running spec's
  CoreApi* core = nullptr;
  // What the task or its actor holds: Execute's own grant (a pointer, so that ThreadTask
  // stays trivially destructible and its accesses need no thread_local init guard).
  const GpuGrant* gpus = nullptr;
  const GpuDevices* gpu_devices = nullptr;  // the rank's, which gpus->slots index
};
thread_local ThreadTask t_task;
thread_local CoreApi* t_thread_core = nullptr;  // SetThreadCore

uint64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace


TaskId CurrentTaskId() { return t_task.active ? t_task.id : TaskId(); }
const std::string* CurrentTaskName() { return t_task.active ? t_task.name : nullptr; }
int CurrentTaskDepth() { return t_task.active ? t_task.depth : 0; }
bool CurrentActorRestarted() { return t_task.active && t_task.in_actor && t_task.actor_restarted; }
CoreApi* RunningTaskCore() { return t_task.active ? t_task.core : t_thread_core; }
void SetThreadCore(CoreApi* core) { t_thread_core = core; }

bool CurrentTaskCancelled() {
  const std::atomic<bool>* flag = t_task.active ? Executor::CurrentCancelFlag() : nullptr;
  return flag != nullptr && flag->load(std::memory_order_acquire);
}

const std::atomic<bool>* CurrentTaskCancelFlag() {
  return t_task.active ? Executor::CurrentCancelFlag() : nullptr;
}

namespace {
std::atomic<RunningTaskCancelHook> g_cancel_hook{nullptr};  // SetRunningTaskCancelHook
}  // namespace

void SetRunningTaskCancelHook(RunningTaskCancelHook hook) { g_cancel_hook.store(hook); }

void ThrowCancelled(int rank) {
  const std::string name = t_task.active && t_task.name ? *t_task.name : std::string();
  const std::string message = "task " + name + " was cancelled while it ran (prism::Cancel or its timeout)";
  throw TaskCancelledError("prism::TaskCancelledError", message, name, rank,
                           "prism: TaskCancelled: " + message);
}

std::vector<std::string> CurrentGpuIds() {
  std::vector<std::string> ids;
  if (!t_task.active || t_task.gpu_devices == nullptr) return ids;
  if (t_task.gpus == nullptr) return ids;
  for (size_t slot : t_task.gpus->slots) ids.push_back(t_task.gpu_devices->ids.at(slot));
  return ids;
}

std::vector<int> CurrentGpuOrdinals() {
  std::vector<int> ordinals;
  if (!t_task.active || t_task.gpu_devices == nullptr) return ordinals;
  if (t_task.gpus == nullptr) return ordinals;
  for (size_t slot : t_task.gpus->slots) ordinals.push_back(t_task.gpu_devices->ordinals.at(slot));
  return ordinals;
}

TaskRunner::TaskRunner(int rank, const ResourceSet& capacity, uint64_t max_inline_bytes,
                       MemoryStore& store, ObjectPuller& puller, GeneratorProducers& producers,
                       ToHead to_head, CoreApi* core, std::function<void()> after_task,
                       GpuDevices gpus)
    : rank_(rank),
      max_inline_bytes_(max_inline_bytes),
      store_(store),
      puller_(puller),
      producers_(producers),
      to_head_(std::move(to_head)),
      core_(core),
      after_task_(std::move(after_task)),
      gpus_(std::move(gpus)) {
  executor_ = std::make_unique<Executor>(
      capacity, [this](DispatchTask& t) { Execute(t); },
      [this](DispatchTask& t, const std::string& message) { FailUnstartedTask(t, message); });
}

TaskRunner::~TaskRunner() {
  {
    std::lock_guard<std::mutex> lock(deferred_mu_);
    deferred_stop_ = true;
  }
  deferred_cv_.notify_all();
  if (deferred_thread_.joinable()) deferred_thread_.join();
  if (!executor_->Stop()) executor_.release();  // threads still in user code keep using it
  // Before the deferred-work members go: a leaving actor thread may call back (Defer,
  // which now refuses), and ~ActorHost waits for it. A host with a call still in user
  // code is leaked: its thread uses it when the call returns.
  std::lock_guard<std::mutex> lock(actors_mu_);
  for (auto& [id, host] : actors_) {
    if (!host->Stop()) host.release();
  }
  for (auto& [raw, host] : ended_actors_) {
    if (!host->Stop()) host.release();
  }
  actors_.clear();
  ended_actors_.clear();
}

bool TaskRunner::Stop() {
  // Actor threads hold no executor slot: a call still in user code at Shutdown reports to
  // the head when it returns, so the runtime must not be deleted under it. Calls about to
  // return get kStopGrace to do so: a thread left running would race the process's exit
  // (serializing a result while static destructors run).
  const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  {
    std::lock_guard<std::mutex> lock(actors_mu_);
    for (auto& [id, host] : actors_) host->Stop();  // all stop taking work before any wait
    for (auto& [raw, host] : ended_actors_) host->Stop();
  }
  bool idle = executor_->Stop(deadline);
  // Under the lock: the deferred thread must not reap a host while it is waited on.
  std::lock_guard<std::mutex> lock(actors_mu_);
  for (auto& [id, host] : actors_) idle = host->Stop(deadline) && idle;
  for (auto& [raw, host] : ended_actors_) idle = host->Stop(deadline) && idle;
  return idle;
}

bool TaskRunner::InTask() { return t_task.active; }

bool TaskRunner::RunHere(ObjectId id) { return !t_task.active && executor_->RunHere(id); }

bool TaskRunner::Block() {
  if (!t_task.active || t_task.in_actor) return false;  // actor threads hold no executor slot
  if (!executor_->Block(*t_task.demand)) {
    throw RuntimeError(
        "prism: task " + *t_task.name + " (nesting depth " + std::to_string(t_task.depth) +
        ") cannot wait in Get/Wait on rank " + std::to_string(rank_) + ": " +
        std::to_string(MaxBlockedTasks()) +
        " tasks wait there already, the most a rank keeps threads for (kMaxBlockedTasks). "
        "Nested tasks this wide or deep would exhaust the rank's threads: wait for fewer "
        "results from inside tasks at once, or return refs instead of waiting for them");
  }
  to_head_(TaskBlocked{t_task.id, true});
  return true;
}

void TaskRunner::Unblock() {
  executor_->Unblock(*t_task.demand);
  to_head_(TaskBlocked{t_task.id, false});
}

void TaskRunner::Defer(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(deferred_mu_);
  if (deferred_stop_) return;  // shutting down: nobody would run it
  deferred_.push_back(std::move(work));
  if (!deferred_thread_.joinable()) {
    try {
      deferred_thread_ = StartThread([this] { DeferredMain(); });
    } catch (const std::system_error& e) {
      // The work stays queued: the next Defer tries again.
      PRISM_LOG_ERROR(ThreadStartFailure("deferred work", e));
    }
  }
  deferred_cv_.notify_one();
}

void TaskRunner::DeferredMain() {
  NameThisThread("prism-deferred");
  std::unique_lock<std::mutex> lock(deferred_mu_);
  for (;;) {
    deferred_cv_.wait(lock, [&] { return deferred_stop_ || !deferred_.empty(); });
    if (deferred_.empty()) return;  // stopping, nothing left
    auto work = std::move(deferred_.front());
    deferred_.pop_front();
    lock.unlock();
    work();
    lock.lock();
  }
}

void TaskRunner::Run(DispatchTask&& d) {
  if (d.spec->kind == TaskKind::kTask) {
    executor_->Submit(std::move(d));
  } else {
    RouteToActor(std::move(d));
  }
}

void TaskRunner::Kill(const KillActor& k) {
  std::deque<DispatchTask> failed;
  ActorHost* ended = nullptr;
  {
    std::lock_guard<std::mutex> lock(actors_mu_);
    auto it = actors_.find(k.actor);
    if (it != actors_.end()) {
      failed = it->second->Kill(k.restart, k.cause);
      if (!k.restart) {
        // The head sends nothing more for this actor: its host leaves the table and is
        // deleted once its threads have left (a call may still be running).
        ended = it->second.get();
        ended_actors_.emplace(ended, std::move(it->second));
        actors_.erase(it);
      }
    }
  }
  if (!failed.empty()) {
    auto shared = std::make_shared<std::deque<DispatchTask>>(std::move(failed));
    Defer([this, shared, cause = k.cause] { FailCalls(std::move(*shared), cause); });
  }
  if (!k.restart) ReleaseActorGpus(k.actor);  // a restart keeps the actor's resources
  if (ended != nullptr) Defer([this, ended, id = k.actor] { Reap(id, ended); });
}

GpuGrant TaskRunner::GpusFor(const TaskSpec& spec) {
  if (gpus_.devices().ids.empty()) return {};  // a rank without GPUs: nothing to look up
  if (spec.kind == TaskKind::kActorCall) {
    std::lock_guard<std::mutex> lock(actors_mu_);
    auto it = actor_gpus_.find(spec.actor);
    return it == actor_gpus_.end() ? GpuGrant{} : it->second;
  }
  if (spec.kind == TaskKind::kActorCreation) {
    std::lock_guard<std::mutex> lock(actors_mu_);
    auto it = actor_gpus_.find(spec.id);
    if (it != actor_gpus_.end()) return it->second;  // a restart: same devices
  }
  const int64_t units = spec.options->demand.Get("GPU");
  if (units <= 0) return {};
  auto grant = gpus_.Acquire(units, kGpuWait);
  if (!grant) {
    throw ResourceError(
        "prism: " + spec.options->name + " was granted " + ResourceSet({{"GPU", FromUnits(units)}}).ToString() +
        " on rank " + std::to_string(rank_) + " but no device had room within " +
        std::to_string(kGpuWait.count() / 1000) + " s (" + gpus_.DescribeFree() +
        "): fractions of GPUs held by other tasks or actors leave no whole device free; "
        "ask for whole GPUs, or fractions that add up to 1");
  }
  if (spec.kind == TaskKind::kActorCreation) {
    std::lock_guard<std::mutex> lock(actors_mu_);
    actor_gpus_[spec.id] = *grant;
  }
  return *grant;
}

void TaskRunner::ReleaseActorGpus(ObjectId actor) {
  GpuGrant grant;
  {
    std::lock_guard<std::mutex> lock(actors_mu_);
    auto it = actor_gpus_.find(actor);
    if (it == actor_gpus_.end()) return;
    grant = std::move(it->second);
    actor_gpus_.erase(it);
  }
  gpus_.Release(grant);
}

void TaskRunner::Reap(ObjectId actor, ActorHost* host) {
  {
    std::lock_guard<std::mutex> lock(actors_mu_);
    auto live = actors_.find(actor);
    if (!ended_actors_.count(host) && (live == actors_.end() || live->second.get() != host)) {
      return;  // reaped already
    }
  }
  // Only this thread reaps, so the host stays alive while it joins (outside the lock:
  // a leaving thread may still be calling back).
  if (!host->JoinThreads()) return;  // a call still runs: its thread calls back as it leaves
  std::lock_guard<std::mutex> lock(actors_mu_);
  ended_actors_.erase(host);  // deletes it if the head ended it; else it waits for the Kill
}

void TaskRunner::RouteToActor(DispatchTask&& d) {
  const TaskSpec& spec = *d.spec;
  ObjectId actor = spec.kind == TaskKind::kActorCreation ? spec.id : spec.actor;
  ActorHost* host = nullptr;
  {
    std::lock_guard<std::mutex> lock(actors_mu_);
    auto& slot = actors_[actor];
    if (!slot) {
      if (spec.kind != TaskKind::kActorCreation) {
        actors_.erase(actor);
      } else {
        slot = std::make_unique<ActorHost>(
            actor, spec.options->max_concurrency, [this](DispatchTask& t, ActorHost& h) { Execute(t, &h); },
            [this](ActorHost& h) { Defer([this, id = h.id(), host = &h] { Reap(id, host); }); });
      }
    }
    auto it = actors_.find(actor);
    if (it != actors_.end()) host = it->second.get();
  }
  if (host == nullptr || !host->Enqueue(std::move(d))) {
    auto one = std::make_shared<std::deque<DispatchTask>>();  // Enqueue does not move from
    one->push_back(std::move(d));                             // a task it refuses
    std::string cause = host != nullptr ? host->cause() : "";
    if (cause.empty()) cause = "actor " + actor.Hex() + " is dead";
    Defer([this, one, cause] { FailCalls(std::move(*one), cause); });
  }
}

void TaskRunner::FailCalls(std::deque<DispatchTask>&& calls, const std::string& cause) {
  for (auto& c : calls) {
    if (!c.spec) continue;
    TaskDone done;
    done.id = c.spec->id;
    done.attempt = c.spec->attempt;
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kActorError, cause, c.spec->options->name, rank_);
    to_head_(std::move(done));
  }
}

void TaskRunner::Cancel(const CancelDispatched& m) {
  DispatchTask removed;
  bool dropped = false;
  if (m.actor.IsNil()) {
    const std::atomic<bool>* flag = nullptr;
    auto result = executor_->Cancel(m.id, &removed, &flag);
    dropped = result == Executor::CancelResult::kRemoved;
    if (result == Executor::CancelResult::kFlagged) {
      store_.Interrupt(flag);
      if (RunningTaskCancelHook hook = g_cancel_hook.load()) hook(flag);
    }
  } else {
    const std::atomic<bool>* flag = nullptr;
    {
      std::lock_guard<std::mutex> lock(actors_mu_);
      auto it = actors_.find(m.actor);
      dropped = it != actors_.end() && it->second->Cancel(m.id, &removed, &flag);
    }
    if (flag != nullptr) {  // running: flagged
      store_.Interrupt(flag);
      if (RunningTaskCancelHook hook = g_cancel_hook.load()) hook(flag);
    }
  }
  if (dropped) ReportDropped(std::move(removed), m.error);
}

void TaskRunner::ReportDropped(DispatchTask&& task, const ErrorInfo& error) {
  // From inside Handle: on rank 0 a direct send could reach the head under its own lock.
  Defer([this, spec = task.spec, error] {
    TaskDone done;
    done.id = spec->id;
    done.attempt = spec->attempt;
    done.ok = false;
    done.error = error;
    done.error.rank = rank_;
    to_head_(std::move(done));
  });
}

void TaskRunner::FailUnstartedTask(DispatchTask& task, const std::string& message) {
  // From inside Handle (Submit) a direct send could reach the head under its own lock.
  Defer([this, spec = task.spec, message] {
    TaskDone done;
    done.id = spec->id;
    done.attempt = spec->attempt;
    done.ok = false;
    done.error = ErrorInfo::Exception("prism::RuntimeError", message, spec->options->name, rank_);
    to_head_(std::move(done));
  });
}

void TaskRunner::Invoke(const TaskSpec& spec, const RemoteFunction& fn, void* self,
                        const std::vector<ByteView>& views, TaskDone& done) {
  const bool method = spec.kind == TaskKind::kActorCall;
  if (spec.options->streaming) {
    if (!fn.generate) {
      throw FunctionNotFound("prism: " + spec.options->function +
                             " is not registered in this binary (PRISM_REMOTE) as a streaming "
                             "generator (first parameter a prism::StreamWriter<T>&)");
    }
    {
      // Unregistered before TaskDone goes: acks for this run stop here.
      std::unique_ptr<GeneratorSink> sink = producers_.Start(spec);
      try {
        fn.generate(self, views, *sink);
      } catch (const GeneratorStoppedSignal&) {
        // The consumer dropped its generator: nobody wants the rest, so the task ends here.
      }
    }
    done.inline_value = std::make_shared<const Buffer>();  // the task's own object: done
    return;
  }
  if (spec.num_returns > 1) {
    if (!fn.invoke_parts) {
      throw FunctionNotFound("prism: " + spec.options->function +
                             " does not return a std::tuple, std::pair or std::vector in this "
                             "binary, so SetNumReturns cannot split its result");
    }
    std::vector<Buffer> parts;
    std::vector<std::vector<ObjectId>> contained;
    fn.invoke_parts(self, views, parts, contained);
    if (!method && CurrentTaskCancelled()) ThrowCancelled(rank_);  // not stored: cancelled
    if (parts.size() != static_cast<size_t>(spec.num_returns)) {
      throw Error("prism: " + spec.options->function + " returned " + std::to_string(parts.size()) +
                  " values but the call asked for " + std::to_string(spec.num_returns) +
                  " (SetNumReturns): return exactly n values");
    }
    std::vector<ObjectId> stored;  // large parts kept here, dropped again if a later one fails
    try {
      for (size_t i = 0; i < parts.size(); ++i) {
        ReturnValue r;
        r.size = parts[i].size();
        r.contained = std::move(contained[i]);
        auto payload = std::make_shared<const Buffer>(std::move(parts[i]));
        if (payload->size() <= max_inline_bytes_) {
          r.inline_value = std::move(payload);
        } else {
          const ObjectId id = ReturnId(spec.id, static_cast<int>(i));
          store_.Put(id, std::move(payload));
          stored.push_back(id);
        }
        if (i == 0) {
          done.inline_value = std::move(r.inline_value);
          done.size = r.size;
          done.contained = std::move(r.contained);
        } else {
          done.more_returns.push_back(std::move(r));
        }
      }
    } catch (...) {
      store_.Erase(stored);
      done.more_returns.clear();
      throw;
    }
    return;
  }
  if (method ? !fn.method : !fn.invoke) {
    throw FunctionNotFound("prism: function " + spec.options->function +
                           " is not registered in this binary (PRISM_REMOTE)" +
                           (fn.generate ? std::string(" as a plain function: it is a streaming generator") : ""));
  }
  Buffer out;
  ContainedRefScope contained;
  if (method) {
    fn.method(self, views, out);
  } else {
    fn.invoke(views, out);
    if (CurrentTaskCancelled()) ThrowCancelled(rank_);  // not stored: cancelled
  }
  done.contained = contained.Take();
  done.size = out.size();
  auto payload = std::make_shared<const Buffer>(std::move(out));
  if (payload->size() <= max_inline_bytes_) {
    done.inline_value = std::move(payload);
  } else {
    store_.Put(spec.id, std::move(payload));
  }
}

void TaskRunner::Execute(DispatchTask& d, ActorHost* host) {
  const TaskSpec& spec = *d.spec;
  t_task.active = true;
  t_task.depth = spec.depth;
  t_task.in_actor = host != nullptr;
  t_task.actor_restarted = host != nullptr && host->incarnation() > 0;
  t_task.id = spec.id;
  t_task.name = &spec.options->name;
  t_task.demand = &spec.options->demand;
  t_task.core = core_;
  GpuGrant gpus;  // filled once the arguments are here
  t_task.gpus = &gpus;
  t_task.gpu_devices = &gpus_.devices();
  TaskDone done;
  done.id = spec.id;
  done.attempt = spec.attempt;
  uint64_t start = NowNs();
  try {
    // Resolve by-reference arguments: inline values came with the task; large ones are
    // pulled from a holder (at most once per rank, then cached).
    std::vector<Payload> ref_values(d.refs.size());
    std::vector<ObjectId> to_fetch;
    for (size_t i = 0; i < d.refs.size(); ++i) {
      auto& loc = d.refs[i];
      if (loc.inline_value) {
        ref_values[i] = loc.inline_value;
      } else if (auto local = store_.Find(loc.id)) {
        if (local->error) ThrowStored(store_, loc.id, *local->error);
        ref_values[i] = local->value;
      } else {
        // Ask the head, which says where to pull it from (spreading readers over the
        // copies), or, for an actor call routed before it was ready, when it is.
        puller_.Request({&loc.id, 1});
        to_fetch.push_back(loc.id);
      }
    }
    if (!to_fetch.empty()) {
      const std::atomic<bool>* cancel = host == nullptr ? Executor::CurrentCancelFlag() : nullptr;
      store_.WaitFor(to_fetch, to_fetch.size(), std::nullopt, cancel);
      if (cancel != nullptr && cancel->load(std::memory_order_acquire)) ThrowCancelled(rank_);
      for (size_t i = 0; i < d.refs.size(); ++i) {
        if (ref_values[i]) continue;
        auto obj = store_.Find(d.refs[i].id);
        if (!obj) throw ObjectLostError("prism: argument " + d.refs[i].id.Hex() + " vanished");
        if (obj->error) ThrowStored(store_, d.refs[i].id, *obj->error);
        ref_values[i] = obj->value;
      }
    }
    std::vector<ByteView> views;
    views.reserve(spec.args.size());
    size_t next_ref = 0;
    for (const auto& arg : spec.args) {
      const Payload& p = arg.is_ref ? ref_values.at(next_ref++) : arg.value;
      views.push_back({p->data(), p->size(), &p});  // views of arguments may alias p
    }
    gpus = GpusFor(spec);
    const RemoteFunction* fn = FunctionRegistry::Instance().FindByName(spec.options->function);
    if (fn == nullptr) {
      throw FunctionNotFound("prism: function " + spec.options->function +
                             " is not registered in this binary (PRISM_REMOTE)");
    }
    if (spec.kind == TaskKind::kActorCreation) {
      if (!fn->create) {
        throw FunctionNotFound("prism: function " + spec.options->function +
                               " is not registered in this binary (PRISM_REMOTE) as an actor factory");
      }
      host->SetInstance(fn->create(views), fn->destroy);
      done.inline_value = std::make_shared<const Buffer>();
    } else {
      void* self = nullptr;
      if (spec.kind == TaskKind::kActorCall) {
        self = host->instance();
        if (self == nullptr) throw ActorError("prism: actor " + spec.actor.Hex() + " is dead");
      }
      Invoke(spec, *fn, self, views, done);
    }
  } catch (const ExitActorSignal&) {
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kActorError, "the actor ended itself with ExitActor()", spec.options->name, rank_);
    if (host != nullptr) {
      FailCalls(host->Die("the actor ended itself with ExitActor()"),
                "the actor ended itself with ExitActor()");
      ReleaseActorGpus(host->id());
      to_head_(ActorDied{host->id(), "the actor ended itself with ExitActor()"});
    }
  } catch (const WorkerExitSignal& e) {
    // As if the task's worker process had died: a task is retried elsewhere (max_retries),
    // an actor ends (its calls fail with ActorDiedError) unless its max_restarts allow a
    // restart.
    done.ok = false;
    const std::string cause = spec.options->name + " " + e.what + " on rank " + std::to_string(rank_) +
                              ", which would have ended the rank and everything on it";
    if (host != nullptr && spec.kind == TaskKind::kActorCall) {
      // The instance is gone, as with Ray's dead worker process; the head restarts the actor
      // if its max_restarts allow, and then sends this call and the queued ones (failed
      // here, after the head heard of the crash) again if max_task_retries allow. The local
      // kill comes first: on rank 0 the head's restart (its creation) may arrive inside
      // to_head_.
      done.error = ErrorInfo::Of(ErrorKind::kActorError, "the actor's " + cause, spec.options->name, rank_);
      auto queued = host->Kill(/*restart=*/true, "the actor's " + cause);
      to_head_(ActorDied{host->id(), "the actor's " + cause, /*crashed=*/true});
      FailCalls(std::move(queued), "the actor's " + cause);
    } else if (host != nullptr) {
      done.error = ErrorInfo::Of(ErrorKind::kActorError, "the actor's " + cause, spec.options->name, rank_);
      FailCalls(host->Die("the actor's " + cause), "the actor's " + cause);
      ReleaseActorGpus(host->id());
      to_head_(ActorDied{host->id(), "the actor's " + cause});
    } else {
      done.error = ErrorInfo::Of(ErrorKind::kWorkerCrashed, "task " + cause, spec.options->name, rank_);
    }
  } catch (const ActorError& e) {
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kActorError, e.what(), spec.options->name, rank_);
  } catch (const ObjectStoreFullError& e) {
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kObjectStoreFull, std::string(e.what()) + " (storing the result of task " +
                                         spec.options->name + " on rank " + std::to_string(rank_) + ")",
                  spec.options->name, rank_);
  } catch (const TaskCancelledError& e) {
    // This task was cancelled, or something it waited on was: a cancellation either way.
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kTaskCancelled, e.OriginalMessage(), e.TaskName(), e.Rank());
  } catch (const TaskError& e) {
    // A failure of something this task waited on: pass the original cause through.
    done.ok = false;
    done.error = ErrorInfo::Exception(e.OriginalType(), e.OriginalMessage(), e.TaskName(), e.Rank());
  } catch (const std::exception& e) {
    done.ok = false;
    done.error = ErrorInfo::Exception(Demangle(typeid(e).name()), e.what(), spec.options->name, rank_);
  } catch (...) {
    done.ok = false;
    done.error = ErrorInfo::Exception("unknown exception", "a non-std::exception was thrown", spec.options->name,
                  rank_);
  }
  if (!done.ok && host != nullptr && spec.kind == TaskKind::kActorCreation) {
    std::string cause = "the actor's factory " + spec.options->function + " threw " + done.error.type +
                        ": " + done.error.message;
    FailCalls(host->Die(cause), cause);
    ReleaseActorGpus(host->id());
    to_head_(ActorDied{host->id(), cause});
  }
  // A task's GPUs are free before the head hears it ended (and may send the next one).
  if (spec.kind == TaskKind::kTask && !gpus.slots.empty()) gpus_.Release(gpus);
  t_task.gpus = nullptr;
  done.exec_ns = NowNs() - start;
  t_task.active = false;
  t_task.name = nullptr;
  t_task.in_actor = false;
  to_head_(std::move(done));
  if (after_task_) after_task_();
}

}  // namespace prism::internal
