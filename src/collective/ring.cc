// Ring reduce-scatter and all-gather over MPI point-to-point (Patarasuk and Yuan's bandwidth-
// optimal all-reduce, as in Baidu's ring all-reduce, gloo's allreduce_ring_chunked and NCCL).
//
// The buffer is cut into one part per member (PartOf). Member m sends to m + 1 and receives
// from m - 1. Reduce-scatter, steps s = 0 .. n-2: m sends part (m - s - 1) and receives part
// (m - s - 2), which it reduces into its own copy and forwards at the next step; after n - 1
// steps part m is complete on member m. All-gather, steps s = 0 .. n-2: m sends part (m - s)
// (its complete part first) and receives part (m - s - 1) straight into place, forwarding it
// next. Every member moves 2 (n - 1) / n of the buffer each way: bandwidth-optimal.
//
// Each part travels in chunks of at most chunk_bytes, so that reducing chunk c overlaps the
// transfer of chunk c + 1 and a forwarded chunk leaves as soon as it is reduced (the
// reduce-scatter is pipelined instead of moving in n - 1 lock steps). The next step's receives are posted one
// step ahead into the other half of a double buffer. One tag, and MPI's non-overtaking order
// between a pair of ranks, match the chunks: a member posts its receives in the order its left
// neighbour sends. Receives land in a part only after every send out of that part completed.
//
// Waits poll MPI_Test and the group's Waiter (abort, timeout); on the way out of a failed wait
// the pending receives are cancelled, and a scratch buffer that MPI might still write is kept.
#include "ring.h"

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "kernels.h"
#include "prism/platform/communicator.h"

namespace prism::collective::internal {

void CheckMpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    throw Error(std::string("prism::collective: ") + call + " failed: " + platform::MpiErrorText(rc));
  }
}

void WaitRequest(MPI_Request& req, Waiter& w) {
  int done = 0;
  CheckMpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (done) return;
  w.Start();
  for (;;) {
    CheckMpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    w.Poll();
  }
}

namespace {

/// Requests of one ring run. Completes them normally; on unwinding (an abort or timeout),
/// cancels the receives, gives them a second to finish, and reports whether any may still
/// write (then the scratch buffer must never be freed).
class Requests {
 public:
  ~Requests() {
    if (!Pending()) return;
    for (MPI_Request& r : recvs_) {
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    }
    const double until = MPI_Wtime() + 1.0;
    bool open = true;
    while (open && MPI_Wtime() < until) {
      open = false;
      for (MPI_Request& r : recvs_) {
        int done = 0;
        if (r != MPI_REQUEST_NULL && MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
          open = true;
        }
      }
    }
    if (open) *leak_scratch_ = true;
    // Sends that never matched stay with MPI (the communicator is abandoned with them).
    for (MPI_Request& r : sends_) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
  }

  bool Pending() const {
    for (const auto* v : {&recvs_, &sends_}) {
      for (MPI_Request r : *v) {
        if (r != MPI_REQUEST_NULL) return true;
      }
    }
    return false;
  }

  size_t Recv(const RingSetup& s, char* buf, int64_t bytes) {
    recvs_.push_back(MPI_REQUEST_NULL);
    CheckMpi(MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, (s.rank + s.size - 1) % s.size,
                       s.tag, s.comm, &recvs_.back()),
             "MPI_Irecv");
    return recvs_.size() - 1;
  }
  void Send(const RingSetup& s, const char* buf, int64_t bytes) {
    sends_.push_back(MPI_REQUEST_NULL);
    CheckMpi(MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, (s.rank + 1) % s.size, s.tag,
                       s.comm, &sends_.back()),
             "MPI_Isend");
  }
  void WaitRecv(size_t i, Waiter& w) { WaitRequest(recvs_[i], w); }
  void WaitSends(Waiter& w) {
    for (MPI_Request& r : sends_) WaitRequest(r, w);
    sends_.clear();
  }
  void WaitAll(Waiter& w) {
    for (MPI_Request& r : recvs_) WaitRequest(r, w);
    WaitSends(w);
  }

  bool* leak_scratch_ = nullptr;

 private:
  std::vector<MPI_Request> recvs_, sends_;
};

/// A scratch buffer that is freed unless a receive into it could not be cancelled.
class Scratch {
 public:
  explicit Scratch(int64_t bytes) : data_(new char[static_cast<size_t>(std::max<int64_t>(bytes, 1))]) {}
  ~Scratch() {
    if (leak_) (void)data_.release();  // MPI may still write here: never free it
  }
  char* get() { return data_.get(); }
  bool leak_ = false;

 private:
  std::unique_ptr<char[]> data_;
};

int Mod(int a, int n) { return ((a % n) + n) % n; }

using Parts = std::function<Range(int)>;  // a part's elements

