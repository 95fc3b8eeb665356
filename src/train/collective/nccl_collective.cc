// The NCCL backend of prism::train collectives (CUDA tensors), compiled only with
// -DPRISM_WITH_NCCL=ON. Without it, MakeNcclCollective throws and HaveNccl() is false
// (mpi_collective.cc).
//
// The group's MPI collective (the bootstrap) carries NCCL's unique id from member 0 to the
// others; after that NCCL runs on its own. The communicator is nonblocking
// (ncclConfig_t::blocking = 0) and every operation runs on a private CUDA stream that is
// polled (cudaStreamQuery, ncclCommGetAsyncError) so that the group's `aborted` flag and the
// timeout can end a wait: ncclCommAbort then stops the kernels stuck on a missing peer.
//
// The LibTorch of the machines this is developed on is CPU-only, so this code never asks
// LibTorch for CUDA: it takes the raw pointer of each tensor (data_ptr()), checks with
// cudaPointerGetAttributes that it is device memory, and makes AllGather's results with
// cudaMalloc + torch::from_blob. It compiles and links there but cannot run (no GPU): it is
// untested until a machine with GPUs runs it.
#include "prism/platform/poll.h"
#include "prism/train/collective.h"
#include "train/collective/dtype_table.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "prism's NCCL backend needs NCCL >= 2.14 (nonblocking communicators, ncclGetLastError)"
#endif

namespace prism::train {

namespace {

using Clock = std::chrono::steady_clock;

std::string CudaText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

/// Element type for reductions; other operations move bytes (ncclUint8).
bool NcclReduceType(torch::ScalarType t, ncclDataType_t* out) {
  return internal::LookUpDtype<ncclDataType_t>(
      {{torch::kFloat32, ncclFloat32}, {torch::kFloat64, ncclFloat64}, {torch::kFloat16, ncclFloat16},
       {torch::kBFloat16, ncclBfloat16}, {torch::kInt32, ncclInt32}, {torch::kInt64, ncclInt64},
       {torch::kUInt8, ncclUint8}, {torch::kInt8, ncclInt8}},
      t, out);
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAverage:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

class NcclCollective final : public Collective {
 public:
  NcclCollective(Collective& bootstrap, int device, CollectiveOptions options)
      : device_(device), options_(std::move(options)) {
    rank_ = bootstrap.Rank();
    size_ = bootstrap.Size();
    where_ = "prism::train NCCL collective (member " + std::to_string(rank_) + " of " +
             std::to_string(size_) + ", CUDA device " + std::to_string(device_) + ")";

    // Every member sets up its device and stream first and all learn who failed, so that a
    // bad device is an error on every member rather than a hang in ncclCommInitRank.
    std::string local_error = SetUpDevice();
    torch::Tensor ok = torch::full({1}, local_error.empty() ? 1 : 0, torch::kInt32);
    std::vector<torch::Tensor> all_ok = bootstrap.AllGather(ok);
    std::string failed;
    for (int i = 0; i < size_; ++i) {
      if (all_ok[static_cast<size_t>(i)].item<int32_t>() == 0) {
        failed += (failed.empty() ? "" : ", ") + std::to_string(i);
      }
    }
    if (!failed.empty()) {
      ReleaseDevice();
      throw Error(where_ + ": members " + failed + " could not set up their CUDA device" +
                  (local_error.empty() ? " (see their errors)" : ": " + local_error));
    }

    // Member 0 makes the unique id; one status byte ahead of it tells the others whether it
    // could.
    torch::Tensor id_buf = torch::zeros({1 + NCCL_UNIQUE_ID_BYTES}, torch::kUInt8);
    ncclUniqueId id{};
    std::string id_error;
    if (rank_ == 0) {
      ncclResult_t r = ncclGetUniqueId(&id);
      if (r == ncclSuccess) {
        id_buf.data_ptr<uint8_t>()[0] = 1;
        std::memcpy(id_buf.data_ptr<uint8_t>() + 1, id.internal, NCCL_UNIQUE_ID_BYTES);
      } else {
        id_error = ncclGetErrorString(r);
      }
    }
    bootstrap.Broadcast(id_buf, 0);
    if (id_buf.data_ptr<uint8_t>()[0] != 1) {
      ReleaseDevice();
      throw Error(where_ + ": member 0 could not make an NCCL unique id" +
                  (id_error.empty() ? " (see its error)" : ": " + id_error));
    }
    std::memcpy(id.internal, id_buf.data_ptr<uint8_t>() + 1, NCCL_UNIQUE_ID_BYTES);

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // init and operations return at once; Wait polls them
    const auto start = Clock::now();
    ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      std::string detail = NcclText(r);
      if (comm_ != nullptr) ncclCommAbort(comm_);
      comm_ = nullptr;
      ReleaseDevice();
      throw Error(where_ + ": ncclCommInitRank failed: " + detail);
    }
    try {
      WaitNccl("ncclCommInitRank", start);
    } catch (...) {
      ReleaseDevice();
      throw;
    }
  }

  ~NcclCollective() override {
    cudaSetDevice(device_);
    if (comm_ != nullptr) {
      // After an abort a peer may be stuck in an operation with us; Destroy could wait.
      if (GroupAborted()) {
        ncclCommAbort(comm_);
      } else {
        ncclCommDestroy(comm_);
      }
      comm_ = nullptr;
    }
    ReleaseDevice();
  }

  int Rank() const override { return rank_; }
  int Size() const override { return size_; }
  std::string Backend() const override { return "nccl"; }

  void AllReduce(torch::Tensor& tensor, ReduceOp op) override {
    ncclDataType_t type;
    if (!NcclReduceType(tensor.scalar_type(), &type)) {
      throw Error(where_ + ": AllReduce: dtype " +
                  std::string(c10::toString(tensor.scalar_type())) +
                  " is not supported by NCCL here (float32/64, float16, bfloat16, int8, uint8, "
                  "int32, int64): convert the tensor first");
    }
    if (op == ReduceOp::kAverage && !tensor.is_floating_point()) {
      throw Error(where_ + ": AllReduce: kAverage needs a floating-point tensor, got " +
                  std::string(c10::toString(tensor.scalar_type())) + ": use kSum and divide");
    }
    void* data = DevicePointer(tensor, "AllReduce");
    Run("AllReduce", tensor.nbytes(), [&] {
      return ncclAllReduce(data, data, static_cast<size_t>(tensor.numel()), type, NcclOp(op), comm_,
                           stream_);
    });
  }

  void Broadcast(torch::Tensor& tensor, int root) override {
    if (root < 0 || root >= size_) {
      throw Error(where_ + ": Broadcast: root " + std::to_string(root) +
                  " is not a group rank (0.." + std::to_string(size_ - 1) + ")");
    }
    void* data = DevicePointer(tensor, "Broadcast");
    Run("Broadcast", tensor.nbytes(), [&] {
      return ncclBroadcast(data, data, tensor.nbytes(), ncclUint8, root, comm_, stream_);
    });
  }

  std::vector<torch::Tensor> AllGather(const torch::Tensor& tensor) override {
    void* data = DevicePointer(tensor, "AllGather");
    // Members must agree on the size: NCCL cannot check it (a mismatch corrupts or hangs).
    const size_t bytes = tensor.nbytes();
    CheckCuda(cudaSetDevice(device_), "cudaSetDevice");
    void* out = nullptr;
    CheckCuda(cudaMalloc(&out, std::max<size_t>(bytes * static_cast<size_t>(size_), 1)),
              "cudaMalloc for AllGather's result");
    // Freed when the last of the returned tensors goes (they share the allocation).
    std::shared_ptr<void> owner(out, [device = device_](void* p) {
      cudaSetDevice(device);
      cudaFree(p);
    });
    Run("AllGather", bytes,
        [&] { return ncclAllGather(data, out, bytes, ncclUint8, comm_, stream_); });
    auto options = tensor.options().device(torch::Device(torch::kCUDA, device_));
    std::vector<torch::Tensor> result;
    for (int i = 0; i < size_; ++i) {
      result.push_back(torch::from_blob(
          static_cast<char*>(out) + static_cast<size_t>(i) * bytes, tensor.sizes(),
          [owner](void*) {}, options));
    }
    return result;
  }

  void Barrier() override {
    Run("Barrier", 0, [&] {
      return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, stream_);
    });
  }

