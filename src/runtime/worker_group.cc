// WorkerGroup (prism/platform/worker_group.h), built on the platform door (plus two helpers
// of common/: Demangle, ResourceSet::ToString): a placement group reserves the workers, one
// task per bundle runs the loop, and a channel carries every report and every worker's end
// to the driver, in order per worker.
//
// Stop and abort reach a worker through a small task pinned to its rank (no CPU: the
// worker's own task holds them), which flips the worker's entry in this process's
// registry, keyed by (group, attempt, worker), or runs its abort hooks.
#include "prism/platform/worker_group.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <tuple>
#include <typeinfo>

#include "common/demangle.h"
#include "common/log.h"
#include "common/resources.h"
#include "prism/api.h"

#include "prism/platform/channel.h"
#include "prism/platform/invoke.h"
#include "prism/platform/placement.h"
#include "prism/platform/preemption.h"

namespace prism::platform {
namespace detail {

/// What travels on a group's channel.
struct WireEvent {
  int kind = 0;
  int worker = -1;
  int attempt = 0;
  std::string bytes;       // kReport, kFinished
  std::string error_type;  // kFailed
  std::string message;     // kFailed
  int signal = 0;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& kind& worker& attempt& bytes& error_type& message& signal;
  }
};

/// What a worker's task is given.
struct WorkerStart {
  std::string group_id, channel, loop, config;
  int attempt = 0;
  int index = 0;
  std::vector<WorkerInfo> group;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& group_id& channel& loop& config& attempt& index& group;
  }
};

// ---- This process's workers: stop flags and abort hooks ---------------------------------

using WorkerKey = std::tuple<std::string, int, int>;  // group, attempt, worker
struct WorkerEntry {
  bool stop = false;
  bool aborted = false;  // hooks registered later run at once
  std::vector<std::function<void()>> abort_hooks;
};
std::mutex g_mu;
std::map<WorkerKey, WorkerEntry> g_workers;
thread_local const WorkerContext* t_worker = nullptr;

enum Control { kStop = 0, kAbort = 1 };

/// Runs on a worker's rank: asks that worker to stop, or runs its abort hooks.
bool PrismWorkerGroupControl(std::string group, int attempt, int index, int what) {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    // A worker not started yet finds its stop when it starts. One that ended already
    // leaves this entry behind until its group's next attempt starts here.
    WorkerEntry& entry = g_workers[{group, attempt, index}];
    entry.stop = true;
    if (what == kAbort) {
      entry.aborted = true;
      hooks = entry.abort_hooks;
    }
  }
  for (auto& hook : hooks) hook();
  return true;
}

/// A worker: runs the loop with its context on this thread, then tells the driver how it
/// ended (and rethrows a failure, so the state API lists the task as failed too).
std::string PrismWorkerGroupRun(WorkerStart s) {
  const WorkerKey key{s.group_id, s.attempt, s.index};
  WorkerContext ctx(s.group_id, s.channel, s.attempt, s.group.at(static_cast<size_t>(s.index)), s.group);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_workers.try_emplace(key);  // a stop that came first is kept
    // Entries of this group's older attempts (controls that came after a worker ended).
    for (auto it = g_workers.lower_bound({s.group_id, 0, 0});
         it != g_workers.end() && std::get<0>(it->first) == s.group_id;) {
      it = std::get<1>(it->first) < s.attempt ? g_workers.erase(it) : std::next(it);
    }
  }
  t_worker = &ctx;
  WireEvent end;
  end.worker = s.index;
  end.attempt = s.attempt;
  std::exception_ptr failure;
  try {
    end.bytes = Invoke<std::string>(s.loop, s.config);
    end.kind = WorkerEvent::kFinished;
  } catch (...) {
    end.kind = WorkerEvent::kFailed;
    failure = std::current_exception();
    end.error_type = ExceptionType(failure);
    end.message = ExceptionMessage(failure);
  }
  t_worker = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_workers.erase(key);
  }
  Publish(s.channel, ToBytes(end));
  if (failure) std::rethrow_exception(failure);
  return end.bytes;
}

}  // namespace detail

std::string TypeName(const std::type_info& type) { return internal::Demangle(type.name()); }

