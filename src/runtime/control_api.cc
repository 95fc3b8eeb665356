// The public calls the head answers, from any rank: AvailableResources, placement groups,
// the internal KV (prism/kv.h) and the state API (prism/state.h). Each is one HeadCall
// round trip through this rank's node manager (on rank 0 a direct call, no MPI).
#include <chrono>
#include <thread>

#include "prism/api.h"
#include "prism/kv.h"
#include "prism/platform/placement.h"
#include "prism/serialization.h"
#include "prism/state.h"
#include "head/kv_store.h"
#include "common/head_calls.h"

namespace prism {
namespace {

/// One typed control call to the head through the caller's core, naming `what` if none runs.
template <class Call>
typename Call::Result Ask(const char* what, const typename Call::Args& args = {}) {
  return internal::CallHead<Call>(internal::RequireCore(what), args);
}

namespace call = internal;  // the call types of common/head_calls.h

}  // namespace

std::map<std::string, double> AvailableResources() {
  return Ask<call::Available>("AvailableResources");
}

// ---- Placement groups --------------------------------------------------------------------

PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  auto id = Ask<call::CreateGroup>("CreatePlacementGroup", PlacementGroup("", options));
  return PlacementGroup(id, options);
}

void RemovePlacementGroup(const std::string& placement_group_id) {
  if (!Ask<call::RemoveGroup>("RemovePlacementGroup", placement_group_id)) {
    throw Error("prism: RemovePlacementGroup: no placement group " + placement_group_id);
  }
}

namespace {
PlacementGroup FindGroup(const char* what, const std::string& name, const std::string& id) {
  auto found = Ask<call::GetGroups>(what, {name, id});
  return found.empty() ? PlacementGroup() : found.front();
}
}  // namespace

PlacementGroup GetPlacementGroup(const std::string& name) {
  return FindGroup("GetPlacementGroup", name, "");
}

PlacementGroup GetPlacementGroupById(const std::string& id) {
  return FindGroup("GetPlacementGroupById", "", id);
}

std::vector<PlacementGroup> GetAllPlacementGroups() {
  return Ask<call::GetGroups>("GetAllPlacementGroups", {"", ""});
}

PlacementGroupState PlacementGroup::GetState() const {
  if (id_.empty()) return PlacementGroupState::UNRECOGNIZED;
  switch (Ask<call::GroupStatus>("PlacementGroup::GetState", id_)) {
    case internal::PlacementGroupStatus::kPending: return PlacementGroupState::PENDING;
    case internal::PlacementGroupStatus::kCreated: return PlacementGroupState::CREATED;
    case internal::PlacementGroupStatus::kUnknown: break;
  }
  return PlacementGroupState::REMOVED;  // the head forgets a group once it is removed
}

bool PlacementGroup::Wait(int timeout_seconds) const {
  if (id_.empty()) throw Error("prism: Wait on an empty PlacementGroup handle");
  // The head pushes the group's creation or removal to this rank: no polling.
  return internal::RequireCore("PlacementGroup::Wait")
      .WaitPlacementGroup(id_, static_cast<int64_t>(timeout_seconds) * 1000);
}

void Cancel(const internal::ObjectRefBase& ref, bool force, bool recursive) {
  if (ref.IsNil()) throw Error("prism: Cancel on an empty ObjectRef");
  if (force) {
    throw Error("prism: Cancel(ref, force=true) is not supported: Ray's force kills the "
                "worker process, and Prism's tasks share their rank's process (killing it "
                "ends the job). Use force=false: the task's Get/Wait throw and IsCancelled() "
                "turns true, and its result is TaskCancelledError either way");
  }
  internal::RequireCore("Cancel").Cancel(ref.ID(), recursive);
}

namespace platform {

std::vector<BundleLocation> BundleLocations(const PlacementGroup& pg) {
  if (pg.GetID().empty()) throw Error("prism: BundleLocations of an empty PlacementGroup handle");
  const auto ranks = Ask<call::BundleRanks>("BundleLocations", pg.GetID());
  const auto& nodes = internal::RequireCore("BundleLocations").NodeIds();
  std::vector<BundleLocation> out;
  for (int r : ranks) out.push_back({r, nodes.at(static_cast<size_t>(r))});
  return out;
}

}  // namespace platform

// ---- Internal KV ---------------------------------------------------------------------------

namespace kv {

// Keys and values are checked here, before they travel, and again by the head.
using internal::KvStore;

bool Put(const std::string& key, const std::string& value, bool overwrite) {
  KvStore::CheckPut(key, value.size());
  return Ask<call::KvPut>("kv::Put", {key, value, overwrite});
}

std::optional<std::string> Get(const std::string& key) {
  KvStore::CheckKey(key, "kv::Get", false);
  return Ask<call::KvGet>("kv::Get", key);
}

bool Exists(const std::string& key) {
  KvStore::CheckKey(key, "kv::Exists", false);
  return Ask<call::KvExists>("kv::Exists", key);
}

int64_t Delete(const std::string& key, bool by_prefix) {
  if (by_prefix) {
    KvStore::CheckPrefix(key, "kv::Delete");
  } else {
    KvStore::CheckKey(key, "kv::Delete", true);
  }
  return Ask<call::KvDelete>("kv::Delete", {key, by_prefix});
}

std::vector<std::string> List(const std::string& prefix) {
  KvStore::CheckPrefix(prefix, "kv::List");
  return Ask<call::KvList>("kv::List", prefix);
}

}  // namespace kv

// ---- State API -----------------------------------------------------------------------------

namespace state {

std::vector<NodeState> ListNodes() {
  return Ask<call::ListNodes>("state::ListNodes");
}
std::vector<ActorState> ListActors() {
  return Ask<call::ListActors>("state::ListActors");
}
std::vector<TaskState> ListTasks(const TaskFilter& filter) {
  return Ask<call::ListTasks>("state::ListTasks", filter);
}
std::vector<PlacementGroupState> ListPlacementGroups() {
  return Ask<call::ListGroups>("state::ListPlacementGroups");
}
TaskSummary SummarizeTasks() {
  return Ask<call::SummarizeTasks>("state::SummarizeTasks");
}
std::vector<JobState> ListJobs() {
  return Ask<call::ListJobs>("state::ListJobs");
}
std::vector<WorkerState> ListWorkers() {
  return Ask<call::ListWorkers>("state::ListWorkers");
}
std::vector<ErrorState> ListErrors(size_t limit) {
  return Ask<call::ListErrors>("state::ListErrors", static_cast<uint64_t>(limit));
}

}  // namespace state
}  // namespace prism
