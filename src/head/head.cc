#include "head/head.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common/log.h"
#include "head/memory_return.h"

namespace prism::internal {

void ReleaseFreeMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

namespace {
std::vector<std::string> DefaultNodes(std::vector<std::string> node_of_rank, size_t num_ranks) {
  if (node_of_rank.empty()) {
    for (size_t r = 0; r < num_ranks; ++r) node_of_rank.push_back("rank-" + std::to_string(r));
  }
  return node_of_rank;
}
}  // namespace

Head::Head(std::vector<ResourceSet> capacities, SendFn send, std::vector<std::string> node_of_rank)
    : send_(std::move(send)),
      node_of_rank_(DefaultNodes(std::move(node_of_rank), capacities.size())),
      scheduler_(std::move(capacities)),
      tables_(scheduler_.NumRanks(), node_of_rank_),
      objects_(send_),
      groups_(scheduler_, node_of_rank_),
      tasks_(send_, scheduler_, objects_, groups_, actors_, tables_),
      actors_(send_, scheduler_, objects_, groups_, tasks_, tables_) {
  // An actor's id is also the object its handles refer to: when the last goes, it dies.
  objects_.SetFreedHook([this](ObjectId id) { actors_.OnHandleFreed(id); });
  groups_.SetSend(send_);
}

void Head::Handle(int from, Message&& msg) {
  if (auto* call = std::get_if<HeadCall>(&msg)) {
    OnHeadCall(from, std::move(*call));  // locks per call
    return;
  }
  Locked lock(*this);
  HandleLocked(from, std::move(msg));
}

void Head::Post(int from, Message&& msg) {
  if (auto* call = std::get_if<HeadCall>(&msg)) {
    OnHeadCall(from, std::move(*call));  // its caller waits for the answer anyway
    return;
  }
  if (!has_posted_.load(std::memory_order_seq_cst) && mu_.try_lock()) {
    // Nobody holds the head and nothing waits in the queue: handle it now, without
    // queueing. (A message this thread posted earlier was drained already: the queue was
    // empty, and the thread that drained it has let go of the lock.)
    DrainPosted();  // what others posted between the look and the lock goes first
    HandleLocked(from, std::move(msg));
    UnlockAndDrain();
    return;
  }
  {
    std::lock_guard<AdaptiveMutex> lock(posted_mu_);
    posted_.emplace_back(from, std::move(msg));
    has_posted_.store(true, std::memory_order_seq_cst);
  }
  if (mu_.try_lock()) UnlockAndDrain();
}

void Head::DrainPosted() {
  while (has_posted_.load(std::memory_order_acquire)) {
    {
      std::lock_guard<AdaptiveMutex> lock(posted_mu_);
      draining_.swap(posted_);
      has_posted_.store(false, std::memory_order_seq_cst);
    }
    for (auto& [from, msg] : draining_) HandleLocked(from, std::move(msg));
    draining_.clear();
    // After a burst, keep no burst-sized buffer (it would come back as posted_ next swap).
    if (draining_.capacity() > kMaxKeptPosted) std::vector<std::pair<int, Message>>().swap(draining_);
  }
}

void Head::UnlockAndDrain() {
  for (;;) {
    DrainPosted();
    const bool drained = drain_watch_.Drained(tasks_.Size() + objects_.Size());
    mu_.unlock();
    // Once per drained burst, outside the lock: the head's and rank 0's node's frees of
    // the burst are done (the node handles the head's messages inline).
    if (drained) ReleaseFreeMemory();
    // A message posted after the drain found the lock taken and left it to us: look again.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!has_posted_.load(std::memory_order_seq_cst) || !mu_.try_lock()) return;
  }
}

void Head::HandleLocked(int from, Message&& msg) {
  std::visit(
      [&](auto&& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, SubmitTask>) {
          tasks_.OnSubmit(from, std::move(m.spec));
        } else if constexpr (std::is_same_v<T, TaskDone>) {
          tasks_.OnTaskDone(from, std::move(m));
        } else if constexpr (std::is_same_v<T, TaskBlocked>) {
          tasks_.OnTaskBlocked(from, m);
        } else if constexpr (std::is_same_v<T, PutObject>) {
          objects_.OnPut(from, std::move(m));
        } else if constexpr (std::is_same_v<T, RefUpdate>) {
          objects_.OnRefUpdate(from, m);
        } else if constexpr (std::is_same_v<T, Subscribe>) {
          objects_.OnSubscribe(from, m);
        } else if constexpr (std::is_same_v<T, AddLocation>) {
          objects_.OnPullDone(from, m);
          if (m.failed_from >= 0) parked_ = objects_.ExpireParked(WallNowNs());
        } else if constexpr (std::is_same_v<T, CancelTask>) {
          tasks_.OnCancel(m);
        } else if constexpr (std::is_same_v<T, KillActorRequest>) {
          actors_.OnKillRequest(m);
        } else if constexpr (std::is_same_v<T, ActorDied>) {
          if (m.crashed) {
            actors_.OnCrashed(m.actor, m.cause);
          } else {
            actors_.ActorDead(m.actor, m.cause);
          }
        } else if constexpr (std::is_same_v<T, Publish>) {
          const int dest = channels_.Route(m.channel);
          if (dest >= 0) {
            send_(dest, Deliver{std::move(m.channel), std::move(m.bytes), from});
          } else {
            tables_.RecordError("CHANNEL_MESSAGE_DROPPED",
                                "a message rank " + std::to_string(from) + " published to channel \"" +
                                    m.channel + "\" was dropped: no rank has it open",
                                ObjectId(), from);
          }
        } else if constexpr (std::is_same_v<T, GeneratorItem>) {
          tasks_.OnGeneratorItem(from, std::move(m));
        } else if constexpr (std::is_same_v<T, GeneratorConsumed>) {
          tasks_.OnGeneratorConsumed(from, m);
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          // Liveness is tracked by the transport; nothing to do here.
        } else {
          PRISM_LOG_ERROR("head got a " << KindName(msg) << " from rank " << from);
        }
      },
      std::move(msg));
}

