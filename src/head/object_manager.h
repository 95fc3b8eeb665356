#pragma once
// The head's object manager: every live object's lifecycle in one place. It keeps the
// reference counts (ObjectDirectory: who holds a ref, which tasks use it, which objects
// contain it), readiness (pending, ready with an inline value or holders, failed), the
// ranks subscribed to it, the tasks waiting for it as an argument, and the broadcast tree
// of a large object (which copy each reader pulls from). Pure logic: the head serialises
// calls; messages go out through `send`.

#include <functional>
#include <vector>

#include "common/protocol.h"
#include "head/object_directory.h"

namespace prism::internal {

class ObjectManager {
 public:
  using SendFn = std::function<void(int dest, Message&& msg)>;
  /// Called for each freed object before its copies are told to go (an actor whose last
  /// handle went dies here).
  using FreedHook = std::function<void(ObjectId id)>;
  /// Each copy serves at most this many readers at once.
  static constexpr size_t kMaxPullsPerCopy = 2;

  explicit ObjectManager(SendFn send) : send_(std::move(send)) {}
  void SetFreedHook(FreedHook hook) { freed_hook_ = std::move(hook); }

  // Messages from the nodes.
  void OnPut(int from, PutObject&& put);
  void OnRefUpdate(int from, const RefUpdate& m);
  void OnSubscribe(int from, const Subscribe& m);
  /// A pull the head assigned ended (AddLocation): a new copy, maybe, and room for a
  /// waiting reader.
  void OnPullDone(int from, const AddLocation& m);

  /// A submitted task's return object, held by its submitter until the task ends.
  void CreateResult(ObjectId id, int submitter) { objects_.Create(id, submitter, true); }
  /// The same, kept implicit (no entry) until it is looked up or claimed: the task
  /// manager answers for it through `claim` (see ObjectDirectory).
  void AddImplicitResult() { objects_.AddImplicit(); }
  void ClaimResult(ObjectId id, int submitter) { objects_.Claim(id, submitter); }
  void SetResultClaim(ObjectDirectory::ClaimFn claim) { objects_.SetClaim(std::move(claim)); }
  /// A value a streaming generator yielded on `producer`: a ready object held by
  /// `consumer` (its stream keeps the ref until Next hands it out). A small value travels
  /// to the consumer in its report, which keeps a copy; a large one stays on the producer.
  void AddStreamValue(ObjectId id, int consumer, int producer, const Payload& inline_value,
                      uint64_t size, std::vector<ObjectId> contained);
  ObjectEntry* Find(ObjectId id) { return objects_.Find(id); }
  /// True if nothing refers to `id` any more (no ObjectRef, task argument or containing
  /// object): whatever it becomes, nobody can read it.
  bool Unreferenced(ObjectId id) {
    const ObjectEntry* e = objects_.Find(id);
    return e == nullptr ||
           (e->holders.empty() && e->task_uses == 0 && !(e->extra && e->extra->container_refs > 0));
  }
  /// What a dispatched task learns of a by-reference argument: the inline value of a
  /// small, ready object.
  ArgLocation LocationOf(ObjectId id);
  /// Adds the bytes of a large object to the ranks holding a copy (for locality).
  void AddBytesOnRanks(ObjectId id, std::vector<uint64_t>& bytes_on_rank, int num_ranks);

  /// The producing task of `id` ended: records the value (inline, or `from` holds it) or
  /// the error, pushes small results and failures to the submitter while it holds a ref,
  /// and wakes subscribers. Returns the tasks that waited for it as an argument.
  std::vector<TaskId> Resolve(ObjectId id, TaskDone& done, const std::shared_ptr<ErrorInfo>& failure,
                              int from, int submitter);

  // Reference counts (see ObjectDirectory). Calls that may free append to `freed`; hand
  // the list to Free once the caller's own bookkeeping is done.
  void AddTaskUse(ObjectId id) { objects_.AddTaskUse(id); }
  void AddHolder(ObjectId id, int rank) { objects_.AddHolder(id, rank); }
  void RemoveTaskUse(ObjectId id, FreedList& freed) { objects_.RemoveTaskUse(id, freed); }
  void RemoveHolder(ObjectId id, int rank, FreedList& freed) {
    objects_.RemoveHolder(id, rank, freed);
  }
  void ProducerDone(ObjectId id, FreedList& freed) { objects_.ProducerDone(id, freed); }
  void SetContained(ObjectId id, std::vector<ObjectId> contained) {
    objects_.SetContained(id, std::move(contained));
  }
  /// Runs the freed hook for each object, then tells every rank with a copy to drop it.
  void Free(FreedList& freed);

  size_t Size() const { return objects_.Size(); }

  // Recovery mode (a lost worker rank does not end the job).
  /// A reader whose pull failed from a rank not (yet) lost waits this long for the rank to
  /// be declared lost before it is told the object is lost (ExpireParked).
  void SetParkNs(int64_t ns) { park_ns_ = ns; }
  /// Keeps the task that made `id` (a ready value on a worker rank) so that OnRankLost can
  /// have it run again.
  void KeepLineage(ObjectId id, const std::shared_ptr<const TaskSpec>& spec);
  /// `rank` was lost: it is dropped from every object's holders (objects only its refs kept
  /// are freed), copies, subscribers and readers. An object whose only copies were there
  /// is rebuilt if its task may run again: it is pending again, and its task's spec is
  /// returned (once per task) for the task manager to rerun. Else it fails with
  /// ObjectLostError saying why. Readers parked on a failed pull from `rank` hear again.
  std::vector<std::shared_ptr<const TaskSpec>> OnRankLost(int rank);
  /// Tells readers parked longer than the park time (their source was never declared
  /// lost) that the object could not be fetched. Returns how many are still parked.
  size_t ExpireParked(int64_t now_ns);

 private:
  /// A subscription from `from` to one object (OnSubscribe's step).
  void SubscribeOne(int from, ObjectId id);
  /// Forgets the pulls `reader` was assigned (it ended them, or it is gone).
  static void DropPullsOf(ObjectExtra& x, int reader);
  /// A reader whose pull of `id` failed from `source` (recovery mode).
  struct Parked {
    ObjectId id;
    int reader;
    int source;
    int64_t deadline_ns;
  };
  bool IsLost(int rank) const { return rank >= 0 && static_cast<size_t>(rank) < lost_.size() && lost_[rank]; }

  /// Sends the ready object to its subscribers and to rank `also` (>= 0).
  void NotifyReady(ObjectId id, ObjectEntry& e, int also = -1);
  /// Tells `reader` where to pull a large object from, or queues it until a copy is free.
  void AssignPull(ObjectId id, ObjectEntry& e, int reader);
  ObjectReady ReadyMessage(ObjectId id, const ObjectEntry& e) const;

  SendFn send_;
  FreedHook freed_hook_;
  ObjectDirectory objects_;
  std::vector<bool> lost_;  // ranks lost (recovery mode)
  std::vector<Parked> parked_;
  int64_t park_ns_ = 31'000'000'000;
};

/// The error for an object that is gone (freed after its last ObjectRef was dropped).
ErrorInfo LostError(ObjectId id, const std::string& task_name);

}  // namespace prism::internal
