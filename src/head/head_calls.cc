// The head's control-plane calls (HeadCall -> HeadReply): actor lookup, resources,
// placement groups, the internal KV and the state API, from any rank. Each call takes the
// head's lock once and answers at once; nothing here waits.
#include <unistd.h>

#include "common/log.h"
#include "prism/errors.h"
#include "prism/serialization.h"
#include "common/head_calls.h"
#include "head/head.h"

namespace prism::internal {

namespace {

const char* StrategyName(PlacementStrategy s) {
  static const char* const kNames[] = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"};
  return kNames[static_cast<int>(s)];
}

}  // namespace

void Head::SetJobInfo(JobInfo info) {
  Locked lock(*this);
  task_table_ = TaskTable(info.task_table_size);
  job_ = std::move(info);
}

void Head::OnHeadCall(int from, HeadCall&& call) {
  HeadReply reply;
  reply.request = call.request;
  const Payload& args = call.args;
  try {
    switch (static_cast<HeadOp>(call.op)) {
      case LookupActor::kOp:
        reply.result = Answer<LookupActor>(args, [&](const std::string& name) {
          Locked lock(*this);
          std::pair<uint64_t, std::string> found{0, ""};
          auto it = actor_names_.find(name);
          if (it != actor_names_.end()) {
            found = {it->second.Value(), actors_.at(it->second).creation->class_name};
          }
          return found;
        });
        break;
      case internal::Available::kOp:
        reply.result = Answer<internal::Available>(args, [&](NoArgs) { return Available(); });
        break;
      case CreateGroup::kOp:
        reply.result = Answer<CreateGroup>(args, [&](const PlacementGroup& group) {
          return CreatePlacementGroup({group.GetName(), group.GetBundles(), group.GetStrategy()});
        });
        break;
      case RemoveGroup::kOp:
        reply.result = Answer<RemoveGroup>(args, [&](const std::string& id) { return RemovePlacementGroup(id); });
        break;
      case GroupStatus::kOp:
        reply.result = Answer<GroupStatus>(args, [&](const std::string& id) { return PlacementGroupState(id); });
        break;
      case GetGroups::kOp:
        reply.result = Answer<GetGroups>(args, [&](const std::pair<std::string, std::string>& filter) {
          return PlacementGroups(filter.first, filter.second);
        });
        break;
      case KvPut::kOp:
        reply.result = Answer<KvPut>(args, [&](std::tuple<std::string, std::string, bool> a) {
          Locked lock(*this);
          return kv_.Put(std::get<0>(a), std::move(std::get<1>(a)), std::get<2>(a));
        });
        break;
      case KvGet::kOp:
        reply.result = Answer<KvGet>(args, [&](const std::string& key) {
          Locked lock(*this);
          return kv_.Get(key);
        });
        break;
      case KvExists::kOp:
        reply.result = Answer<KvExists>(args, [&](const std::string& key) {
          Locked lock(*this);
          return kv_.Exists(key);
        });
        break;
      case KvDelete::kOp:
        reply.result = Answer<KvDelete>(args, [&](const std::pair<std::string, bool>& a) {
          Locked lock(*this);
          return kv_.Delete(a.first, a.second);
        });
        break;
      case KvList::kOp:
        reply.result = Answer<KvList>(args, [&](const std::string& prefix) {
          Locked lock(*this);
          return kv_.Keys(prefix);
        });
        break;
      case internal::ListNodes::kOp:
        reply.result = Answer<internal::ListNodes>(args, [&](NoArgs) { return ListNodes(); });
        break;
      case internal::ListActors::kOp:
        reply.result = Answer<internal::ListActors>(args, [&](NoArgs) { return ListActors(); });
        break;
      case internal::ListTasks::kOp:
        reply.result = Answer<internal::ListTasks>(args, [&](const state::TaskFilter& f) { return ListTasks(f); });
        break;
      case ListGroups::kOp:
        reply.result = Answer<ListGroups>(args, [&](NoArgs) { return ListPlacementGroups(); });
        break;
      case internal::SummarizeTasks::kOp:
        reply.result = Answer<internal::SummarizeTasks>(args, [&](NoArgs) { return SummarizeTasks(); });
        break;
      case internal::ListJobs::kOp:
        reply.result = Answer<internal::ListJobs>(args, [&](NoArgs) { return ListJobs(); });
        break;
      case internal::ListWorkers::kOp:
        reply.result = Answer<internal::ListWorkers>(args, [&](NoArgs) { return ListWorkers(); });
        break;
      case internal::ListErrors::kOp:
        reply.result = Answer<internal::ListErrors>(args, [&](uint64_t limit) { return ListErrors(limit); });
        break;
      default:
        throw Error("prism: unknown control call " + std::to_string(call.op) + " from rank " +
                    std::to_string(from) + " (ranks running different binaries?)");
    }
  } catch (const ResourceError& e) {
    reply.ok = false;
    reply.error_kind = ErrorKind::kResourceError;
    reply.error = e.what();
  } catch (const std::exception& e) {
    reply.ok = false;
    reply.error_kind = ErrorKind::kError;
    reply.error = e.what();
  }
  send_(from, std::move(reply));
}

// ---- State API ----------------------------------------------------------------------------

std::vector<state::NodeState> Head::ListNodes() {
  Locked lock(*this);
  std::vector<state::NodeState> out;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) {
    state::NodeState n;
    n.rank = r;
    n.node_id = node_of_rank_[r];
    n.host = r < static_cast<int>(job_.hosts.size()) ? job_.hosts[r] : node_of_rank_[r];
    n.state = "ALIVE";
    n.is_head = r == 0;
    n.resources_total = scheduler_.Capacity(r).ToMap();
    n.resources_available = scheduler_.Free(r).ToMap();
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<state::ActorState> Head::ListActors() {
  Locked lock(*this);
  static const char* const kStates[] = {"PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD"};
  std::vector<state::ActorState> out;
  for (const auto& [id, a] : actors_) {
    state::ActorState s;
    s.actor_id = id.Hex();
    s.class_name = a.creation->class_name;
    s.name = a.creation->actor_name;
    s.state = kStates[static_cast<int>(a.state)];
    s.rank = a.rank;
    s.num_restarts = a.restarts;
    s.max_restarts = a.creation->max_restarts;
    s.death_cause = a.cause;
    s.placement_group_id = a.creation->placement_group;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& x, const auto& y) { return x.actor_id < y.actor_id; });
  return out;
}

std::vector<TaskRecord> Head::LiveTaskRecords() {
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
    r.actor = spec.kind == TaskKind::kActorCall ? spec.actor
              : spec.kind == TaskKind::kActorCreation ? spec.id
                                                      : ObjectId();
    r.function = task_table_.Intern(spec.function);
    if (spec.name != spec.function) r.name = spec.name;
    r.placement_group = spec.placement_group;
    r.rank = t.rank;
    r.attempt = spec.attempt;
    r.times = t.times;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<state::TaskState> Head::ListTasks(const state::TaskFilter& filter) {
  Locked lock(*this);
  return task_table_.List(filter, LiveTaskRecords());
}

state::TaskSummary Head::SummarizeTasks() {
  Locked lock(*this);
  return task_table_.Summarize(LiveTaskRecords());
}

std::vector<state::PlacementGroupState> Head::ListPlacementGroups() {
  Locked lock(*this);
  std::vector<state::PlacementGroupState> out;
  for (const auto& [id, g] : groups_) {
    state::PlacementGroupState s;
    s.placement_group_id = id;
    s.name = g.options.name;
    s.strategy = StrategyName(g.options.strategy);
    s.state = g.created ? "CREATED" : "PENDING";
    for (const auto& b : g.bundles) s.bundles.push_back(b.ToMap());
    s.bundle_ranks = g.ranks;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<state::JobState> Head::ListJobs() {
  Locked lock(*this);
  state::JobState j;
  j.job_id = job_.job_id;
  j.status = "RUNNING";
  j.entrypoint = job_.entrypoint;
  j.launcher = job_.launcher;
  j.start_time_ns = job_.start_time_ns;
  j.num_ranks = scheduler_.NumRanks();
  j.driver_pid = job_.pids.empty() ? static_cast<int>(getpid()) : job_.pids[0];
  j.driver_host = job_.hosts.empty() ? node_of_rank_[0] : job_.hosts[0];
  return {j};
}

std::vector<state::WorkerState> Head::ListWorkers() {
  Locked lock(*this);
  std::vector<state::WorkerState> out;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) {
    state::WorkerState w;
    w.rank = r;
    w.pid = r < static_cast<int>(job_.pids.size()) ? job_.pids[r] : 0;
    w.host = r < static_cast<int>(job_.hosts.size()) ? job_.hosts[r] : node_of_rank_[r];
    w.node_id = node_of_rank_[r];
    w.worker_type = r == 0 ? "DRIVER" : "WORKER";
    w.num_tasks_finished = finished_per_rank_[r];
    w.num_actors = actors_per_rank_[r];
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<state::ErrorState> Head::ListErrors(size_t limit) {
  Locked lock(*this);
  size_t first = errors_.size() > limit ? errors_.size() - limit : 0;
  return {errors_.begin() + static_cast<std::ptrdiff_t>(first), errors_.end()};
}

}  // namespace prism::internal
