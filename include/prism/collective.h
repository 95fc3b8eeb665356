#pragma once
// prism::collective: collective communication for any group of tasks or actors (Ray's
// ray.util.collective), on plain typed buffers, with no LibTorch. prism::train's MPI backend,
// Data's shuffles and users' actor groups all use it.
//
//   // on every member (a task or actor pinned to each of world ranks 1, 2, 3):
//   auto group = prism::collective::Group::Create("shuffle-7", {1, 2, 3});
//   std::vector<float> grads = ...;
//   group.AllReduce(grads, prism::collective::ReduceOp::kAverage);   // in place
//   std::vector<int64_t> all = group.AllGather(std::vector<int64_t>{my_count});
//   if (group.Rank() == 0) group.Send(block, /*peer=*/2); else if (group.Rank() == 2) group.Recv(block, 0);
//   std::vector<uint8_t> mine = group.AllToAllV(bytes, counts_per_member);  // a shuffle's exchange
//
// A Group is made collectively by its members from a key and the members' world ranks (on a
// platform::Communicator). Members must call the same operations in the same order with
// matching arguments; a mismatch of element count, dtype or operation is reported as a
// prism::Error on every member where it can be seen (same-host groups always see it, as do
// Send/Recv and AllGather/ReduceScatter over MPI) rather than hanging.
//
// Algorithms are chosen per operation from the group's layout and the message size (see
// src/collective/group.cc): members on one host reduce through a shared-memory segment
// (reduce-scatter + all-gather, pipelined in cache-sized blocks); across hosts, large
// all-reduces run a chunked ring over MPI point-to-point with reductions overlapping the
// transfers, and small ones MPI's own collectives. GroupOptions::algorithm forces one.
//
// Every operation polls GroupOptions::aborted while it waits and throws CollectiveAborted
// once that returns true, and CollectiveTimeout after GroupOptions::timeout, so a dead peer
// never hangs a member. After either, the group refuses further operations (its peers may be
// anywhere in the operation): make a new group. Bad arguments (bad root or peer, unsupported
// dtype, buffer sizes that do not fit) throw prism::Error before anything is sent and leave
// the group usable.
//
// Thread safety: a Group is used by one thread at a time. For a second stream of collectives
// on another thread, Duplicate it (collectively), as with an MPI communicator.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "prism/errors.h"
#include "prism/platform/communicator.h"

namespace prism::collective {

/// An operation gave up because GroupOptions::aborted returned true (a peer failed, the group
/// is being torn down). The group is unusable afterwards.
class CollectiveAborted : public Error {
 public:
  using Error::Error;
};

/// An operation did not finish within GroupOptions::timeout (a member never joined: it
/// failed, is stuck, or called a different operation). The group is unusable afterwards.
class CollectiveTimeout : public Error {
 public:
  using Error::Error;
};

/// Element types of the buffers an operation takes.
enum class DataType { kFloat32, kFloat64, kInt32, kInt64, kUInt8 };

/// Reductions. kAverage is the sum divided by the group's size, for floating types only.
enum class ReduceOp { kSum, kProduct, kMin, kMax, kAverage };

/// How an operation moves its data (GroupOptions::algorithm).
enum class Algorithm {
  kAuto,          ///< chosen per operation and size (the default)
  kMpi,           ///< MPI's own nonblocking collectives on the group's communicator
  kRing,          ///< chunked ring (reduce-scatter + all-gather) over MPI point-to-point
  kSharedMemory,  ///< the group's shared-memory segment (every member on one host)
  /// All-reduce only: the members on each host reduce among themselves (shared memory),
  /// one member per host all-reduce over a ring, and each host's first member broadcasts
  /// the result to the others. kAuto's choice from the ring's sizes on for a group across
  /// hosts where some host holds several members. Other operations take kAuto's algorithm.
  kHierarchical,
};

/// "float32", "sum", "ring", ...: for messages.
const char* Name(DataType type);
const char* Name(ReduceOp op);
const char* Name(Algorithm algorithm);
/// Bytes per element.
int64_t SizeOf(DataType type);

/// DataTypeOf<T>: the DataType of a C++ element type (float, double, int32_t, int64_t,
/// uint8_t); other types do not compile.
template <typename T>
struct DataTypeOf;
template <>
struct DataTypeOf<float> {
  static constexpr DataType value = DataType::kFloat32;
};
template <>
struct DataTypeOf<double> {
  static constexpr DataType value = DataType::kFloat64;
};
template <>
struct DataTypeOf<int32_t> {
  static constexpr DataType value = DataType::kInt32;
};
template <>
struct DataTypeOf<int64_t> {
  static constexpr DataType value = DataType::kInt64;
};
template <>
struct DataTypeOf<uint8_t> {
  static constexpr DataType value = DataType::kUInt8;
};

struct GroupOptions {
  /// Polled while an operation waits; true makes it throw CollectiveAborted. Called on the
  /// operation's thread; must not block. An exception from it counts as true.
  std::function<bool()> aborted;
  /// An operation (or the group's creation) still unfinished after this throws
  /// CollectiveTimeout.
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  /// kAuto, or one algorithm for every operation that has it (tests, benchmarks).
  /// kSharedMemory on a group that spans hosts (or could not map its segment) falls back to
  /// kAuto's choice; GroupInfo says what the group has.
  Algorithm algorithm = Algorithm::kAuto;
};

class Group {
 public:
  /// Creates group `key` over MPI_COMM_WORLD ranks `world_ranks` (this rank's place in the
  /// list is its group rank; every member passes the same key and list), collectively with
  /// the other members: the communicator (platform::Communicator::Create, which has no
  /// timeout: call it where every member is known to be running), then the shared-memory
  /// segment of a same-host group (with `options.timeout`). Throws prism::Error on bad input
  /// (see Communicator::Create) and outside an MPI job.
  static Group Create(const std::string& key, const std::vector<int>& world_ranks,
                      GroupOptions options = {});

