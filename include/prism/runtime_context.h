#pragma once

#include <string>
#include <vector>

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

/// The GPUs the running task or actor holds (Ray's ray.get_gpu_ids()), named as the rank's
/// launcher names them: entries of CUDA_VISIBLE_DEVICES (numbers or UUIDs), else Slurm's
/// GPU indices (SLURM_STEP_GPUS / SLURM_JOB_GPUS), else "0", "1", ... for GPUs declared with
/// num_gpus that nothing lists. A task asking for 1 GPU gets one id; an actor keeps its ids
/// for its whole life; a fraction (0.5) shares one id with other fractions. Empty on the
/// driver outside a task, and in a task or actor that asked for no GPU. Tasks share their
/// rank's process, so Prism never changes CUDA_VISIBLE_DEVICES: use GetGpuDeviceIndices()
/// to pick a device. Throws RuntimeError if Prism is not initialized. Thread-safe.
std::vector<std::string> GetGpuIds();

/// The CUDA device index (torch's cuda:<index>) of each of GetGpuIds(), in the same order:
/// its position in CUDA_VISIBLE_DEVICES when that lists the rank's devices (CUDA numbers
/// the visible devices from 0), else the Slurm index itself. With Slurm binding one GPU to
/// each task, every rank's task gets index 0. Throws RuntimeError if Prism is not
/// initialized. Thread-safe.
std::vector<int> GetGpuDeviceIndices();

}  // namespace prism
