#include "node_manager/actor_host.h"

#include <algorithm>

#include "common/spin_wait.h"
#include "common/thread_name.h"
#include "node_manager/executor.h"

namespace prism::internal {

ActorHost::ActorHost(ObjectId id, int max_concurrency, RunFn run, EndedFn ended)
    : id_(id),
      max_concurrency_(std::max(1, max_concurrency)),
      run_(std::move(run)),
      ended_(std::move(ended)) {}

ActorHost::~ActorHost() {
  std::vector<std::thread> threads;
  bool idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = nullptr;  // the owner is going away: leaving threads must not call back
    stop_ = true;
    idle = running_ == 0;
    threads.swap(threads_);
    if (idle && instance_ != nullptr && destroy_) destroy_(instance_);
    instance_ = nullptr;
  }
  cv_.notify_all();
  for (auto& t : threads) {
    if (idle) {
      t.join();
    } else {
      t.detach();  // a call is still in user code (its owner leaks the host instead)
    }
  }
}

bool ActorHost::Enqueue(DispatchTask&& task) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool creation = task.spec->kind == TaskKind::kActorCreation;
  if (stop_ || (dead_ && !creation)) return false;
  if (threads_.size() < static_cast<size_t>(max_concurrency_)) {
    threads_.emplace_back();
    try {
      threads_.back() = StartThread([this] { ThreadMain(); });
      ++live_;
    } catch (const std::system_error& e) {
      threads_.pop_back();
      if (threads_.empty()) {  // nothing could run it: the actor is dead, nothing else
        dead_ = true;
        cause_ = ThreadStartFailure("actor " + id_.Hex(), e);
        return false;
      }
      // Fewer threads than max_concurrency: the ones there run the calls.
    }
  }
  if (creation) {
    dead_ = false;
    cause_.clear();
    creating_ = true;
  }
  mailbox_.push_back(std::move(task));
  queued_.store(mailbox_.size(), std::memory_order_relaxed);
  if (sleeping_ > 0) cv_.notify_all();  // a spinning thread sees queued_ change by itself
  return true;
}

void ActorHost::ThreadMain() {
  NameThisThread("prism-actor");
  std::unique_lock<std::mutex> lock(mu_);
  // A creation runs alone; calls run once the instance exists.
  auto runnable = [&] {
    if (stop_) return true;
    if (mailbox_.empty()) return false;
    const bool creation = mailbox_.front().spec->kind == TaskKind::kActorCreation;
    return creation ? running_ == 0 : !creating_;
  };
  for (;;) {
    if (!runnable()) {
      // Calls often arrive back to back: look again for a few microseconds first.
      lock.unlock();
      SpinWhile([&] { return queued_.load(std::memory_order_relaxed) == 0; }, kSpinUs);
      lock.lock();
      ++sleeping_;
      cv_.wait(lock, runnable);
      --sleeping_;
    }
    if (stop_) break;
    DispatchTask task = std::move(mailbox_.front());
    mailbox_.pop_front();
    queued_.store(mailbox_.size(), std::memory_order_relaxed);
    const bool creation = task.spec->kind == TaskKind::kActorCreation;
    if (creation) {
      DestroyIfIdle();  // a restart's: the killed incarnation goes first
      ++incarnation_;
    }
    ++running_;
    std::atomic<bool> cancelled{false};
    const TaskId call = task.spec->id;
    running_calls_.emplace_back(call, &cancelled);
    lock.unlock();
    Executor::BindCancelFlag(&cancelled);  // IsCancelled and Get see a Cancel of this call
    run_(task, *this);
    Executor::BindCancelFlag(nullptr);
    lock.lock();
    auto mine = std::find_if(running_calls_.begin(), running_calls_.end(),
                             [&](const auto& r) { return r.second == &cancelled; });
    *mine = running_calls_.back();
    running_calls_.pop_back();
    --running_;
    if (creation) creating_ = false;
    DestroyIfIdle();
    cv_.notify_all();
  }
  // The actor ended: the first thread to leave idle destroys the instance, the last asks
  // the owner to join the threads.
  DestroyIfIdle();
  EndedFn ended = --live_ == 0 ? ended_ : nullptr;
  lock.unlock();
  if (ended) ended(*this);
}

bool ActorHost::Stop(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_all();
  return cv_.wait_until(lock, deadline, [&] { return running_ == 0; });  // notified per call
}

bool ActorHost::JoinThreads() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_ || live_ > 0) return false;
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();  // they left ThreadMain: returns at once
  return true;
}

void ActorHost::SetInstance(void* instance, std::function<void(void*)> destroy) {
  std::lock_guard<std::mutex> lock(mu_);
  instance_ = instance;
  destroy_ = std::move(destroy);
}

bool ActorHost::dead() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dead_;
}

void ActorHost::DestroyIfIdle() {
  if (destroy_pending_ && running_ == 0) {
    if (instance_ != nullptr && destroy_) destroy_(instance_);
    instance_ = nullptr;
    destroy_pending_ = false;
  }
}

bool ActorHost::Cancel(TaskId id, DispatchTask* removed, const std::atomic<bool>** flag) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(mailbox_.begin(), mailbox_.end(),
                         [&](const DispatchTask& t) { return t.spec->id == id; });
  if (it == mailbox_.end()) {
    auto running = std::find_if(running_calls_.begin(), running_calls_.end(),
                                [&](const auto& r) { return r.first == id; });
    if (running != running_calls_.end()) {
      running->second->store(true, std::memory_order_release);
      if (flag != nullptr) *flag = running->second;
    }
    return false;
  }
  if (it->spec->kind != TaskKind::kActorCall) return false;
  *removed = std::move(*it);
  mailbox_.erase(it);
  queued_.store(mailbox_.size(), std::memory_order_relaxed);
  return true;
}

std::deque<DispatchTask> ActorHost::Kill(bool restart, const std::string& cause) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!restart && cause_.empty()) cause_ = cause.empty() ? "the actor was killed" : cause;
  std::deque<DispatchTask> failed;
  for (auto& t : mailbox_) failed.push_back(std::move(t));
  mailbox_.clear();
  queued_.store(0, std::memory_order_relaxed);
  // The instance is destroyed by the actor's own thread (as it leaves, or before the
  // restart's creation runs), never here: Kill arrives in Handle, which on rank 0 runs
  // under the head's lock, and a Python instance's destructor waits for the GIL, which a
  // Python thread may hold while it waits for that lock.
  destroy_pending_ = true;
  dead_ = !restart;
  // After a restart, calls wait for the new creation (it arrives right after the kill).
  creating_ = restart;
  if (!restart) stop_ = true;  // threads leave once their current call returns
  cv_.notify_all();
  return failed;
}

std::deque<DispatchTask> ActorHost::Die(const std::string& cause) {
  return Kill(/*restart=*/false, cause);
}

std::string ActorHost::cause() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cause_;
}

}  // namespace prism::internal
