#include "node_manager/deadline_timer.h"

#include <vector>

#include "common/log.h"
#include "common/thread_name.h"
#include "node_manager/executor.h"

namespace prism::internal {

void DeadlineTimer::Add(TaskId id, int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  auto at = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const bool earliest = deadlines_.empty() || at < deadlines_.begin()->first;
  deadlines_.emplace(at, std::make_pair(id, timeout_ms));
  if (!thread_.joinable()) {
    try {
      thread_ = StartThread([this] { ThreadMain(); });
    } catch (const std::system_error& e) {
      // The deadline stays: the next Add tries again to start the thread.
      PRISM_LOG_ERROR(ThreadStartFailure("task timeouts (SetTimeout)", e));
    }
  }
  if (earliest) cv_.notify_one();
}

void DeadlineTimer::ThreadMain() {
  NameThisThread("prism-timeouts");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (deadlines_.empty()) {
      cv_.wait(lock, [&] { return stop_ || !deadlines_.empty(); });
      continue;
    }
    auto next = deadlines_.begin()->first;
    if (Clock::now() < next) {
      cv_.wait_until(lock, next);  // woken early by a nearer deadline or Stop
      continue;
    }
    std::vector<std::pair<TaskId, int64_t>> due;
    const auto now = Clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      due.push_back(deadlines_.begin()->second);
      deadlines_.erase(deadlines_.begin());
    }
    lock.unlock();
    for (const auto& [id, ms] : due) fire_(id, ms);
    lock.lock();
  }
}

void DeadlineTimer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    deadlines_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

size_t DeadlineTimer::Pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return deadlines_.size();
}

}  // namespace prism::internal
