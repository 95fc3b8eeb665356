#pragma once
// Preemption hooks for libraries (what prism/preemption.h describes, from the library's
// side): keep SIGTERM from ending rank 0 while the library can stop cleanly, and hear
// SIGUSR1/SIGTERM the moment they arrive instead of polling PreemptionSignal().

#include <functional>
#include <list>

#include "prism/preemption.h"

namespace prism::platform {

/// While one is alive on rank 0, SIGTERM no longer ends the process there: the library
/// stops on its own after saving its state (prism::train's Fit holds one). Thread-safe.
class PreemptionGuard {
 public:
  PreemptionGuard();
  ~PreemptionGuard();
  PreemptionGuard(const PreemptionGuard&) = delete;
  PreemptionGuard& operator=(const PreemptionGuard&) = delete;
};

/// Calls `hook(signal)` on Prism's signal-watcher thread each time SIGUSR1 or SIGTERM
/// arrives on this rank, after PreemptionSignal() has recorded it, until destroyed. The
/// hook must be quick and must not throw (wake a thread, set a flag). Thread-safe.
class PreemptionHook {
 public:
  explicit PreemptionHook(std::function<void(int signal)> hook);
  ~PreemptionHook();
  PreemptionHook(const PreemptionHook&) = delete;
  PreemptionHook& operator=(const PreemptionHook&) = delete;

 private:
  std::list<std::function<void(int)>>::iterator it_;
};

/// "SIGUSR1" or "SIGTERM" (else "signal"), for messages.
const char* SignalName(int signal);

}  // namespace prism::platform
