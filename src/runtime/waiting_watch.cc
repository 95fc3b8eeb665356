#include "runtime/waiting_watch.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/thread_name.h"
#include "head/head.h"

namespace prism::internal {

WaitingWatch::WaitingWatch(Head& head, double warn_after_s)
    : head_(head), bound_ns_(static_cast<int64_t>(warn_after_s * 1e9)) {
  if (bound_ns_ > 0) thread_ = std::thread([this] { Run(); });
}

WaitingWatch::~WaitingWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WaitingWatch::Run() {
  NameThisThread("prism-watch");
  const auto period = std::chrono::nanoseconds(std::min<int64_t>(1'000'000'000, bound_ns_ / 2));
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    lock.unlock();
    for (const std::string& warning : head_.WaitingWarnings(bound_ns_)) PRISM_LOG_WARN(warning);
    lock.lock();
  }
}

}  // namespace prism::internal
