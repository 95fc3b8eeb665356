#pragma once
// The head's table of every live object: state, where copies are, and why it is alive.
//
// An object stays alive while any of these is non-zero: ranks holding an ObjectRef to it
// (`holders`, one entry per rank however many refs that rank has), pending tasks that take
// it as an argument (`task_uses`), live objects whose values contain a ref to it
// (`container_refs`, kept out of line: rare), and its producing task still running
// (`producer_pending`). When all drop to zero the entry is erased, the ranks in `locations` are told to free their copies,
// and the objects it contained lose one container ref each (which may free them in turn).
//
// A task's result starts implicit: counted, but with no entry, while all there is to know
// is that its submitter holds it and its task has not ended (a million queued tasks keep
// no result entries: issue 22). The task manager holds the claim (SetClaim). The first
// lookup of the id, or the task's end (Claim), makes the entry, as Create would have.
// Pure logic: no locks, no I/O; the head serialises calls.

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "prism/internal/core_api.h"
#include "prism/internal/ids.h"
#include "common/protocol.h"
#include "head/rank_list.h"

namespace prism::internal {

/// Ranks, usually one or two: kept inline, so an entry's lists allocate nothing per task.

/// What few objects need: kept out of line, so the common entry (a task's result, a Put
/// value) stays small (issue 22: head memory per queued task).
struct ObjectExtra {
  std::shared_ptr<ErrorInfo> error;  // kFailed
  std::vector<ObjectId> contained;   // refs nested in its value
  std::vector<TaskId> dependents;    // tasks waiting for it as an argument
  // Fan-out of a large object: which rank each reader pulls from, readers waiting for a
  // free source (every copy is already serving its share), and transfers per source.
  std::vector<std::pair<int, int>> pulls;  // (reader, source)
  std::vector<int> waiting_readers;
  // Ranks that asked for it before it was ready (a submitter holding the result hears
  // without asking, so most objects never have one).
  std::vector<int> subscribers;
  int32_t container_refs = 0;  // objects whose values nest a ref to it
  // Recovery mode: the task that made it, kept while its only copies are on worker ranks,
  // so that it can be run again if they are lost (lineage reconstruction).
  std::shared_ptr<const TaskSpec> lineage;
};

struct ObjectEntry {
  enum class State : uint8_t { kPending, kReady, kFailed };
  State state = State::kPending;
  bool producer_pending = false;
  int32_t task_uses = 0;
  uint64_t size = 0;
  Payload inline_value;
  RankList locations;            // ranks with a copy (large objects and cached inline ones)
  RankList holders;              // ranks with >= 1 local ObjectRef
  std::unique_ptr<ObjectExtra> extra;  // null until one of its fields is needed

  /// The rare fields, made on first use.
  ObjectExtra& More() {
    if (!extra) extra = std::make_unique<ObjectExtra>();
    return *extra;
  }
  const std::shared_ptr<ErrorInfo>& error() const {
    static const std::shared_ptr<ErrorInfo> kNone;
    return extra ? extra->error : kNone;
  }
};

struct FreedObject {
  ObjectId id;
  RankList locations;
};
/// Objects freed by one step: usually one (a result whose last ref went), kept inline.
using FreedList = boost::container::small_vector<FreedObject, 2>;

class ObjectDirectory {
 public:
  /// Gives up the claim on implicit result `id`: its submitter, or -1 if `id` is not an
  /// implicit result (never was, or its entry was made). Called on a lookup miss.
  using ClaimFn = std::function<int(ObjectId id)>;

  /// Creates an entry held by `holder` (the submitting or putting rank).
  ObjectEntry& Create(ObjectId id, int holder, bool producer_pending);
  /// The entry of `id`, made first if `id` is an implicit result; null: no such object.
  ObjectEntry* Find(ObjectId id);

  /// Who answers for implicit results (set once, by the task manager).
  void SetClaim(ClaimFn claim) { claim_ = std::move(claim); }
  /// A task's result `id` is implicit from now on; its claimant answers for it.
  void AddImplicit() { ++implicit_; }
  /// The claimant made the entry of its implicit result `id`, held by `holder` with its
  /// producer pending (the task ended, or the id was looked up).
  ObjectEntry& Claim(ObjectId id, int holder) {
    --implicit_;
    return Create(id, holder, /*producer_pending=*/true);
  }

  void AddHolder(ObjectId id, int rank);
  void AddTaskUse(ObjectId id);
  void AddLocation(ObjectId id, int rank);
  /// Records the refs nested in the object's value; each gets one container ref.
  void SetContained(ObjectId id, std::vector<ObjectId> contained);
  // The calls below may free objects; those are appended to `freed`.
  void RemoveHolder(ObjectId id, int rank, FreedList& freed);
  void RemoveTaskUse(ObjectId id, FreedList& freed);
  void ProducerDone(ObjectId id, FreedList& freed);
  /// Live objects, implicit results included.
  size_t Size() const { return objects_.size() + implicit_; }
  /// The objects whose entry names `rank` (a holder, a copy, a subscriber or a reader).
  std::vector<ObjectId> Touching(int rank) const;

 private:
  void MaybeFree(ObjectId id, FreedList& freed);
  std::unordered_map<ObjectId, ObjectEntry> objects_;
  ClaimFn claim_;
  size_t implicit_ = 0;  // implicit results: counted in Size, no entry
};

}  // namespace prism::internal
