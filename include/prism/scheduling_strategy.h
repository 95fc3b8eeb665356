#pragma once
// Where a task (or an actor) may run, as Ray's scheduling strategies. In Prism a node of
// Ray's is a rank.
//
//   prism::Task(f).SetSchedulingStrategy(prism::SpreadSchedulingStrategy{}).Remote();
//   prism::Task(f).SetSchedulingStrategy(prism::NodeAffinitySchedulingStrategy{2, true}).Remote();
//
// DEFAULT: Ray's hybrid policy (the submitting rank while it is under half loaded, then the
// rank holding the most argument bytes, else the least loaded rank).
// SPREAD: round-robin over the ranks with room, so consecutive tasks land on different
// ranks even while one rank could hold them all.
// Node affinity, hard (soft = false): only on `rank`; a rank that does not exist, or that
// can never hold the task's resources, is a ResourceError at Remote(); a busy one makes the
// task wait for it. Soft: on `rank` when it has room, else wherever the default policy
// puts it (also when the rank does not exist or could never hold the task).

namespace prism {

/// Ray's default policy.
struct DefaultSchedulingStrategy {};
/// Ray's "SPREAD": tasks round-robin over the ranks that have room.
struct SpreadSchedulingStrategy {};
/// Ray's NodeAffinitySchedulingStrategy(node_id, soft), with a rank for the node.
struct NodeAffinitySchedulingStrategy {
  int rank = 0;
  bool soft = false;
};

}  // namespace prism
