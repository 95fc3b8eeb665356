#pragma once
// SIGUSR1 / SIGTERM handling (see prism/preemption.h for what users see). The handler only
// records the signal and wakes a watcher thread through a pipe; the watcher logs it and,
// on rank 0 with no run that can stop cleanly (no platform::PreemptionGuard alive), lets SIGTERM end
// the process as it would have without Prism. A SIGTERM that the MPI launcher (mpirun or
// its daemon, our parent) sends is no preemption: the launcher is ending the job because a
// rank died (or it was stopped itself), so rank 0 says which ranks on its host ended and
// how, and every rank ends as SIGTERM would end it: no checkpoint, no requeue.

#include <functional>
#include <string>
#include <vector>

namespace prism::internal {

/// Installs the handlers (only for signals still at their default disposition) and starts
/// the watcher. Called by Init on every rank, with every rank's host and pid (to say which
/// ranks ended when the launcher ends the job).
void InstallStopSignals(int rank, std::vector<std::string> hosts = {}, std::vector<int> pids = {});
/// Stops the watcher and restores the dispositions. Called by Shutdown (and before a
/// serving rank exits).
void UninstallStopSignals();

/// Rank 0: `last_words` runs on the watcher thread just before a SIGTERM outside any
/// PreemptionGuard ends the process (the dashboard writes its report). It must not throw;
/// an empty function clears it. Thread-safe.
void SetLastWordsOnSigterm(std::function<void()> last_words);

/// "SIGUSR1" or "SIGTERM" (else "signal"), for messages.
const char* StopSignalName(int sig);

/// Forgets the signal received (PreemptionSignal() returns 0 again): for tests that
/// preempt a run and then resume it in the same process.
void ClearStopSignalForTesting();

}  // namespace prism::internal
