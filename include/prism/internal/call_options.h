#pragma once
// The chainable options that tasks and actor creations share (Ray's TaskCaller and
// ActorCreator setters): name, resources, placement group. CRTP keeps the chaining typed.

#include <map>
#include <string>

#include "prism/internal/core_api.h"
#include "prism/placement_group.h"

namespace prism::internal {

template <typename Derived>
class CallOptions {
 public:
  /// Name shown in errors, logs and the state API (default: the function's name). For an
  /// actor it is also the name GetActor finds it by.
  Derived& SetName(std::string name) {
    request_.name = std::move(name);
    return Self();
  }
  /// Resources held while it runs (a task) or lives (an actor), e.g. {{"CPU", 2}}. Amounts
  /// below 1 may be fractional. Use {"rank:N", 0.01} to pin to rank N.
  Derived& SetResources(const std::map<std::string, double>& resources) {
    for (const auto& [k, v] : resources) request_.resources[k] = v;
    return Self();
  }
  Derived& SetResource(const std::string& name, double amount) {
    request_.resources[name] = amount;
    return Self();
  }
  /// Runs inside bundle `bundle_index` of `group` (-1: any bundle), using the bundle's
  /// reserved resources; waits until the group is created, fails if it is removed first or
  /// the demand exceeds the bundle.
  Derived& SetPlacementGroup(const PlacementGroup& group, int bundle_index = -1) {
    request_.placement_group = group.GetID();
    request_.bundle_index = bundle_index;
    return Self();
  }

 protected:
  TaskRequest request_;

 private:
  Derived& Self() { return static_cast<Derived&>(*this); }
};

}  // namespace prism::internal
