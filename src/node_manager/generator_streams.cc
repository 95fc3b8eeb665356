#include "node_manager/generator_streams.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "prism/errors.h"

namespace prism::internal {

// ---- Producer side ----------------------------------------------------------------------

class GeneratorProducers::Sink : public GeneratorSink {
 public:
  Sink(GeneratorProducers& owner, const TaskSpec& spec, std::shared_ptr<State> state)
      : owner_(owner), task_(spec.id), attempt_(spec.attempt),
        backpressure_(spec.options->generator_backpressure), state_(std::move(state)) {}
  ~Sink() override { owner_.Finish(task_, state_); }

  void Yield(Buffer&& value, std::vector<ObjectId> contained) override {
    if (Stopped()) throw GeneratorStoppedSignal{};
    GeneratorItem item;
    item.task = task_;
    item.attempt = attempt_;
    item.index = yielded_;
    item.item = owner_.next_id_();
    item.size = value.size();
    item.contained = std::move(contained);
    auto payload = std::make_shared<const Buffer>(std::move(value));
    if (payload->size() <= owner_.max_inline_bytes_) {
      item.inline_value = std::move(payload);
    } else {
      owner_.store_.Put(item.item, std::move(payload));  // pulled from here, freed by the head
    }
    owner_.to_head_(std::move(item));
    ++yielded_;
    if (backpressure_ > 0) {
      // Never under the lock: the head may answer on this thread (rank 0).
      std::unique_lock<std::mutex> lock(owner_.mu_);
      owner_.cv_.wait(lock, [&] {
        return state_->stop || yielded_ < state_->consumed + backpressure_;
      });
    }
    if (Stopped()) throw GeneratorStoppedSignal{};
  }
  uint64_t NumYielded() const override { return yielded_; }

 private:
  bool Stopped() {
    std::lock_guard<std::mutex> lock(owner_.mu_);
    return state_->stop;
  }

  GeneratorProducers& owner_;
  const TaskId task_;
  const int attempt_;
  const uint64_t backpressure_;
  std::shared_ptr<State> state_;
  uint64_t yielded_ = 0;
};

std::unique_ptr<GeneratorSink> GeneratorProducers::Start(const TaskSpec& spec) {
  auto state = std::make_shared<State>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_[spec.id] = state;
  }
  return std::make_unique<Sink>(*this, spec, std::move(state));
}

void GeneratorProducers::Finish(TaskId task, const std::shared_ptr<State>& state) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(task);
  if (it != running_.end() && it->second == state) running_.erase(it);
}

void GeneratorProducers::OnAck(const GeneratorAck& ack) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(ack.task);
    if (it == running_.end()) return;  // it ended meanwhile
    State& s = *it->second;
    s.consumed = std::max(s.consumed, ack.consumed);
    s.stop = s.stop || ack.stop;
  }
  cv_.notify_all();
}

// ---- Consumer side ----------------------------------------------------------------------

void GeneratorStreams::Register(TaskId task, uint64_t backpressure) {
  std::lock_guard<std::mutex> lock(mu_);
  Stream& s = streams_[task];
  s.report_every = backpressure == 0 ? 0 : std::max<uint64_t>(1, backpressure / 4);
}

void GeneratorStreams::OnReport(GeneratorReport&& r) {
  if (r.end) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = streams_.find(r.task);
      if (it == streams_.end()) return;  // dropped
      it->second.ended = true;
      it->second.failed = r.failed;
      if (r.failed) it->second.error = std::move(r.error);
    }
    cv_.notify_all();
    return;
  }
  // The head counts this rank as a holder already: the stream holds that ref until Next
  // hands it to the ReferenceCounter (not here: on rank 0 this may run inside a call that
  // holds the counter's lock while it talks to the head). A small value is stored now, so
  // that Get finds it here.
  if (r.inline_value) {
    ObjectReady ready;
    ready.id = r.item;
    ready.inline_value = std::move(r.inline_value);
    ready.size = r.size;
    puller_.OnObjectReady(std::move(ready));
  }
  bool taken = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(r.task);
    if (it != streams_.end()) {
      it->second.ready.push_back(r.item);
      taken = true;
    }
  }
  if (taken) {
    cv_.notify_all();
  } else {
    to_head_(RefUpdate{{}, {r.item}});  // its generator was dropped: the value goes
  }
}

ObjectId GeneratorStreams::Next(TaskId task, int64_t timeout_ms) {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> deadline;
  if (timeout_ms >= 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  // Gives the CPU back at most once per call, and takes it again however the call ends
  // (declared before the lock: runs after it is released).
  struct Blocked {
    std::function<void()>& unblock;
    bool on = false;
    ~Blocked() {
      if (on) unblock();
    }
  } blocked{unblock_};
  bool tried_block = false;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = streams_.find(task);
    if (it == streams_.end()) {
      throw Error("prism: ObjectRefGenerator " + task.Hex() +
                  " is not consumed on this rank: take its values on the rank (in the task) "
                  "that called Remote");
    }
    Stream& s = it->second;
    if (!s.ready.empty()) {
      ObjectId id = s.ready.front();
      s.ready.pop_front();
      ++s.consumed;
      const bool ack = s.report_every > 0 && !s.ended && s.consumed - s.reported >= s.report_every;
      if (ack) s.reported = s.consumed;
      const uint64_t consumed = s.consumed;
      lock.unlock();
      refs_.AdoptHeld(id);  // the caller's ObjectRef adopts the stream's ref
      // Never under the lock: on rank 0 the head may answer on this thread.
      if (ack) to_head_(GeneratorConsumed{task, consumed, false});
      return id;
    }
    if (s.ended) {
      if (!s.failed) return ObjectId();
      s.failed = false;  // thrown once; the stream has ended after it
      ErrorInfo error = std::move(s.error);
      lock.unlock();
      ThrowStored(store_, task, error);
    }
    if (s.report_every > 0 && s.consumed > s.reported) {
      // About to wait: the producer may be waiting for word of these.
      s.reported = s.consumed;
      const uint64_t consumed = s.consumed;
      lock.unlock();
      to_head_(GeneratorConsumed{task, consumed, false});
      lock.lock();
      continue;
    }
    if (deadline && Clock::now() >= *deadline) {
      throw TimeoutError("prism: ObjectRefGenerator::Next timed out after " +
                         std::to_string(timeout_ms) +
                         " ms: the generator has not yielded its next value (nor ended)");
    }
    if (!tried_block) {
      tried_block = true;
      lock.unlock();
      blocked.on = block_();  // may throw (too many waiting tasks): nothing to undo
      lock.lock();
      continue;
    }
    if (deadline) {
      cv_.wait_until(lock, *deadline);
    } else {
      cv_.wait(lock);
    }
  }
}

void GeneratorStreams::Drop(TaskId task) {
  Stream s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(task);
    if (it == streams_.end()) return;
    s = std::move(it->second);
    streams_.erase(it);
  }
  cv_.notify_all();
  if (!s.ended) to_head_(GeneratorConsumed{task, s.consumed, true});
  // The refs the stream held (never in the ReferenceCounter): the values not taken go.
  if (!s.ready.empty()) to_head_(RefUpdate{{}, {s.ready.begin(), s.ready.end()}});
}

size_t GeneratorStreams::Size() {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

}  // namespace prism::internal