std::map<std::string, double> Head::Available() {
  Locked lock(*this);
  ResourceSet total;
  for (int r = 0; r < scheduler_.NumRanks(); ++r) {
    if (!scheduler_.IsLost(r)) total.Add(scheduler_.Free(r));
  }
  return total.ToMap();
}

size_t Head::NumObjects() {
  Locked lock(*this);
  return objects_.Size();
}

std::vector<std::string> Head::WaitingWarnings(int64_t bound_ns) {
  Locked lock(*this);
  return tasks_.WaitingWarnings(WallNowNs(), bound_ns);
}

size_t Head::NumTasks() {
  Locked lock(*this);
  return tasks_.Size();
}

// ---- Placement groups --------------------------------------------------------------------

std::string Head::CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  auto bundles = PlacementGroupManager::CheckBundles(options);
  Locked lock(*this);
  std::string id = groups_.Create(options, std::move(bundles));
  tasks_.DrainQueues();
  return id;
}

bool Head::RemovePlacementGroup(const std::string& id) {
  Locked lock(*this);
  if (groups_.WasRemoved(id)) return true;  // removing twice is a no-op (Ray's)
  if (!groups_.Exists(id)) return false;
  std::vector<TaskId> queued = tasks_.DetachFromGroup(id);
  std::vector<ObjectId> doomed = actors_.InGroup(id);  // Ray kills a group's actors with it
  groups_.Remove(id);
  const std::string cause = "its placement group " + id + " was removed";
  for (ObjectId actor : doomed) {
    // A creation not placed yet fails first: ActorDead drains the queues, which would fail
    // it as a task of a removed group instead of as an actor that died with its group.
    if (tasks_.IsWaitingForRank(actor)) {
      tasks_.Fail(actor, ErrorInfo::Of(ErrorKind::kActorError, cause, tasks_.NameOf(actor)));
    }
    actors_.ActorDead(actor, cause);
  }
  for (TaskId t : queued) {
    if (!tasks_.IsKnown(t)) continue;
    tasks_.Fail(t, ErrorInfo::Of(ErrorKind::kPlacementGroupRemoved,
                                 "placement group " + id + " was removed before the task ran",
                                 tasks_.NameOf(t)));
  }
  tasks_.DrainQueues();
  return true;
}

PlacementGroupStatus Head::PlacementGroupState(const std::string& id) {
  Locked lock(*this);
  return groups_.Status(id);
}

std::vector<PlacementGroup> Head::PlacementGroups(const std::string& name, const std::string& id) {
  Locked lock(*this);
  return groups_.Find(name, id);
}

std::vector<int> Head::BundleRanks(const std::string& id) {
  Locked lock(*this);
  return groups_.BundleRanks(id);
}

}  // namespace prism::internal
