#pragma once
// The GIL as Prism's C++ threads take and leave it, shared by the extensions of the prism
// package (prism._prism, prism._tune, prism._train).

#include <Python.h>

#include <chrono>
#include <thread>

namespace prism::python {

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
    if (held_) PyGILState_Release(state_);
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
  ~ReleaseGil() {
#if PY_VERSION_HEX >= 0x030D0000
    while (Py_IsFinalizing()) std::this_thread::sleep_for(std::chrono::hours(1));
#else
    while (_Py_IsFinalizing()) std::this_thread::sleep_for(std::chrono::hours(1));
#endif
    PyEval_RestoreThread(state_);
  }
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

 private:
  PyThreadState* state_;
};

}  // namespace prism::python
