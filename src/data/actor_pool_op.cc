// The actor pool of a class MapBatches (Ray Data's ActorPoolMapOperator with its
// autoscaling actor pool).
//
// The class: ActorClass<C>(args...) registers, at static initialization of every rank, a
// factory from (C, argument types) to a ClassUdf; the plan carries the factory's key and
// the arguments' bytes. Each pool actor is a MapActor made by MapActor::Create, which
// builds the class once; a constructor's exception is kept and thrown by every call (a
// factory that throws would leave only an ActorError without the operator's name).
//
// The pool (driver side): it starts `min` actors when the execution first schedules it,
// spread over the ranks. Blocks go to idle actors, one call per actor at a time, while the
// operator's share of the byte budget allows (the executor's rule, as for task stages).
// When a block is ready, the budget allows a call and every actor is busy, one more actor
// starts, up to `max` (ActorsToStart, pure). A new actor's calls queue on it until its
// constructor has run. Output keeps the source's order (the executor's reorder buffer).
// When the pool's input is exhausted and its calls are done, or the execution stops or is
// dropped, the actors are killed. A call whose actor died (its rank was lost) is sent
// again to another actor while the block has retries left; an exception the operator's
// retry_exceptions names is retried likewise (RetryableError, plan.h). A finished block
// whose only copy was lost with its actor's rank is not rebuilt by the core (an actor
// call's result): whoever reads it (FetchBlock) runs the call again on a new actor of the
// class, on a live rank, from the input its PoolLineage keeps.

#include "data/actor_pool_op.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "prism/scheduling_strategy.h"

namespace prism::data::internal {

namespace {

std::mutex& RegistryMutex() {
  static std::mutex mutex;
  return mutex;
}
std::unordered_map<std::string, ClassFactory>& Registry() {
  static std::unordered_map<std::string, ClassFactory> registry;
  return registry;
}

}  // namespace

void RegisterClassUdf(const std::string& key, ClassFactory factory) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry()[key] = factory;
}

ClassFactory FindClassUdf(const std::string& key) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = Registry().find(key);
  return it == Registry().end() ? nullptr : it->second;
}

std::string TypeName(const std::type_info& type) {
  std::string out = platform::TypeName(type);
  // An unnamed namespace adds nothing a reader needs in an operator's name.
  for (const std::string anon : {"(anonymous namespace)::", "{anonymous}::"}) {
    for (size_t at; (at = out.find(anon)) != std::string::npos;) out.erase(at, anon.size());
  }
  return out;
}

int ActorsToStart(const PoolView& v) {
  if (v.alive < v.min) return v.min - v.alive;
  if (v.input_waiting && v.budget_allows && v.idle == 0 && v.alive < v.max) return 1;
  return 0;
}

int ResolveMaxActors(int min, int max, double cluster_cpus) {
  if (max > 0) return std::max(min, max);
  return std::max(min, std::max(1, static_cast<int>(cluster_cpus)));
}

std::vector<std::vector<Op>> SplitAtActorOps(const std::vector<Op>& ops) {
  std::vector<std::vector<Op>> groups(1);
  for (const Op& op : ops) {
    if (op.kind == Op::kMapBatchesClass) groups.emplace_back();
    groups.back().push_back(op);
  }
  return groups;
}

// ---- The actor (runs on any rank) -------------------------------------------------------

MapActor* MapActor::Create(std::string key, std::vector<std::string> args, std::string op_name) {
  auto* actor = new MapActor();
  try {
    ClassFactory factory = FindClassUdf(key);
    if (factory == nullptr) {
      throw Error("no class registered as \"" + key +
                  "\" in this binary (ActorClass<C> registers it; every rank runs the same binary)");
    }
    actor->udf_ = factory(args);
  } catch (...) {
    actor->construct_error_ = "prism::data: " + op_name + ": the constructor failed on rank " +
                              std::to_string(GetRuntimeContext().GetRank()) + ": " +
                              platform::DescribeException(std::current_exception());
  }
  return actor;
}

std::tuple<Block, BlockMeta> MapActor::Call(Block input, int64_t keep_rows, std::vector<Op> ops,
                                            int64_t index, int32_t attempt) {
  if (!construct_error_.empty()) throw OpError(construct_error_ + " (block " + std::to_string(index) + ")");
  const Op& op = ops.at(0);
  if (keep_rows >= 0 && keep_rows < input.num_rows()) input = input.Slice(0, keep_rows);
  Block block;
  if (input.num_rows() == 0) {
    block = input;  // as ApplyStage: no UDF call for a block without rows
  } else {
    try {
      std::vector<Block> out;
      for (int64_t b = 0; b < input.num_rows(); b += op.batch_size) {
        const int64_t end = std::min(input.num_rows(), b + op.batch_size);
        out.push_back(udf_->Call(b == 0 && end == input.num_rows() ? input : input.Slice(b, end)));
      }
      block = out.size() == 1 ? out[0] : Block::Concat(out);
    } catch (const prism::internal::ExitActorSignal&) {
      throw;  // ExitActor(): the actor ends; the executor sends the block to another
    } catch (...) {
      ThrowOpFailure(op, index, attempt, std::current_exception());
    }
  }
  std::string part_file;
  int64_t part_rows = 0;
  uint64_t part_bytes = 0;
  std::vector<Op> after(ops.begin() + 1, ops.end());
  block = ApplyStage(std::move(block), after, index, -1, &part_file, &part_rows, &part_bytes, attempt);
  BlockMeta meta = BlockMeta::Of(block);
  meta.part_file = part_file;
  meta.part_rows = part_rows;
  meta.part_bytes = part_bytes;
  if (!part_file.empty()) meta.SetPartWriter();
  return {std::move(block), std::move(meta)};
}

}  // namespace prism::data::internal

