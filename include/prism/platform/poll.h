#pragma once
// Pausing in a poll loop: for a library that waits on something only polling advances (a
// nonblocking MPI collective advances when it is tested, a CUDA stream is queried) and must
// stay abortable, so it cannot block in MPI_Wait.
//
//   for (auto start = Clock::now();;) {
//     MPI_Test(&req, &done, MPI_STATUS_IGNORE);
//     if (done || aborted()) break;
//     platform::PollPause(Clock::now() - start);
//   }

#include <sched.h>

#include <chrono>
#include <thread>

namespace prism::platform {

/// The pause in a poll loop that has waited `waited` so far: none for the first 50 us,
/// where small operations finish; a yield until 2 ms, so a peer sharing the core runs; then
/// 50 us sleeps, so a long wait does not hold a core. (Measured with the training
/// benchmark: yielding up to 50 ms instead of 2 ms cut 2-worker scaling from 0.54 to 0.37.)
inline void PollPause(std::chrono::steady_clock::duration waited) {
  if (waited < std::chrono::microseconds(50)) return;
  if (waited < std::chrono::milliseconds(2)) {
    sched_yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace prism::platform