std::string ExceptionType(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const TaskError& t) {
    return t.OriginalType();
  } catch (const std::exception& x) {
    return TypeName(typeid(x));
  } catch (...) {
    return "unknown exception";
  }
}

std::string ExceptionMessage(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const TaskError& t) {
    return t.OriginalMessage();
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "a non-std::exception was thrown";
  }
}

std::string DescribeException(std::exception_ptr e) { return ExceptionType(e) + ": " + ExceptionMessage(e); }

const WorkerContext& CurrentWorker() {
  if (detail::t_worker == nullptr) {
    throw Error("prism: CurrentWorker() called outside a WorkerGroup's loop");
  }
  return *detail::t_worker;
}

void WorkerContext::Report(const std::string& bytes) const {
  detail::WireEvent e;
  e.kind = WorkerEvent::kReport;
  e.worker = info_.index;
  e.attempt = attempt_;
  e.bytes = bytes;
  Publish(channel_, ToBytes(e));
}

bool WorkerContext::StopRequested() const {
  std::lock_guard<std::mutex> lock(detail::g_mu);
  auto it = detail::g_workers.find({group_id_, attempt_, info_.index});
  return it != detail::g_workers.end() && it->second.stop;
}

void WorkerContext::OnAbort(std::function<void()> hook) const {
  {
    std::lock_guard<std::mutex> lock(detail::g_mu);
    auto& entry = detail::g_workers[{group_id_, attempt_, info_.index}];
    if (!entry.aborted) {
      entry.abort_hooks.push_back(std::move(hook));
      return;
    }
  }
  hook();  // the group was aborted before this hook was set
}

// ---- The driver's side -------------------------------------------------------------------

struct WorkerGroup::Impl {
  WorkerGroupOptions options;
  std::string id;
  std::unique_ptr<Channel> channel;
  PlacementGroup pg;
  std::vector<WorkerInfo> workers;
  int attempt = -1;
  std::set<int> alive;              // workers of the current attempt that have not ended
  // The current attempt's worker tasks' results: they hold the refs the workers serialized
  // into their results and reports until the reader has read them (header).
  std::vector<ObjectRef<std::string>> results;
  std::deque<WorkerEvent> kept;     // events read by Abort, for Next
  std::optional<PreemptionHook> preemption;

  /// How often a wait for events looks for a worker whose task failed without a word: its
  /// process died (a lost rank in recovery mode), so its end event never comes.
  static constexpr int64_t kSilentEndCheckMs = 200;

  /// The next event from the channel (stale attempts dropped), without `kept`.
  std::optional<WorkerEvent> Receive(int64_t timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      int64_t left = timeout_ms < 0 ? -1
                                    : std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                               deadline - std::chrono::steady_clock::now())
                                                               .count());
      auto m = channel->Next(left < 0 ? kSilentEndCheckMs : std::min(left, kSilentEndCheckMs));
      if (!m) {
        if (auto ended = SilentEnd()) return ended;
        if (left >= 0 && left <= kSilentEndCheckMs) return std::nullopt;
        continue;
      }
      auto wire = FromBytes<detail::WireEvent>(m->bytes);
      WorkerEvent e;
      e.kind = static_cast<WorkerEvent::Kind>(wire.kind);
      e.worker = wire.worker;
      e.attempt = wire.attempt;
      e.bytes = std::move(wire.bytes);
      if (e.kind == WorkerEvent::kFailed) {
        e.bytes = wire.error_type + ": " + wire.message;  // as DescribeException
        e.error_type = std::move(wire.error_type);
        e.message = std::move(wire.message);
      }
      e.signal = wire.signal;
      if (e.kind != WorkerEvent::kPreempted && e.attempt != attempt) continue;  // an older attempt's
      if (e.kind == WorkerEvent::kFinished || e.kind == WorkerEvent::kFailed) {
        if (alive.erase(e.worker) == 0) continue;  // already ended (SilentEnd)
      }
      return e;
    }
  }

  /// A worker of this attempt whose task failed without sending its end (its rank was
  /// lost): a kFailed event with the task's error, once. Null if none.
  std::optional<WorkerEvent> SilentEnd() {
    if (alive.empty() || results.empty()) return std::nullopt;
    std::vector<ObjectId> ids;
    for (const auto& r : results) ids.push_back(r.ID());
    std::vector<bool> ready;
    try {
      ready = internal::RequireCore("WorkerGroup").Wait(ids, static_cast<int>(ids.size()), 0);
    } catch (const TaskCancelledError&) {
      return std::nullopt;  // the task that owns the group was cancelled: it cannot wait, even for no time
    }
    for (int i : alive) {
      const auto u = static_cast<size_t>(i);
      if (u >= ready.size() || !ready[u]) continue;
      try {
        results[u].Get(0);
        continue;  // it finished: its end event is on its way
      } catch (const std::exception& error) {
        WorkerEvent e;
        e.kind = WorkerEvent::kFailed;
        e.worker = i;
        e.attempt = attempt;
        e.error_type = "prism::TaskError";
        e.message = error.what();
        e.bytes = e.error_type + ": " + e.message;
        alive.erase(i);
        return e;
      }
    }
    return std::nullopt;
  }

  void Control(int what) {
    for (int i : alive) {
      const auto& w = workers[static_cast<size_t>(i)];
      prism::Task(detail::PrismWorkerGroupControl)
          .SetResource("CPU", 0)
          .SetResource("rank:" + std::to_string(w.rank), 0.001)
          .Remote(id, attempt, i, what);
    }
  }
};

