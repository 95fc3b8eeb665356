#pragma once
// The GIL as Prism's C++ threads take and leave it, shared by the extensions of the prism
// package (prism._prism, prism._tune, prism._train).

#include <Python.h>

#include <chrono>
#include <thread>

namespace prism::python {

/// Whether this thread holds the GIL (no fatal error when not). Python 3.11 keeps one
/// current thread state for the process, the GIL holder's, not one per thread.
inline bool HoldsGil() {
#if PY_VERSION_HEX >= 0x030D0000
  PyThreadState* current = PyThreadState_GetUnchecked();
#else
  PyThreadState* current = _PyThreadState_UncheckedGet();
#endif
  return current != nullptr && current == PyGILState_GetThisThreadState();
}

/// Sleeps until the process ends: for a thread the interpreter no longer lets run.
[[noreturn]] inline void ParkForever() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

/// Holds the GIL on an executor thread. The first use on a thread makes its Python thread
/// state and keeps it (one PyGILState_Ensure never released), so each later task costs a
/// GIL switch, not a thread state's creation and deletion. A no-op on a thread that holds
/// the GIL already (an actor destroyed when a Python thread drops its last handle).
class TaskGil {
 public:
  TaskGil() {
    if (PyGILState_Check()) return;
    held_ = true;
    thread_local bool made = false;
    if (!made) {
      PyGILState_Ensure();
      PyEval_SaveThread();
      made = true;
    }
    state_ = PyGILState_Ensure();
  }
  ~TaskGil() {
    if (!held_) return;
    // A thread that does not hold the GIL here is being ended by the interpreter: it
    // finalizes, and a thread trying to take the GIL then leaves through pthread_exit, whose
    // unwinding runs this destructor (before, PyGILState_Release aborted the process:
    // "thread state must be current when releasing"). It waits here for the process's end.
    if (!HoldsGil()) ParkForever();
    PyGILState_Release(state_);
  }
  TaskGil(const TaskGil&) = delete;
  TaskGil& operator=(const TaskGil&) = delete;

 private:
  bool held_ = false;
  PyGILState_STATE state_ = PyGILState_UNLOCKED;
};

/// Releases the GIL while it lives, as py::gil_scoped_release does; but a thread that comes
/// back while the interpreter is finalizing (the script ended while a task of this rank
/// waited in get) waits there for the process to end instead of taking the GIL, which
/// would end the thread inside C++ frames (an abort) or use an interpreter being torn down.
class ReleaseGil {
 public:
  ReleaseGil() : state_(PyEval_SaveThread()) {}
  // noexcept(false): if finalization begins between the check and the GIL, Python ends the
  // thread inside PyEval_RestoreThread (pthread_exit's forced unwinding), which must pass
  // through here to a TaskGil that parks it, not terminate the process.
  ~ReleaseGil() noexcept(false) {
#if PY_VERSION_HEX >= 0x030D0000
    if (Py_IsFinalizing()) ParkForever();
#else
    if (_Py_IsFinalizing()) ParkForever();
#endif
    PyEval_RestoreThread(state_);
  }
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

 private:
  PyThreadState* state_;
};

}  // namespace prism::python
