#include "node_manager/executor.h"

#include "common/spin_wait.h"
#include "common/thread_name.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace prism::internal {

namespace {
std::atomic<int> g_failing_thread_starts{0};
std::atomic<size_t> g_max_blocked_tasks{kMaxBlockedTasks};
thread_local std::atomic<bool>* t_cancel_flag = nullptr;  // this pool thread's slot's

int CountThreads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}
}  // namespace

std::atomic<bool> g_hold_new_pool_threads{false};

void FailThreadStartsForTest(int n) { g_failing_thread_starts.store(n); }
void HoldNewPoolThreadsForTest(bool hold) { g_hold_new_pool_threads.store(hold); }
void SetMaxBlockedTasksForTest(size_t n) { g_max_blocked_tasks.store(n == 0 ? kMaxBlockedTasks : n); }

size_t MaxBlockedTasks() { return g_max_blocked_tasks.load(std::memory_order_relaxed); }

void MaybeFailThreadStartForTest() {
  if (g_failing_thread_starts.load(std::memory_order_relaxed) > 0 &&
      g_failing_thread_starts.fetch_sub(1) > 0) {
    throw std::system_error(EAGAIN, std::generic_category(),
                            "injected by a test");
  }
}

std::string ThreadStartFailure(const std::string& what, const std::system_error& e) {
  return "could not start a thread for " + what + " (" + e.what() + ", with " +
         std::to_string(CountThreads()) +
         " threads in this process): the process is at a limit on threads or memory mappings "
         "(ulimit -u, /proc/sys/kernel/threads-max, /proc/sys/vm/max_map_count); end actors "
         "that are no longer needed, or block fewer tasks at once";
}

Executor::Executor(ResourceSet capacity, RunFn run, FailFn fail)
    : run_(std::move(run)), fail_(std::move(fail)), available_(std::move(capacity)) {}

Executor::~Executor() { Stop(); }

ResourceSet Executor::CpuOnly(const ResourceSet& demand) {
  ResourceSet cpu;
  cpu.Set("CPU", demand.Get("CPU"));
  return cpu;
}

void Executor::Submit(DispatchTask&& task) {
  bool unstarted;
  {
    std::lock_guard<AdaptiveMutex> lock(mu_);
    waiting_.push_back(std::move(task));
    unstarted = Admit();
  }
  if (unstarted) FailUnstarted();
}

