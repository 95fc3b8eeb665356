#pragma once
// Preemption hooks for libraries (what prism/preemption.h describes, from the library's
// side): keep SIGTERM from ending rank 0 while the library can stop cleanly, and hear
// SIGUSR1/SIGTERM the moment they arrive instead of polling PreemptionSignal().

#include <functional>
#include <list>
#include <string>

#include "prism/preemption.h"

namespace prism::platform {

/// While one is alive on rank 0, SIGTERM no longer ends the process there: the library
/// stops on its own after saving its state (prism::train's Fit holds one). Rank 0 then
/// prints "prism: received SIGTERM (preemption or time limit): <on_signal>", where
/// on_signal says what happens next; with guards nested, the newest one's. Thread-safe.
class PreemptionGuard {
 public:
  /// What a training or tuning run does: "the training or tuning run stops at its next
  /// checkpoint; exit status 75 asks the job script to requeue".
  PreemptionGuard();
  /// `on_signal`: what the guarding library does on the signal, for rank 0's message (e.g.
  /// Serve: "Serve stops accepting requests and drains the ones in flight").
  explicit PreemptionGuard(std::string on_signal);
  ~PreemptionGuard();
  PreemptionGuard(const PreemptionGuard&) = delete;
  PreemptionGuard& operator=(const PreemptionGuard&) = delete;

 private:
  std::list<std::string>::iterator it_;
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

/// Whether a PreemptionGuard is alive in this process now: on rank 0, SIGTERM would not
/// end it but ask the guarding library to stop. For a program or test that must send
/// itself a signal only once a run is guarded.
bool Guarded();

/// "SIGUSR1" or "SIGTERM" (else "signal"), for messages.
const char* SignalName(int signal);

}  // namespace prism::platform
