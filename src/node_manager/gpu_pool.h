#pragma once
// Which of a rank's GPUs a task or actor holds. The head counts GPUs as one number per
// rank; this pool turns a granted amount into specific devices, as Ray's local resource
// manager does: a whole amount (1, 2, ...) takes that many GPUs nobody holds any part of;
// a fraction (< 1) takes a share of one GPU, the fullest that still has room (so that
// fractions pack and whole GPUs stay free). A holder keeps its devices until it releases
// them: a task when it ends, an actor when it dies.
//
// The devices are the rank's visible ones (GpuDevices): ids as the launcher named them
// (CUDA_VISIBLE_DEVICES entries, Slurm's GPU indices) and the CUDA ordinal this process
// reaches each one by. Tasks share the process, so nobody changes CUDA_VISIBLE_DEVICES:
// a task uses the ordinal (torch's cuda:<ordinal>). Thread-safe.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace prism::internal {

/// The GPUs one rank may hand out, in order. `ids[i]` is how the launcher names device i
/// (a number or a UUID), `ordinals[i]` the CUDA device index this process uses for it.
struct GpuDevices {
  std::vector<std::string> ids;
  std::vector<int> ordinals;
};

/// What one holder got: indices into the pool's devices, with the share of each it holds.
struct GpuGrant {
  std::vector<size_t> slots;
  std::vector<int64_t> units;  // per slot, in resource units (kResourceUnit = one GPU)
  bool Empty() const { return slots.empty(); }
};

class GpuPool {
 public:
  explicit GpuPool(GpuDevices devices);

  /// Takes `units` of GPU (kResourceUnit per GPU). Waits up to `timeout` for a holder to
  /// release what it needs: the head only sends what fits in the rank's total, but the
  /// total may be free in pieces no one request can use (two GPUs each 0.5 held, a request
  /// of 1), or a release may not have happened yet. Returns nullopt when it did not fit in
  /// time; an empty grant for `units` <= 0.
  std::optional<GpuGrant> Acquire(int64_t units, std::chrono::milliseconds timeout);
  /// Gives back what Acquire granted. Idempotent for an empty grant.
  void Release(const GpuGrant& grant);

  const GpuDevices& devices() const { return devices_; }
  /// "GPU 2: 0.5 free, GPU 5: 1 free" (for errors).
  std::string DescribeFree();

 private:
  std::optional<GpuGrant> TryTake(int64_t units);  // requires mu_

  const GpuDevices devices_;
  std::mutex mu_;
  std::condition_variable released_;
  std::vector<int64_t> free_;  // per device, in units
};

}  // namespace prism::internal
