#pragma once
// Which element type a backend reduces a torch dtype as: each backend (MPI over
// prism::collective, NCCL) lists the dtypes it reduces as a table of pairs, and looks a
// tensor's dtype up in it; a dtype it does not list is an error its caller names.

#include <torch/torch.h>

#include <initializer_list>
#include <utility>

namespace prism::train::internal {

template <class To>
using DtypeTable = std::initializer_list<std::pair<torch::ScalarType, To>>;

/// Sets *out to the entry for `t` in `table` and returns true, or returns false.
template <class To>
bool LookUpDtype(DtypeTable<To> table, torch::ScalarType t, To* out) {
  for (const auto& [from, to] : table) {
    if (from == t) {
      *out = to;
      return true;
    }
  }
  return false;
}

}  // namespace prism::train::internal
