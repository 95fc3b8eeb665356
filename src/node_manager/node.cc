#include "node_manager/node.h"

#include <cxxabi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <typeinfo>

#include "common/log.h"
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
  TaskId id;
  ResourceSet demand;
};
thread_local ThreadTask t_task;
thread_local std::vector<ObjectId> t_deferred_releases;

std::string Demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = (status == 0 && out != nullptr) ? out : name;
  std::free(out);
  return s;
}

uint64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// kCopyDidNotFit is the error a rank keeps for an object whose fetched copy did not fit its
// store. Unlike a failed task, it is not the object's fate: it is dropped once read, and
// the next Get fetches again (memory may have been freed meanwhile).
[[noreturn]] void ThrowStored(const ErrorInfo& e) {
  switch (e.kind) {
    case ErrorKind::kObjectLost: throw ObjectLostError("prism: " + e.message);
    case ErrorKind::kActorError: throw ActorError("prism: " + e.message);
    case ErrorKind::kObjectStoreFull:
    case ErrorKind::kCopyDidNotFit: throw ObjectStoreFullError(e.message);
    case ErrorKind::kError: throw Error(e.message);
    case ErrorKind::kTaskException:
    case ErrorKind::kResourceError:
    case ErrorKind::kPlacementGroupRemoved: break;
  }
  throw TaskError(e.type, e.message, e.task_name, e.rank, "prism: task failed: " + e.Render());
}

}  // namespace

TaskId CurrentTaskId() { return t_task.active ? t_task.id : TaskId(); }
bool CurrentActorRestarted() { return t_task.active && t_task.in_actor && t_task.actor_restarted; }

Node::Node(NodeOptions options, ToHead to_head, ObjectFetcher* fetcher)
    : options_(std::move(options)),
      to_head_(std::move(to_head)),
      fetcher_(fetcher),
      store_(options_.object_store_memory, options_.spill_dir) {
  executor_ = std::make_unique<Executor>(options_.capacities.at(options_.rank),
                                         [this](DispatchTask& t) { Execute(t); });
}

Node::~Node() {
  {
    std::lock_guard<std::mutex> lock(deferred_mu_);
    deferred_stop_ = true;
  }
  deferred_cv_.notify_all();
  if (deferred_thread_.joinable()) deferred_thread_.join();
  if (!executor_->Stop()) executor_.release();  // threads still in user code keep using it
}

void Node::Defer(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(deferred_mu_);
  deferred_.push_back(std::move(work));
  if (!deferred_thread_.joinable()) deferred_thread_ = std::thread([this] { DeferredMain(); });
  deferred_cv_.notify_one();
}