namespace {
std::string NewGroupId() {
  static std::atomic<uint64_t> next{0};
  return "wg-" + std::to_string(GetRuntimeContext().GetRank()) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(++next);
}
}  // namespace

WorkerGroup::WorkerGroup(WorkerGroupOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& g = *impl_;
  if (options.num_workers < 1) {
    throw Error("prism: WorkerGroup " + options.name + ": num_workers is " +
                std::to_string(options.num_workers) + "; it must be at least 1");
  }
  if (!options.ranks.empty() && static_cast<int>(options.ranks.size()) != options.num_workers) {
    throw Error("prism: WorkerGroup " + options.name + ": ranks lists " + std::to_string(options.ranks.size()) +
                " ranks for " + std::to_string(options.num_workers) + " workers; give one per worker, or none");
  }
  if (options.resources_per_worker.empty()) options.resources_per_worker["CPU"] = 1;
  g.options = std::move(options);
  g.id = NewGroupId();
  g.channel = std::make_unique<Channel>("prism/worker_group/" + g.id);
  PlacementGroupCreationOptions pg;
  pg.strategy = g.options.strategy;
  pg.one_bundle_per_rank = g.options.one_worker_per_rank;
  for (int i = 0; i < g.options.num_workers; ++i) {
    pg.bundles.emplace_back(g.options.resources_per_worker.begin(), g.options.resources_per_worker.end());
    if (!g.options.ranks.empty()) pg.bundles.back()["rank:" + std::to_string(g.options.ranks[i])] = 0.001;
  }
  g.pg = CreatePlacementGroup(pg);  // ResourceError if it could never fit
  if (!g.pg.Wait(g.options.reserve_timeout_s)) {
    RemovePlacementGroup(g.pg.GetID());
    throw Error("prism: WorkerGroup " + g.options.name + ": could not reserve " +
                std::to_string(g.options.num_workers) + " workers with " +
                internal::ResourceSet(g.options.resources_per_worker).ToString() + " each within " +
                std::to_string(g.options.reserve_timeout_s) +
                " s: other tasks, actors or placement groups hold those resources "
                "(prism::state::ListPlacementGroups, ListActors)");
  }
  std::map<std::string, int> per_node, node_index;
  for (const auto& where : BundleLocations(g.pg)) {
    WorkerInfo w;
    w.index = static_cast<int>(g.workers.size());
    w.rank = where.rank;
    w.node_id = where.node_id;
    node_index.try_emplace(where.node_id, static_cast<int>(node_index.size()));
    w.node_rank = node_index[where.node_id];
    w.local_rank = per_node[where.node_id]++;
    g.workers.push_back(w);
  }
  for (auto& w : g.workers) w.local_world_size = per_node[w.node_id];
  if (g.options.preemption_events) {
    const std::string channel = g.channel->name();
    g.preemption.emplace([channel](int sig) {
      detail::WireEvent e;
      e.kind = WorkerEvent::kPreempted;
      e.signal = sig;
      Publish(channel, ToBytes(e));
    });
  }
}

