#pragma once
// An in-process cluster: N ranks in this one process, with no MPI and no launcher. Each
// rank has its own node manager (executor threads, object store), rank 0 also the head;
// they talk by direct calls, and objects move between the ranks' stores by copy. While one
// lives, the whole public API works as in an MPI job of `num_ranks` ranks: tasks, actors,
// objects, placement groups (bundles land on distinct ranks), kv::, state::, and a task
// sees GetRuntimeContext().GetRank() of the rank it was placed on.
//
// For unit tests of libraries built on Prism (and of programs) that need several ranks
// without mpirun:
//
//   prism::platform::InProcessCluster cluster({.num_ranks = 3});
//   auto ref = prism::Task(Square).SetResource("rank:2", 0.01).Remote(7);  // runs on rank 2
//
// One runtime per process at a time: constructing it while prism::Init is active (or
// another cluster lives) throws prism::RuntimeError, and so does prism::Init while it lives.
// Not a performance model of an MPI job: messages are function calls.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace prism::platform {

struct InProcessOptions {
  int num_ranks = 2;
  double num_cpus = 2;                        // CPUs per rank
  std::map<std::string, double> resources;    // custom resources per rank
  uint64_t object_store_memory = 1ull << 30;  // per rank; no spilling
  int ranks_per_node = 0;                     // >0: simulated nodes of this many ranks
  /// GPUs each rank offers, by id as CUDA_VISIBLE_DEVICES would list them ({"2", "5"}: two
  /// GPUs, which GetGpuIds names "2" and "5" and GetGpuDeviceIndices 0 and 1). No device is
  /// touched: for testing code that picks its GPU. Default none.
  std::vector<std::string> gpu_ids;
};

class InProcessCluster {
 public:
  /// Starts the ranks and makes them the process's runtime. Throws RuntimeError if a
  /// runtime is already active, Error for bad options.
  explicit InProcessCluster(InProcessOptions options = {});
  /// Stops every rank (tasks still running user code keep their threads) and ends the
  /// runtime: ObjectRefs that outlive it are inert.
  ~InProcessCluster();
  InProcessCluster(const InProcessCluster&) = delete;
  InProcessCluster& operator=(const InProcessCluster&) = delete;

  int num_ranks() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism::platform