void Node::DeferredMain() {
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

bool Node::Stop() { return executor_->Stop(); }

// ---- Submit / Put ----------------------------------------------------------------------

void Node::ValidateResources(const std::string& task_name,
                             const std::map<std::string, double>& resources) const {
  for (const auto& [name, amount] : resources) {
    if (!(amount >= 0) || !std::isfinite(amount)) {
      throw ResourceError("prism: task " + task_name + ": resource " + name + " = " +
                          std::to_string(amount) + " must be a finite amount >= 0");
    }
    if (amount > 1 && amount != std::floor(amount)) {
      throw ResourceError("prism: task " + task_name + ": resource " + name + " = " +
                          std::to_string(amount) +
                          ": amounts above 1 must be whole numbers (only amounts below 1 "
                          "may be fractional)");
    }
  }
}

void Node::CheckFeasible(const TaskSpec& spec) const {
  bool feasible = std::any_of(options_.capacities.begin(), options_.capacities.end(),
                              [&](const ResourceSet& c) { return spec.demand.FitsIn(c); });
  if (feasible) return;
  std::string offer = DescribeRankCapacities(options_.capacities, 4);
  throw ResourceError("prism: task " + spec.name + " asks for " + spec.demand.ToString() +
                      " but no rank can ever provide that (ranks offer:" + offer +
                      "). Lower the request or start ranks with more "
                      "(--prism-num-cpus, --prism-num-gpus, --prism-resources).");
}

ObjectId Node::Submit(TaskRequest&& request) {
  TaskSpec spec;
  spec.function = std::move(request.function);
  const bool named = !request.name.empty();
  spec.name = named ? std::move(request.name) : spec.function;
  if (request.resources.empty()) {
    // The common case, a task with default resources: no validation or map work.
    static const ResourceSet kDefaultDemand({{"CPU", 1}});
    spec.demand = kDefaultDemand;
  } else {
    ValidateResources(spec.name, request.resources);
    if (request.resources.find("CPU") == request.resources.end()) request.resources["CPU"] = 1;
    spec.demand = ResourceSet(request.resources);
  }
  CheckFeasible(spec);
  spec.id = NextId();
  spec.args.reserve(request.args.size());
  for (auto& a : request.args) {
    TaskSpecArg arg;
    arg.is_ref = a.is_ref;
    arg.ref = a.ref;
    if (!a.is_ref) arg.value = std::make_shared<const Buffer>(std::move(a.value));
    spec.args.push_back(std::move(arg));
  }
  spec.contained = std::move(request.contained);
  spec.max_retries = request.max_retries;
  spec.retry_exceptions = request.retry_exceptions;
  spec.submitter = options_.rank;
  spec.kind = static_cast<TaskKind>(request.kind);
  spec.actor = request.actor;
  spec.max_restarts = request.max_restarts;
  spec.max_concurrency = request.max_concurrency;
  spec.class_name = std::move(request.class_name);
  if (spec.kind == TaskKind::kActorCreation && named) spec.actor_name = spec.name;
  spec.placement_group = std::move(request.placement_group);
  spec.bundle_index = request.bundle_index;
  ObjectId id = spec.id;
  {
    std::lock_guard<AdaptiveMutex> lock(refs_mu_);
    refs_[id] = 1;  // adopted by the returned ObjectRef; the head counts this rank as holder
    to_head_(SubmitTask{std::move(spec)});
  }
  return id;
}

ObjectId Node::Put(Buffer&& value, std::vector<ObjectId> contained) {
  ObjectId id = NextId();
  auto payload = std::make_shared<const Buffer>(std::move(value));
  PutObject msg;
  msg.id = id;
  msg.size = payload->size();
  msg.contained = std::move(contained);
  if (payload->size() <= options_.max_inline_bytes) msg.inline_value = payload;
  store_.Put(id, std::move(payload));
  std::lock_guard<AdaptiveMutex> lock(refs_mu_);
  refs_[id] = 1;
  to_head_(std::move(msg));
  return id;
}

// ---- Reference counting ----------------------------------------------------------------

void Node::AddLocalRef(ObjectId id) {
  std::lock_guard<AdaptiveMutex> lock(refs_mu_);
  if (refs_[id]++ == 0) to_head_(RefUpdate{{id}, {}});
}

void Node::RemoveLocalRef(ObjectId id) {
  if (DeferRefReleases::Depth() > 0 && t_task.active) {
    t_deferred_releases.push_back(id);
    return;
  }
  std::lock_guard<AdaptiveMutex> lock(refs_mu_);
  auto it = refs_.find(id);
  if (it == refs_.end()) return;
  if (--it->second == 0) {
    refs_.erase(it);
    to_head_(RefUpdate{{}, {id}});
  }
}

void Node::FlushDeferredReleases() {
  std::vector<ObjectId> ids;
  ids.swap(t_deferred_releases);
  for (ObjectId id : ids) RemoveLocalRef(id);
}

size_t Node::NumLocalRefs() {
  std::lock_guard<AdaptiveMutex> lock(refs_mu_);
  return refs_.size();
}

// ---- Get / Wait ------------------------------------------------------------------------

void Node::Request(const std::vector<ObjectId>& ids) {
  Subscribe sub;
  {
    auto here = store_.Contains(ids);
    std::lock_guard<AdaptiveMutex> lock(requests_mu_);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (here[i] || !requested_.insert(ids[i]).second) continue;
      sub.ids.push_back(ids[i]);
    }
  }
  if (!sub.ids.empty()) to_head_(std::move(sub));
}

