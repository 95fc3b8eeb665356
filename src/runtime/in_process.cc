// The in-process cluster (prism/platform/in_process.h): the same Head and Node classes an
// MPI job runs, wired the way rank 0 wires its own node to the head, for every rank.
#include "prism/platform/in_process.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/object_fetcher.h"
#include "head/head.h"
#include "node_manager/node.h"
#include "prism/errors.h"

namespace prism::platform {

using internal::Head;
using internal::Message;
using internal::Node;
using prism::ObjectId;
using internal::Payload;

struct InProcessCluster::Impl : internal::ObjectFetcher {
  std::unique_ptr<Head> head;
  std::vector<std::unique_ptr<Node>> nodes;

  // Every message between the parts passes this gate. Closing it drops later messages
  // (a call still finishing on an actor's thread at the end) and waits for those in
  // flight, so that nothing reaches a part being destroyed. Re-entrant, unlike a lock:
  // a fetch's answer goes to the head from inside a message to a node.
  std::atomic<bool> closed{false};
  std::atomic<int> in_flight{0};
  template <typename F>
  void Pass(F&& deliver) {
    in_flight.fetch_add(1);
    if (!closed.load()) deliver();
    in_flight.fetch_sub(1);
  }
  void Close() {
    closed.store(true);
    while (in_flight.load() != 0) std::this_thread::yield();
  }

  // Objects move by copy between the ranks' stores (a value shares its bytes).
  void Fetch(int holder, ObjectId id, std::function<void(Payload, const std::string&)> done) override {
    Payload value = nodes.at(static_cast<size_t>(holder))->LocalValue(id);
    done(value, value ? "" : "rank " + std::to_string(holder) + " does not hold it");
  }
};

InProcessCluster::InProcessCluster(InProcessOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.num_ranks < 1 || options.num_ranks > 1024) {
    throw Error("prism: InProcessCluster: num_ranks is " + std::to_string(options.num_ranks) +
                "; it must be 1..1024");
  }
  if (!(options.num_cpus >= 0) || options.num_cpus > internal::kMaxResourceAmount) {
    throw Error("prism: InProcessCluster: num_cpus must be >= 0 and at most 1e14");
  }
  const int n = options.num_ranks;
  std::vector<internal::ResourceSet> capacities;
  std::vector<std::string> node_ids;
  for (int r = 0; r < n; ++r) {
    std::map<std::string, double> amounts = options.resources;
    amounts["CPU"] = options.num_cpus;
    if (!options.gpu_ids.empty()) amounts["GPU"] = static_cast<double>(options.gpu_ids.size());
    amounts["object_store_memory"] =
        std::min<double>(static_cast<double>(options.object_store_memory), internal::kMaxResourceAmount);
    amounts["rank:" + std::to_string(r)] = 1;
    capacities.emplace_back(amounts);
    node_ids.push_back(options.ranks_per_node > 0 ? "node-" + std::to_string(r / options.ranks_per_node)
                                                  : "rank-" + std::to_string(r));
  }
  static std::atomic<int> clusters{0};
  const std::string job_id = "inprocess-" + std::to_string(getpid()) + "-" + std::to_string(++clusters);
  Impl* self = impl_.get();
  impl_->head = std::make_unique<Head>(
      capacities,
      [self](int dest, Message&& m) {
        self->Pass([&] { self->nodes.at(static_cast<size_t>(dest))->Handle(std::move(m)); });
      },
      node_ids);
  internal::JobInfo job;
  job.job_id = job_id;
  job.entrypoint = "InProcessCluster";
  job.launcher = "in-process";
  job.hosts = node_ids;
  job.pids.assign(static_cast<size_t>(n), static_cast<int>(getpid()));
  impl_->head->SetJobInfo(std::move(job));
  for (int r = 0; r < n; ++r) {
    internal::NodeOptions o;
    o.rank = r;
    o.world_size = n;
    o.capacities = capacities;
    o.object_store_memory = options.object_store_memory;
    o.node_ids = node_ids;
    o.job_id = job_id;
    o.gpus.ids = options.gpu_ids;
    for (size_t i = 0; i < options.gpu_ids.size(); ++i) o.gpus.ordinals.push_back(static_cast<int>(i));
    impl_->nodes.push_back(std::make_unique<Node>(
        o, [self, r](Message&& m) { self->Pass([&] { self->head->Post(r, std::move(m)); }); }, self));
  }
  internal::SetProcessCore(impl_->nodes[0].get());
}

InProcessCluster::~InProcessCluster() {
  internal::SetProcessCore(nullptr);
  // Tasks and calls nobody waited for usually end within moments: give them up to 2 s,
  // then drop what they still send.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (impl_->head->NumTasks() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->Close();
  bool clean = true;
  for (auto& node : impl_->nodes) clean &= node->Stop();
  // With tasks still running user code, their threads keep using the ranks: leave them.
  if (!clean) (void)impl_.release();
}

int InProcessCluster::num_ranks() const { return static_cast<int>(impl_->nodes.size()); }

}  // namespace prism::platform
