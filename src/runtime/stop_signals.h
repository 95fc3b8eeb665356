#pragma once
// SIGUSR1 / SIGTERM handling (see prism/preemption.h for what users see). The handler only
// records the signal and wakes a watcher thread through a pipe; the watcher logs it and,
// on rank 0 with no run that can stop cleanly (no platform::PreemptionGuard alive), lets SIGTERM end
// the process as it would have without Prism.

namespace prism::internal {

/// Installs the handlers (only for signals still at their default disposition) and starts
/// the watcher. Called by Init on every rank.
void InstallStopSignals(int rank);
/// Stops the watcher and restores the dispositions. Called by Shutdown (and before a
/// serving rank exits).
void UninstallStopSignals();

/// "SIGUSR1" or "SIGTERM" (else "signal"), for messages.
const char* StopSignalName(int sig);

/// Forgets the signal received (PreemptionSignal() returns 0 again): for tests that
/// preempt a run and then resume it in the same process.
void ClearStopSignalForTesting();

}  // namespace prism::internal