std::vector<bool> Node::Await(const std::vector<ObjectId>& ids, size_t need,
                              int64_t timeout_ms) {
  std::optional<Clock::time_point> deadline;
  if (timeout_ms >= 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto now_flags = store_.WaitFor(ids, need, Clock::now());
  if (static_cast<size_t>(std::count(now_flags.begin(), now_flags.end(), true)) >= need) {
    return now_flags;
  }
  const bool in_task = t_task.active && !t_task.in_actor;
  if (in_task) {
    executor_->Block(t_task.demand);
    to_head_(TaskBlocked{t_task.id, true});
  }
  auto flags = store_.WaitFor(ids, need, deadline);
  if (in_task) {
    executor_->Unblock(t_task.demand);
    to_head_(TaskBlocked{t_task.id, false});
  }
  return flags;
}

std::vector<Payload> Node::Get(const std::vector<ObjectId>& ids, int64_t timeout_ms) {
  auto found = store_.FindMany(ids);
  std::vector<ObjectId> missing;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!found[i]) missing.push_back(ids[i]);
  }
  if (!missing.empty()) {
    Request(missing);
    auto flags = Await(missing, missing.size(), timeout_ms);
    size_t still = std::count(flags.begin(), flags.end(), false);
    if (still > 0) {
      throw TimeoutError("prism: Get timed out after " + std::to_string(timeout_ms) + " ms: " +
                         std::to_string(still) + " of " + std::to_string(ids.size()) +
                         " objects not ready");
    }
    found = store_.FindMany(ids);
  }
  std::vector<Payload> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!found[i]) {  // freed between the wait and now: cannot happen while the caller holds refs
      throw ObjectLostError("prism: object " + ids[i].Hex() + " was freed while being read");
    }
    if (found[i]->error) ThrowLocal(ids[i], *found[i]->error);
    out.push_back(std::move(found[i]->value));
  }
  return out;
}

std::vector<bool> Node::Wait(const std::vector<ObjectId>& ids, int num_objects,
                             int64_t timeout_ms) {
  std::unordered_set<ObjectId> unique(ids.begin(), ids.end());
  if (unique.size() != ids.size()) {
    throw Error("prism: Wait got the same ObjectRef more than once; pass each ref once");
  }
  Request(ids);
  return Await(ids, static_cast<size_t>(num_objects), timeout_ms);
}

// ---- Messages from the head -------------------------------------------------------------

void Node::Handle(Message&& msg) {
  if (auto* d = std::get_if<DispatchTask>(&msg)) {
    if (d->spec->kind == TaskKind::kTask) {
      executor_->Submit(std::move(*d));
    } else {
      RouteToActor(std::move(*d));
    }
  } else if (auto* k = std::get_if<::prism::internal::KillActor>(&msg)) {
    std::deque<DispatchTask> failed;
    {
      std::lock_guard<std::mutex> lock(actors_mu_);
      auto it = actors_.find(k->actor);
      if (it != actors_.end()) failed = it->second->Kill(k->restart, k->cause);
    }
    if (!failed.empty()) {
      auto shared = std::make_shared<std::deque<DispatchTask>>(std::move(failed));
      Defer([this, shared, cause = k->cause] { FailCalls(std::move(*shared), cause); });
    }
  } else if (auto* reply = std::get_if<HeadReply>(&msg)) {
    std::lock_guard<std::mutex> lock(calls_mu_);
    replies_[reply->request] = std::move(*reply);
    calls_cv_.notify_all();
  } else if (auto* r = std::get_if<ObjectReady>(&msg)) {
    OnObjectReady(std::move(*r));
  } else if (auto* f = std::get_if<FreeObjects>(&msg)) {
    store_.Erase(f->ids);
  } else {
    PRISM_LOG_ERROR("node got an unexpected " << KindName(msg));
  }
}

void Node::OnObjectReady(ObjectReady&& m) {
  auto done = [&] {
    std::lock_guard<AdaptiveMutex> lock(requests_mu_);
    requested_.erase(m.id);
  };
  if (m.failed) {
    done();
    store_.PutError(m.id, std::move(m.error));
  } else if (m.inline_value) {
    done();
    StoreArrived(m.id, std::move(m.inline_value));
  } else {
    StartFetch(m.id, m.holders);
  }
}

