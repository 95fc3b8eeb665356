// Element-wise reductions for every DataType and ReduceOp: plain loops over __restrict
// pointers that the compiler vectorizes (at -O2 with -ftree-vectorize, GCC's default at -O3
// and RelWithDebInfo's -O2 since GCC 12).
#include "kernels.h"

#include <cstring>

namespace prism::collective {

const char* Name(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kUInt8:
      return "uint8";
  }
  return "unknown dtype";
}

const char* Name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProduct:
      return "product";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAverage:
      return "average";
  }
  return "unknown op";
}

const char* Name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kMpi:
      return "mpi";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kSharedMemory:
      return "shared memory";
    case Algorithm::kHierarchical:
      return "hierarchical";
  }
  return "unknown algorithm";
}

int64_t SizeOf(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kUInt8:
      return 1;
  }
  return 0;
}

namespace internal {

namespace {

template <typename T, typename F>
void Apply(T* __restrict dst, const T* __restrict a, const T* __restrict b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

template <typename T>
void CombineTyped(ReduceOp op, void* dst_v, const void* a_v, const void* b_v, int64_t n) {
  auto* dst = static_cast<T*>(dst_v);
  const auto* a = static_cast<const T*>(a_v);
  const auto* b = static_cast<const T*>(b_v);
  // dst may alias a (an in-place accumulation): then a separate loop, without __restrict.
  if (dst == a) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(dst[i] + b[i]);
        return;
      case ReduceOp::kProduct:
        for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(dst[i] * b[i]);
        return;
      case ReduceOp::kMin:
        for (int64_t i = 0; i < n; ++i) dst[i] = b[i] < dst[i] ? b[i] : dst[i];
        return;
      case ReduceOp::kMax:
        for (int64_t i = 0; i < n; ++i) dst[i] = b[i] > dst[i] ? b[i] : dst[i];
        return;
    }
    return;
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      Apply(dst, a, b, n, [](T x, T y) { return static_cast<T>(x + y); });
      return;
    case ReduceOp::kProduct:
      Apply(dst, a, b, n, [](T x, T y) { return static_cast<T>(x * y); });
      return;
    case ReduceOp::kMin:
      Apply(dst, a, b, n, [](T x, T y) { return y < x ? y : x; });
      return;
    case ReduceOp::kMax:
      Apply(dst, a, b, n, [](T x, T y) { return y > x ? y : x; });
      return;
  }
}

template <typename T>
void DivideTyped(void* dst_v, int64_t n, int members) {
  auto* dst = static_cast<T*>(dst_v);
  const T m = static_cast<T>(members);
  for (int64_t i = 0; i < n; ++i) dst[i] /= m;
}

}  // namespace

bool Supports(DataType type, ReduceOp op) {
  if (SizeOf(type) == 0) return false;
  if (op == ReduceOp::kAverage) return type == DataType::kFloat32 || type == DataType::kFloat64;
  return true;
}

std::string UnsupportedText(DataType type, ReduceOp op) {
  if (SizeOf(type) == 0) {
    return "dtype " + std::to_string(static_cast<int>(type)) +
           " is not a DataType (float32, float64, int32, int64, uint8)";
  }
  return std::string("kAverage needs a floating-point type (float32 or float64), got ") +
         Name(type) + ": use kSum and divide, or convert to floating point first";
}

void Combine(DataType type, ReduceOp op, void* dst, const void* a, const void* b, int64_t count) {
  if (count <= 0) return;
  switch (type) {
    case DataType::kFloat32:
      return CombineTyped<float>(op, dst, a, b, count);
    case DataType::kFloat64:
      return CombineTyped<double>(op, dst, a, b, count);
    case DataType::kInt32:
      return CombineTyped<int32_t>(op, dst, a, b, count);
    case DataType::kInt64:
      return CombineTyped<int64_t>(op, dst, a, b, count);
    case DataType::kUInt8:
      return CombineTyped<uint8_t>(op, dst, a, b, count);
  }
}

void Finish(DataType type, ReduceOp op, void* dst, int64_t count, int members) {
  if (op != ReduceOp::kAverage || count <= 0) return;
  if (type == DataType::kFloat32) DivideTyped<float>(dst, count, members);
  if (type == DataType::kFloat64) DivideTyped<double>(dst, count, members);
}

}  // namespace internal
}  // namespace prism::collective