namespace {
/// A worker that failed was reported as a kFailed event, so its task's failed result has
/// been seen: read it before dropping it, or the core logs it as an error nobody read.
/// Only results already there are touched (a loop's result is a few bytes).
void ReadFailedResults(std::vector<ObjectRef<std::string>>& results) try {
  if (results.empty()) return;
  const auto ready = internal::RequireCore("WorkerGroup").Wait(
      [&] {
        std::vector<ObjectId> ids;
        for (const auto& r : results) ids.push_back(r.ID());
        return ids;
      }(),
      static_cast<int>(results.size()), 0);
  for (size_t i = 0; i < results.size(); ++i) {
    if (!ready[i]) continue;
    try {
      results[i].Get(0);
    } catch (const std::exception&) {  // the failure the kFailed event carried
    }
  }
} catch (const TaskCancelledError&) {
  // The task that owns the group was cancelled (a Tune trial stopped): it cannot wait,
  // even for no time; its results go unread.
} catch (const std::exception& e) {
  PRISM_LOG_WARN("WorkerGroup: reading its workers' results: " << e.what());
}
}  // namespace

WorkerGroup::~WorkerGroup() {
  if (!IsInitialized()) return;  // after Shutdown: nothing to give back
  try {
    impl_->preemption.reset();
    if (Running()) Abort(30000);
    RemovePlacementGroup(impl_->pg.GetID());
    ReadFailedResults(impl_->results);
  } catch (const std::exception&) {  // the job is ending: the head frees everything anyway
  }
}

const std::vector<WorkerInfo>& WorkerGroup::workers() const { return impl_->workers; }
const std::string& WorkerGroup::id() const { return impl_->id; }
int WorkerGroup::attempt() const { return impl_->attempt; }
bool WorkerGroup::Running() const { return !impl_->alive.empty(); }

void WorkerGroup::Start(const std::string& loop, const std::string& config) {
  Impl& g = *impl_;
  if (Running()) {
    throw Error("prism: WorkerGroup " + g.options.name + ": " + std::to_string(g.alive.size()) +
                " worker(s) of attempt " + std::to_string(g.attempt) +
                " still run; read their events until Running() is false, or Abort, before Start");
  }
  const auto* fn = internal::FunctionRegistry::Instance().FindByName(loop);
  if (fn == nullptr || !fn->invoke) {
    throw Error("prism: WorkerGroup " + g.options.name + ": no function registered as \"" + loop +
                "\" (PRISM_REMOTE; the loop is std::string(std::string))");
  }
  ++g.attempt;
  g.kept.clear();
  ReadFailedResults(g.results);
  g.results.clear();
  for (const auto& w : g.workers) {
    detail::WorkerStart s;
    s.group_id = g.id;
    s.channel = g.channel->name();
    s.loop = loop;
    s.config = config;
    s.attempt = g.attempt;
    s.index = w.index;
    s.group = g.workers;
    auto task = prism::Task(detail::PrismWorkerGroupRun).SetPlacementGroup(g.pg, w.index);
    task.SetName(g.options.name + "_worker_" + std::to_string(w.index));
    // Never rerun alone: its peers wait in collectives with it. A worker whose process
    // died fails (SilentEnd), and the group's owner restarts the whole group.
    task.SetMaxRetries(0);
    for (const auto& [k, v] : g.options.resources_per_worker) task.SetResource(k, v);
    g.results.push_back(task.Remote(s));
    g.alive.insert(w.index);
  }
}

std::optional<WorkerEvent> WorkerGroup::Next(int64_t timeout_ms) {
  if (!impl_->kept.empty()) {
    WorkerEvent e = std::move(impl_->kept.front());
    impl_->kept.pop_front();
    return e;
  }
  return impl_->Receive(timeout_ms);
}

void WorkerGroup::RequestStop() { impl_->Control(detail::kStop); }

bool WorkerGroup::Abort(int64_t timeout_ms) {
  Impl& g = *impl_;
  g.Control(detail::kAbort);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!g.alive.empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (auto e = g.Receive(left.count())) g.kept.push_back(std::move(*e));
  }
  return g.alive.empty();
}

}  // namespace prism::platform

PRISM_REMOTE(prism::platform::detail::PrismWorkerGroupRun, prism::platform::detail::PrismWorkerGroupControl);
