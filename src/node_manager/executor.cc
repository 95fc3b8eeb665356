#include "node_manager/executor.h"

#include "common/spin_wait.h"

#include <chrono>

namespace prism::internal {

Executor::Executor(ResourceSet capacity, RunFn run)
    : run_(std::move(run)), available_(std::move(capacity)) {}

Executor::~Executor() { Stop(); }

ResourceSet Executor::CpuOnly(const ResourceSet& demand) {
  ResourceSet cpu;
  cpu.Set("CPU", demand.Get("CPU"));
  return cpu;
}

void Executor::Submit(DispatchTask&& task) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  waiting_.push_back(std::move(task));
  Admit();
}

void Executor::Admit(size_t caller_takes) {
  // Strict FIFO: the head already sized what it sent here (capacity x pipeline depth), so
  // the queue is short-lived; scanning past a task that does not fit would cost a demand
  // comparison per queued task on every completion.
  while (!waiting_.empty() && waiting_.front().spec->demand.FitsIn(available_)) {
    available_.Subtract(waiting_.front().spec->demand);
    runnable_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  num_runnable_.store(runnable_.size(), std::memory_order_relaxed);
  if (runnable_.size() <= caller_takes || stop_) return;  // the caller runs it: nobody to wake
  const size_t need = runnable_.size() - caller_takes;
  if (spinning_ >= need) return;  // spinning threads will take them: no wake-up
  if (idle_ >= need) {
    cv_.notify_one();
    return;
  }
  size_t missing = need - idle_;
  for (size_t i = 0; i < missing; ++i) {
    threads_.emplace_back([this] { ThreadMain(); });
  }
  if (idle_ > 0) cv_.notify_all();
}

void Executor::ThreadMain() {
  std::unique_lock<AdaptiveMutex> lock(mu_);
  for (;;) {
    ++idle_;  // a spinning thread counts as idle: Admit hands it work instead of spawning
    if (runnable_.empty() && !stop_) {
      // Tasks often arrive back to back: look again for a few microseconds before paying
      // for a sleep and a wake-up.
      ++spinning_;
      lock.unlock();
      SpinWhile([&] { return num_runnable_.load(std::memory_order_relaxed) == 0; }, kSpinUs);
      lock.lock();
      --spinning_;
    }
    cv_.wait(lock, [&] { return stop_ || !runnable_.empty(); });
    --idle_;
    if (stop_) return;
    DispatchTask task = std::move(runnable_.front());
    runnable_.pop_front();
    num_runnable_.store(runnable_.size(), std::memory_order_relaxed);
    lock.unlock();
    run_(task);
    lock.lock();
    available_.Add(task.spec->demand);
    // This thread takes the next runnable task itself (the lock is held until it does), so
    // Admit wakes or starts threads only for the rest.
    Admit(/*caller_takes=*/1);
  }
}

void Executor::Block(const ResourceSet& demand) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  available_.Add(CpuOnly(demand));
  Admit();
}

void Executor::Unblock(const ResourceSet& demand) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  available_.Subtract(CpuOnly(demand));  // may go negative for a moment: Ray does the same
}

bool Executor::Stop() {
  std::vector<std::thread> threads;
  bool all_idle;
  {
    std::lock_guard<AdaptiveMutex> lock(mu_);
    if (stop_) return stopped_clean_;
    stop_ = true;
    all_idle = idle_ == threads_.size();
    threads.swap(threads_);
  }
  cv_.notify_all();
  // Threads inside user code may never return: join only when none is running one.
  for (auto& t : threads) {
    if (all_idle) {
      t.join();
    } else {
      t.detach();
    }
  }
  stopped_clean_ = all_idle;
  return all_idle;
}

size_t Executor::NumThreads() {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  return threads_.size();
}

}  // namespace prism::internal