  /// A group on `comm` (from platform::Communicator::Create or Duplicate), which it owns from
  /// here on. Collective over comm's members (it sets up the shared-memory segment). Throws
  /// prism::Error if `comm` is empty.
  static Group FromCommunicator(platform::Communicator comm, GroupOptions options = {});

  /// A group over the same members whose operations never cross this one's (its own
  /// communicator and segment), for a second stream on another thread. Collective over the
  /// members. `options` default to this group's.
  Group Duplicate() const;
  Group Duplicate(GroupOptions options) const;

  Group();  ///< An empty group (every operation throws).
  Group(Group&&) noexcept;
  Group& operator=(Group&&) noexcept;
  ~Group();  ///< Local: never waits for the other members.

  /// This member's rank in the group, and the group's size.
  int Rank() const;
  int Size() const;
  bool valid() const { return impl_ != nullptr; }
  /// What the group has: "communicator "k" (world ranks [1, 2], member 0), shared memory".
  std::string Describe() const;
  /// Whether the members share a host and mapped the group's shared-memory segment.
  bool HasSharedMemory() const;
  /// The algorithm the group would use for an all-reduce of `bytes` bytes.
  Algorithm AllReduceAlgorithm(int64_t bytes) const;

  // ---- Operations on pointer + element count -------------------------------------------------

  /// In place: every member ends with the element-wise reduction over all members.
  void AllReduce(void* data, int64_t count, DataType type, ReduceOp op);
  /// `send` holds Size() * recv_count elements; member i receives in `recv` the reduction of
  /// every member's elements [i * recv_count, (i + 1) * recv_count).
  void ReduceScatter(const void* send, void* recv, int64_t recv_count, DataType type,
                     ReduceOp op);
  /// `recv` (Size() * count elements) gets member i's `send` at i * count, for every i.
  void AllGather(const void* send, void* recv, int64_t count, DataType type);
  /// In place: every member ends with member `root`'s elements.
  void Broadcast(void* data, int64_t count, DataType type, int root);
  /// Returns once every member has entered it.
  void Barrier();
  /// To group rank `peer`, which calls Recv with the same count and type. Returns once the
  /// data has left this buffer (and may be reused).
  void Send(const void* data, int64_t count, DataType type, int peer);
  /// From group rank `peer`'s Send. Throws prism::Error if the sender's count or type differ.
  void Recv(void* data, int64_t count, DataType type, int peer);
  /// All-to-all with a count per pair (MPI_Alltoallv): this member sends `send_counts[j]`
  /// elements, starting at element `send_displs[j]` of `send`, to member j, and receives
  /// `recv_counts[i]` elements from member i into `recv` at element `recv_displs[i]` (each
  /// vector has Size() entries; counts may be 0 and differ per pair; the part sent to itself
  /// is copied). Counts are int64: any size per pair. Before any data moves the members swap
  /// their counts, so a send count that is not its receiver's recv count is a prism::Error on
  /// every member (the group stays usable); a negative count or displacement, a null buffer
  /// with a count, or vectors of the wrong size throw before anything is sent. How the bytes
  /// move: small exchanges (< 256 KiB in all) and Algorithm::kMpi run MPI_Ialltoallv on the
  /// group's staging buffers, in rounds of at most 1 GiB per member (MPI's counts are int);
  /// larger ones go pairwise over MPI point-to-point straight between the callers' buffers,
  /// in pieces of at most 4 MiB (no staging copy). Same-host groups use the same paths (no
  /// shared-memory segment here). `recv` must not overlap `send`.
  void AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                 const std::vector<int64_t>& send_displs, void* recv,
                 const std::vector<int64_t>& recv_counts, const std::vector<int64_t>& recv_displs,
                 DataType type);

