#include "node_manager/node.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <typeinfo>

#include "common/log.h"
#include "prism/remote.h"
#include "prism/serialization.h"

namespace prism::internal {

using Clock = std::chrono::steady_clock;

namespace {
/// The highest id counter a node of this process reached (see Node::counter_).
std::atomic<uint64_t> g_ids_minted{0};
}  // namespace

Node::Node(NodeOptions options, ToHead to_head, ObjectFetcher* fetcher)
    : options_(std::move(options)),
      to_head_(std::move(to_head)),
      store_(options_.object_store_memory, options_.spill_dir),
      refs_(to_head_),
      puller_(options_.rank, store_, fetcher, to_head_, options_.recovery),
      producers_(options_.max_inline_bytes, store_, to_head_, [this] { return NextId(); }),
      runner_(options_.rank, options_.capacities.at(options_.rank), options_.max_inline_bytes, store_,
              puller_, producers_, to_head_, this, [this] { refs_.FlushDeferred(); }, options_.gpus),
      streams_(to_head_, refs_, puller_, store_, [this] { return runner_.Block(); },
               [this] { runner_.Unblock(); }),
      callbacks_(this),
      timeouts_([this](TaskId id, int64_t ms) {
        to_head_(CancelTask{id, true, static_cast<uint64_t>(ms)});
      }),
      counter_(g_ids_minted.load()) {
  refs_.SetReleasedHook([this](ObjectId id) { puller_.Released(id); });
  refs_.SetBatchReleases(options_.batch_releases);
  store_.SetCallbackSink([this](std::vector<MemoryStore::ReadyCallback>&& ready) {
    callbacks_.Post(std::move(ready));
  });
  if (options_.node_ids.empty()) {
    for (int r = 0; r < options_.world_size; ++r) options_.node_ids.push_back("rank-" + std::to_string(r));
  }
  // Ray's default: each job its own anonymous namespace (the same on every rank).
  if (options_.ray_namespace.empty()) options_.ray_namespace = "anonymous-" + options_.job_id;
}

std::vector<std::map<std::string, double>> Node::Capacities() const {
  std::vector<std::map<std::string, double>> out;
  for (const auto& c : options_.capacities) out.push_back(c.ToMap());
  return out;
}

state::ObjectStoreState Node::LocalObjectStore() {
  const MemoryStore::Usage u = store_.GetUsage();
  state::ObjectStoreState out;
  out.rank = options_.rank;
  out.capacity_bytes = u.capacity;
  out.used_bytes = u.bytes;
  out.peak_used_bytes = u.peak_bytes;
  out.num_objects = u.num_objects;
  out.spilled_bytes = u.spilled_bytes;
  out.num_spilled = u.num_spilled;
  out.spilled_bytes_total = u.spilled_bytes_total;
  out.num_spilled_total = u.num_spilled_total;
  out.restored_bytes_total = u.restored_bytes_total;
  out.num_restored_total = u.num_restored_total;
  return out;
}

Node::~Node() = default;

bool Node::Stop() {
  const uint64_t minted = counter_.load();
  for (uint64_t seen = g_ids_minted.load(); seen < minted && !g_ids_minted.compare_exchange_weak(seen, minted);) {
  }
  timeouts_.Stop();
  const bool callbacks_idle = callbacks_.Stop();
  return runner_.Stop() && callbacks_idle;
}

// ---- Submit / Put ----------------------------------------------------------------------

void Node::ValidateResources(const std::string& task_name,
                             const std::map<std::string, double>& resources) const {
  for (const auto& [name, amount] : resources) {
    if (!(amount >= 0) || !std::isfinite(amount)) {
      throw ResourceError("prism: task " + task_name + ": resource " + name + " = " +
                          std::to_string(amount) + " must be a finite amount >= 0");
    }
    if (amount > kMaxResourceAmount) {
      throw ResourceError("prism: task " + task_name + ": resource " + name + " = " +
                          std::to_string(amount) + " is more than any cluster holds (at most " +
                          std::to_string(kMaxResourceAmount) + " of one resource)");
    }
    if (amount > 1 && amount != std::floor(amount)) {
      throw ResourceError("prism: task " + task_name + ": resource " + name + " = " +
                          std::to_string(amount) +
                          ": amounts above 1 must be whole numbers (only amounts below 1 "
                          "may be fractional)");
    }
  }
}

void Node::CheckFeasible(const TaskOptions& options) const {
  const SchedulingStrategy& where = options.strategy;
  if (where.kind == SchedulingStrategy::Kind::kNodeAffinity && !where.soft) {
    const int n = static_cast<int>(options_.capacities.size());
    if (where.rank < 0 || where.rank >= n) {
      throw ResourceError("prism: task " + options.name + " is pinned (NodeAffinitySchedulingStrategy, hard) to rank " +
                          std::to_string(where.rank) + ", but the job has ranks 0.." + std::to_string(n - 1) +
                          ". Pin to an existing rank, or pass soft = true to run elsewhere when it cannot");
    }
    if (!options.demand.FitsIn(options_.capacities[where.rank])) {
      throw ResourceError("prism: task " + options.name + " is pinned (NodeAffinitySchedulingStrategy, hard) to rank " +
                          std::to_string(where.rank) + ", which can never provide " + options.demand.ToString() +
                          " (it offers " + options_.capacities[where.rank].ToString() +
                          "). Lower the request, or pass soft = true to run elsewhere");
    }
    return;
  }
  bool feasible = std::any_of(options_.capacities.begin(), options_.capacities.end(),
                              [&](const ResourceSet& c) { return options.demand.FitsIn(c); });
  if (feasible) return;
  std::string offer = DescribeRankCapacities(options_.capacities, 4);
  if (options_.wait_infeasible) {
    WarnInfeasible(options.name, options.demand.ToString(), offer);
    return;
  }
  throw ResourceError("prism: task " + options.name + " asks for " + options.demand.ToString() +
                      " but no rank can ever provide that (ranks offer:" + offer +
                      "). Lower the request or start ranks with more "
                      "(--prism-num-cpus, --prism-num-gpus, --prism-resources).");
}

void Node::WarnInfeasible(const std::string& name, const std::string& demand, const std::string& offer) const {
  {
    std::lock_guard<std::mutex> lock(warned_mu_);
    if (!warned_infeasible_.insert(name + " " + demand).second) return;  // once per function and demand
  }
  PRISM_LOG_WARN("task " << name << " asks for " << demand
                 << ", which no rank can ever provide (ranks offer:" << offer
                 << "); it stays pending, as in Ray (Config::wait_infeasible): an MPI job's ranks are "
                    "fixed, so it will not run unless cancelled or the job ends. Lower the request "
                    "or start ranks with more (--prism-num-cpus, --prism-num-gpus, --prism-resources)");
}

namespace {

// A task with default resources: {CPU: 1}. Never destroyed: Shutdown at exit (a driver that
// did not call it) may still submit tasks after static destructors ran.
const ResourceSet& DefaultDemand() {
  static const ResourceSet& demand = *new ResourceSet({{"CPU", 1}});
  return demand;
}

// The demand `resources` asks for (CPU 1 unless given) equals `demand`.
bool SameDemand(const std::map<std::string, double>& resources, const ResourceSet& demand) {
  if (resources.empty()) return demand == DefaultDemand();
  size_t entries = 0;
  bool cpu = false;
  for (const auto& [name, amount] : resources) {
    // Not validated yet: an amount out of range (or NaN) never matches; building the
    // options then says what is wrong with it.
    if (!(amount >= 0 && amount <= kMaxResourceAmount)) return false;
    const int64_t units = ToUnits(amount);
    cpu = cpu || name == kCpuName;
    if (units == 0) continue;
    if (demand.Get(name) != units) return false;
    ++entries;
  }
  if (!cpu) {
    if (demand.Get(kCpuName) != kResourceUnit) return false;
    ++entries;
  }
  return entries == demand.Entries().size();
}

}  // namespace

const std::string& Node::NamespaceOf(const TaskRequest& request) const {
  return request.ray_namespace.empty() ? options_.ray_namespace : request.ray_namespace;
}

bool Node::SameOptions(const TaskRequest& request, const TaskOptions& o) const {
  // Every field OptionsOf sets is compared here: two requests differing in one that is
  // not would share options. A field added to TaskOptions changes its size: compare it
  // below (and set it in OptionsOf), then update the size.
#if defined(__GLIBCXX__) && defined(__x86_64__)
  static_assert(sizeof(TaskOptions) == 272, "TaskOptions changed: compare its new field in SameOptions");
#endif
  const bool named = !request.name.empty();
  const bool named_actor = request.kind == TaskRequest::Kind::kActorCreation && named;
  return o.function == request.function && o.name == (named ? request.name : request.function) &&
         o.strategy == request.strategy && o.placement_group == request.placement_group &&
         o.bundle_index == request.bundle_index && o.max_retries == request.max_retries &&
         o.retry_exceptions == request.retry_exceptions && o.streaming == request.streaming &&
         o.generator_backpressure == request.generator_backpressure && o.class_name == request.class_name &&
         o.max_restarts == request.max_restarts && o.max_concurrency == request.max_concurrency &&
         o.max_task_retries == request.max_task_retries &&
         (named_actor ? o.actor_name == o.name && o.actor_namespace == NamespaceOf(request)
                      : o.actor_name.empty() && o.actor_namespace.empty()) &&
         SameDemand(request.resources, o.demand);
}

std::shared_ptr<const TaskOptions> Node::OptionsOf(const TaskRequest& request) const {
  // Calls of one caller match the thread's recent options: compared field by field with
  // the request, nothing is built or checked again.
  thread_local RecentOptions recent;
  thread_local uint64_t recent_node = 0;
  if (recent_node != serial_) {
    recent.Clear();
    recent_node = serial_;
  }
  if (auto same = recent.Find([&](const TaskOptions& o) { return SameOptions(request, o); })) return same;
  auto o = std::make_shared<TaskOptions>();
  const bool named = !request.name.empty();
  o->function = request.function;
  o->name = named ? request.name : request.function;
  if (request.resources.empty()) {
    o->demand = DefaultDemand();
  } else {
    ValidateResources(o->name, request.resources);
    std::map<std::string, double> resources = request.resources;
    resources.try_emplace("CPU", 1);
    o->demand = ResourceSet(resources);
  }
  o->strategy = request.strategy;
  o->placement_group = request.placement_group;
  o->bundle_index = request.bundle_index;
  o->max_retries = request.max_retries;
  o->retry_exceptions = request.retry_exceptions;
  o->streaming = request.streaming;
  o->generator_backpressure = request.generator_backpressure;
  o->class_name = request.class_name;
  o->max_restarts = request.max_restarts;
  o->max_concurrency = request.max_concurrency;
  o->max_task_retries = request.max_task_retries;
  if (request.kind == TaskRequest::Kind::kActorCreation && named) {
    o->actor_name = o->name;
    o->actor_namespace = NamespaceOf(request);
  }
  if (o->strategy.kind != SchedulingStrategy::Kind::kDefault && !o->placement_group.empty()) {
    throw Error("prism: task " + o->name + " has both a placement group and a scheduling strategy; "
                "the placement group decides where it runs, so give only one");
  }
  // Ray schedules an actor's calls by its actor alone: under its rule a call's resources are
  // not checked (the call runs with what the actor holds).
  if (!(options_.wait_infeasible && request.kind == TaskRequest::Kind::kActorCall)) CheckFeasible(*o);
  recent.Add(o);
  return o;
}

ObjectId Node::Submit(TaskRequest&& request) {
  auto shared_spec = std::make_shared<TaskSpec>();
  TaskSpec& spec = *shared_spec;
  spec.options = OptionsOf(request);
  const TaskOptions& options = *spec.options;
  const int depth = CurrentTaskDepth() + 1;
  if (depth > kMaxTaskDepth) {
    throw RuntimeError("prism: " + options.name + " would run at nesting depth " +
                       std::to_string(depth) + " (a task submitting a task, and so on), " +
                       "beyond the limit of " + std::to_string(kMaxTaskDepth) +
                       " (kMaxTaskDepth): does the recursion end? Each level waiting in Get "
                       "holds a thread; make it shallower, or a loop inside one task");
  }
  spec.depth = static_cast<int16_t>(depth);
  if (request.num_returns < 1 || request.num_returns > kMaxNumReturns) {
    throw Error("prism: task " + options.name + " asks for " + std::to_string(request.num_returns) +
                " returns; SetNumReturns takes 1.." + std::to_string(kMaxNumReturns));
  }
  spec.num_returns = request.num_returns;
  spec.id = NextId(spec.num_returns);
  spec.args.reserve(request.args.size());
  for (auto& a : request.args) {
    TaskSpecArg arg;
    arg.is_ref = a.is_ref;
    arg.ref = a.ref;
    if (!a.is_ref) arg.value = std::make_shared<const Buffer>(std::move(a.value));
    spec.args.push_back(std::move(arg));
  }
  spec.contained = std::move(request.contained);
  spec.submitter = options_.rank;
  spec.kind = static_cast<TaskKind>(request.kind);
  spec.actor = request.actor;
  spec.parent = CurrentTaskId();
  ObjectId id = spec.id;
  const int num_returns = spec.num_returns;
  // Its values may come back as soon as the head has the task: listen first.
  if (options.streaming) streams_.Register(id, options.generator_backpressure);
  puller_.ExpectResults(id, num_returns);  // the head tells us of them: Get need not ask
  refs_.Adopt(id, SubmitTask{std::move(shared_spec)}, num_returns);  // the returned ObjectRefs'
  if (request.timeout_ms >= 0) timeouts_.Add(id, request.timeout_ms);
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
  refs_.Adopt(id, std::move(msg));
  return id;
}

// ---- Reference counting ----------------------------------------------------------------

void Node::AddLocalRef(ObjectId id) { refs_.Add(id); }

void Node::RemoveLocalRef(ObjectId id) {
  refs_.Remove(id, DeferRefReleases::Depth() > 0 && TaskRunner::InTask());
}

// ---- Streaming generators --------------------------------------------------------------

ObjectId Node::NextGeneratorValue(TaskId generator, int64_t timeout_ms) {
  return streams_.Next(generator, timeout_ms);
}

void Node::DropGenerator(TaskId generator) { streams_.Drop(generator); }

// ---- Get / Wait ------------------------------------------------------------------------

PresenceFlags Node::Await(std::span<const ObjectId> ids, size_t need, int64_t timeout_ms) {
  std::optional<Clock::time_point> deadline;
  if (timeout_ms >= 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  PresenceFlags now_flags;
  auto present_now = [&] {  // a look without waiting: how many of ids are here
    now_flags = store_.WaitFor(ids, need, Clock::now());
    return static_cast<size_t>(std::count(now_flags.begin(), now_flags.end(), true));
  };
  size_t have = present_now();
  if (have >= need) return now_flags;
  // The driver waiting for a task that no executor thread took yet runs it itself, rather
  // than wake a thread that may share its core and then sleep until it is done. Not under
  // a timeout: the task may run longer than the caller wants to wait. Each task run stores
  // its object (a value or its error), so no more than `need` are run.
  const size_t before = have;
  for (size_t i = 0; i < ids.size() && have < need && timeout_ms < 0 && !TaskRunner::InTask(); ++i) {
    if (!now_flags[i] && runner_.RunHere(ids[i])) ++have;
  }
  if (have > before && present_now() >= need) return now_flags;
  refs_.SendReleases();  // about to wait: what this rank dropped goes to the head now
  const std::atomic<bool>* cancel = TaskRunner::InTask() ? Executor::CurrentCancelFlag() : nullptr;
  const bool blocked = runner_.Block();
  auto flags = store_.WaitFor(ids, need, deadline, cancel);
  if (blocked) runner_.Unblock();
  if (cancel != nullptr && cancel->load(std::memory_order_acquire)) ThrowCancelled(options_.rank);
  return flags;
}

std::vector<Payload> Node::Get(const std::vector<ObjectId>& ids, int64_t timeout_ms) {
  if (CurrentTaskCancelled()) ThrowCancelled(options_.rank);
  auto found = store_.FindMany(ids);
  boost::container::small_vector<ObjectId, 4> missing;
  boost::container::small_vector<size_t, 4> missing_at;  // their positions in ids
  for (size_t i = 0; i < ids.size(); ++i) {
    if (found[i]) continue;
    missing.push_back(ids[i]);
    missing_at.push_back(i);
  }
  if (!missing.empty()) {
    const std::span<const ObjectId> wanted(missing.data(), missing.size());
    puller_.Request(wanted);
    auto flags = Await(wanted, wanted.size(), timeout_ms);
    size_t still = std::count(flags.begin(), flags.end(), false);
    if (still > 0) {
      throw TimeoutError("prism: Get timed out after " + std::to_string(timeout_ms) + " ms: " +
                         std::to_string(still) + " of " + std::to_string(ids.size()) +
                         " objects not ready");
    }
    auto arrived = store_.FindMany(wanted);  // the rest were found above
    for (size_t k = 0; k < missing_at.size(); ++k) found[missing_at[k]] = std::move(arrived[k]);
  }
  std::vector<Payload> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!found[i]) {  // freed between the wait and now: cannot happen while the caller holds refs
      throw ObjectLostError("prism: object " + ids[i].Hex() + " was freed while being read");
    }
    if (found[i]->error) ThrowStored(store_, ids[i], *found[i]->error);
    out.push_back(std::move(found[i]->value));
  }
  return out;
}

