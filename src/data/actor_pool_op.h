#pragma once
// The actor pool of a class MapBatches (internal; Ray Data's ActorPoolMapOperator): the
// sizing rule (pure), the actor that runs the class on the workers, and the driver-side
// pool the streaming executor dispatches blocks to. actor_pool_op.cc explains the rules.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "data/executor.h"
#include "data/plan.h"
#include "prism/actor.h"
#include "prism/data/actor_class.h"

namespace prism::data::internal {

/// What the pool looks like when the executor may hand it a block.
struct PoolView {
  int min = 1;             // Concurrency's bounds (max already resolved: >= min)
  int max = 1;
  int alive = 0;           // actors started and not dead
  int idle = 0;            // of those, without a call
  bool input_waiting = false;  // a block is ready for the pool
  bool budget_allows = false;  // and the operator's byte budget lets it start one more call
};

/// How many actors to start now (pure): up to min at once; then one more while a block
/// waits, the budget allows a call, every actor is busy and the pool is below max; never
/// beyond max.
int ActorsToStart(const PoolView& view);

/// The pool's upper bound: `max`, or (0) the cluster's CPUs, at least `min`.
int ResolveMaxActors(int min, int max, double cluster_cpus);

/// Cuts a fused stage at its class MapBatches: the operators before the first one (maybe
/// none), then one group per class MapBatches with the function operators after it. Pure.
std::vector<std::vector<Op>> SplitAtActorOps(const std::vector<Op>& ops);

/// The actor behind a pool slot: constructs the class once (an exception is kept and
/// thrown by every call, naming the operator), then runs one block per call.
class MapActor {
 public:
  /// The actor's factory: builds the class `key` from `args` (registered by ActorClass).
  static MapActor* Create(std::string key, std::vector<std::string> args, std::string op_name);
  /// Runs the class on `input` in batches of ops[0].batch_size, then ops[1..] (fused
  /// function operators), as a stage task would: returns the block and its metadata.
  std::tuple<Block, BlockMeta> Call(Block input, int64_t keep_rows, std::vector<Op> ops,
                                    int64_t index, int32_t attempt);

 private:
  std::unique_ptr<ClassUdf> udf_;
  std::string construct_error_;  // "" when the class was built
};

/// The driver's side of one pool: its actors, which are idle, starts and kills. Not
/// thread-safe (the executor's thread).
class ActorPoolOp {
 public:
  /// `ops[0]` is the class MapBatches; max_actors is resolved (>= min).
  ActorPoolOp(std::vector<Op> ops, int max_actors);
  /// Kills the actors.
  ~ActorPoolOp();
  ActorPoolOp(const ActorPoolOp&) = delete;
  ActorPoolOp& operator=(const ActorPoolOp&) = delete;

  /// Starts the actors ActorsToStart asks for (none once closed); returns how many.
  int Scale(bool input_waiting, bool budget_allows);
  /// True if an actor has no call.
  bool HasIdle() const;
  /// Sends block `input` to an idle actor (HasIdle must hold): its block and metadata refs
  /// and the actor's slot id.
  std::tuple<ObjectRef<Block>, ObjectRef<BlockMeta>, int64_t> Submit(const BlockHandle& input,
                                                                     int32_t attempt);
  /// The actor's call finished: it is idle again.
  void Release(int64_t actor);
  /// The actor died (its rank was lost): forget it (Scale replaces it).
  void Remove(int64_t actor);
  /// Kills every actor and starts no more.
  void Close();

  int alive() const { return static_cast<int>(actors_.size()); }
  int64_t started() const { return started_; }
  int64_t peak() const { return peak_; }

 private:
  struct Slot {
    ActorHandle<MapActor> handle;
    bool busy = false;
  };
  std::vector<Op> ops_;
  int min_ = 1, max_ = 1;
  std::map<int64_t, Slot> actors_;
  int64_t next_id_ = 0;
  int64_t started_ = 0;
  int64_t peak_ = 0;
  bool closed_ = false;
};

}  // namespace prism::data::internal
