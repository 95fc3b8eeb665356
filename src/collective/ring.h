#pragma once
// Ring algorithms over MPI point-to-point on a group's communicator (see ring.cc), for groups
// whose members do not share a host.

#include <mpi.h>

#include <cstdint>

#include "prism/collective.h"
#include "shared_memory.h"  // Waiter

namespace prism::collective::internal {

struct RingSetup {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int tag = 0;               // every message of the ring carries it
  int64_t chunk_bytes = 0;   // largest message; reductions overlap the next chunk's transfer
};

/// Throws prism::Error naming the call, for an MPI return code that is not MPI_SUCCESS.
void CheckMpi(int rc, const char* call);

/// Polls `req` until it completes, calling the waiter (which throws on abort or timeout).
void WaitRequest(MPI_Request& req, Waiter& w);

/// In place over `count` elements: every member ends with the reduction over all members.
/// Reduce-scatter then all-gather around the ring, parts cut by PartOf.
void RingAllReduce(const RingSetup& s, void* data, int64_t count, DataType type, ReduceOp op,
                   Waiter& w);

/// In place over Size() parts of `part_count` elements each (`data` holds them all): member i
/// ends with part i reduced over all members (the other parts hold partial sums).
void RingReduceScatter(const RingSetup& s, void* data, int64_t part_count, DataType type,
                       ReduceOp op, Waiter& w);

/// In place: `data` holds Size() parts of `part_bytes`; member i's part i is sent around the
/// ring until every member has every part.
void RingAllGather(const RingSetup& s, void* data, int64_t part_bytes, Waiter& w);

}  // namespace prism::collective::internal
