#pragma once
// Turns C library return codes into exceptions naming the call, file:line and code.

#include <mpi.h>

#include <string>

#include "prism/errors.h"

namespace prism::internal {
/// MPI's text for an error code (MPI_Error_string), or "MPI error <code>".
std::string MpiErrorText(int code);
[[noreturn]] void ThrowMpiError(int code, const char* call, const char* file, int line);
}  // namespace prism::internal

#define PRISM_MPI_CHECK(call)                                                  \
  do {                                                                         \
    int prism_mpi_rc = (call);                                                 \
    if (prism_mpi_rc != MPI_SUCCESS) {                                         \
      ::prism::internal::ThrowMpiError(prism_mpi_rc, #call, __FILE__, __LINE__); \
    }                                                                          \
  } while (0)
