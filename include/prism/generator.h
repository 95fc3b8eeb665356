#pragma once
// Streaming generators (Ray's ObjectRefGenerator): a remote function that emits values as
// it goes. Its first parameter is a prism::StreamWriter<T>&; each Yield(value) becomes an
// object of its own (small ones travel inline, large ones stay in the producer's store),
// reported to the caller in order while the task still runs. The caller's Remote returns
// an ObjectRefGenerator<T> and takes the refs as they come:
//
//   void Blocks(prism::StreamWriter<Block>& out, int n) {
//     for (int i = 0; i < n; ++i) out.Yield(MakeBlock(i));
//   }
//   PRISM_REMOTE(Blocks);
//   auto gen = prism::Task(Blocks).SetGeneratorBackpressure(8).Remote(1000);
//   for (prism::ObjectRef<Block> ref : gen) Use(*ref.Get());
//
// If the generator throws after k values, the caller gets the k refs, then Next() throws
// the error (TaskError, ...). Dropping the ObjectRefGenerator frees the values not taken
// and stops the producer (its next Yield ends the task quietly).

#include <cstdint>
#include <iterator>
#include <optional>
#include <utility>

#include "prism/errors.h"
#include "prism/internal/core_api.h"
#include "prism/object_ref.h"
#include "prism/serialization.h"

namespace prism {

/// What a streaming generator writes its values to. Passed by the runtime as the remote
/// function's (or actor method's) first parameter; use it on the task's own thread.
template <typename T>
class StreamWriter {
 public:
  using ValueType = T;
  explicit StreamWriter(internal::GeneratorSink& sink) : sink_(&sink) {}
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  /// Emits one value: it becomes an object of its own, reported to the caller after the
  /// values before it. Blocks while the caller has SetGeneratorBackpressure(n) values (64
  /// by default) not yet taken. If the caller dropped its ObjectRefGenerator, it unwinds the generator
  /// (the task then ends quietly; do not catch with `catch (...)` without rethrowing).
  /// Throws SerializationError or ObjectStoreFullError like a task's result.
  void Yield(const T& value) {
    internal::ContainedRefScope scope;
    internal::Buffer bytes = internal::Serialize(value);
    sink_->Yield(std::move(bytes), scope.Take());
  }
  /// How many values this run of the generator yielded so far.
  uint64_t NumYielded() const { return sink_->NumYielded(); }

 private:
  internal::GeneratorSink* sink_;
};

namespace internal {
template <typename T>
struct IsStreamWriter : std::false_type {};
template <typename T>
struct IsStreamWriter<StreamWriter<T>> : std::true_type {};
}  // namespace internal

/// The caller's end of a streaming generator task: the refs of the values it yields, in
/// order, as they are produced. Move-only, and lives on the rank that called Remote (Ray's
/// is not serializable either: it cannot be passed to tasks). Not thread-safe: one thread
/// takes values at a time. Destroying it frees the values not taken and stops the producer.
template <typename T>
class ObjectRefGenerator {
 public:
  ObjectRefGenerator() = default;
  /// Adopts the local reference to the generator task's own object (its completion).
  ObjectRefGenerator(ObjectId task, internal::ObjectRefBase::Adopt adopt) : task_(task, adopt) {}
  ObjectRefGenerator(ObjectRefGenerator&&) noexcept = default;
  ObjectRefGenerator& operator=(ObjectRefGenerator&& other) noexcept {
    if (this != &other) {
      Drop();
      task_ = std::move(other.task_);
    }
    return *this;
  }
  ObjectRefGenerator(const ObjectRefGenerator&) = delete;
  ObjectRefGenerator& operator=(const ObjectRefGenerator&) = delete;
  ~ObjectRefGenerator() { Drop(); }

  /// The generator task's id.
  ObjectId ID() const { return task_.ID(); }
  /// The completion of the generator task: ready when it ended (after its last value);
  /// Get throws its error if it failed.
  const ObjectRef<void>& TaskRef() const { return task_; }

  /// Blocks until the next value's ref is reported; std::nullopt once the generator ended.
  /// If the generator failed, throws its error (TaskError, ActorError, ...) once, after
  /// every ref it yielded before; later calls return std::nullopt. Inside a task, gives
  /// the task's CPU back while it waits. Throws Error on an empty (moved-from) generator.
  std::optional<ObjectRef<T>> Next() { return Next(-1); }
  /// Like Next(), but throws prism::TimeoutError if no ref (and no end) came within
  /// timeout_ms milliseconds (0: only what is here already).
  std::optional<ObjectRef<T>> Next(int64_t timeout_ms) {
    if (task_.IsNil()) throw Error("prism: Next on an empty (moved-from) ObjectRefGenerator");
    ObjectId id = internal::RequireCore("ObjectRefGenerator::Next").NextGeneratorValue(task_.ID(), timeout_ms);
    if (id.IsNil()) return std::nullopt;
    return ObjectRef<T>(id, internal::ObjectRefBase::Adopt{});
  }

  /// Input iterator over the refs: `for (ObjectRef<T> ref : gen)`. Advancing calls
  /// Next() (and throws what it throws).
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = ObjectRef<T>;
    using difference_type = std::ptrdiff_t;
    using pointer = const ObjectRef<T>*;
    using reference = const ObjectRef<T>&;
    Iterator() = default;
    reference operator*() const { return *current_; }
    pointer operator->() const { return &*current_; }
    Iterator& operator++() {
      current_ = generator_->Next();
      return *this;
    }
    void operator++(int) { ++*this; }
    /// Iterators compare equal when both are at the end.
    friend bool operator==(const Iterator& a, const Iterator& b) {
      return !a.current_.has_value() && !b.current_.has_value();
    }
    friend bool operator!=(const Iterator& a, const Iterator& b) { return !(a == b); }

   private:
    friend class ObjectRefGenerator;
    ObjectRefGenerator* generator_ = nullptr;
    std::optional<ObjectRef<T>> current_;
  };
  /// Takes the first ref (blocking, like Next()).
  Iterator begin() {
    Iterator it;
    it.generator_ = this;
    it.current_ = Next();
    return it;
  }
  Iterator end() { return Iterator(); }

 private:
  void Drop() {
    if (task_.IsNil()) return;
    if (auto* core = internal::CurrentCore()) core->DropGenerator(task_.ID());
  }
  ObjectRef<void> task_;  // the generator task's own object: keeps its record alive
};

}  // namespace prism
