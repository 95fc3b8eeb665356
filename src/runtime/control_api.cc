// The public calls the head answers, from any rank: AvailableResources, placement groups,
// the internal KV (prism/kv.h) and the state API (prism/state.h). Each is one HeadCall
// round trip through this rank's node manager (on rank 0 a direct call, no MPI).
#include <chrono>
#include <thread>

#include "prism/api.h"
#include "prism/kv.h"
#include "prism/serialization.h"
#include "prism/state.h"
#include "gcs/kv_store.h"
#include "runtime/node.h"

namespace prism {
namespace {

/// Calls the head with `args` and decodes its answer as R.
template <typename R, typename A>
R Call(const char* what, internal::HeadOp op, const A& args) {
  internal::Payload reply = internal::LiveNode(what).CallHead(op, internal::Serialize(args));
  return internal::Deserialize<R>(reply->data(), reply->size());
}
template <typename R>
R Call(const char* what, internal::HeadOp op) {
  return Call<R>(what, op, uint8_t{0});
}

using Op = internal::HeadOp;

}  // namespace

std::map<std::string, double> AvailableResources() {
  return Call<std::map<std::string, double>>("AvailableResources", Op::kAvailable);
}

// ---- Placement groups --------------------------------------------------------------------

PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  auto id = Call<std::string>("CreatePlacementGroup", Op::kCreatePlacementGroup,
                              PlacementGroup("", options));
  return PlacementGroup(id, options);
}

void RemovePlacementGroup(const std::string& placement_group_id) {
  if (!Call<bool>("RemovePlacementGroup", Op::kRemovePlacementGroup, placement_group_id)) {
    throw Error("prism: RemovePlacementGroup: no placement group " + placement_group_id);
  }
}

namespace {
PlacementGroup FindGroup(const char* what, const std::string& name, const std::string& id) {
  auto found = Call<std::vector<PlacementGroup>>(what, Op::kGetPlacementGroups, std::pair(name, id));
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
  return Call<std::vector<PlacementGroup>>("GetAllPlacementGroups", Op::kGetPlacementGroups,
                                           std::pair(std::string(), std::string()));
}

bool PlacementGroup::Wait(int timeout_seconds) const {
  if (id_.empty()) throw Error("prism: Wait on an empty PlacementGroup handle");
  // The head places groups as resources free up; ask for the state, backing off.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  auto nap = std::chrono::microseconds(50);
  for (;;) {
    int state = Call<int>("PlacementGroup::Wait", Op::kPlacementGroupState, id_);
    if (state == 2) return true;   // created
    if (state == 0) return false;  // removed
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(5000));
  }
}

// ---- Internal KV ---------------------------------------------------------------------------

namespace kv {

bool Put(const std::string& key, const std::string& value, bool overwrite) {
  internal::KvStore::CheckPut(key, value.size());  // before the value travels
  return Call<bool>("kv::Put", Op::kKvPut, std::tuple(key, value, overwrite));
}

std::optional<std::string> Get(const std::string& key) {
  return Call<std::optional<std::string>>("kv::Get", Op::kKvGet, key);
}

bool Exists(const std::string& key) { return Call<bool>("kv::Exists", Op::kKvExists, key); }

int64_t Delete(const std::string& key, bool by_prefix) {
  return Call<int64_t>("kv::Delete", Op::kKvDelete, std::pair(key, by_prefix));
}

std::vector<std::string> List(const std::string& prefix) {
  return Call<std::vector<std::string>>("kv::List", Op::kKvList, prefix);
}

}  // namespace kv

// ---- State API -----------------------------------------------------------------------------

namespace state {

std::vector<NodeState> ListNodes() {
  return Call<std::vector<NodeState>>("state::ListNodes", Op::kListNodes);
}
std::vector<ActorState> ListActors() {
  return Call<std::vector<ActorState>>("state::ListActors", Op::kListActors);
}
std::vector<TaskState> ListTasks(const TaskFilter& filter) {
  return Call<std::vector<TaskState>>("state::ListTasks", Op::kListTasks, filter);
}
std::vector<PlacementGroupState> ListPlacementGroups() {
  return Call<std::vector<PlacementGroupState>>("state::ListPlacementGroups",
                                                Op::kListPlacementGroups);
}
TaskSummary SummarizeTasks() {
  return Call<TaskSummary>("state::SummarizeTasks", Op::kSummarizeTasks);
}
std::vector<JobState> ListJobs() {
  return Call<std::vector<JobState>>("state::ListJobs", Op::kListJobs);
}
std::vector<WorkerState> ListWorkers() {
  return Call<std::vector<WorkerState>>("state::ListWorkers", Op::kListWorkers);
}
std::vector<ErrorState> ListErrors(size_t limit) {
  return Call<std::vector<ErrorState>>("state::ListErrors", Op::kListErrors,
                                       static_cast<uint64_t>(limit));
}

}  // namespace state
}  // namespace prism
