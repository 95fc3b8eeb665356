#pragma once
// Rank 0's watch over tasks that wait on resources held for good (issue 39, item 6): every
// second (or half the bound, if shorter) it asks the head for tasks that have waited
// longer than `pending_warn_s` on resources only an actor's end or a placement group's
// removal can free, and logs what each wants and what holds it. One short wake a second
// on one rank; it takes the head's lock only for a walk over the non-empty queues.

#include <condition_variable>
#include <mutex>
#include <thread>

namespace prism::internal {

class Head;

class WaitingWatch {
 public:
  /// Starts the thread; warn_after_s <= 0 starts nothing.
  WaitingWatch(Head& head, double warn_after_s);
  /// Stops and joins the thread.
  ~WaitingWatch();
  WaitingWatch(const WaitingWatch&) = delete;
  WaitingWatch& operator=(const WaitingWatch&) = delete;

 private:
  void Run();

  Head& head_;
  const int64_t bound_ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace prism::internal