  // ---- Typed conveniences ---------------------------------------------------------------------

  template <typename T>
  void AllReduce(T* data, int64_t count, ReduceOp op) {
    AllReduce(data, count, DataTypeOf<T>::value, op);
  }
  template <typename T>
  void AllReduce(std::vector<T>& data, ReduceOp op) {
    AllReduce(data.data(), static_cast<int64_t>(data.size()), DataTypeOf<T>::value, op);
  }
  /// `send.size()` must be a multiple of Size(); returns this member's share.
  template <typename T>
  std::vector<T> ReduceScatter(const std::vector<T>& send, ReduceOp op) {
    const int64_t n = static_cast<int64_t>(send.size());
    const int64_t share = CheckDivisible(n, "ReduceScatter");
    std::vector<T> recv(static_cast<size_t>(share));
    ReduceScatter(send.data(), recv.data(), share, DataTypeOf<T>::value, op);
    return recv;
  }
  /// Every member's `send` (of equal sizes), concatenated in group rank order.
  template <typename T>
  std::vector<T> AllGather(const std::vector<T>& send) {
    std::vector<T> recv(send.size() * static_cast<size_t>(Size()));
    AllGather(send.data(), recv.data(), static_cast<int64_t>(send.size()), DataTypeOf<T>::value);
    return recv;
  }
  template <typename T>
  void Broadcast(std::vector<T>& data, int root) {
    Broadcast(data.data(), static_cast<int64_t>(data.size()), DataTypeOf<T>::value, root);
  }
  template <typename T>
  void Send(const std::vector<T>& data, int peer) {
    Send(data.data(), static_cast<int64_t>(data.size()), DataTypeOf<T>::value, peer);
  }
  /// Into `data`, whose size must be the sender's.
  template <typename T>
  void Recv(std::vector<T>& data, int peer) {
    Recv(data.data(), static_cast<int64_t>(data.size()), DataTypeOf<T>::value, peer);
  }
  /// `send` holds the parts for members 0, 1, ... one after another, `send_counts[j]`
  /// elements for member j; returns what every member sent this one, in group rank order
  /// (the counts are exchanged first, so receivers need not know them). With `recv_counts`,
  /// it also says how many elements came from each member.
  template <typename T>
  std::vector<T> AllToAllV(const std::vector<T>& send, const std::vector<int64_t>& send_counts,
                           std::vector<int64_t>* recv_counts = nullptr) {
    std::vector<int64_t> from = ExchangeCounts(send_counts, static_cast<int64_t>(send.size()));
    std::vector<int64_t> send_displs(from.size()), recv_displs(from.size());
    int64_t at = 0, total = 0;
    for (size_t j = 0; j < from.size(); ++j) {
      send_displs[j] = at;
      at += send_counts[j];
      recv_displs[j] = total;
      total += from[j];
    }
    std::vector<T> recv(static_cast<size_t>(total));
    AllToAllV(send.data(), send_counts, send_displs, recv.data(), from, recv_displs,
              DataTypeOf<T>::value);
    if (recv_counts != nullptr) *recv_counts = std::move(from);
    return recv;
  }

  class Impl;

 private:
  explicit Group(std::unique_ptr<Impl> impl);
  int64_t CheckDivisible(int64_t n, const char* op) const;
  /// AllToAllV's typed form: checks that `send_counts` has Size() entries (>= 0) summing to
  /// `send_size`, then swaps them: returns how many elements each member will send here.
  std::vector<int64_t> ExchangeCounts(const std::vector<int64_t>& send_counts, int64_t send_size);
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism::collective