bool Executor::Admit(size_t caller_takes) {
  // Strict FIFO: the head already sized what it sent here (capacity x pipeline depth), so
  // the queue is short-lived; scanning past a task that does not fit would cost a demand
  // comparison per queued task on every completion.
  while (!waiting_.empty() && waiting_.front().spec->options->demand.FitsIn(available_)) {
    available_.Subtract(waiting_.front().spec->options->demand);
    runnable_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  num_runnable_.store(runnable_.size(), std::memory_order_relaxed);
  if (runnable_.size() <= caller_takes || stop_) return false;  // the caller runs it: nobody to wake
  const size_t need = runnable_.size() - caller_takes;
  if (spinning_ + starting_ >= need) return false;  // they will take them: no wake-up
  if (idle_ + starting_ >= need) {
    cv_.notify_one();
    return false;
  }
  // A thread started by an earlier call may not have run yet (starting a thread takes tens
  // of microseconds, and the head pipelines several tasks to a rank at once): it takes one
  // of these. Counting only the idle ones started a thread per queued task (34 threads on
  // the driver's rank in a batch of 10,000 one-CPU tasks, where one was enough).
  size_t missing = need - idle_ - starting_;
  for (size_t i = 0; i < missing; ++i) {
    threads_.emplace_back();
    try {
      threads_.back() = StartThread([this] { ThreadMain(); });
      ++starting_;
    } catch (const std::system_error& e) {
      // The tasks no thread will take now (the last ones) fail, rather than wait for a
      // thread that may never come.
      threads_.pop_back();
      start_error_ = "prism: " + ThreadStartFailure("a task", e);
      for (size_t k = i; k < missing && runnable_.size() > caller_takes; ++k) {
        available_.Add(runnable_.back().spec->options->demand);
        unstarted_.push_back(std::move(runnable_.back()));
        runnable_.pop_back();
      }
      num_runnable_.store(runnable_.size(), std::memory_order_relaxed);
      if (idle_ > 0) cv_.notify_all();
      return true;
    }
  }
  if (idle_ > 0) cv_.notify_all();
  return false;
}

void Executor::FailUnstarted() {
  std::deque<DispatchTask> tasks;
  std::string message;
  {
    std::lock_guard<AdaptiveMutex> lock(mu_);
    tasks.swap(unstarted_);
    message = start_error_;
  }
  for (auto& t : tasks) {
    if (fail_) fail_(t, message);
  }
}

const std::atomic<bool>* Executor::CurrentCancelFlag() { return t_cancel_flag; }
void Executor::BindCancelFlag(std::atomic<bool>* flag) { t_cancel_flag = flag; }

Executor::CancelResult Executor::Cancel(TaskId id, DispatchTask* removed,
                                        const std::atomic<bool>** flag) {
  bool unstarted = false;
  CancelResult result = CancelResult::kNotHere;
  {
    std::lock_guard<AdaptiveMutex> lock(mu_);
    auto match = [&](const DispatchTask& t) { return t.spec->id == id; };
    if (auto it = std::find_if(waiting_.begin(), waiting_.end(), match); it != waiting_.end()) {
      *removed = std::move(*it);
      waiting_.erase(it);
      result = CancelResult::kRemoved;
    } else if (auto r = std::find_if(runnable_.begin(), runnable_.end(), match); r != runnable_.end()) {
      available_.Add(r->spec->options->demand);  // admitted: its resources go back
      *removed = std::move(*r);
      runnable_.erase(r);
      num_runnable_.store(runnable_.size(), std::memory_order_relaxed);
      result = CancelResult::kRemoved;
    } else {
      for (auto& slot : slots_) {
        if (slot->running != id) continue;
        slot->cancelled.store(true, std::memory_order_release);
        *flag = &slot->cancelled;
        return CancelResult::kFlagged;
      }
    }
    if (result == CancelResult::kRemoved) unstarted = Admit();  // room for the next in line
  }
  if (unstarted) FailUnstarted();
  return result;
}

DispatchTask Executor::Take(std::deque<DispatchTask>::iterator it, Slot& slot) {
  DispatchTask task = std::move(*it);
  runnable_.erase(it);
  num_runnable_.store(runnable_.size(), std::memory_order_relaxed);
  slot.running = task.spec->id;
  slot.cancelled.store(false, std::memory_order_relaxed);
  return task;
}

void Executor::Returned(Slot& slot, const DispatchTask& task) {
  slot.running = TaskId();
  if (stop_) cv_.notify_all();  // Stop waits for running tasks to return
  available_.Add(task.spec->options->demand);
}

bool Executor::RunHere(TaskId id) {
  if (num_runnable_.load(std::memory_order_relaxed) == 0) return false;
  std::unique_lock<AdaptiveMutex> lock(mu_);
  if (stop_) return false;
  auto it = std::find_if(runnable_.begin(), runnable_.end(), [&](const DispatchTask& t) { return t.spec->id == id; });
  if (it == runnable_.end()) return false;
  // Not a streaming generator (it may wait in Yield for its consumer: this thread), nor a
  // task holding GPUs (they are set up per pool thread).
  const TaskOptions& options = *it->spec->options;
  if (options.streaming || options.demand.Get("GPU") > 0) return false;
  if (outside_slots_.empty()) {  // one per outside thread running a task at once
    slots_.push_back(std::make_unique<Slot>());
    outside_slots_.push_back(slots_.back().get());
  }
  Slot* slot = outside_slots_.back();
  outside_slots_.pop_back();
  DispatchTask task = Take(it, *slot);
  lock.unlock();
  std::atomic<bool>* outer = t_cancel_flag;
  t_cancel_flag = &slot->cancelled;
  run_(task);
  t_cancel_flag = outer;
  lock.lock();
  Returned(*slot, task);
  outside_slots_.push_back(slot);
  if (Admit()) {
    lock.unlock();
    FailUnstarted();
  }
  return true;
}

void Executor::ThreadMain() {
  NameThisThread("prism-task");
  while (g_hold_new_pool_threads.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::unique_lock<AdaptiveMutex> lock(mu_);
  --starting_;  // from here on counted as idle or busy
  slots_.push_back(std::make_unique<Slot>());
  Slot* slot = slots_.back().get();
  t_cancel_flag = &slot->cancelled;
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
    DispatchTask task = Take(runnable_.begin(), *slot);
    lock.unlock();
    run_(task);
    lock.lock();
    Returned(*slot, task);
    // This thread takes the next runnable task itself (the lock is held until it does), so
    // Admit wakes or starts threads only for the rest.
    if (Admit(/*caller_takes=*/1)) {
      lock.unlock();
      FailUnstarted();
      lock.lock();
    }
  }
}

bool Executor::Block(const ResourceSet& demand) {
  bool unstarted;
  {
    std::lock_guard<AdaptiveMutex> lock(mu_);
    if (blocked_ >= MaxBlockedTasks()) return false;
    ++blocked_;
    available_.Add(CpuOnly(demand));
    unstarted = Admit();
  }
  if (unstarted) FailUnstarted();
  return true;
}

void Executor::Unblock(const ResourceSet& demand) {
  std::lock_guard<AdaptiveMutex> lock(mu_);
  --blocked_;
  available_.Subtract(CpuOnly(demand));  // may go negative for a moment: Ray does the same
}

bool Executor::Stop(std::chrono::steady_clock::time_point deadline) {
  std::vector<std::thread> threads;
  bool all_idle;
  {
    std::unique_lock<AdaptiveMutex> lock(mu_);
    if (stop_) return stopped_clean_;
    stop_ = true;
    cv_.notify_all();
    // A starting thread sees stop_ first; a running one clears its slot when its task
    // returns (and notifies).
    auto none_running = [&] {
      return std::none_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->running != TaskId(); });
    };
    all_idle = cv_.wait_until(lock, deadline, none_running);
    threads.swap(threads_);
  }
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
