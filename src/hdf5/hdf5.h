#pragma once
// What every HDF5 user in Prism shares (Train's state dicts, Data's HDF5 files): the
// process-wide HDF5 lock, an owning handle for HDF5 identifiers, and the most specific
// message on HDF5's error stack.

#include <hdf5.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

namespace prism::internal {

/// The process-wide HDF5 lock. Libraries built for parallel HDF5 are never thread-safe
/// (H5_HAVE_THREADSAFE is off in libhdf5-openmpi-dev), and a rank may read data blocks
/// (prism::data) while it saves a checkpoint (prism::train) on another thread: both hold it
/// across a sequence of HDF5 calls, from opening the file to closing it. An inline
/// function's static: one object in the program, whichever libraries include this.
inline std::mutex& Hdf5Mutex() {
  static std::mutex mutex;
  return mutex;
}

/// Owns an HDF5 identifier and closes it with the matching H5?close.
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer close) : id_(id), close_(close) {}
  Hid(Hid&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  Hid& operator=(Hid&& other) noexcept {
    if (this != &other) {
      Close();
      id_ = std::exchange(other.id_, -1);
      close_ = other.close_;
    }
    return *this;
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  ~Hid() { Close(); }

  hid_t get() const { return id_; }
  /// Closes now; returns what the close returned (H5Fclose flushes, so it can fail).
  herr_t Close() {
    herr_t rc = 0;
    if (id_ >= 0 && close_ != nullptr) rc = close_(id_);
    id_ = -1;
    return rc;
  }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

/// The most specific message on HDF5's error stack (then clears it), e.g. "unable to
/// lock file, errno = 11, error message = 'Resource temporarily unavailable'". With `err`,
/// also the errno a system call on the stack failed with (its text says "errno = N"; 0 if
/// none did): HDF5 reports a full disk only there.
inline std::string Hdf5Cause(int* err = nullptr) {
  struct Found {
    std::string cause;
    int err = 0;
  } found;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
        auto* found = static_cast<Found*>(data);
        if (e == nullptr || e->desc == nullptr) return 0;
        if (n == 0) found->cause = e->desc;
        if (found->err == 0) {
          if (const char* at = std::strstr(e->desc, "errno = ")) found->err = std::atoi(at + 8);
        }
        return 0;
      },
      &found);
  H5Eclear2(H5E_DEFAULT);
  if (err != nullptr) *err = found.err;
  return found.cause;
}

}  // namespace prism::internal
