#pragma once
// A mutex that spins briefly before sleeping (glibc's PTHREAD_MUTEX_ADAPTIVE_NP). For locks
// held for well under a microsecond but taken by several threads at high rates (the head,
// the reference table), sleeping in the kernel on every collision costs far more than the
// critical section. Satisfies Lockable, so std::lock_guard / std::unique_lock work.

#include <pthread.h>

namespace prism::internal {

class AdaptiveMutex {
 public:
  AdaptiveMutex() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&mu_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~AdaptiveMutex() { pthread_mutex_destroy(&mu_); }
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;
  void lock() { pthread_mutex_lock(&mu_); }
  bool try_lock() { return pthread_mutex_trylock(&mu_) == 0; }
  void unlock() { pthread_mutex_unlock(&mu_); }

 private:
  pthread_mutex_t mu_;
};

}  // namespace prism::internal
