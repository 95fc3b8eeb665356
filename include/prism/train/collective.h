#pragma once
// Collectives for a training group: one interface, two backends.
//  - MPI (CPU tensors): a prism::collective::Group (prism/collective.h: shared memory on
//    one host, a ring or MPI's collectives across hosts) on a communicator of the group's
//    ranks from the platform's communicator service (prism/platform/communicator.h).
//  - NCCL (CUDA tensors): built with -DPRISM_WITH_NCCL=ON against CUDA and NCCL; its unique
//    id travels over the group's MPI communicator. It compiles and links on machines
//    without a GPU but cannot run there.
// Every operation can be aborted: it polls `aborted` while it waits and throws
// CollectiveAborted once that returns true (a peer failed, the group is being torn down),
// and CollectiveTimeout after `timeout`, so a dead peer never hangs a worker.

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "prism/collective.h"
#include "prism/errors.h"
#include "prism/platform/communicator.h"

namespace prism::train {

/// The core library's errors (prism/collective.h): an operation aborted, or timed out.
using CollectiveAborted = prism::collective::CollectiveAborted;
using CollectiveTimeout = prism::collective::CollectiveTimeout;

enum class ReduceOp { kSum, kAverage, kMax, kMin };

class Collective {
 public:
  virtual ~Collective() = default;
  /// This member's rank in the group, and the group's size.
  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  /// "mpi" or "nccl".
  virtual std::string Backend() const = 0;
  /// In place, on a contiguous tensor (float32/64, int32/64, uint8; kAverage: float only).
  virtual void AllReduce(torch::Tensor& tensor, ReduceOp op) = 0;
  /// In place: every member ends with root's values.
  virtual void Broadcast(torch::Tensor& tensor, int root) = 0;
  /// Every member's tensor (same shape and dtype on all), in rank order.
  virtual std::vector<torch::Tensor> AllGather(const torch::Tensor& tensor) = 0;
  virtual void Barrier() = 0;
};

struct CollectiveOptions {
  /// Polled while an operation waits; true makes it throw CollectiveAborted.
  std::function<bool()> aborted;
  /// An operation still unfinished after this throws CollectiveTimeout.
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
};

/// The MPI backend on `comm`, which it owns from here on: a communicator of the group's
/// ranks from platform::Communicator::Create, or a Duplicate of one for a second stream of
/// collectives (a collective object is used by one thread at a time). Collective over comm's
/// members (it makes a prism::collective::Group, which maps a shared segment on one host).
/// Throws prism::Error if `comm` is empty.
std::unique_ptr<Collective> MakeMpiCollective(platform::Communicator comm,
                                              CollectiveOptions options = {});

/// The NCCL backend (only with PRISM_WITH_NCCL): `bootstrap` (an MPI collective over the
/// same members) carries the unique id; `device` is this member's CUDA device.
std::unique_ptr<Collective> MakeNcclCollective(Collective& bootstrap, int device,
                                               CollectiveOptions options = {});

/// Whether this build has the NCCL backend.
bool HaveNccl();

}  // namespace prism::train
