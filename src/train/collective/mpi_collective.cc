// The MPI backend of prism::train collectives: torch tensors on a prism::collective::Group
// (prism/collective.h), which chooses the algorithm (shared memory on one host, a ring or
// MPI's own collectives across hosts), polls the group's `aborted` flag and enforces the
// timeout. This file only checks tensors and maps dtypes and ops.
//
// Not for concurrent use: one thread at a time calls one Collective (members must also issue
// the same operations in the same order).
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "prism/internal/collective_testing.h"
#include "prism/collective.h"
#include "prism/platform/communicator.h"
#include "prism/train/collective.h"
#include "train/collective/dtype_table.h"

namespace prism::train {

namespace internal {
/// For tests only: messages of at most `bytes` on the MPI paths (<= 0 restores the default).
/// Process-wide; forwards to prism::collective's hook.
void SetMpiChunkBytesForTesting(int64_t bytes) {
  prism::collective::internal::SetMessageBytesForTesting(bytes);
  prism::collective::internal::SetSharedBlockBytesForTesting(bytes);
}
}  // namespace internal

namespace {

namespace coll = prism::collective;

// The dimensions compared by AllGather's shape check (a deeper tensor folds the rest into
// the last slot).
constexpr int kMetaDims = 8;
constexpr int kMetaLen = 3 + kMetaDims;  // dtype, ndim, numel, dims

/// Tensors of operations that were abandoned: a pending MPI send may still read them, so
/// they are never freed.
void KeepForever(torch::Tensor buffer) {
  static std::mutex mu;
  static auto* kept = new std::vector<torch::Tensor>();  // never destroyed, on purpose
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(buffer));
}

std::string DtypeName(torch::ScalarType t) { return c10::toString(t); }

/// The collective dtype of a tensor's, or false if it has none.
bool ToDataType(torch::ScalarType t, coll::DataType* out) {
  return internal::LookUpDtype<coll::DataType>({{torch::kFloat32, coll::DataType::kFloat32},
                                                {torch::kFloat64, coll::DataType::kFloat64},
                                                {torch::kInt32, coll::DataType::kInt32},
                                                {torch::kInt64, coll::DataType::kInt64},
                                                {torch::kUInt8, coll::DataType::kUInt8}},
                                               t, out);
}

coll::ReduceOp ToReduceOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return coll::ReduceOp::kSum;
    case ReduceOp::kAverage:
      return coll::ReduceOp::kAverage;
    case ReduceOp::kMax:
      return coll::ReduceOp::kMax;
    case ReduceOp::kMin:
      return coll::ReduceOp::kMin;
  }
  return coll::ReduceOp::kSum;
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
  explicit MpiCollective(coll::Group group, std::string describe, std::vector<int> world_ranks)
      : group_(std::move(group)), describe_(std::move(describe)),
        world_ranks_(std::move(world_ranks)) {}

  int Rank() const override { return group_.Rank(); }
  int Size() const override { return group_.Size(); }
  std::string Backend() const override { return "mpi"; }

  void AllReduce(torch::Tensor& tensor, ReduceOp op) override {
    const char* name = "AllReduce";
    CheckTensor(tensor, name);
    coll::DataType type{};
    if (!ToDataType(tensor.scalar_type(), &type)) {
      throw Error(Where(name) + ": dtype " + DtypeName(tensor.scalar_type()) +
                  " is not supported by the MPI backend (float32, float64, int32, int64, "
                  "uint8): convert the tensor with .to(...) first");
    }
    if (op == ReduceOp::kAverage && !tensor.is_floating_point()) {
      throw Error(Where(name) + ": kAverage needs a floating-point tensor, got " +
                  DtypeName(tensor.scalar_type()) +
                  ": use kSum and divide, or convert the tensor to float first");
    }
    Guarded(tensor, [&] { group_.AllReduce(tensor.data_ptr(), tensor.numel(), type, ToReduceOp(op)); });
  }

  void Broadcast(torch::Tensor& tensor, int root) override {
    const char* name = "Broadcast";
    CheckTensor(tensor, name);
    if (root < 0 || root >= Size()) {
      throw Error(Where(name) + ": root " + std::to_string(root) +
                  " is not a group rank; the group has ranks 0.." + std::to_string(Size() - 1) +
                  " (group ranks, not world ranks)");
    }
    // Bytes, so that every dtype works.
    Guarded(tensor, [&] {
      group_.Broadcast(tensor.data_ptr(), static_cast<int64_t>(tensor.nbytes()),
                       coll::DataType::kUInt8, root);
    });
  }

  std::vector<torch::Tensor> AllGather(const torch::Tensor& input) override {
    CheckTensor(input, "AllGather", /*need_contiguous=*/false);
    torch::Tensor tensor = input.contiguous();  // read only: a copy is fine
    const int size = Size();

    // Every member learns every member's dtype and shape first, so a mismatch is an error
    // on all of them (not a truncated message on some and a hang on others).
    std::vector<int64_t> meta(kMetaLen);
    FillMeta(tensor, meta.data());
    std::vector<int64_t> all_meta = group_.AllGather(meta);
    CheckSameMeta(all_meta, tensor.nbytes());

    torch::Tensor out = torch::empty({size * tensor.numel()}, tensor.options());
    Guarded(out, [&] {
      group_.AllGather(tensor.data_ptr(), out.data_ptr(), static_cast<int64_t>(tensor.nbytes()),
                       coll::DataType::kUInt8);
    });
    std::vector<torch::Tensor> result;
    result.reserve(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) {
      result.push_back(out.narrow(0, i * tensor.numel(), tensor.numel()).view(tensor.sizes()));
    }
    return result;
  }

  void Barrier() override { group_.Barrier(); }

 private:
  std::string Where(const char* name) const {
    return std::string("prism::train MPI ") + name + " on " + describe_;
  }

  /// Runs an operation on `tensor`'s memory; keeps the tensor if the operation was abandoned.
  template <typename Fn>
  void Guarded(const torch::Tensor& tensor, Fn fn) {
    try {
      fn();
    } catch (const coll::CollectiveAborted&) {
      KeepForever(tensor);
      throw;
    } catch (const coll::CollectiveTimeout&) {
      KeepForever(tensor);
      throw;
    }
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

  static void FillMeta(const torch::Tensor& t, int64_t* meta) {
    meta[0] = static_cast<int64_t>(t.scalar_type());
    meta[1] = t.dim();
    meta[2] = t.numel();
    for (int d = 0; d < kMetaDims; ++d) meta[3 + d] = d < t.dim() ? t.size(d) : 0;
    for (int64_t d = kMetaDims; d < t.dim(); ++d) meta[3 + kMetaDims - 1] *= t.size(d);
  }

  void CheckSameMeta(const std::vector<int64_t>& all_meta, size_t bytes) const {
    const int64_t* m = all_meta.data();
    const int size = Size();
    bool same = true;
    for (int i = 1; i < size && same; ++i) {
      same = std::equal(m, m + kMetaLen, m + static_cast<ptrdiff_t>(i) * kMetaLen);
    }
    if (same) return;
    std::string members;
    for (int i = 0; i < size; ++i) {
      std::vector<int64_t> one(m + i * kMetaLen, m + (i + 1) * kMetaLen);
      members += (i ? "; " : "") + std::string("member ") + std::to_string(i) + " (world rank " +
                 std::to_string(world_ranks_[static_cast<size_t>(i)]) + "): " + ShapeText(one);
    }
    // Nothing but the small exchange ran, so the group stays usable.
    throw Error(Where("AllGather") + " of " + std::to_string(bytes) + " bytes: every member must " +
                "pass a tensor of the same shape and dtype, but they differ: " + members);
  }

  coll::Group group_;
  std::string describe_;
  std::vector<int> world_ranks_;
};

}  // namespace

std::unique_ptr<Collective> MakeMpiCollective(platform::Communicator comm, CollectiveOptions options) {
  if (!comm.valid()) {
    throw Error("prism::train::MakeMpiCollective: the communicator is empty; make it with "
                "platform::Communicator::Create (or Duplicate)");
  }
  std::string describe = comm.Describe();
  std::vector<int> world_ranks = comm.world_ranks();
  coll::GroupOptions o;
  o.aborted = std::move(options.aborted);
  o.timeout = options.timeout;
  return std::make_unique<MpiCollective>(coll::Group::FromCommunicator(std::move(comm), std::move(o)),
                                         std::move(describe), std::move(world_ranks));
}

#if !PRISM_WITH_NCCL
// Without -DPRISM_WITH_NCCL=ON, nccl_collective.cc is not compiled (one LibTorch unit less).
std::unique_ptr<Collective> MakeNcclCollective(Collective&, int, CollectiveOptions) {
  throw Error(
      "prism was built without NCCL: configure with -DPRISM_WITH_NCCL=ON "
      "-DCUDAToolkit_ROOT=/usr/local/cuda");
}

bool HaveNccl() { return false; }
#endif

}  // namespace prism::train
