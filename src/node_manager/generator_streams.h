#pragma once
// Streaming generators on a rank: both ends of the stream (protocol.h has the messages).
//
// GeneratorProducers: the generator tasks running here. Each run gets a sink that mints an
// id per yielded value, keeps a large value in this rank's store, and reports it to the
// head (GeneratorItem) with its index. With a backpressure limit N, Yield then waits while
// N or more of the values reported are not yet taken by the consumer, as far as this rank
// knows from the head's acks (GeneratorAck); the head sends the consumer's count whenever
// the producer may be waiting, so a wait always ends: when the consumer takes a value,
// drops its generator (`stop`), or the job ends. The consumer controls that wait, so it has
// no timeout of its own, like a consumer's Next without one.
//
// GeneratorStreams: the generators this rank consumes (one per ObjectRefGenerator made
// here). Values arrive from the head in order (GeneratorReport), their refs already counted
// for this rank; Next hands them out one by one, and the end (with the task's error, if it
// failed) comes after the last. Dropping a stream releases the refs not taken and tells the
// head, which stops the producer; values still in flight are released as they arrive.
// Both thread-safe.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/protocol.h"
#include "node_manager/object_puller.h"
#include "node_manager/reference_counter.h"
#include "object_store/memory_store.h"

namespace prism::internal {

class GeneratorProducers {
 public:
  using ToHead = std::function<void(Message&&)>;
  GeneratorProducers(uint64_t max_inline_bytes, MemoryStore& store, ToHead to_head,
                     std::function<ObjectId()> next_id)
      : max_inline_bytes_(max_inline_bytes), store_(store), to_head_(std::move(to_head)),
        next_id_(std::move(next_id)) {}

  /// The sink one run of generator task `spec` yields into; registered (for acks) until
  /// it is destroyed. Destroy it before reporting the task's end.
  std::unique_ptr<GeneratorSink> Start(const TaskSpec& spec);
  /// The head's word on a generator running here (ignored if it ended).
  void OnAck(const GeneratorAck& ack);

 private:
  struct State {
    uint64_t consumed = 0;
    bool stop = false;
  };
  class Sink;
  friend class Sink;
  void Finish(TaskId task, const std::shared_ptr<State>& state);

  const uint64_t max_inline_bytes_;
  MemoryStore& store_;
  ToHead to_head_;
  std::function<ObjectId()> next_id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<TaskId, std::shared_ptr<State>> running_;
};

class GeneratorStreams {
 public:
  using ToHead = std::function<void(Message&&)>;
  /// `block`/`unblock` give a waiting task's CPU back and take it again (TaskRunner);
  /// `block` returns false outside a task.
  GeneratorStreams(ToHead to_head, ReferenceCounter& refs, ObjectPuller& puller, MemoryStore& store,
                   std::function<bool()> block, std::function<void()> unblock)
      : to_head_(std::move(to_head)), refs_(refs), puller_(puller), store_(store),
        block_(std::move(block)), unblock_(std::move(unblock)) {}

  /// A generator task submitted here, with its backpressure limit (0: none). With a limit,
  /// the values taken are reported to the head: every limit/4 of them, and whenever Next
  /// is about to wait (so a producer waiting at its limit always hears of them). Call
  /// before its SubmitTask goes out.
  void Register(TaskId task, uint64_t backpressure);
  /// A value (in order) or the end, from the head.
  void OnReport(GeneratorReport&& report);
  /// The next value's id (its ref now the caller's), nil at the end; see
  /// CoreApi::NextGeneratorValue.
  ObjectId Next(TaskId task, int64_t timeout_ms);
  /// The generator is gone (CoreApi::DropGenerator).
  void Drop(TaskId task);
  size_t Size();

 private:
  struct Stream {
    std::deque<ObjectId> ready;  // reported, not yet taken; the head counts a ref for each
    uint64_t consumed = 0;
    uint64_t reported = 0;       // the count the head last heard
    uint64_t report_every = 0;   // 0: no backpressure, nothing to report
    bool ended = false;
    bool failed = false;         // cleared once the error was thrown
    ErrorInfo error;
  };

  ToHead to_head_;
  ReferenceCounter& refs_;
  ObjectPuller& puller_;
  MemoryStore& store_;
  std::function<bool()> block_;
  std::function<void()> unblock_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<TaskId, Stream> streams_;
};

}  // namespace prism::internal
