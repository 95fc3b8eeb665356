#pragma once
// Threads that wait help the transport meanwhile. An executor or actor thread looking for
// its next task and a Get looking for a result spin for a few microseconds before they
// sleep (spin_wait.h); during that spin each looks at the transport itself (one pass:
// send what is queued, receive what came) instead of only yielding the core to the
// transport's progress thread. A message then reaches the thread that waits for it
// without a hand-off, and the progress thread, seeing helpers at work, sleeps instead of
// competing with them for the cores (with more threads than cores every hand-off waits
// for a context switch: about 2.5 us each on this VM, 11 per remote round trip).
//
// The transport installs itself (MpiTransport::Start) and removes itself before it stops.
// Without one (a single rank, the in-process cluster, the unit tests) helping does nothing.

#include <sched.h>

namespace prism::internal {

class ProgressHelper {
 public:
  virtual ~ProgressHelper() = default;
  /// One pass over the transport's work, unless another thread is on it; true if the pass
  /// found some (a message, a completed transfer). On false the caller yields the core,
  /// even though Open MPI's poll may have yielded already (it does when ranks outnumber
  /// cores): measured, yielding once more gave the producing threads more room (remote
  /// round trip 7.2-9.5 against 9.9-12.7 us, async tasks 442k-482k against 269k-442k/s).
  virtual bool Help() = 0;
  /// The calling thread stops helping (it is about to sleep): a progress thread that
  /// stepped aside for helpers takes over again at once.
  virtual void StopHelping() = 0;
};

/// Installs the process's helper (replacing any other).
void SetProgressHelper(ProgressHelper* helper);
/// Removes `helper` if it is the installed one (a transport stopping leaves another's
/// installation alone), then returns once no other thread is inside a call to a helper.
void RemoveProgressHelper(ProgressHelper* helper);
/// ProgressHelper::Help on the installed helper; false if there is none.
bool HelpProgress();
/// ProgressHelper::StopHelping on the installed helper, if any.
void StopHelpingProgress();

}  // namespace prism::internal