/// The reduce-scatter phase on `data`: part m ends complete on member m.
void ReduceScatterPhase(const RingSetup& s, char* data, int64_t elem, const Parts& parts,
                        DataType type, ReduceOp op, Requests& req,
                        Scratch& scratch, int64_t scratch_half, Waiter& w) {
  const int n = s.size, m = s.rank;
  const int64_t chunk = std::max<int64_t>(1, s.chunk_bytes / elem);
  char* tmp[2] = {scratch.get(), scratch.get() + scratch_half};

  // Step s receives part (m - s - 2) into tmp[s % 2], chunk k at offset k * chunk.
  auto post_recvs = [&](int step) -> std::vector<size_t> {
    std::vector<size_t> ids;
    const Range p = parts(Mod(m - step - 2, n));
    for (int64_t k = 0; k < NumPieces(p.size(), chunk); ++k) {
      const Range c = PieceOf(p.size(), chunk, k);
      ids.push_back(req.Recv(s, tmp[step % 2] + c.begin * elem, c.size() * elem));
    }
    return ids;
  };
  // Step 0 sends this member's own part (m - 1) as it is.
  {
    const Range p = parts(Mod(m - 1, n));
    for (int64_t k = 0; k < NumPieces(p.size(), chunk); ++k) {
      const Range c = PieceOf(p.size(), chunk, k);
      req.Send(s, data + (p.begin + c.begin) * elem, c.size() * elem);
    }
  }
  std::vector<size_t> next = post_recvs(0);
  for (int step = 0; step < n - 1; ++step) {
    std::vector<size_t> now = std::move(next);
    if (step + 1 < n - 1) next = post_recvs(step + 1);
    const int part = Mod(m - step - 2, n);
    const Range p = parts(part);
    const bool last = step == n - 2;
    for (int64_t k = 0; k < static_cast<int64_t>(now.size()); ++k) {
      const Range c = PieceOf(p.size(), chunk, k);
      req.WaitRecv(now[static_cast<size_t>(k)], w);
      char* dst = data + (p.begin + c.begin) * elem;
      Combine(type, op, dst, dst, tmp[step % 2] + c.begin * elem, c.size());
      if (last) Finish(type, op, dst, c.size(), n);
      if (!last) req.Send(s, dst, c.size() * elem);
    }
  }
}

/// The all-gather phase: member m's part (complete) is sent first, then forwarded parts.
void AllGatherPhase(const RingSetup& s, char* data, int64_t elem, const Parts& parts,
                    Requests& req, Waiter& w) {
  const int n = s.size, m = s.rank;
  const int64_t chunk = std::max<int64_t>(1, s.chunk_bytes / elem);
  {
    const Range p = parts(m);
    for (int64_t k = 0; k < NumPieces(p.size(), chunk); ++k) {
      const Range c = PieceOf(p.size(), chunk, k);
      req.Send(s, data + (p.begin + c.begin) * elem, c.size() * elem);
    }
  }
  // Every receive lands in its final place; the parts are distinct, so all are posted now.
  std::vector<std::vector<size_t>> ids(static_cast<size_t>(n - 1));
  for (int step = 0; step < n - 1; ++step) {
    const Range p = parts(Mod(m - step - 1, n));
    for (int64_t k = 0; k < NumPieces(p.size(), chunk); ++k) {
      const Range c = PieceOf(p.size(), chunk, k);
      ids[static_cast<size_t>(step)].push_back(
          req.Recv(s, data + (p.begin + c.begin) * elem, c.size() * elem));
    }
  }
  for (int step = 0; step < n - 1; ++step) {
    const Range p = parts(Mod(m - step - 1, n));
    for (size_t k = 0; k < ids[static_cast<size_t>(step)].size(); ++k) {
      req.WaitRecv(ids[static_cast<size_t>(step)][k], w);
      if (step + 1 < n - 1) {
        const Range c = PieceOf(p.size(), chunk, static_cast<int64_t>(k));
        req.Send(s, data + (p.begin + c.begin) * elem, c.size() * elem);
      }
    }
  }
}

int64_t LargestPart(const Parts& parts, int n) {
  int64_t most = 0;
  for (int i = 0; i < n; ++i) most = std::max(most, parts(i).size());
  return most;
}

}  // namespace

void RingAllReduce(const RingSetup& s, void* data, int64_t count, DataType type, ReduceOp op,
                   Waiter& w) {
  if (s.size == 1 || count == 0) {
    Finish(type, op, data, count, s.size);
    return;
  }
  const int64_t elem = SizeOf(type);
  Parts parts = [&](int i) { return PartOf(count, s.size, i); };
  const int64_t half = LargestPart(parts, s.size) * elem;
  Scratch scratch(2 * half);
  Requests req;
  req.leak_scratch_ = &scratch.leak_;
  auto* bytes = static_cast<char*>(data);
  ReduceScatterPhase(s, bytes, elem, parts, type, op, req, scratch, half, w);
  // The all-gather writes into parts that were sent from: those sends must be done first.
  // They are: the right neighbour receives them in its own reduce-scatter. (Part m is sent
  // only after this wait, in the all-gather: had it left during the reduce-scatter, waiting
  // for it here would wait for a receive the right neighbour posts only after its own wait,
  // a cycle around the ring once messages are too large for MPI's eager protocol.)
  req.WaitAll(w);
  AllGatherPhase(s, bytes, elem, parts, req, w);
  req.WaitAll(w);
}

void RingReduceScatter(const RingSetup& s, void* data, int64_t part_count, DataType type,
                       ReduceOp op, Waiter& w) {
  if (s.size == 1 || part_count == 0) {
    Finish(type, op, data, part_count, s.size);
    return;
  }
  const int64_t elem = SizeOf(type);
  Parts parts = [&](int i) { return Range{i * part_count, (i + 1) * part_count}; };
  const int64_t half = part_count * elem;
  Scratch scratch(2 * half);
  Requests req;
  req.leak_scratch_ = &scratch.leak_;
  ReduceScatterPhase(s, static_cast<char*>(data), elem, parts, type, op, req, scratch, half, w);
  req.WaitAll(w);
}

void RingAllGather(const RingSetup& s, void* data, int64_t part_bytes, Waiter& w) {
  if (s.size == 1 || part_bytes == 0) return;
  Parts parts = [&](int i) { return Range{i * part_bytes, (i + 1) * part_bytes}; };
  Requests req;
  bool unused = false;
  req.leak_scratch_ = &unused;
  AllGatherPhase(s, static_cast<char*>(data), 1, parts, req, w);
  req.WaitAll(w);
}

}  // namespace prism::collective::internal
