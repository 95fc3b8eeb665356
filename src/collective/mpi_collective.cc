// The MPI backend of prism::train collectives, on a communicator of the group's ranks from
// the platform's communicator service (prism/platform/communicator.h).
//
// Prism's progress thread uses MPI_COMM_WORLD on every rank all the time, so nothing here
// runs on MPI_COMM_WORLD: every operation runs on the group's own communicator. Operations are
// nonblocking MPI calls polled to completion, so that a wait can be cut short by the group's
// `aborted` flag or by the timeout instead of hanging on a member that never comes.
//
// Not for concurrent use: one thread at a time calls one Collective (as with any MPI
// communicator, members must also issue the same operations in the same order).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "prism/platform/communicator.h"
#include "prism/platform/poll.h"
#include "prism/train/collective.h"

namespace prism::train {

namespace internal {
// Largest piece one MPI call moves, in bytes. MPI counts are int; 1 GiB pieces stay far
// from INT_MAX in any unit an MPI library might count in (elements or bytes). Tests lower
// it to exercise the chunked paths with small tensors.
constexpr int64_t kDefaultMaxChunkBytes = int64_t{1} << 30;
std::atomic<int64_t> g_max_chunk_bytes{kDefaultMaxChunkBytes};

/// For tests only: pieces of at most `bytes` (<= 0 restores the default). Process-wide.
void SetMpiChunkBytesForTesting(int64_t bytes) {
  g_max_chunk_bytes = bytes > 0 ? bytes : kDefaultMaxChunkBytes;
}
}  // namespace internal

namespace {

using Clock = std::chrono::steady_clock;

// The dimensions compared by AllGather's shape check (a deeper tensor folds the rest into
// the last slot).
constexpr int kMetaDims = 8;
constexpr int kMetaLen = 3 + kMetaDims;  // dtype, ndim, numel, dims

/// Buffers of operations that were abandoned while still pending: MPI may still write to
/// (or read from) them when a late peer's message arrives, so they are never freed.
void KeepForever(torch::Tensor buffer) {
  static std::mutex mu;
  static auto* kept = new std::vector<torch::Tensor>();  // never destroyed, on purpose
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(buffer));
}

std::string DtypeName(torch::ScalarType t) { return c10::toString(t); }

/// The MPI type of an element for reductions; the other operations move bytes.
MPI_Datatype ReduceType(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return MPI_FLOAT;
    case torch::kFloat64:
      return MPI_DOUBLE;
    case torch::kInt32:
      return MPI_INT32_T;
    case torch::kInt64:
      return MPI_INT64_T;
    case torch::kUInt8:
      return MPI_UINT8_T;
    default:
      return MPI_DATATYPE_NULL;
  }
}

const char* OpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

std::string ShapeText(const std::vector<int64_t>& meta) {
  std::ostringstream s;
  s << DtypeName(static_cast<torch::ScalarType>(meta[0])) << " [";
  const int64_t ndim = meta[1];
  for (int64_t d = 0; d < std::min<int64_t>(ndim, kMetaDims); ++d) {
    s << (d ? ", " : "") << meta[3 + d];
  }
  if (ndim > kMetaDims) s << " (x" << (ndim - kMetaDims + 1) << " dims folded)";
  s << "]";
  return s.str();
}

class MpiCollective final : public Collective {
 public:
  MpiCollective(platform::Communicator comm, CollectiveOptions options)
      : owner_(std::move(comm)), comm_(owner_.comm()), world_ranks_(owner_.world_ranks()),
        options_(std::move(options)), rank_(owner_.Rank()), size_(owner_.Size()) {}

  ~MpiCollective() override {
    // A broken communicator still has our pending request, and after an abort peers may
    // have requests pending toward us: freeing it could let a later communicator inherit
    // its context id and receive their stale messages. Leaked on purpose.
    if (broken_ || GroupAborted()) owner_.Abandon();
  }

  int Rank() const override { return rank_; }
  int Size() const override { return size_; }
  std::string Backend() const override { return "mpi"; }