PRISM_REMOTE(prism::data::internal::MapActor::Create, &prism::data::internal::MapActor::Call);

namespace prism::data::internal {

// ---- The pool (driver) ------------------------------------------------------------------

namespace {

/// A new actor of the pool's class (as Scale starts them).
ActorHandle<MapActor> StartActor(const Op& op) {
  auto creator = Actor(MapActor::Create).SetSchedulingStrategy(SpreadSchedulingStrategy{});
  if (op.num_cpus > 0) creator.SetResource("CPU", op.num_cpus);
  if (op.num_gpus > 0) creator.SetResource("GPU", op.num_gpus);
  return creator.Remote(op.class_key, op.class_args, op.Name());
}

/// Runs a lost pool block's call again on a new actor, from its input.
Block RebuildPoolBlock(const PoolLineage& lineage, int timeout_ms) {
  const Op& op = lineage.ops.at(0);
  std::fprintf(stderr, "prism::data: %s: block %lld was lost with its rank; running it again on a new actor\n",
               op.Name().c_str(), static_cast<long long>(lineage.index));
  Block input = FetchBlock(lineage.input, timeout_ms);
  ActorHandle<MapActor> actor = StartActor(op);
  struct KillAtEnd {
    ActorHandle<MapActor>& actor;
    ~KillAtEnd() {
      try {
        actor.Kill();
      } catch (...) {  // dead already: nothing to stop
      }
    }
  } kill{actor};
  auto [block, meta] = actor.Task(&MapActor::Call)
                           .SetNumReturns(2)
                           .Remote(std::move(input), int64_t{-1}, lineage.ops, lineage.index, lineage.attempt);
  return *Get(block, timeout_ms);
}

}  // namespace

ActorPoolOp::ActorPoolOp(std::vector<Op> ops, int max_actors)
    : ops_(std::move(ops)), min_(ops_.at(0).min_actors), max_(max_actors) {}

ActorPoolOp::~ActorPoolOp() { Close(); }

int ActorPoolOp::Scale(bool input_waiting, bool budget_allows) {
  if (closed_) return 0;
  PoolView view;
  view.min = min_;
  view.max = max_;
  view.alive = alive();
  for (const auto& [id, slot] : actors_) view.idle += slot.busy ? 0 : 1;
  view.input_waiting = input_waiting;
  view.budget_allows = budget_allows;
  const int n = ActorsToStart(view);
  const Op& op = ops_[0];
  for (int k = 0; k < n; ++k) {
    Slot slot;
    slot.handle = StartActor(op);
    actors_.emplace(next_id_++, std::move(slot));
    ++started_;
  }
  peak_ = std::max<int64_t>(peak_, alive());
  return n;
}

bool ActorPoolOp::HasIdle() const {
  return std::any_of(actors_.begin(), actors_.end(), [](const auto& a) { return !a.second.busy; });
}

std::tuple<ObjectRef<Block>, ObjectRef<BlockMeta>, int64_t> ActorPoolOp::Submit(
    const BlockHandle& input, int32_t attempt) {
  auto it = std::find_if(actors_.begin(), actors_.end(), [](const auto& a) { return !a.second.busy; });
  if (it == actors_.end()) throw Error("prism::data: " + ops_[0].Name() + ": no idle actor (a bug)");
  it->second.busy = true;
  auto [block, meta] = it->second.handle.Task(&MapActor::Call)
                           .SetNumReturns(2)
                           .Remote(input.block, input.keep_rows, ops_, input.index, attempt);
  return {std::move(block), std::move(meta), it->first};
}

void ActorPoolOp::Release(int64_t actor) {
  auto it = actors_.find(actor);
  if (it != actors_.end()) it->second.busy = false;
}

void ActorPoolOp::Remove(int64_t actor) {
  auto it = actors_.find(actor);
  if (it == actors_.end()) return;
  try {
    it->second.handle.Kill();
  } catch (...) {  // already dead: nothing to stop
  }
  actors_.erase(it);
}

Block FetchBlock(const BlockHandle& h, int timeout_ms) {
  Block block;
  try {
    block = *Get(h.block, timeout_ms);
  } catch (const ObjectLostError&) {
    if (!h.lineage) throw;
    block = RebuildPoolBlock(*h.lineage, timeout_ms);
  }
  if (h.keep_rows >= 0 && h.keep_rows < block.num_rows()) block = block.Slice(0, h.keep_rows);
  return block;
}

void ActorPoolOp::Close() {
  closed_ = true;
  for (auto& [id, slot] : actors_) {
    try {
      slot.handle.Kill();
    } catch (...) {  // dead already, or the runtime shut down: nothing to stop
    }
  }
  actors_.clear();
}

}  // namespace prism::data::internal
