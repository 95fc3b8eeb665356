#pragma once
// `n` CPUs as a resource set: what the head, scheduler and placement tests ask for and offer.
#include "common/resources.h"

namespace prism::internal {

inline ResourceSet Cpus(double n) { return ResourceSet({{"CPU", n}}); }

}  // namespace prism::internal
