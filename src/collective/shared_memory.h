#pragma once
// The shared-memory engine of a same-host group: one POSIX shared-memory segment per group,
// mapped by every member, and the collectives that run through it (see shared_memory.cc for
// the algorithm). No MPI here: the group (group.cc) makes the segment's name known to the
// members, and unit tests drive several members as threads of one process.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "prism/collective.h"

namespace prism::collective::internal {

/// What a wait calls while it spins: Start once when a wait begins, then Poll every few
/// dozen spins; Poll pauses as the wait grows and throws (CollectiveAborted,
/// CollectiveTimeout) to give up.
class Waiter {
 public:
  virtual ~Waiter() = default;
  virtual void Start() = 0;
  virtual void Poll() = 0;
};

/// The members called different operations, or the same one with different counts, types,
/// operations or roots. Every member sees the same headers and throws this, before any data
/// moved, so the group stays usable.
class MismatchError : public Error {
 public:
  using Error::Error;
};

/// The segment's shape: every member maps the same.
struct SegmentShape {
  int members = 0;
  int64_t block_bytes = 256 << 10;  // one pipeline block of one member
  int slots = 4;                    // blocks in flight per member (>= 2)
  /// Bytes of the whole segment.
  size_t Bytes() const;
  /// block_bytes rounded up to a whole page and to at least 64 bytes per member.
  SegmentShape Normalized() const;
};

class SharedSegment {
 public:
  /// Creates POSIX shared-memory object `name` ("/prism-..."; it must not exist), sized and
  /// reserved for `shape` (posix_fallocate, so a full /dev/shm is an error here rather than
  /// a SIGBUS later), and maps it as member `rank`. Throws prism::Error saying why.
  static std::unique_ptr<SharedSegment> Create(const std::string& name, SegmentShape shape,
                                               int rank);
  /// Maps the existing object `name` as member `rank`; throws prism::Error if it is missing
  /// or of another size.
  static std::unique_ptr<SharedSegment> Open(const std::string& name, SegmentShape shape,
                                             int rank);
  /// Removes the name (the mappings stay valid). Returns false if it was not there.
  static bool Unlink(const std::string& name);
  ~SharedSegment();  // unmaps; local

  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  int Rank() const { return rank_; }
  int Size() const { return shape_.members; }
  const SegmentShape& shape() const { return shape_; }

  // Collectives: every member calls the same ones in the same order; each throws
  // MismatchError when the members' calls differ, or whatever Waiter::Poll throws.
  void Barrier(Waiter& w);
  void AllReduce(void* data, int64_t count, DataType type, ReduceOp op, Waiter& w);
  void ReduceScatter(const void* send, void* recv, int64_t recv_count, DataType type, ReduceOp op,
                     Waiter& w);
  void AllGather(const void* send, void* recv, int64_t count, DataType type, Waiter& w);
  void Broadcast(void* data, int64_t count, DataType type, int root, Waiter& w);

  struct Header;
  struct Control;

 private:
  SharedSegment(void* base, SegmentShape shape, int rank);
  static std::unique_ptr<SharedSegment> Map(const std::string& name, SegmentShape shape, int rank,
                                            bool create);

  Control& Ctl(int member) const;
  Control& Me() const { return Ctl(rank_); }
  char* Slot(int member, uint64_t block) const;
  /// Publishes this member's header for the next operation and waits for every member's;
  /// throws MismatchError if they differ.
  void Arrive(int kind, int64_t count, DataType type, int op, int root, Waiter& w);
  /// Waits until every member's counter (arrive, written, reduced or done) is >= target.
  void WaitAll(std::atomic<uint64_t> Control::*counter, uint64_t target, Waiter& w) const;
  /// Sets this member's counters to at least `end`: the operation's blocks are all done here.
  void EndOperation(uint64_t end);

  void* base_;
  SegmentShape shape_;
  int rank_;
  uint64_t seq_ = 0;    // operations so far, the same on every member
  uint64_t block_ = 0;  // pipeline blocks so far, the same on every member
};

}  // namespace prism::collective::internal
