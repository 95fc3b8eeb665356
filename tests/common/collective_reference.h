#pragma once
// Inputs and expected results for collective tests, shared by the unit tests (members as
// threads) and the multi-rank tests (members as ranks): member m's element i, and what a
// reduction over `members` members must give at i.
#include <prism/collective.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace prism_test {

/// Member m's element i: differs between members and elements, in -5..5.
inline int64_t Val(int m, int64_t i) { return (m * 7 + i * 3) % 11 - 5; }

/// Member m's input of `count` elements, each Val(m, i) + shift.
template <typename T>
std::vector<T> Input(int m, int64_t count, int64_t shift) {
  std::vector<T> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = static_cast<T>(Val(m, i) + shift);
  return v;
}

/// Element i of `op` over the inputs of members 0..members-1, computed in double.
inline double Expected(int members, int64_t i, prism::collective::ReduceOp op, int64_t shift) {
  using prism::collective::ReduceOp;
  double acc = static_cast<double>(Val(0, i) + shift);
  for (int m = 1; m < members; ++m) {
    const double v = static_cast<double>(Val(m, i) + shift);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc += v;
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  return op == ReduceOp::kAverage ? acc / members : acc;
}

}  // namespace prism_test