std::vector<bool> Node::Wait(const std::vector<ObjectId>& ids, int num_objects,
                             int64_t timeout_ms) {
  if (CurrentTaskCancelled()) ThrowCancelled(options_.rank);
  std::unordered_set<ObjectId> unique(ids.begin(), ids.end());
  if (unique.size() != ids.size()) {
    throw Error("prism: Wait got the same ObjectRef more than once; pass each ref once");
  }
  puller_.Request(ids);
  auto flags = Await(ids, static_cast<size_t>(num_objects), timeout_ms);
  return std::vector<bool>(flags.begin(), flags.end());
}

// ---- Messages from the head -------------------------------------------------------------

void Node::Handle(Message&& msg) {
  if (auto* d = std::get_if<DispatchTask>(&msg)) {
    runner_.Run(std::move(*d));
  } else if (auto* k = std::get_if<::prism::internal::KillActor>(&msg)) {
    runner_.Kill(*k);
  } else if (auto* reply = std::get_if<HeadReply>(&msg)) {
    std::lock_guard<std::mutex> lock(calls_mu_);
    replies_[reply->request] = std::move(*reply);
    calls_cv_.notify_all();
  } else if (auto* r = std::get_if<ObjectReady>(&msg)) {
    puller_.OnObjectReady(std::move(*r));
  } else if (auto* f = std::get_if<FreeObjects>(&msg)) {
    store_.Erase(f->ids);
  } else if (auto* c = std::get_if<CancelDispatched>(&msg)) {
    runner_.Cancel(*c);
  } else if (auto* g = std::get_if<PlacementGroupChanged>(&msg)) {
    std::lock_guard<std::mutex> lock(groups_mu_);
    group_changes_[g->group] = g->status;
    groups_cv_.notify_all();
  } else if (auto* report = std::get_if<GeneratorReport>(&msg)) {
    streams_.OnReport(std::move(*report));
  } else if (auto* ack = std::get_if<GeneratorAck>(&msg)) {
    producers_.OnAck(*ack);
  } else if (auto* lost = std::get_if<RankLost>(&msg)) {
    puller_.PeerLost(lost->rank);
  } else if (auto* d = std::get_if<Deliver>(&msg)) {
    std::shared_ptr<ChannelInbox> inbox;
    {
      std::lock_guard<std::mutex> lock(channels_mu_);
      auto it = channels_.find(d->channel);
      if (it != channels_.end()) inbox = it->second;
    }
    if (inbox) {
      inbox->Push({d->from, d->bytes ? std::string(d->bytes->data(), d->bytes->size()) : std::string()});
    } else {
      PRISM_LOG_WARN("a message for channel " << d->channel << " from rank " << d->from
                                              << " came after it was closed here; dropped");
    }
  } else {
    PRISM_LOG_ERROR("node got an unexpected " << KindName(msg));
  }
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

// ---- Channels -------------------------------------------------------------------------

std::shared_ptr<ChannelInbox> Node::OpenChannel(const std::string& name) {
  if (name.empty()) throw Error("prism: a channel needs a name");
  auto inbox = std::make_shared<ChannelInbox>();
  {
    // Registered before the head routes to it, so no message can come too early.
    std::lock_guard<std::mutex> lock(channels_mu_);
    if (!channels_.emplace(name, inbox).second) {
      throw Error("prism: channel \"" + name + "\" is already open on this rank (rank " +
                  std::to_string(options_.rank) + ")");
    }
  }
  int owner = -1;
  try {
    owner = internal::CallHead<internal::OpenChannel>(*this, {name, options_.rank});
  } catch (...) {
    std::lock_guard<std::mutex> lock(channels_mu_);
    channels_.erase(name);
    throw;
  }
  if (owner >= 0) {
    std::lock_guard<std::mutex> lock(channels_mu_);
    channels_.erase(name);
    throw Error("prism: channel \"" + name + "\" is already open on rank " + std::to_string(owner) +
                "; close it there first or pick another name");
  }
  return inbox;
}

void Node::CloseChannel(const std::string& name) {
  internal::CallHead<internal::CloseChannel>(*this, {name, options_.rank});  // no more routing here, then forget it
  std::lock_guard<std::mutex> lock(channels_mu_);
  channels_.erase(name);
}

void Node::Publish(const std::string& name, Buffer&& bytes) {
  to_head_(::prism::internal::Publish{name, std::make_shared<const Buffer>(std::move(bytes))});
}

// ---- Cancel, completion callbacks, placement group pushes --------------------------------

void Node::Cancel(ObjectId id, bool recursive) { to_head_(CancelTask{id, recursive, 0}); }

void Node::OnReady(ObjectId id, std::function<void()> callback) {
  // The pending callback holds a reference (as Ray's callback holds its ObjectRef): the
  // object cannot be freed before the callback has seen it.
  refs_.Add(id);
  puller_.Request({&id, 1});
  store_.NotifyWhenPresent(id, [this, id, cb = std::move(callback)] {
    struct Release {  // even if cb throws
      Node* node;
      ObjectId id;
      ~Release() { node->refs_.Remove(id, false); }
    } release{this, id};
    cb();
  });
}

bool Node::WaitPlacementGroup(const std::string& id, int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
  // One call registers this rank as a watcher and says where the group is now; the head
  // pushes PlacementGroupChanged when it is created or removed (maybe before the answer).
  auto status = internal::CallHead<internal::WatchGroup>(*this, id);
  if (status != PlacementGroupStatus::kPending) return status == PlacementGroupStatus::kCreated;
  std::unique_lock<std::mutex> lock(groups_mu_);
  auto changed = [&] { return group_changes_.count(id) > 0; };
  if (!groups_cv_.wait_until(lock, deadline, changed)) return false;
  return group_changes_[id] == static_cast<uint8_t>(PlacementGroupStatus::kCreated);
}

// ---- Actors and control calls ---------------------------------------------------------

void Node::KillActor(ObjectId actor, bool no_restart) { to_head_(KillActorRequest{actor, no_restart}); }

std::pair<ObjectId, std::string> Node::LookupActor(const std::string& name, const std::string& ray_namespace) {
  auto [id, class_name] = internal::CallHead<internal::LookupActor>(
      *this, {ray_namespace.empty() ? options_.ray_namespace : ray_namespace, name});
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

}  // namespace prism::internal
