#pragma once
// The communicator service: MPI communicators over any set of ranks, for libraries that run
// their own collectives (prism::train's all-reduce, and whatever a user runs with MPI
// directly on a worker group).
//
// Prism's progress thread owns MPI_COMM_WORLD, so no library may run a collective there or
// pick tags on it. Instead, the members of a group create one communicator together, under
// a key that names the group, and duplicate it for each independent stream of collectives
// (one for the training loop, one for the gradient reducer's thread, ...):
//
//   auto group = platform::Communicator::Create("run-7/attempt-0", {1, 2, 3});  // members
//   auto loop = group.Duplicate();       // collectives on this thread
//   auto grads = group.Duplicate();      // and on another, never crossing
//   MPI_Allreduce(..., loop.comm());
//
// Creation is collective over the members only (MPI_Comm_create_group on a private copy of
// MPI_COMM_WORLD made at Init); the head hands every member the same creation tag for the
// key, so concurrent creations of different groups never cross. Keys must be unique among
// groups being created at the same time; a group made again later may reuse its key.
//
// Needs an MPI job (mpirun or srun): in an InProcessCluster, or a program started without a
// launcher, Create throws prism::Error.

#include <mpi.h>

#include <string>
#include <vector>

namespace prism::platform {

class Communicator {
 public:
  /// Creates the communicator `key` over MPI_COMM_WORLD ranks `world_ranks` (this rank's
  /// place in the list is its rank in the group; every member passes the same list and
  /// key). Blocks until every member has called it: there is no timeout, as in MPI, so
  /// call it where all members are known to be running. Throws prism::Error on bad input
  /// (a rank outside the job or listed twice, this rank not a member, an empty key).
  static Communicator Create(const std::string& key, const std::vector<int>& world_ranks);

  /// A communicator over the same members whose messages never match this one's.
  /// Collective over the members, like MPI_Comm_dup.
  Communicator Duplicate() const;

  Communicator() = default;
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  /// Frees the MPI communicator (while MPI runs), unless Abandon was called.
  ~Communicator();

  MPI_Comm comm() const { return comm_; }
  int Rank() const { return rank_; }
  int Size() const { return static_cast<int>(world_ranks_.size()); }
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  const std::string& key() const { return key_; }
  bool valid() const { return comm_ != MPI_COMM_NULL; }
  /// For messages: `communicator "run-7/0" (world ranks [0, 1, 2], member 1)`.
  std::string Describe() const;

  /// Never frees the MPI communicator: for one that still has an operation pending (a
  /// collective given up on after a peer failed), which MPI could otherwise complete into
  /// a later communicator that reused its context.
  void Abandon() { abandoned_ = true; }

 private:
  Communicator(MPI_Comm comm, std::string key, std::vector<int> world_ranks);
  void Free();

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string key_;
  std::vector<int> world_ranks_;
  int rank_ = -1;
  bool abandoned_ = false;
};

/// MPI's text for an error code (MPI_Error_string), for messages.
std::string MpiErrorText(int code);

}  // namespace prism::platform
