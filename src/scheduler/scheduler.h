#pragma once
// Placement of ready tasks on ranks (rank 0's scheduler). Pure logic: the head calls it
// under its lock; tests drive it directly.
//
// The head's protocol for one task, step by step:
//   1. submit      a node sends SubmitTask; the head records the task and its return object.
//   2. resolve     each by-reference argument must be ready; the task waits on pending
//                  ones and fails at once, with the cause, if one failed.
//   3. place       Scheduler::Place picks a rank (below) or the task queues in its class.
//   4. dispatch    resources are committed on that rank and DispatchTask carries the spec
//                  plus, per reference argument, its inline value or its holders.
//   5. complete    TaskDone releases the resources, records the result (inline value or
//                  location), wakes dependents and subscribers, and retries on exceptions
//                  when the task asked for it.
//   6. release     argument uses are dropped; objects nobody references are freed.
//
// Placement (Ray's hybrid policy): among ranks where the demand fits, prefer the
// submitting rank while it is under half loaded, then the rank holding the most bytes of
// large arguments, else the least loaded rank (ties go round-robin). A task may ask for
// another policy (its SchedulingStrategy): SPREAD takes the next rank with room after the
// last SPREAD task's, round-robin, so consecutive tasks land on different ranks even while
// one could hold them all; node affinity takes its rank when that has room, and otherwise
// waits (hard) or falls back to the default policy (soft, also for a rank that does not
// exist or could never hold the task). Soft affinity wants room now: it is never pipelined
// onto its rank behind running tasks while another rank could start it.
//
// Pipelining: a rank may be sent more tasks than it has slots, to hide the dispatch round
// trip, but only for functions measured to be short. A function whose tasks run in time t
// may fill a rank up to depth = clamp(kPipelineWindow / t, 1, kMaxDepth) times its
// capacity; unknown functions get depth 1, so long tasks never queue behind each other on
// a busy rank while another rank idles. The node runs queued tasks as slots free up.
//
// Cost of one decision, with N ranks: the least loaded rank comes from an index of the
// ranks by load, walked from the least loaded until a rank fits, and cut short once the
// load is past what any rank could take the demand's CPUs at; a demand naming a resource
// only some ranks hold (e.g. "rank:7", "GPU" on a few) looks at those ranks only. The
// index is a min segment tree over the ranks' loads (an array: the next rank at a load,
// from the round-robin cursor on, is one descent; Commit and Release rewrite a leaf and
// its ancestors while their minimum changes) and the count of ranks at each distinct load
// (few: 0, 1, 2, ... on ranks of one size). A decision is O(log N) where a scan of every
// rank was O(N): 624 us at 10,000 ranks before, measured by
// perf/head_simulation_benchmark.cc (perf/README.md, "Scale"); the tree replaced a
// std::set of (load, rank), whose cache misses made a task cost more as ranks grew. Same
// choice as the scan: the least loaded rank that fits, ties to the first at or after the
// round-robin cursor.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/resources.h"
#include "prism/internal/core_api.h"

namespace prism::internal {

class Scheduler {
 public:
  static constexpr uint64_t kPipelineWindowNs = 500'000;
  static constexpr int64_t kMaxDepth = 64;

  explicit Scheduler(std::vector<ResourceSet> capacities);

  int NumRanks() const { return static_cast<int>(ranks_.size()); }
  const ResourceSet& Capacity(int rank) const { return ranks_[rank].capacity; }
  const ResourceSet& Committed(int rank) const { return ranks_[rank].committed; }
  /// True if some live rank's whole capacity covers `demand`.
  bool Feasible(const ResourceSet& demand) const;
  /// Why `demand` is infeasible, for the error message.
  std::string DescribeInfeasible(const ResourceSet& demand) const;

  /// Picks a rank with room for `demand`, or -1. `bytes_on_rank` (may be empty) gives the
  /// bytes of large arguments held per rank, for locality.
  int Place(const std::string& function, const ResourceSet& demand, int submitter,
            const std::vector<uint64_t>& bytes_on_rank, const SchedulingStrategy& strategy = {});
  /// False when no rank can have room for `demand`'s CPUs now (no pipelining): the least
  /// loaded rank is too full. True does not mean one has: a quick test before a search.
  bool MayHaveRoom(const ResourceSet& demand) const;
  /// Capacity minus committed, never below zero (pipelining may over-commit a rank).
  ResourceSet Free(int rank) const;
  void Commit(int rank, const ResourceSet& demand);
  void Release(int rank, const ResourceSet& demand);
  /// The rank was lost (recovery mode): nothing is placed on it again.
  void RemoveRank(int rank);
  bool IsLost(int rank) const { return ranks_[rank].lost; }

  /// Feeds the pipelining estimate with a measured run time.
  void RecordRunTime(const std::string& function, uint64_t ns);
  int64_t PipelineDepth(const std::string& function) const;

 private:
  struct RankState {
    ResourceSet capacity;
    ResourceSet committed;
    bool lost = false;
  };
  /// Load of a rank in [0, inf): committed CPU over capacity CPU (or over 1 if it has none).
  double Load(int rank) const;
  /// Moves `rank` to its current load in the index (tree_, levels_).
  void Reindex(int rank);
  /// The first rank at or after `from` whose load is exactly `load`, or -1.
  int FirstAtLoad(int from, double load) const;
  /// The least load of any rank (+inf with no ranks).
  double LeastLoad() const { return tree_[1]; }
  /// The least loaded rank among `candidates` (sorted) that fits, ties to the first at or
  /// after next_; -1 if none.
  template <typename Fits>
  int LeastLoadedOf(const std::vector<int>& candidates, Fits&& fits) const;
  std::vector<RankState> ranks_;
  std::vector<double> load_;  // Load(r), as indexed
  // Min segment tree over load_: leaf of rank r at leaves_ + r (padding leaves +inf),
  // tree_[k] = min of its children, tree_[1] the least load.
  size_t leaves_ = 1;
  std::vector<double> tree_;
  std::map<double, int> levels_;  // each distinct load: how many ranks are at it
  double max_cpu_ = 0;                        // the largest CPU capacity of any rank
  // Resources some ranks lack (rank:N, GPU on a few): the ranks holding each, sorted.
  // A resource in neither this nor held_by_all_ is on no rank.
  std::unordered_map<std::string, std::vector<int>> holders_;
  std::set<std::string> held_by_all_;
  /// mean_ns_'s entry for `function`, or nullptr.
  const std::pair<const std::string, double>* FindMean(const std::string& function) const;
  std::unordered_map<std::string, double> mean_ns_;  // EWMA of run time per function
  mutable const std::pair<const std::string, double>* last_mean_ = nullptr;  // FindMean's last
  int next_ = 0;
  int next_spread_ = 0;  // where the next SPREAD task starts looking
};

}  // namespace prism::internal
