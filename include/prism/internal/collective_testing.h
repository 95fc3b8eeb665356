#pragma once
// Test hooks of prism::collective (process-wide; for tests only): smaller pieces make the
// chunked and pipelined paths run with small buffers (prism::collective's tests, and
// prism::train's MPI backend that forwards to them).

#include <cstdint>

namespace prism::collective::internal {

/// The largest message of the ring and of the chunked MPI paths (<= 0 restores the default).
void SetMessageBytesForTesting(int64_t bytes);

/// The shared-memory pipeline block of groups made from now on (<= 0 restores the default).
void SetSharedBlockBytesForTesting(int64_t bytes);

}  // namespace prism::collective::internal
