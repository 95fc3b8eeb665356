#pragma once
// Interrupting a running task's code when prism::Cancel reaches it: the hook a front end
// sets (prism._prism raises KeyboardInterrupt in a Python task's thread, as Ray does). The
// core itself only sets the task's cancel flag, which IsCancelled and a blocked Get see.

#include <atomic>

namespace prism::internal {

/// The cancel flag of the task running on this thread (null outside a task and in actor
/// methods): what the hook is given for it.
const std::atomic<bool>* CurrentTaskCancelFlag();

/// Called when prism::Cancel flags a running task, with that task's flag, on the thread
/// that handles the cancel (a transport or head thread): the hook only hands the word on,
/// never blocks or calls back into the core. One hook per process; null removes it.
using RunningTaskCancelHook = void (*)(const std::atomic<bool>* flag);
void SetRunningTaskCancelHook(RunningTaskCancelHook hook);

}  // namespace prism::internal
