#pragma once
// The control-plane calls any rank can make of the head (GCS tables, KV, placement groups,
// actor lookup, the state API), each declared once with its argument and result types.
// The caller (runtime/control_api.cc, node/node.cc) and the head (head/head_calls.cc) both
// name the call's type, so a mismatch is a compile error, not a decode error at run time:
//
//   auto existed = CallHead<KvPut>(core, {key, value, overwrite});        // caller
//   case KvPut::kOp: return Answer<KvPut>(call, [&](KvPut::Args a) {...});  // head
//
// On the wire a call is a HeadCall (op, serialized Args) answered by one HeadReply
// (serialized Result, or an error kind and text).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "prism/errors.h"
#include "prism/internal/core_api.h"
#include "prism/placement_group.h"
#include "prism/serialization.h"
#include "prism/state.h"

namespace prism::internal {

/// A placement group as the head knows it.
enum class PlacementGroupStatus : uint8_t { kUnknown, kPending, kCreated };

/// Arguments of a call that takes none.
struct NoArgs {
  template <class Archive>
  void serialize(Archive&, unsigned) {}
};

/// One call: its op, argument type and result type.
template <HeadOp Op, typename A, typename R>
struct HeadCallType {
  static constexpr HeadOp kOp = Op;
  using Args = A;
  using Result = R;
};

// (namespace, name) -> (actor id value, class name); id 0 if no live actor has that name.
using LookupActor = HeadCallType<HeadOp::kLookupActor, std::pair<std::string, std::string>,
                                 std::pair<uint64_t, std::string>>;
using Available = HeadCallType<HeadOp::kAvailable, NoArgs, std::map<std::string, double>>;
// (group with its options, no id) -> new id. ResourceError if it could never be placed.
using CreateGroup = HeadCallType<HeadOp::kCreatePlacementGroup, PlacementGroup, std::string>;
using RemoveGroup = HeadCallType<HeadOp::kRemovePlacementGroup, std::string, bool>;  // found
using GroupStatus = HeadCallType<HeadOp::kPlacementGroupState, std::string, PlacementGroupStatus>;
// (name, id) -> live groups matching both (an empty filter matches all).
using GetGroups = HeadCallType<HeadOp::kGetPlacementGroups, std::pair<std::string, std::string>,
                               std::vector<PlacementGroup>>;
// (key, value, overwrite) -> the key existed.
using KvPut = HeadCallType<HeadOp::kKvPut, std::tuple<std::string, std::string, bool>, bool>;
using KvGet = HeadCallType<HeadOp::kKvGet, std::string, std::optional<std::string>>;
using KvExists = HeadCallType<HeadOp::kKvExists, std::string, bool>;
// (key, by_prefix) -> keys deleted.
using KvDelete = HeadCallType<HeadOp::kKvDelete, std::pair<std::string, bool>, int64_t>;
using KvList = HeadCallType<HeadOp::kKvList, std::string, std::vector<std::string>>;  // (prefix)
using ListNodes = HeadCallType<HeadOp::kListNodes, NoArgs, std::vector<state::NodeState>>;
using ListActors = HeadCallType<HeadOp::kListActors, NoArgs, std::vector<state::ActorState>>;
using ListTasks = HeadCallType<HeadOp::kListTasks, state::TaskFilter, std::vector<state::TaskState>>;
using ListGroups = HeadCallType<HeadOp::kListPlacementGroups, NoArgs,
                                std::vector<state::PlacementGroupState>>;
using SummarizeTasks = HeadCallType<HeadOp::kSummarizeTasks, NoArgs, state::TaskSummary>;
using ListJobs = HeadCallType<HeadOp::kListJobs, NoArgs, std::vector<state::JobState>>;
using ListWorkers = HeadCallType<HeadOp::kListWorkers, NoArgs, std::vector<state::WorkerState>>;
using ListErrors = HeadCallType<HeadOp::kListErrors, uint64_t, std::vector<state::ErrorState>>;  // (limit)
// (group id) -> the rank of each bundle, in order; empty while pending or unknown.
using BundleRanks = HeadCallType<HeadOp::kBundleRanks, std::string, std::vector<int>>;
// (channel, rank) -> -1 if `rank` now owns the channel, else the rank that already does.
using OpenChannel = HeadCallType<HeadOp::kOpenChannel, std::pair<std::string, int>, int>;
// (channel, rank) -> whether `rank` owned it (and no longer does).
using CloseChannel = HeadCallType<HeadOp::kCloseChannel, std::pair<std::string, int>, bool>;
// (communicator key, member count) -> its creation tag, the same for every member.
using CommunicatorTag = HeadCallType<HeadOp::kCommunicatorTag, std::pair<std::string, int>, int>;

// (group id) -> its status now; if pending, the head also pushes PlacementGroupChanged to
// the calling rank once it is created or removed.
using WatchGroup = HeadCallType<HeadOp::kWatchPlacementGroup, std::string, PlacementGroupStatus>;

/// Caller side: the call's serialized arguments.
template <class Call>
Buffer EncodeArgs(const typename Call::Args& args) {
  return Serialize(args);
}
/// Caller side: the head's answer as the call's result type.
template <class Call>
typename Call::Result DecodeResult(const Payload& reply) {
  if (!reply) throw Error("prism: control call answered without a result");
  return Deserialize<typename Call::Result>(reply->data(), reply->size());
}
/// Caller side, the whole call: `core` sends it to the head and waits for its answer
/// (CoreApi::ControlCall), returned as the call's result type.
template <class Call>
typename Call::Result CallHead(CoreApi& core, const typename Call::Args& args) {
  return DecodeResult<Call>(core.ControlCall(Call::kOp, EncodeArgs<Call>(args)));
}
/// Head side: decodes the arguments, runs `serve` on them and serializes what it returns,
/// which must convert to the call's result type.
template <class Call, typename F>
Payload Answer(const Payload& args, F&& serve) {
  static_assert(std::is_invocable_v<F, typename Call::Args>, "serve takes the call's Args");
  static_assert(std::is_convertible_v<std::invoke_result_t<F, typename Call::Args>, typename Call::Result>,
                "serve returns the call's Result");
  if (!args) throw Error("prism: control call without arguments");
  auto decoded = Deserialize<typename Call::Args>(args->data(), args->size());
  const typename Call::Result result = serve(std::move(decoded));
  return std::make_shared<const Buffer>(Serialize(result));
}

}  // namespace prism::internal
