#pragma once
// The chainable options calls share (Ray's TaskCaller, ActorCreator and ActorTaskCaller
// setters): name and resources for every call (RequestOptions); placement group,
// scheduling strategy and runtime environment for tasks and actor creations (CallOptions).
// CRTP keeps the chaining typed.

#include <map>
#include <string>
#include <type_traits>

#include "prism/internal/core_api.h"
#include "prism/placement_group.h"
#include "prism/runtime_env.h"
#include "prism/scheduling_strategy.h"

namespace prism::internal {

/// The setters every kind of call has, actor method calls included: name and resources.
template <typename Derived>
class RequestOptions {
 public:
  /// Name shown in errors, logs and the state API (default: the function's name). For an
  /// actor it is also the name GetActor finds it by.
  Derived& SetName(std::string name) {
    request_.name = std::move(name);
    return Self();
  }
  /// Resources held while it runs (a task) or lives (an actor), e.g. {{"CPU", 2}}. Amounts
  /// below 1 may be fractional. Use {"rank:N", 0.01} to pin to rank N.
  /// Takes a std::map or a std::unordered_map (Ray's type). Adds to what was set before.
  Derived& SetResources(const std::map<std::string, double>& resources) {
    for (const auto& [k, v] : resources) request_.resources[k] = v;
    return Self();
  }
  template <typename Map, typename = std::enable_if_t<!std::is_same_v<Map, std::map<std::string, double>>>>
  Derived& SetResources(const Map& resources) {  // std::unordered_map and other maps
    for (const auto& [k, v] : resources) request_.resources[std::string(k)] = static_cast<double>(v);
    return Self();
  }
  /// One resource, e.g. SetResource("GPU", 1).
  Derived& SetResource(const std::string& name, double amount) {
    request_.resources[name] = amount;
    return Self();
  }

 protected:
  TaskRequest request_;
  Derived& Self() { return static_cast<Derived&>(*this); }
};

/// What tasks and actor creations add: placement group, scheduling strategy, runtime
/// environment.
template <typename Derived>
class CallOptions : public RequestOptions<Derived> {
 public:
  /// Runs inside bundle `bundle_index` of `group` (-1: any bundle), using the bundle's
  /// reserved resources; waits until the group is created, fails if it is removed first or
  /// the demand exceeds the bundle.
  Derived& SetPlacementGroup(const PlacementGroup& group, int bundle_index = -1) {
    request_.placement_group = group.GetID();
    request_.bundle_index = bundle_index;
    return Self();
  }
  /// Where it may run (see prism/scheduling_strategy.h): SPREAD over the ranks, or node
  /// affinity to a rank (hard, or soft: that rank if it has room, else anywhere). Not with
  /// SetPlacementGroup (the group decides).
  Derived& SetSchedulingStrategy(DefaultSchedulingStrategy) {
    request_.strategy = SchedulingStrategy{};
    return Self();
  }
  Derived& SetSchedulingStrategy(SpreadSchedulingStrategy) {
    request_.strategy = SchedulingStrategy{SchedulingStrategy::Kind::kSpread, -1, false};
    return Self();
  }
  Derived& SetSchedulingStrategy(const NodeAffinitySchedulingStrategy& affinity) {
    request_.strategy = SchedulingStrategy{SchedulingStrategy::Kind::kNodeAffinity, affinity.rank, affinity.soft};
    return Self();
  }
  /// Ray's per-task or per-actor runtime environment. Tasks share their rank's process, so
  /// only an environment the job already has is accepted (a no-op); anything else throws
  /// Error naming the variable: set it for the job (Config::env_vars) instead.
  Derived& SetRuntimeEnv(const RuntimeEnv& env) {
    RequireJobEnvironment(env, "SetRuntimeEnv");
    return Self();
  }

 protected:
  using RequestOptions<Derived>::request_;
  using RequestOptions<Derived>::Self;
};

}  // namespace prism::internal
