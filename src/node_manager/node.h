#pragma once
// The node manager: one per rank (rank 0 included). It implements the user-facing core
// calls (Submit, Put, Get, Wait) and keeps the rank's objects in its MemoryStore, over
// three parts: ReferenceCounter (this rank's ObjectRefs), ObjectPuller (objects it needs
// from elsewhere) and TaskRunner (what the head dispatches here). It talks to the head
// through `to_head` (a direct call on rank 0, an MPI message elsewhere).

#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "common/adaptive_mutex.h"
#include "common/head_calls.h"
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/object_fetcher.h"
#include "object_store/memory_store.h"
#include "prism/internal/core_api.h"
#include "node_manager/callback_pool.h"
#include "node_manager/deadline_timer.h"
#include "node_manager/executor.h"
#include "node_manager/generator_streams.h"
#include "node_manager/object_puller.h"
#include "node_manager/reference_counter.h"
#include "node_manager/task_runner.h"
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
  std::vector<std::string> node_ids;           // per rank (default: each rank its own node)
  std::string job_id;
  std::string ray_namespace;  // the job's namespace; "" = "anonymous-<job id>"
  GpuDevices gpus;  // the devices this rank's GPU capacity stands for
  /// Tell the head of dropped refs in batches (ReferenceCounter): set where something calls
  /// SendReleases periodically (the MPI progress loop); else each release goes at once.
  bool batch_releases = false;
  /// A task no rank could ever hold is submitted anyway, with a warning (Ray's rule,
  /// Config::wait_infeasible), instead of being a ResourceError.
  bool wait_infeasible = false;
  /// Recovery mode (mpirun --enable-recovery): a lost worker rank does not end the job; a
  /// pull from a rank that may be lost waits for the head's word (ObjectPuller).
  bool recovery = false;
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
  void Cancel(ObjectId id, bool recursive) override;
  void OnReady(ObjectId id, std::function<void()> callback) override;
  bool WaitPlacementGroup(const std::string& id, int64_t timeout_ms) override;
  void KillActor(ObjectId actor, bool no_restart) override;
  std::pair<ObjectId, std::string> LookupActor(const std::string& name,
                                               const std::string& ray_namespace) override;
  const std::string& Namespace() const override { return options_.ray_namespace; }
  void AddLocalRef(ObjectId id) override;
  void RemoveLocalRef(ObjectId id) override;
  ObjectId NextGeneratorValue(TaskId generator, int64_t timeout_ms) override;
  void DropGenerator(TaskId generator) override;
  Payload ControlCall(HeadOp op, Buffer&& args) override { return CallHead(op, std::move(args)); }
  std::shared_ptr<ChannelInbox> OpenChannel(const std::string& name) override;
  void CloseChannel(const std::string& name) override;
  void Publish(const std::string& name, Buffer&& bytes) override;
  int Rank() const override { return options_.rank; }
  int WorldSize() const override { return options_.world_size; }
  const std::vector<std::string>& NodeIds() const override { return options_.node_ids; }
  const std::string& JobId() const override { return options_.job_id; }
  std::vector<std::map<std::string, double>> Capacities() const override;
  state::ObjectStoreState LocalObjectStore() override;

  /// One control-plane call to the head (see common/head_calls.h): sends `args`, waits for
  /// the answer and returns its result. Rethrows the head's error (ResourceError or
  /// Error). Throws Error if no answer comes within `timeout` (the head answers at once;
  /// only a lost rank 0 could delay it, and that ends the job).
  Payload CallHead(HeadOp op, Buffer&& args,
                   std::chrono::milliseconds timeout = std::chrono::seconds(60));

  /// Handles a message from the head (DispatchTask, ObjectReady, FreeObjects, KillActor,
  /// HeadReply, Deliver, GeneratorReport, GeneratorAck). Thread-safe; never calls into the
  /// head synchronously.
  void Handle(Message&& msg);
  /// Looks up a local object for a peer's fetch.
  Payload LocalValue(ObjectId id);
  /// Sends the releases of refs batched so far (options.batch_releases); the MPI progress
  /// loop calls it every 100 ms.
  void SendReleases() { refs_.SendReleases(); }
  /// Stops running new tasks. Returns false if some task is still running user code.
  bool Stop();

  int rank() const { return options_.rank; }
  size_t NumLocalRefs() { return refs_.Size(); }
  /// Streaming generators this rank consumes (live ObjectRefGenerators).
  size_t NumGeneratorStreams() { return streams_.Size(); }
  MemoryStore& store() { return store_; }
  Executor& executor() { return runner_.executor(); }

 private:
  static uint64_t NextSerial() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }
  void ValidateResources(const std::string& task_name,
                         const std::map<std::string, double>& resources) const;
  /// Throws ResourceError if no rank's whole capacity covers the task's demand (with
  /// NodeOptions::wait_infeasible: warns, once per function and demand, instead).
  void CheckFeasible(const TaskOptions& options) const;
  void WarnInfeasible(const std::string& name, const std::string& demand, const std::string& offer) const;
  mutable std::mutex warned_mu_;
  mutable std::set<std::string> warned_infeasible_;
  /// The request's options, checked (resources, strategy, feasibility): the calling
  /// thread's last ones if equal, so a caller's tasks share one copy.
  std::shared_ptr<const TaskOptions> OptionsOf(const TaskRequest& request) const;
  /// A named actor's namespace: the request's, else the job's.
  const std::string& NamespaceOf(const TaskRequest& request) const;
  /// Whether `request` asks for exactly options `o`.
  bool SameOptions(const TaskRequest& request, const TaskOptions& o) const;
  /// Waits for ids; while inside a task, gives its CPU back for the duration.
  PresenceFlags Await(std::span<const ObjectId> ids, size_t need, int64_t timeout_ms);
  /// A fresh id; with n > 1, the first of n consecutive ones (a task's returns).
  ObjectId NextId(int n = 1) { return ObjectId::Make(options_.rank, counter_.fetch_add(n) + 1); }

  NodeOptions options_;
  const uint64_t serial_ = NextSerial();  // OptionsOf's thread caches belong to one Node
  ToHead to_head_;
  MemoryStore store_;
  ReferenceCounter refs_;
  ObjectPuller puller_;
  GeneratorProducers producers_;
  TaskRunner runner_;
  GeneratorStreams streams_;
  CallbackPool callbacks_;
  DeadlineTimer timeouts_;
  /// Ids minted so far. A node starts where this process's last one stopped (Stop records
  /// it), so ids are unique in the process across sessions: an ObjectRef that outlived its
  /// session and is dropped in a later one names no object of that session (with counters
  /// from 0 again, it released the new session's object of the same id: issue 41).
  std::atomic<uint64_t> counter_;

  std::mutex groups_mu_;
  std::condition_variable groups_cv_;
  std::unordered_map<std::string, uint8_t> group_changes_;  // pushed PlacementGroupChanged

  std::mutex channels_mu_;
  std::unordered_map<std::string, std::shared_ptr<ChannelInbox>> channels_;  // open here

  std::mutex calls_mu_;
  std::condition_variable calls_cv_;
  uint64_t next_call_ = 0;
  std::unordered_map<uint64_t, HeadReply> replies_;  // answered head calls, by request id
};

}  // namespace prism::internal