  void AllReduce(torch::Tensor& tensor, ReduceOp op) override {
    const char* name = "AllReduce";
    CheckTensor(tensor, name);
    MPI_Datatype type = ReduceType(tensor.scalar_type());
    if (type == MPI_DATATYPE_NULL) {
      throw Error(Where(name) + ": dtype " + DtypeName(tensor.scalar_type()) +
                  " is not supported by the MPI backend (float32, float64, int32, int64, "
                  "uint8): convert the tensor with .to(...) first");
    }
    if (op == ReduceOp::kAverage && !tensor.is_floating_point()) {
      throw Error(Where(name) + ": kAverage needs a floating-point tensor, got " +
                  DtypeName(tensor.scalar_type()) +
                  ": use kSum and divide, or convert the tensor to float first");
    }
    MPI_Op mpi_op = op == ReduceOp::kMax ? MPI_MAX : op == ReduceOp::kMin ? MPI_MIN : MPI_SUM;
    Operation o = Begin(std::string(name) + " (" + OpName(op) + ")", tensor.nbytes());
    const int64_t elem = tensor.element_size();
    auto* data = static_cast<char*>(tensor.data_ptr());
    ForEachChunk(tensor.numel(), elem, [&](int64_t first, int count) {
      MPI_Request req = MPI_REQUEST_NULL;
      Check(MPI_Iallreduce(MPI_IN_PLACE, data + first * elem, count, type, mpi_op, comm_, &req), o);
      Wait(req, o, tensor);
    });
    if (op == ReduceOp::kAverage) {
      torch::NoGradGuard no_grad;  // the data of a parameter or gradient, not a graph step
      tensor.div_(size_);
    }
  }

  void Broadcast(torch::Tensor& tensor, int root) override {
    const char* name = "Broadcast";
    CheckTensor(tensor, name);
    if (root < 0 || root >= size_) {
      throw Error(Where(name) + ": root " + std::to_string(root) +
                  " is not a group rank; the group has ranks 0.." + std::to_string(size_ - 1) +
                  " (group ranks, not world ranks)");
    }
    Operation o = Begin(name, tensor.nbytes());
    auto* data = static_cast<char*>(tensor.data_ptr());
    // Bytes, so that every dtype works.
    ForEachChunk(static_cast<int64_t>(tensor.nbytes()), 1, [&](int64_t first, int count) {
      MPI_Request req = MPI_REQUEST_NULL;
      Check(MPI_Ibcast(data + first, count, MPI_BYTE, root, comm_, &req), o);
      Wait(req, o, tensor);
    });
  }

  std::vector<torch::Tensor> AllGather(const torch::Tensor& input) override {
    const char* name = "AllGather";
    CheckTensor(input, name, /*need_contiguous=*/false);
    torch::Tensor tensor = input.contiguous();  // read only: a copy is fine
    Operation o = Begin(name, tensor.nbytes());

    // Every member learns every member's dtype and shape first, so a mismatch is an error
    // on all of them (not a truncated message on some and a hang on others).
    torch::Tensor meta = torch::empty({kMetaLen}, torch::kInt64);
    torch::Tensor all_meta = torch::empty({size_, kMetaLen}, torch::kInt64);
    FillMeta(tensor, meta.data_ptr<int64_t>());
    {
      MPI_Request req = MPI_REQUEST_NULL;
      Check(MPI_Iallgather(meta.data_ptr(), kMetaLen, MPI_INT64_T, all_meta.data_ptr(), kMetaLen,
                           MPI_INT64_T, comm_, &req),
            o);
      Wait(req, o, all_meta, meta);
    }
    CheckSameMeta(all_meta, o);

    const int64_t member_bytes = static_cast<int64_t>(tensor.nbytes());
    torch::Tensor out = torch::empty({size_ * tensor.numel()}, tensor.options());
    auto* send = static_cast<const char*>(tensor.data_ptr());
    auto* recv = static_cast<char*>(out.data_ptr());
    ForEachChunk(member_bytes, 1, [&](int64_t first, int count) {
      MPI_Request req = MPI_REQUEST_NULL;
      if (count == member_bytes) {
        Check(MPI_Iallgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, comm_, &req), o);
        Wait(req, o, out, tensor);
        return;
      }
      // A piece of every member's tensor: member i's bytes [first, first + count) land at
      // i * member_bytes + first, through a type whose extent is a whole member's tensor.
      MPI_Datatype piece = MPI_DATATYPE_NULL, strided = MPI_DATATYPE_NULL;
      Check(MPI_Type_contiguous(count, MPI_BYTE, &piece), o);
      Check(MPI_Type_create_resized(piece, 0, member_bytes, &strided), o);
      MPI_Type_free(&piece);
      Check(MPI_Type_commit(&strided), o);
      Check(MPI_Iallgather(send + first, count, MPI_BYTE, recv + first, 1, strided, comm_, &req),
            o);
      Wait(req, o, out, tensor);  // on an abandoned request the type is left to it
      MPI_Type_free(&strided);
    });

