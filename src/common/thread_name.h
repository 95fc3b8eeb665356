#pragma once
// Names Prism's threads, so that `top -H`, `ps -L`, gdb, perf and /proc/<pid>/task/*/comm
// tell them apart from the user's: "prism-task" runs tasks, "prism-mpi" drives the MPI
// transport, and so on (ARCHITECTURE.md, "Threads").

#include <pthread.h>

#include <cstdio>

namespace prism::internal {

/// Names the calling thread. `name` is at most 15 characters (the kernel's limit); a
/// longer one is cut there. Failure changes nothing but the name, so it is ignored.
inline void NameThisThread(const char* name) {
  char cut[16];
  std::snprintf(cut, sizeof cut, "%s", name);
  (void)pthread_setname_np(pthread_self(), cut);
}

}  // namespace prism::internal
