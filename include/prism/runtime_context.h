#pragma once

#include <string>

#include "prism/internal/ids.h"

namespace prism {

/// Where the calling code runs. Cheap to get; the values never change during a job.
class RuntimeContext {
 public:
  /// MPI rank of this process (0 = head and driver).
  int GetRank() const;
  /// Number of ranks in the job.
  int GetWorldSize() const;
  /// The node this rank is on: its host name, or "node-K" with PRISM_RANKS_PER_NODE.
  std::string GetNodeId() const;
  /// The job: SLURM_JOB_ID when under Slurm, else an id made at Init.
  std::string GetJobId() const;
  /// Id of the task running on this thread; nil on the driver or outside a task.
  TaskId GetTaskId() const;
  /// True on the driver (rank 0 outside tasks).
  bool IsDriver() const;
};

/// Context of the caller. Throws RuntimeError if Prism is not initialized.
RuntimeContext GetRuntimeContext();

}  // namespace prism