void Node::StartFetch(ObjectId id, const std::vector<int>& holders) {
  // The head assigned this pull: however it ends, it hears back (AddLocation), so that the
  // copy it drew from can serve the next reader.
  if (store_.Contains({id})[0]) {
    {
      std::lock_guard<AdaptiveMutex> lock(requests_mu_);
      requested_.erase(id);
    }
    to_head_(AddLocation{id, true});
    return;
  }
  {
    // One transfer per object per rank, however many tasks and Gets want it at once.
    std::lock_guard<AdaptiveMutex> lock(requests_mu_);
    if (!fetching_.insert(id).second) return;
  }
  if (holders.empty() || fetcher_ == nullptr) {
    {
      std::lock_guard<AdaptiveMutex> lock(requests_mu_);
      fetching_.erase(id);
      requested_.erase(id);
    }
    store_.PutError(id, ErrorInfo::Of(ErrorKind::kObjectLost, "object " + id.Hex() + " has no copy left on any rank",
                         "", -1));
    to_head_(AddLocation{id, false});
    return;
  }
  int holder = holders[static_cast<size_t>(options_.rank) % holders.size()];
  fetcher_->Fetch(holder, id, [this, id, holder](Payload value, const std::string& error) {
    {
      std::lock_guard<AdaptiveMutex> lock(requests_mu_);
      requested_.erase(id);
      fetching_.erase(id);
    }
    bool stored = false;
    if (!value) {
      store_.PutError(id, ErrorInfo::Of(ErrorKind::kObjectLost,
                           "object " + id.Hex() + " could not be fetched from rank " +
                               std::to_string(holder) + ": " + error,
                           "", -1));
    } else {
      stored = StoreArrived(id, std::move(value));
    }
    to_head_(AddLocation{id, stored});
  });
}

bool Node::StoreArrived(ObjectId id, Payload value) {
  try {
    store_.Put(id, std::move(value));
    return true;
  } catch (const ObjectStoreFullError& e) {
    store_.PutError(id, ErrorInfo::Of(ErrorKind::kCopyDidNotFit,
                         std::string(e.what()) + " (a copy of object " + id.Hex() + " fetched to rank " +
                             std::to_string(options_.rank) + "; a later Get tries again)",
                         "", options_.rank));
    return false;
  }
}

void Node::ThrowLocal(ObjectId id, const ErrorInfo& error) {
  if (error.kind == ErrorKind::kCopyDidNotFit) store_.Erase({id});  // read once; the next Get refetches
  ThrowStored(error);
}

Payload Node::LocalValue(ObjectId id) {
  try {
    auto obj = store_.Find(id);
    return obj ? obj->value : nullptr;
  } catch (const std::exception& e) {  // a spilled copy that cannot be read back
    PRISM_LOG_ERROR("serving object " << id.Hex() << ": " << e.what());
    return nullptr;
  }
}

// ---- Running tasks ---------------------------------------------------------------------

void Node::RouteToActor(DispatchTask&& d) {
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
        slot = std::make_unique<ActorHost>(actor, spec.max_concurrency,
                                           [this](DispatchTask& t, ActorHost& h) { Execute(t, &h); });
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

void Node::FailCalls(std::deque<DispatchTask>&& calls, const std::string& cause) {
  for (auto& c : calls) {
    if (!c.spec) continue;
    TaskDone done;
    done.id = c.spec->id;
    done.attempt = c.spec->attempt;
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kActorError, cause, c.spec->name, options_.rank);
    to_head_(std::move(done));
  }
}

void Node::KillActor(ObjectId actor, bool no_restart) { to_head_(KillActorRequest{actor, no_restart}); }

std::pair<ObjectId, std::string> Node::LookupActor(const std::string& name) {
  auto [id, class_name] = Ask<internal::LookupActor>(name);
  return {ObjectId(id), class_name};
}

Payload Node::CallHead(HeadOp op, Buffer&& args, std::chrono::milliseconds timeout) {
  HeadCall call;
  call.op = static_cast<uint16_t>(op);
  call.args = std::make_shared<const Buffer>(std::move(args));
  {
    std::lock_guard<std::mutex> lock(calls_mu_);
    call.request = ++next_call_;
  }
  const uint64_t request = call.request;
  to_head_(std::move(call));
  HeadReply reply;
  {
    std::unique_lock<std::mutex> lock(calls_mu_);
    if (!calls_cv_.wait_for(lock, timeout, [&] { return replies_.count(request) > 0; })) {
      throw Error("prism: no answer from the head (rank 0) in " +
                  std::to_string(timeout.count() / 1000) + " s to a control call");
    }
    reply = std::move(replies_[request]);
    replies_.erase(request);
  }
  if (!reply.ok) {
    if (reply.error_kind == ErrorKind::kResourceError) throw ResourceError(reply.error);
    throw Error(reply.error);
  }
  return reply.result;
}