    std::vector<torch::Tensor> result;
    result.reserve(static_cast<size_t>(size_));
    for (int i = 0; i < size_; ++i) {
      result.push_back(out.narrow(0, i * tensor.numel(), tensor.numel()).view(tensor.sizes()));
    }
    return result;
  }

  void Barrier() override {
    Operation o = Begin("Barrier", 0);
    MPI_Request req = MPI_REQUEST_NULL;
    Check(MPI_Ibarrier(comm_, &req), o);
    Wait(req, o);
  }

 private:
  struct Operation {
    std::string name;
    size_t bytes;
    Clock::time_point start;
  };

  /// "AllReduce on communicator "run-7/0" (world ranks [0, 1, 2], member 1)".
  std::string Where(const char* name) const {
    return std::string("prism::train MPI ") + name + " on " + owner_.Describe();
  }
  std::string Where(const Operation& o) const {
    return "prism::train MPI " + o.name + " of " + std::to_string(o.bytes) + " bytes on " +
           owner_.Describe();
  }

  bool GroupAborted() const noexcept {
    if (!options_.aborted) return false;
    try {
      return options_.aborted();
    } catch (...) {
      return true;  // a flag that cannot be read is no reason to keep waiting
    }
  }

  /// Starts an operation: refuses if the communicator was abandoned or the group aborted.
  Operation Begin(std::string name, size_t bytes) {
    Operation o{std::move(name), bytes, Clock::now()};
    if (broken_) {
      throw CollectiveAborted(Where(o) + ": this group's communicator was abandoned after an " +
                              "earlier operation failed (" + broken_reason_ +
                              "); make a new group to continue");
    }
    if (GroupAborted()) {
      MarkBroken("the group was aborted before " + o.name);
      throw CollectiveAborted(Where(o) + ": the training group was aborted (a worker failed)");
    }
    return o;
  }

  void CheckTensor(const torch::Tensor& t, const char* name, bool need_contiguous = true) const {
    if (!t.defined()) throw Error(Where(name) + ": the tensor is undefined");
    if (!t.device().is_cpu()) {
      throw Error(Where(name) + ": the MPI backend takes CPU tensors, got one on " +
                  t.device().str() + ": call .cpu() first, or use the NCCL backend for GPUs");
    }
    if (need_contiguous && !t.is_contiguous()) {
      throw Error(Where(name) + ": the tensor is not contiguous (a transposed or sliced view); " +
                  "it works in place, so call .contiguous() first and use the result");
    }
  }

  void MarkBroken(const std::string& reason) {
    if (!broken_) broken_reason_ = reason;
    broken_ = true;
  }

  void Check(int rc, const Operation& o) {
    if (rc == MPI_SUCCESS) return;
    // A failed call may leave the communicator in any state: do not use it again.
    MarkBroken("an MPI call failed");
    throw Error(Where(o) + " failed: " + platform::MpiErrorText(rc));
  }

  /// Calls fn(first, count) for pieces of at most the chunk size, in order. `n` counts units
  /// of `unit_bytes` bytes.
  template <typename Fn>
  static void ForEachChunk(int64_t n, int64_t unit_bytes, Fn fn) {
    const int64_t max_units = std::clamp<int64_t>(
        internal::g_max_chunk_bytes.load() / std::max<int64_t>(unit_bytes, 1), 1, INT_MAX);
    for (int64_t first = 0; first < n; first += max_units) {
      fn(first, static_cast<int>(std::min(max_units, n - first)));
    }
  }

  /// Polls `req` until it completes, the group is aborted or the operation's time is up.
  /// `buffers` are what the request reads and writes: kept alive if it is abandoned.
  template <typename... Buffers>
  void Wait(MPI_Request& req, const Operation& o, const Buffers&... buffers) {
    const auto wait_start = Clock::now();
    for (;;) {
      int done = 0;
      Check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), o);
      if (done) return;
      const auto now = Clock::now();
      const bool aborted = GroupAborted();
      if (aborted || now - o.start > options_.timeout) {
        // The request stays pending: MPI has no way to cancel a collective. Its buffers must
        // outlive it, and the communicator must never carry another operation.
        (KeepForever(buffers), ...);
        if (aborted) {
          MarkBroken(o.name + " was aborted");
          throw CollectiveAborted(Where(o) + ": the training group was aborted (a worker failed)");
        }
        MarkBroken(o.name + " timed out");
        throw CollectiveTimeout(
            Where(o) + " did not finish within " + std::to_string(options_.timeout.count()) +
            " ms: a member never joined (it failed, is stuck, or called a different "
            "collective). Raise CollectiveOptions::timeout if the operation is only slow");
      }
      // MPI_Test is what drives a nonblocking collective: keep polling, pausing as the wait grows.
      platform::PollPause(now - wait_start);
    }
  }

  static void FillMeta(const torch::Tensor& t, int64_t* meta) {
    meta[0] = static_cast<int64_t>(t.scalar_type());
    meta[1] = t.dim();
    meta[2] = t.numel();
    for (int d = 0; d < kMetaDims; ++d) meta[3 + d] = d < t.dim() ? t.size(d) : 0;
    for (int64_t d = kMetaDims; d < t.dim(); ++d) meta[3 + kMetaDims - 1] *= t.size(d);
  }

  void CheckSameMeta(const torch::Tensor& all_meta, const Operation& o) const {
    const int64_t* m = all_meta.data_ptr<int64_t>();
    bool same = true;
    for (int i = 1; i < size_ && same; ++i) {
      same = std::equal(m, m + kMetaLen, m + static_cast<ptrdiff_t>(i) * kMetaLen);
    }
    if (same) return;
    std::string members;
    for (int i = 0; i < size_; ++i) {
      std::vector<int64_t> one(m + i * kMetaLen, m + (i + 1) * kMetaLen);
      members += (i ? "; " : "") + std::string("member ") + std::to_string(i) + " (world rank " +
                 std::to_string(world_ranks_[static_cast<size_t>(i)]) + "): " + ShapeText(one);
    }
    // Nothing but the small exchange ran, so the group stays usable.
    throw Error(Where(o) + ": every member must pass a tensor of the same shape and dtype, but " +
                "they differ: " + members);
  }

  platform::Communicator owner_;
  MPI_Comm comm_;
  std::vector<int> world_ranks_;
  CollectiveOptions options_;
  int rank_ = 0;
  int size_ = 0;
  bool broken_ = false;
  std::string broken_reason_;
};

}  // namespace

std::unique_ptr<Collective> MakeMpiCollective(platform::Communicator comm, CollectiveOptions options) {
  if (!comm.valid()) {
    throw Error("prism::train::MakeMpiCollective: the communicator is empty; make it with "
                "platform::Communicator::Create (or Duplicate)");
  }
  // Errors come back as return codes (the service's communicators inherit MPI_ERRORS_RETURN)
  // and become exceptions here, rather than the default abort of the job. (Open MPI 4.1
  // reports a failure inside a running nonblocking collective on MPI_COMM_WORLD, whose
  // handler ends the job: the checks before each operation, such as AllGather's shape
  // exchange, keep such failures from happening.)
  MPI_Comm_set_errhandler(comm.comm(), MPI_ERRORS_RETURN);
  return std::make_unique<MpiCollective>(std::move(comm), std::move(options));
}

}  // namespace prism::train