 private:
  /// Selects the device and makes the stream and the barrier's float; "" or what failed.
  std::string SetUpDevice() {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return "cudaGetDeviceCount: " + CudaText(e);
    if (device_ < 0 || device_ >= count) {
      return "device " + std::to_string(device_) + " does not exist (this process sees " +
             std::to_string(count) + " CUDA devices; check CUDA_VISIBLE_DEVICES)";
    }
    if ((e = cudaSetDevice(device_)) != cudaSuccess) return "cudaSetDevice: " + CudaText(e);
    if ((e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)) != cudaSuccess) {
      stream_ = nullptr;
      return "cudaStreamCreate: " + CudaText(e);
    }
    if ((e = cudaMalloc(&barrier_buf_, sizeof(float))) != cudaSuccess) {
      barrier_buf_ = nullptr;
      return "cudaMalloc: " + CudaText(e);
    }
    return "";
  }

  void ReleaseDevice() {
    if (barrier_buf_ != nullptr) cudaFree(barrier_buf_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    barrier_buf_ = nullptr;
    stream_ = nullptr;
  }

  std::string NcclText(ncclResult_t r) const {
    std::string s = ncclGetErrorString(r);
    const char* last = ncclGetLastError(comm_);
    if (last != nullptr && *last != '\0') s += " (" + std::string(last) + ")";
    return s;
  }

  void CheckCuda(cudaError_t e, const char* what) const {
    if (e != cudaSuccess) throw Error(where_ + ": " + what + " failed: " + CudaText(e));
  }

  bool GroupAborted() const noexcept {
    if (!options_.aborted) return false;
    try {
      return options_.aborted();
    } catch (...) {
      return true;
    }
  }

  /// The tensor's data as a device pointer, after checking that it is one.
  void* DevicePointer(const torch::Tensor& t, const char* op) const {
    if (!t.defined()) throw Error(where_ + ": " + op + ": the tensor is undefined");
    if (!t.is_contiguous()) {
      throw Error(where_ + ": " + op + ": the tensor is not contiguous: call .contiguous() first");
    }
    void* p = t.data_ptr();
    if (t.numel() == 0) return p;
    cudaPointerAttributes attr{};
    cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear it, or the next CUDA call would report it again
      throw Error(where_ + ": " + op + ": cannot inspect the tensor's memory: " + CudaText(e));
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
      throw Error(where_ + ": " + op + ": the tensor's data is not CUDA device memory: the NCCL " +
                  "backend takes CUDA tensors (use the MPI backend for CPU tensors)");
    }
    if (attr.device != device_) {
      throw Error(where_ + ": " + op + ": the tensor is on CUDA device " +
                  std::to_string(attr.device) + " but this group uses device " +
                  std::to_string(device_));
    }
    return p;
  }

