#pragma once
// The node manager: one per rank (rank 0 included). It implements the user-facing core
// calls (Submit, Put, Get, Wait, reference counting), runs dispatched tasks on its
// Executor, keeps the rank's objects in its MemoryStore, and talks to the head through
// `to_head` (a direct call on rank 0, an MPI message elsewhere).

#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "common/adaptive_mutex.h"
#include "common/head_calls.h"
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/object_fetcher.h"
#include "object_store/memory_store.h"
#include "node_manager/actor_host.h"
#include "prism/internal/core_api.h"
#include "node_manager/executor.h"
#include "common/resources.h"
#include "common/protocol.h"

namespace prism::internal {

struct NodeOptions {
  int rank = 0;
  int world_size = 1;
  std::vector<ResourceSet> capacities;  // every rank's, for the submit-time feasibility check
  uint64_t max_inline_bytes = 100 * 1024;
  uint64_t object_store_memory = UINT64_MAX;  // this rank's cap
  std::string spill_dir;                       // private to the job and rank; "" = no spilling
};

class Node : public CoreApi {
 public:
  using ToHead = std::function<void(Message&&)>;
  Node(NodeOptions options, ToHead to_head, ObjectFetcher* fetcher);
  ~Node() override;

  // CoreApi
  ObjectId Submit(TaskRequest&& request) override;
  ObjectId Put(Buffer&& value, std::vector<ObjectId> contained) override;
  std::vector<Payload> Get(const std::vector<ObjectId>& ids, int64_t timeout_ms) override;
  std::vector<bool> Wait(const std::vector<ObjectId>& ids, int num_objects,
                         int64_t timeout_ms) override;
  void KillActor(ObjectId actor, bool no_restart) override;
  std::pair<ObjectId, std::string> LookupActor(const std::string& name) override;

  /// One control-plane call to the head (see common/head_calls.h): sends `args`,
  /// waits for the answer and returns its result. Rethrows the head's error (ResourceError
  /// or Error). Throws Error if no answer comes within `timeout` (the head answers at
  /// once; only a lost rank 0 could delay it, and that ends the job).
  Payload CallHead(HeadOp op, Buffer&& args,
                   std::chrono::milliseconds timeout = std::chrono::seconds(60));
  /// A typed control call (common/head_calls.h): CallHead with the call's own argument
  /// and result types.
  template <class Call>
  typename Call::Result Ask(const typename Call::Args& args) {
    return DecodeResult<Call>(CallHead(Call::kOp, EncodeArgs<Call>(args)));
  }
  void AddLocalRef(ObjectId id) override;
  void RemoveLocalRef(ObjectId id) override;

  /// Handles a message from the head (DispatchTask, ObjectReady, FreeObjects). Thread-safe;
  /// never calls into the head synchronously.
  void Handle(Message&& msg);
  /// Looks up a local object for a peer's fetch.
  Payload LocalValue(ObjectId id);
  /// Stops running new tasks. Returns false if some task is still running user code.
  bool Stop();

  int rank() const { return options_.rank; }
  size_t NumLocalRefs();
  MemoryStore& store() { return store_; }
  Executor& executor() { return *executor_; }

 private:
  /// Runs a task, or (with `host`) an actor's creation or method call, and reports it.
  void Execute(DispatchTask& task, ActorHost* host = nullptr);
  void RouteToActor(DispatchTask&& task);
  /// Fails actor calls that can no longer run, with ActorError(cause).
  void FailCalls(std::deque<DispatchTask>&& calls, const std::string& cause);
  /// Runs `work` soon on the node's deferred-work thread. Handle() may be called under the
  /// head's lock (rank 0), so what it must tell the head goes through here.
  void Defer(std::function<void()> work);
  void DeferredMain();
  void ValidateResources(const std::string& task_name,
                         const std::map<std::string, double>& resources) const;
  /// Throws ResourceError if no rank's whole capacity covers the task's demand.
  void CheckFeasible(const TaskSpec& spec) const;
  void OnObjectReady(ObjectReady&& m);
  /// Stores a copy that arrived; if the store is full, readers get ObjectStoreFullError.
  bool StoreArrived(ObjectId id, Payload value);
  /// Throws the error stored for `id` (dropping it first if it was a copy that did not fit).
  [[noreturn]] void ThrowLocal(ObjectId id, const ErrorInfo& error);
  /// Makes sure each missing id is on its way here (subscribe once per id).
  void Request(const std::vector<ObjectId>& ids);
  void StartFetch(ObjectId id, const std::vector<int>& holders);
  /// Waits for ids; while inside a task, gives its CPU back for the duration.
  std::vector<bool> Await(const std::vector<ObjectId>& ids, size_t need, int64_t timeout_ms);
  ObjectId NextId() { return ObjectId::Make(options_.rank, ++counter_); }
  void FlushDeferredReleases();

  NodeOptions options_;
  ToHead to_head_;
  ObjectFetcher* fetcher_;
  MemoryStore store_;
  std::unique_ptr<Executor> executor_;
  std::atomic<uint64_t> counter_{0};

  AdaptiveMutex refs_mu_;
  std::unordered_map<ObjectId, int64_t> refs_;

  AdaptiveMutex requests_mu_;
  std::unordered_set<ObjectId> requested_;  // subscribed or being fetched, not yet stored
  std::unordered_set<ObjectId> fetching_;   // transfers in flight to this rank

  std::mutex actors_mu_;
  std::unordered_map<ObjectId, std::unique_ptr<ActorHost>> actors_;  // actors living here

  std::mutex deferred_mu_;
  std::condition_variable deferred_cv_;
  std::deque<std::function<void()>> deferred_;
  std::thread deferred_thread_;
  bool deferred_stop_ = false;

  std::mutex calls_mu_;
  std::condition_variable calls_cv_;
  uint64_t next_call_ = 0;
  std::unordered_map<uint64_t, HeadReply> replies_;  // answered head calls, by request id
};

/// The running runtime's node manager (runtime.cc). Throws RuntimeError naming `what`
/// outside Init..Shutdown.
Node& LiveNode(const char* what);

}  // namespace prism::internal
