#pragma once
// One lock for every HDF5 call in the process. Libraries built for parallel HDF5 are never
// thread-safe (H5_HAVE_THREADSAFE is off in libhdf5-openmpi-dev), and a rank may read data
// blocks (prism::data) while it saves a checkpoint (prism::train) on another thread: both
// take this lock around their HDF5 calls.

#include <mutex>

namespace prism::internal {

/// The process-wide HDF5 lock (an inline function's static: one object in the program,
/// whichever libraries include this). Hold it across a sequence of HDF5 calls, from opening
/// the file to closing it.
inline std::mutex& Hdf5Mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace prism::internal
