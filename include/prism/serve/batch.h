#pragma once
// serve::Batch: Ray Serve's @serve.batch for C++. A replica's handler calls the batch with
// one item and gets that item's result; the batch gathers the items that concurrent calls
// bring (up to max_batch_size, waiting at most batch_wait_timeout_s after the first) and
// runs the batch function once on all of them.
//
//   class Model {
//    public:
//     serve::Response operator()(const serve::Request& r) { return batch_(r); }
//    private:
//     std::vector<serve::Response> Infer(std::vector<serve::Request> rs);  // one forward pass
//     serve::Batch<serve::Request, serve::Response> batch_{
//         [this](std::vector<serve::Request> rs) { return Infer(std::move(rs)); },
//         {.max_batch_size = 8, .batch_wait_timeout_s = 0.005}};
//   };
//
// Concurrent calls reach a replica only up to max_ongoing_requests at once, so set
// MaxOngoingRequests(n) >= max_batch_size for full batches.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "prism/errors.h"

namespace prism::serve {

/// Ray's defaults: max_batch_size 10, batch_wait_timeout_s 0.01.
struct BatchOptions {
  int max_batch_size = 10;
  double batch_wait_timeout_s = 0.01;
};

/// The batching decision without threads or clocks (times are seconds on any clock the
/// caller chooses): items wait in arrival order; a batch is ready when max_batch_size items
/// wait or the oldest has waited batch_wait_timeout_s. Not thread-safe.
template <typename T>
class BatchQueue {
 public:
  /// Throws Error when max_batch_size < 1 or batch_wait_timeout_s < 0.
  explicit BatchQueue(BatchOptions options) : options_(options) {
    if (options.max_batch_size < 1) {
      throw Error("serve::Batch: max_batch_size must be >= 1, got " + std::to_string(options.max_batch_size));
    }
    if (options.batch_wait_timeout_s < 0) {
      throw Error("serve::Batch: batch_wait_timeout_s must be >= 0, got " +
                  std::to_string(options.batch_wait_timeout_s));
    }
  }
  /// Adds one item that arrived at `now`.
  void Add(T item, double now) { items_.push_back({std::move(item), now}); }
  /// Whether a batch should run at `now`.
  bool Ready(double now) const {
    if (items_.empty()) return false;
    return static_cast<int>(items_.size()) >= options_.max_batch_size ||
           now >= items_.front().arrival + options_.batch_wait_timeout_s;
  }
  /// When the oldest waiting item's wait ends (meaningful only when !Empty()).
  double Deadline() const { return items_.front().arrival + options_.batch_wait_timeout_s; }
  bool Empty() const { return items_.empty(); }
  size_t Size() const { return items_.size(); }
  /// Removes and returns the next batch: the oldest items, at most max_batch_size.
  std::vector<T> Take() {
    std::vector<T> batch;
    while (!items_.empty() && static_cast<int>(batch.size()) < options_.max_batch_size) {
      batch.push_back(std::move(items_.front().item));
      items_.pop_front();
    }
    return batch;
  }
  const BatchOptions& options() const { return options_; }

 private:
  struct Entry {
    T item;
    double arrival;
  };
  BatchOptions options_;
  std::deque<Entry> items_;
};

/// Batches calls from concurrent threads (a replica's concurrent requests) into one call
/// of `fn` on the batch's own thread. `fn` gets the items in arrival order and must return
/// one result per item, in the same order; if it throws, or returns another count, every
/// call of that batch throws (the error's message, or one that says what went wrong).
/// Thread-safe.
template <typename In, typename Out>
class Batch {
 public:
  using Fn = std::function<std::vector<Out>(std::vector<In>)>;

  /// Starts the batching thread. Throws Error on bad options or an empty `fn`.
  explicit Batch(Fn fn, BatchOptions options = {}) : fn_(std::move(fn)), queue_(options) {
    if (!fn_) throw Error("serve::Batch needs a batch function, got an empty std::function");
    thread_ = std::thread([this] { Loop(); });
  }
  /// Fails calls still waiting (their call throws Error) and joins the thread.
  ~Batch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  /// Adds `item` to the next batch and returns its result once that batch ran. Blocks the
  /// calling thread for the batch's wait and run (at most batch_wait_timeout_s plus the
  /// batch function's time: the request's own work). Rethrows the batch function's error.
  Out operator()(In item) {
    std::promise<Out> promise;
    std::future<Out> future = promise.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) throw Error("serve::Batch: the batch is being destroyed");
      queue_.Add(Pending{std::move(item), std::move(promise)}, Now());
    }
    cv_.notify_all();
    return future.get();
  }

  /// Batches run so far, and the items they held (their ratio: the mean batch size).
  uint64_t batches() const { return batches_.load(); }
  uint64_t items() const { return items_.load(); }
  /// The size of the largest batch so far.
  int max_observed_batch_size() const { return max_seen_.load(); }

 private:
  struct Pending {
    In item;
    std::promise<Out> promise;
  };
  static double Now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  // Waits without a timeout only while nothing is queued: woken by a call or by ~Batch.
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (stop_) break;
      if (queue_.Empty()) {
        cv_.wait(lock, [this] { return stop_ || !queue_.Empty(); });
        continue;
      }
      if (!queue_.Ready(Now())) {
        const double wait = queue_.Deadline() - Now();
        cv_.wait_for(lock, std::chrono::duration<double>(wait > 0 ? wait : 0));
        continue;
      }
      std::vector<Pending> batch = queue_.Take();
      lock.unlock();
      Run(batch);
      lock.lock();
    }
    std::vector<Pending> left = queue_.Take();
    while (!left.empty()) {
      for (auto& p : left) {
        p.promise.set_exception(std::make_exception_ptr(Error("serve::Batch: the batch was destroyed")));
      }
      left = queue_.Take();
    }
  }
  void Run(std::vector<Pending>& batch) {
    std::vector<In> inputs;
    inputs.reserve(batch.size());
    for (auto& p : batch) inputs.push_back(std::move(p.item));
    batches_.fetch_add(1);
    items_.fetch_add(batch.size());
    int seen = max_seen_.load();
    while (static_cast<int>(batch.size()) > seen && !max_seen_.compare_exchange_weak(seen, static_cast<int>(batch.size()))) {
    }
    try {
      std::vector<Out> outputs = fn_(std::move(inputs));
      if (outputs.size() != batch.size()) {
        throw Error("serve::Batch: the batch function returned " + std::to_string(outputs.size()) +
                    " results for " + std::to_string(batch.size()) + " items (it must return one per item)");
      }
      for (size_t i = 0; i < batch.size(); ++i) batch[i].promise.set_value(std::move(outputs[i]));
    } catch (...) {
      for (auto& p : batch) p.promise.set_exception(std::current_exception());
    }
  }

  Fn fn_;
  std::mutex mu_;
  std::condition_variable cv_;
  BatchQueue<Pending> queue_;
  bool stop_ = false;
  std::atomic<uint64_t> batches_{0}, items_{0};
  std::atomic<int> max_seen_{0};
  std::thread thread_;
};

}  // namespace prism::serve