void Node::Execute(DispatchTask& d, ActorHost* host) {
  const TaskSpec& spec = *d.spec;
  t_task.active = true;
  t_task.in_actor = host != nullptr;
  t_task.actor_restarted = host != nullptr && host->incarnation() > 0;
  t_task.id = spec.id;
  t_task.demand = spec.demand;
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
        if (local->error) ThrowLocal(loc.id, *local->error);
        ref_values[i] = local->value;
      } else {
        // Ask the head, which says where to pull it from (spreading readers over the
        // copies), or, for an actor call routed before it was ready, when it is.
        Request({loc.id});
        to_fetch.push_back(loc.id);
      }
    }
    if (!to_fetch.empty()) {
      store_.WaitFor(to_fetch, to_fetch.size(), std::nullopt);
      for (size_t i = 0; i < d.refs.size(); ++i) {
        if (ref_values[i]) continue;
        auto obj = store_.Find(d.refs[i].id);
        if (!obj) throw ObjectLostError("prism: argument " + d.refs[i].id.Hex() + " vanished");
        if (obj->error) ThrowLocal(d.refs[i].id, *obj->error);
        ref_values[i] = obj->value;
      }
    }
    std::vector<ByteView> views;
    views.reserve(spec.args.size());
    size_t next_ref = 0;
    for (const auto& arg : spec.args) {
      const Payload& p = arg.is_ref ? ref_values.at(next_ref++) : arg.value;
      views.push_back({p->data(), p->size()});
    }
    const RemoteFunction* fn = FunctionRegistry::Instance().FindByName(spec.function);
    const bool usable = fn != nullptr && (spec.kind == TaskKind::kTask ? bool(fn->invoke)
                                          : spec.kind == TaskKind::kActorCreation ? bool(fn->create)
                                                                                  : bool(fn->method));
    if (!usable) {
      throw FunctionNotFound("prism: function " + spec.function +
                             " is not registered in this binary (PRISM_REMOTE)");
    }
    Buffer out;
    ContainedRefScope contained;
    if (spec.kind == TaskKind::kTask) {
      fn->invoke(views, out);
    } else if (spec.kind == TaskKind::kActorCreation) {
      host->SetInstance(fn->create(views), fn->destroy);
    } else {
      void* self = host->instance();
      if (self == nullptr) throw ActorError("prism: actor " + spec.actor.Hex() + " is dead");
      fn->method(self, views, out);
    }
    done.contained = contained.Take();
    done.size = out.size();
    auto payload = std::make_shared<const Buffer>(std::move(out));
    if (payload->size() <= options_.max_inline_bytes) {
      done.inline_value = std::move(payload);
    } else {
      store_.Put(spec.id, std::move(payload));
    }
  } catch (const ExitActorSignal&) {
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kActorError, "the actor ended itself with ExitActor()", spec.name, options_.rank);
    if (host != nullptr) {
      FailCalls(host->Die("the actor ended itself with ExitActor()"),
                "the actor ended itself with ExitActor()");
      to_head_(ActorDied{host->id(), "the actor ended itself with ExitActor()"});
    }
  } catch (const ActorError& e) {
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kActorError, e.what(), spec.name, options_.rank);
  } catch (const ObjectStoreFullError& e) {
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kObjectStoreFull, std::string(e.what()) + " (storing the result of task " +
                                         spec.name + " on rank " + std::to_string(options_.rank) + ")",
                  spec.name, options_.rank);
  } catch (const TaskError& e) {
    // A failure of something this task waited on: pass the original cause through.
    done.ok = false;
    done.error = ErrorInfo::Exception(e.OriginalType(), e.OriginalMessage(), e.TaskName(), e.Rank());
  } catch (const std::exception& e) {
    done.ok = false;
    done.error = ErrorInfo::Exception(Demangle(typeid(e).name()), e.what(), spec.name, options_.rank);
  } catch (...) {
    done.ok = false;
    done.error = ErrorInfo::Exception("unknown exception", "a non-std::exception was thrown", spec.name,
                  options_.rank);
  }
  if (!done.ok && host != nullptr && spec.kind == TaskKind::kActorCreation) {
    std::string cause = "the actor's factory " + spec.function + " threw " + done.error.type +
                        ": " + done.error.message;
    FailCalls(host->Die(cause), cause);
    to_head_(ActorDied{host->id(), cause});
  }
  done.exec_ns = NowNs() - start;
  t_task.active = false;
  t_task.in_actor = false;
  to_head_(std::move(done));
  FlushDeferredReleases();
}

}  // namespace prism::internal
