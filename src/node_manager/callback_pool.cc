#include "node_manager/callback_pool.h"

#include <exception>

#include "common/log.h"
#include "common/thread_name.h"
#include "node_manager/executor.h"
#include "node_manager/task_runner.h"

namespace prism::internal {

CallbackPool::~CallbackPool() { Stop(); }

void CallbackPool::Post(std::vector<Callback>&& callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  for (auto& cb : callbacks) queue_.push_back(std::move(cb));
  while (threads_.size() < static_cast<size_t>(kCallbackThreads)) {
    try {
      threads_.push_back(StartThread([this] { ThreadMain(); }));
    } catch (const std::system_error& e) {
      // The callbacks stay queued: a thread started earlier (or the next Post) runs them.
      PRISM_LOG_ERROR(ThreadStartFailure("completion callbacks", e));
      break;
    }
  }
  cv_.notify_one();
}

void CallbackPool::ThreadMain() {
  NameThisThread("prism-callback");
  SetThreadCore(core_);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Callback cb = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    try {
      cb();
    } catch (const std::exception& e) {
      PRISM_LOG_ERROR("a completion callback (OnReady) threw " << e.what() << "; ignored");
    } catch (...) {
      PRISM_LOG_ERROR("a completion callback (OnReady) threw a non-std::exception; ignored");
    }
    cb = nullptr;  // its captures (ObjectRefs) go before the next one
    lock.lock();
    --busy_;
  }
}

bool CallbackPool::Stop() {
  std::vector<std::thread> threads;
  bool idle;
  std::deque<Callback> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && threads_.empty()) return busy_ == 0;
    stop_ = true;
    idle = busy_ == 0;
    threads.swap(threads_);
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& t : threads) idle ? t.join() : t.detach();
  return idle;
}

}  // namespace prism::internal
