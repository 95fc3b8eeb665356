// The head's control-plane calls (HeadCall -> HeadReply): actor lookup, resources,
// placement groups, the internal KV and the state API, from any rank. Each call takes the
// head's lock once and answers at once; nothing here waits.
#include "common/head_calls.h"
#include "head/head.h"
#include "prism/errors.h"

namespace prism::internal {

void Head::OnHeadCall(int from, HeadCall&& call) {
  HeadReply reply;
  reply.request = call.request;
  const Payload& args = call.args;
  try {
    switch (static_cast<HeadOp>(call.op)) {
      case LookupActor::kOp:
        reply.result = Answer<LookupActor>(args, [&](const std::pair<std::string, std::string>& key) {
          Locked lock(*this);
          return actors_.Lookup(key.first, key.second);
        });
        break;
      case internal::Available::kOp:
        reply.result = Answer<internal::Available>(args, [&](NoArgs) { return Available(); });
        break;
      case CreateGroup::kOp:
        reply.result = Answer<CreateGroup>(args, [&](const PlacementGroup& group) {
          return CreatePlacementGroup(
              {group.GetName(), group.GetBundles(), group.GetStrategy(), group.OneBundlePerRank()});
        });
        break;
      case RemoveGroup::kOp:
        reply.result = Answer<RemoveGroup>(args, [&](const std::string& id) { return RemovePlacementGroup(id); });
        break;
      case GroupStatus::kOp:
        reply.result = Answer<GroupStatus>(args, [&](const std::string& id) { return PlacementGroupState(id); });
        break;
      case WatchGroup::kOp:
        reply.result = Answer<WatchGroup>(args, [&](const std::string& id) {
          Locked lock(*this);
          return groups_.Watch(id, from);
        });
        break;
      case GetGroups::kOp:
        reply.result = Answer<GetGroups>(args, [&](const std::pair<std::string, std::string>& filter) {
          return PlacementGroups(filter.first, filter.second);
        });
        break;
      case KvPut::kOp:
        reply.result = Answer<KvPut>(args, [&](std::tuple<std::string, std::string, bool> a) {
          Locked lock(*this);
          return tables_.kv().Put(std::get<0>(a), std::move(std::get<1>(a)), std::get<2>(a));
        });
        break;
      case KvGet::kOp:
        reply.result = Answer<KvGet>(args, [&](const std::string& key) {
          Locked lock(*this);
          return tables_.kv().Get(key);
        });
        break;
      case KvExists::kOp:
        reply.result = Answer<KvExists>(args, [&](const std::string& key) {
          Locked lock(*this);
          return tables_.kv().Exists(key);
        });
        break;
      case KvDelete::kOp:
        reply.result = Answer<KvDelete>(args, [&](const std::pair<std::string, bool>& a) {
          Locked lock(*this);
          return tables_.kv().Delete(a.first, a.second);
        });
        break;
      case KvList::kOp:
        reply.result = Answer<KvList>(args, [&](const std::string& prefix) {
          Locked lock(*this);
          return tables_.kv().Keys(prefix);
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
      case internal::BundleRanks::kOp:
        reply.result = Answer<internal::BundleRanks>(args, [&](const std::string& id) { return BundleRanks(id); });
        break;
      case internal::OpenChannel::kOp:
        reply.result = Answer<internal::OpenChannel>(args, [&](const std::pair<std::string, int>& a) {
          Locked lock(*this);
          return channels_.Open(a.first, a.second);
        });
        break;
      case internal::CloseChannel::kOp:
        reply.result = Answer<internal::CloseChannel>(args, [&](const std::pair<std::string, int>& a) {
          Locked lock(*this);
          return channels_.Close(a.first, a.second);
        });
        break;
      case internal::CommunicatorTag::kOp:
        reply.result = Answer<internal::CommunicatorTag>(args, [&](const std::pair<std::string, int>& a) {
          Locked lock(*this);
          return communicator_tags_.Tag(a.first, a.second);
        });
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

void Head::SetJobInfo(JobInfo info) {
  Locked lock(*this);
  tables_.SetJobInfo(std::move(info));
}

void Head::OnRankLost(int rank, const std::string& why) {
  Locked lock(*this);
  if (rank <= 0 || rank >= scheduler_.NumRanks() || scheduler_.IsLost(rank)) return;
  scheduler_.RemoveRank(rank);
  groups_.OnRankLost(rank);  // first: tasks retried below wait for the lost bundles, not go to the rank
  for (int r = 0; r < scheduler_.NumRanks(); ++r) {
    if (!scheduler_.IsLost(r)) send_(r, RankLost{rank});  // their pulls from it fail at once
  }
  tables_.RecordError("NODE_DIED", "rank " + std::to_string(rank) + " was lost: " + why, ObjectId(), rank);
  actors_.OnRankLost(rank, why);  // first: calls there follow a restarting actor
  tasks_.OnRankLost(rank, why);
  // Values whose only copy was there: their tasks run again (lineage), or they fail.
  for (const auto& lineage : objects_.OnRankLost(rank)) tasks_.Rebuild(lineage, rank);
  parked_ = objects_.ExpireParked(WallNowNs());
  tasks_.DrainQueues();  // places the restarting actors and the rebuilding tasks
}

void Head::SetRecovery(double park_s) {
  Locked lock(*this);
  tasks_.KeepLineage(true);
  objects_.SetParkNs(static_cast<int64_t>(park_s * 1e9));
}

void Head::Tick() {
  if (parked_.load(std::memory_order_relaxed) == 0) return;
  Locked lock(*this);
  parked_ = objects_.ExpireParked(WallNowNs());
}

std::vector<state::NodeState> Head::ListNodes() {
  Locked lock(*this);
  return tables_.ListNodes(scheduler_);
}

std::vector<state::ActorState> Head::ListActors() {
  Locked lock(*this);
  return actors_.List();
}

std::vector<state::TaskState> Head::ListTasks(const state::TaskFilter& filter) {
  Locked lock(*this);
  return tables_.tasks().List(filter, tasks_.LiveRecords());
}

state::TaskSummary Head::SummarizeTasks() {
  Locked lock(*this);
  return tables_.tasks().Summarize(tasks_.LiveRecords());
}

std::vector<state::PlacementGroupState> Head::ListPlacementGroups() {
  Locked lock(*this);
  return groups_.List();
}

std::vector<state::JobState> Head::ListJobs() {
  Locked lock(*this);
  return tables_.ListJobs(scheduler_.NumRanks());
}

std::vector<state::WorkerState> Head::ListWorkers() {
  Locked lock(*this);
  return tables_.ListWorkers(actors_.PerRank());
}

std::vector<state::ErrorState> Head::ListErrors(size_t limit) {
  Locked lock(*this);
  return tables_.ListErrors(limit);
}

}  // namespace prism::internal
