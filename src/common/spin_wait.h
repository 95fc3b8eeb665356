#pragma once
// Busy-wait briefly for work that usually arrives within microseconds, before paying for a
// sleep and a wake-up (a futex round trip costs several microseconds on virtual machines).

#include <chrono>

namespace prism::internal {

/// Spins (with pause instructions, no syscalls) while `keep_waiting()` holds, for at most
/// `max_us` microseconds.
template <typename Pred>
void SpinWhile(Pred&& keep_waiting, int max_us) {
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(max_us);
  while (keep_waiting() && std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 32; ++i) __builtin_ia32_pause();
  }
}

}  // namespace prism::internal