  /// Issues one NCCL operation on our stream and waits for it.
  template <typename Issue>
  void Run(const char* op, size_t bytes, Issue issue) {
    const std::string what = std::string(op) + " of " + std::to_string(bytes) + " bytes";
    if (comm_ == nullptr) {
      throw CollectiveAborted(where_ + ": " + what + ": this group's communicator was aborted " +
                              "by an earlier failure (" + broken_reason_ +
                              "); make a new group to continue");
    }
    if (GroupAborted()) {
      Abort("the group was aborted before " + what);
      throw CollectiveAborted(where_ + ": " + what +
                              ": the training group was aborted (a worker failed)");
    }
    const auto start = Clock::now();
    CheckCuda(cudaSetDevice(device_), "cudaSetDevice");  // the calling thread may be new
    ncclResult_t r = issue();
    if (r != ncclSuccess && r != ncclInProgress) {
      std::string detail = NcclText(r);
      Abort(what + " failed");
      throw Error(where_ + ": " + what + " failed: " + detail);
    }
    WaitNccl(what, start);
  }

  /// Polls the communicator (for a nonblocking call still being enqueued, or an async error)
  /// and the stream until the work is done, the group is aborted or the time is up.
  void WaitNccl(const std::string& what, Clock::time_point start) {
    const auto wait_start = Clock::now();
    for (;;) {
      ncclResult_t async = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
      if (r != ncclSuccess) async = r;
      if (async != ncclSuccess && async != ncclInProgress) {
        std::string detail = NcclText(async);
        Abort(what + " failed");
        throw Error(where_ + ": " + what + " failed: " + detail);
      }
      if (async == ncclSuccess) {
        cudaError_t e = stream_ ? cudaStreamQuery(stream_) : cudaSuccess;
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) {
          Abort(what + " failed on the GPU");
          throw Error(where_ + ": " + what + " failed on the GPU: " + CudaText(e));
        }
      }
      const auto now = Clock::now();
      if (GroupAborted()) {
        Abort(what + " was aborted");
        throw CollectiveAborted(where_ + ": " + what +
                                ": the training group was aborted (a worker failed)");
      }
      if (now - start > options_.timeout) {
        Abort(what + " timed out");
        throw CollectiveTimeout(where_ + ": " + what + " did not finish within " +
                                std::to_string(options_.timeout.count()) +
                                " ms: a member never joined (it failed, is stuck, or called a "
                                "different collective). Raise CollectiveOptions::timeout if it "
                                "is only slow");
      }
      platform::PollPause(now - wait_start);  // spin, then yield, then short sleeps
    }
  }

  /// Stops the communicator's kernels and frees it; every later call throws
  /// CollectiveAborted.
  void Abort(const std::string& reason) {
    if (broken_reason_.empty()) broken_reason_ = reason;
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  int device_;
  CollectiveOptions options_;
  int rank_ = 0;
  int size_ = 0;
  std::string where_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* barrier_buf_ = nullptr;
  std::string broken_reason_;
};

}  // namespace

std::unique_ptr<Collective> MakeNcclCollective(Collective& bootstrap, int device,
                                               CollectiveOptions options) {
  if (bootstrap.Backend() != "mpi") {
    throw Error("prism::train::MakeNcclCollective: the bootstrap must be an MPI collective over " +
                std::string("the same members (MakeMpiCollective), got a ") + bootstrap.Backend() +
                " one");
  }
  return std::make_unique<NcclCollective>(bootstrap, device, std::move(options));
}

bool HaveNccl() { return true; }

}  // namespace prism::train
