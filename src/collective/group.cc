// prism::collective::Group: argument checks, the choice of algorithm, waits that can be
// aborted or time out, and the MPI paths.
//
// Which algorithm (kAuto):
//   members on one host        the group's shared-memory segment, every operation and size
//                              (shared_memory.cc). Measured on this machine (perf/README.md,
//                              "Collectives"): it beats Open MPI's MPI_Allreduce from 1 MiB
//                              to 256 MiB, where Open MPI's own large-message path collapses.
//   across hosts, all-reduce   < 256 KiB: MPI_Iallreduce (latency-bound: MPI's recursive
//                              doubling is what one would write); larger: the chunked ring
//                              over point-to-point (ring.cc), bandwidth-optimal.
//   across hosts, others       ReduceScatter and AllGather: the ring from 256 KiB, MPI's
//                              nonblocking collective below; Broadcast: MPI_Ibcast in pieces;
//                              Barrier: the argument check below (an all-reduce of 10 int64).
// A shared segment needs every member on one host; a group that spans hosts does not map one
// (a hierarchical scheme, shared memory inside a host and a ring between hosts, is left for
// when Prism runs on several hosts with several ranks each).
//
// Across hosts, an operation first agrees on its arguments (a small MPI_Iallreduce of the
// kind, count, type, op and root, as maxima of each value and of its negation), so a
// mismatch is an error on every member rather than a truncated message on one and a hang on
// the others. Same-host groups compare headers in the segment (free: the arrival is a
// synchronization the algorithm needs anyway).
//
// MPI's collectives run on staging buffers owned by the group, never on the caller's: MPI
// cannot cancel a collective, so after an abort or timeout the staging buffer is kept for the
// life of the process (MPI may still write it) and the caller's buffer is free to go. The
// ring's and Send/Recv's point-to-point receives go straight into the caller's buffer and
// are cancelled on the way out.
//
// AllToAllV swaps every member's counts first (an MPI_Iallgather of each member's send and
// receive counts, after the usual argument check), so every member sees the whole count
// matrix and a pair whose counts disagree is an error on all of them. The bytes then move
// with MPI_Ialltoallv through the staging buffers (small exchanges, or kMpi), in rounds of
// at most 1 GiB per member: MPI's counts are int, so a pair's bytes are cut into pieces of
// MPI_BYTE and every member runs the same number of rounds (the largest pair's, known from
// the matrix). Larger exchanges post every receive and send at once, pairwise over
// point-to-point straight between the callers' buffers (a message per pair, cut only at
// the 1 GiB message limit, all tested at once with MPI_Testsome), as the ring does; a 2 GiB shuffle thus never copies through staging nor faults fresh pages.
//
// MPI tags on a group's own communicator: 1 the ring's chunks, 2 a Send's header (count and
// type), 3 a Send's data, 4 AllToAllV's point-to-point pieces. Nothing else runs on it.
#include <mpi.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "kernels.h"
#include "prism/collective.h"
#include "prism/internal/collective_testing.h"
#include "prism/platform/communicator.h"
#include "prism/platform/poll.h"
#include "ring.h"
#include "shared_memory.h"

namespace prism::collective {

namespace internal {
namespace {
constexpr int64_t kDefaultMessageBytes = int64_t{1} << 30;  // the MPI paths' largest piece
constexpr int64_t kDefaultRingChunkBytes = int64_t{512} << 10;
constexpr int64_t kDefaultSharedBlockBytes = int64_t{256} << 10;
std::atomic<int64_t> g_message_bytes{kDefaultMessageBytes};
std::atomic<int64_t> g_ring_chunk_bytes{kDefaultRingChunkBytes};
std::atomic<int64_t> g_shared_block_bytes{kDefaultSharedBlockBytes};
}  // namespace

void SetMessageBytesForTesting(int64_t bytes) {
  g_message_bytes = bytes > 0 ? bytes : kDefaultMessageBytes;
  g_ring_chunk_bytes = bytes > 0 ? bytes : kDefaultRingChunkBytes;
}

void SetSharedBlockBytesForTesting(int64_t bytes) {
  g_shared_block_bytes = bytes > 0 ? bytes : kDefaultSharedBlockBytes;
}
}  // namespace internal

namespace {

using Clock = std::chrono::steady_clock;
using internal::CheckMpi;
using internal::Range;

constexpr int kTagRing = 1;
constexpr int kTagSendHeader = 2;
constexpr int kTagSendData = 3;
constexpr int kTagAllToAll = 4;
// Below this many bytes, across hosts, MPI's own collectives (latency) rather than the ring.
constexpr int64_t kRingMinBytes = int64_t{256} << 10;
// How often a wait calls the `aborted` predicate.
constexpr auto kAbortPollInterval = std::chrono::milliseconds(1);

/// Buffers that MPI may still write after an abandoned operation: never freed.
void KeepForever(std::shared_ptr<void> buffer) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<void>>();  // never destroyed, on purpose
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(buffer));
}

MPI_Datatype MpiType(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kUInt8:
      return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op MpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProduct:
      return MPI_PROD;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    default:
      return MPI_SUM;  // kSum, and kAverage (divided afterwards)
  }
}

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// What identifies this host to its peers: the host name and the kernel's boot id (two
/// containers may share a host name; processes that share a boot id share a kernel, and
/// whether they also share /dev/shm is then checked by mapping the segment).
std::string HostKey() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "/" + ReadFirstLine("/proc/sys/kernel/random/boot_id");
}

}  // namespace

// ---- Impl ----------------------------------------------------------------------------------

class Group::Impl {
 public:
  struct Operation {
    std::string name;
    int64_t bytes = 0;
    Clock::time_point start;
  };

  /// Waits of one operation: the timeout counts from the operation's start.
  class OpWaiter final : public internal::Waiter {
   public:
    OpWaiter(Impl& g, const Operation& o) : g_(g), o_(o) {}
    void Start() override { wait_start_ = Clock::now(); }
    void Poll() override {
      const auto now = Clock::now();
      if (now - last_abort_check_ >= kAbortPollInterval) {
        last_abort_check_ = now;
        if (g_.GroupAborted()) {
          throw CollectiveAborted(g_.Where(o_) + ": the group was aborted (a member failed or the "
                                                 "group is being torn down)");
        }
      }
      if (now - o_.start > g_.options_.timeout) {
        throw CollectiveTimeout(
            g_.Where(o_) + " did not finish within " + std::to_string(g_.options_.timeout.count()) +
            " ms: a member never joined (it failed, is stuck, or called a different "
            "operation). Raise GroupOptions::timeout if the operation is only slow");
      }
      platform::PollPause(now - wait_start_);
    }

   private:
    Impl& g_;
    const Operation& o_;
    Clock::time_point wait_start_ = Clock::now();
    Clock::time_point last_abort_check_ = Clock::now();
  };

  Impl(platform::Communicator comm, GroupOptions options)
      : comm_(std::move(comm)), options_(std::move(options)), rank_(comm_.Rank()),
        size_(comm_.Size()) {}

  ~Impl() {
    // After an abandoned operation MPI may still complete requests on the communicator and in
    // the staging buffers: keep both (a freed communicator's context could be reused by a
    // later one and receive stale messages).
    if (broken_ || GroupAborted()) {
      comm_.Abandon();
      KeepForever(stage_);
      KeepForever(agree_);
      KeepForever(counts_);
    }
  }

  void SetUpSharedMemory();

  /// The two groups of a hierarchical all-reduce, made with the group (FromCommunicator),
  /// while every member is here: made at an all-reduce, a member that never comes would hold
  /// the others in a creation that no abort or timeout ends. This host's members, and the
  /// first member of each host (only on those).
  void SetUpHierarchy() {
    if (host_of_.empty()) return;  // one member: every all-reduce is the identity
    const Algorithm a = options_.algorithm;
    if (!(a == Algorithm::kHierarchical || (a == Algorithm::kAuto && SpansHostsWithNeighbours()))) {
      return;
    }
    const std::vector<int>& world = comm_.world_ranks();
    const int mine = host_of_[static_cast<size_t>(rank_)];
    std::vector<int> local, leaders;
    for (int m = 0; m < size_; ++m) {
      if (host_of_[static_cast<size_t>(m)] == mine) local.push_back(world[static_cast<size_t>(m)]);
    }
    for (int first : host_firsts_) leaders.push_back(world[static_cast<size_t>(first)]);
    GroupOptions sub = options_;
    sub.algorithm = Algorithm::kAuto;
    local_ = Group::Create(comm_.key() + "/host" + std::to_string(mine), local, sub);
    if (host_firsts_[static_cast<size_t>(mine)] == rank_) {
      leaders_ = Group::Create(comm_.key() + "/leaders", leaders, sub);
    }
  }

  std::string Where(const Operation& o) const {
    return "prism::collective " + o.name + " of " + std::to_string(o.bytes) + " bytes on " +
           comm_.Describe();
  }
  std::string Where(const std::string& name) const {
    return "prism::collective " + name + " on " + comm_.Describe();
  }

  bool GroupAborted() const noexcept {
    if (!options_.aborted) return false;
    try {
      return options_.aborted();
    } catch (...) {
      return true;  // a flag that cannot be read is no reason to keep waiting
    }
  }

  void MarkBroken(const std::string& reason) {
    if (!broken_) broken_reason_ = reason;
    broken_ = true;
  }

  /// Starts an operation: refuses if the group is broken or aborted.
  Operation Begin(std::string name, int64_t bytes) {
    Operation o{std::move(name), bytes, Clock::now()};
    if (broken_) {
      throw CollectiveAborted(Where(o) + ": this group is unusable after an earlier operation " +
                              "failed (" + broken_reason_ + "); make a new group to continue");
    }
    if (GroupAborted()) {
      MarkBroken("the group was aborted before " + o.name);
      throw CollectiveAborted(Where(o) + ": the group was aborted (a member failed or the group "
                                         "is being torn down)");
    }
    return o;
  }

  /// Runs `body` as operation `o`: an abort or timeout breaks the group; a mismatch of the
  /// members' arguments is an error that leaves it usable; an MPI failure breaks it.
  template <typename Body>
  void Run(const Operation& o, Body body) {
    try {
      body();
    } catch (const CollectiveAborted&) {
      MarkBroken(o.name + " was aborted");
      throw;
    } catch (const CollectiveTimeout&) {
      MarkBroken(o.name + " timed out");
      throw;
    } catch (const internal::MismatchError& e) {
      throw Error(Where(o) + ": " + e.what());
    } catch (const std::exception& e) {
      MarkBroken(o.name + " failed");
      throw Error(Where(o) + " failed: " + e.what());
    }
  }

  void CheckBuffer(const void* p, int64_t count, DataType type, const std::string& op) const {
    if (SizeOf(type) == 0) {
      throw Error(Where(op) + ": dtype " + std::to_string(static_cast<int>(type)) +
                  " is not a DataType (float32, float64, int32, int64, uint8)");
    }
    if (count < 0) {
      throw Error(Where(op) + ": count " + std::to_string(count) + " is negative");
    }
    if (count > 0 && p == nullptr) {
      throw Error(Where(op) + ": the buffer is null but count is " + std::to_string(count));
    }
  }

  void CheckRank(int r, const char* what, const std::string& op) const {
    if (r < 0 || r >= size_) {
      throw Error(Where(op) + ": " + what + " " + std::to_string(r) +
                  " is not a group rank; the group has ranks 0.." + std::to_string(size_ - 1) +
                  " (group ranks, not world ranks)");
    }
  }

  bool Shm() const { return shm_ != nullptr && options_.algorithm != Algorithm::kMpi &&
                            options_.algorithm != Algorithm::kRing; }

  /// AllReduce's algorithm: kHierarchical when asked for, and kAuto's choice from the ring's
  /// sizes on for a group across hosts where some host holds several members (their shared
  /// memory does the first step: 1.37x the flat ring's bandwidth at 64 MiB on 2+2 ranks over
  /// two hosts, perf/README.md); else Choose's.
  Algorithm ChooseAllReduce(int64_t bytes) const {
    if (options_.algorithm == Algorithm::kHierarchical) return Algorithm::kHierarchical;
    if (options_.algorithm == Algorithm::kAuto && bytes >= kRingMinBytes && SpansHostsWithNeighbours()) {
      return Algorithm::kHierarchical;
    }
    return Choose(bytes);
  }

  /// Whether the members are on more than one host and some host holds two or more.
  bool SpansHostsWithNeighbours() const {
    const size_t hosts = host_firsts_.size();
    return hosts > 1 && hosts < static_cast<size_t>(size_);
  }

  Algorithm Choose(int64_t bytes) const {
    if (Shm()) return Algorithm::kSharedMemory;
    if (options_.algorithm == Algorithm::kMpi || options_.algorithm == Algorithm::kRing) {
      return options_.algorithm;
    }
    return bytes < kRingMinBytes ? Algorithm::kMpi : Algorithm::kRing;
  }

  internal::RingSetup Ring() const {
    return {comm_.comm(), rank_, size_, kTagRing,
            std::clamp<int64_t>(internal::g_ring_chunk_bytes.load(), 1, INT_MAX)};
  }

  /// The staging buffer, at least `bytes` long.
  char* Stage(int64_t bytes) {
    if (!stage_ || static_cast<int64_t>(stage_->size()) < bytes) {
      stage_ = std::make_shared<std::vector<char>>(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    }
    return stage_->data();
  }

  /// Polls an MPI request to completion as part of `o`. A request abandoned by a throw stays
  /// with MPI, on group-owned buffers (the destructor keeps them).
  void Wait(MPI_Request& req, const Operation& o) {
    OpWaiter w(*this, o);
    internal::WaitRequest(req, w);
  }

  /// Every member checks that all passed the same kind, count, type, op and root.
  void Agree(const Operation& o, int kind, int64_t count, DataType type, int op, int root) {
    if (!agree_) agree_ = std::make_shared<std::vector<int64_t>>(10);
    const int64_t mine[5] = {kind, count, static_cast<int64_t>(type), op, root};
    for (int i = 0; i < 5; ++i) {
      (*agree_)[2 * i] = mine[i];
      (*agree_)[2 * i + 1] = -mine[i];
    }
    MPI_Request req = MPI_REQUEST_NULL;
    CheckMpi(MPI_Iallreduce(MPI_IN_PLACE, agree_->data(), 10, MPI_INT64_T, MPI_MAX, comm_.comm(),
                            &req),
             "MPI_Iallreduce (argument check)");
    Wait(req, o);
    static const char* kWhat[5] = {"operation", "element count", "dtype", "reduce op", "root"};
    std::string differ;
    for (int i = 0; i < 5; ++i) {
      const int64_t hi = (*agree_)[2 * i], lo = -(*agree_)[2 * i + 1];
      if (hi != lo) {
        differ += (differ.empty() ? "" : ", ") + std::string(kWhat[i]) + " (from " +
                  std::to_string(lo) + " to " + std::to_string(hi) + ")";
      }
    }
    if (!differ.empty()) {
      throw internal::MismatchError(
          "the members called different operations or passed different arguments: " + differ +
          " differ between members; every member must call the same operation with the same "
          "count and dtype (and op, root)");
    }
  }

  platform::Communicator comm_;
  GroupOptions options_;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<internal::SharedSegment> shm_;
  std::vector<int> host_of_;      // each member's host, numbered by first appearance (size_ > 1)
  std::vector<int> host_firsts_;  // the first member of each host
  Group local_, leaders_;         // a hierarchical all-reduce's groups (SetUpHierarchy)
  std::string shm_note_;  // why there is no segment, for Describe
  std::shared_ptr<std::vector<char>> stage_;
  std::shared_ptr<std::vector<int64_t>> agree_;
  std::shared_ptr<std::vector<int64_t>> counts_;  // AllToAllV's count matrix
  bool broken_ = false;
  std::string broken_reason_;
};

void Group::Impl::SetUpSharedMemory() {
  if (size_ == 1) {
    shm_note_ = "one member";
    return;
  }
  Operation o = Begin("group creation (shared memory)", 0);
  OpWaiter w(*this, o);
  // 1. Do all members share a host?
  constexpr int kKeyBytes = 256;
  std::vector<char> mine(kKeyBytes, 0), all(static_cast<size_t>(kKeyBytes) * size_, 0);
  const std::string key = HostKey();
  std::memcpy(mine.data(), key.data(), std::min<size_t>(key.size(), kKeyBytes - 1));
  auto run = [&](auto&& start) {
    MPI_Request req = MPI_REQUEST_NULL;
    CheckMpi(start(&req), "group creation");
    internal::WaitRequest(req, w);
  };
  try {
    run([&](MPI_Request* r) {
      return MPI_Iallgather(mine.data(), kKeyBytes, MPI_CHAR, all.data(), kKeyBytes, MPI_CHAR,
                            comm_.comm(), r);
    });
  } catch (...) {
    MarkBroken("group creation failed");
    throw;
  }
  // Each member's host, numbered in order of first appearance.
  auto key_of = [&](int m) { return all.data() + static_cast<size_t>(m) * kKeyBytes; };
  for (int q = 0; q < size_; ++q) {
    size_t h = 0;
    while (h < host_firsts_.size() && std::memcmp(key_of(host_firsts_[h]), key_of(q), kKeyBytes) != 0) ++h;
    if (h == host_firsts_.size()) host_firsts_.push_back(q);
    host_of_.push_back(static_cast<int>(h));
  }
  if (host_firsts_.size() > 1) {
    shm_note_ = "members on more than one host";
    return;
  }
  // 2. Member 0 creates the segment and tells the others its name; they map it; all agree
  //    that everyone could; member 0 then removes the name, so nothing is left in /dev/shm
  //    once the group is made (the mappings live on), even if a member dies later.
  internal::SegmentShape shape;
  shape.members = size_;
  shape.block_bytes = internal::g_shared_block_bytes.load();
  struct Announce {
    char name[96];
    int32_t ok;
  } announce{};
  std::string error;
  static std::atomic<int> counter{0};
  if (rank_ == 0) {
    const std::string name = "/prism-coll-" + std::to_string(getpid()) + "-" +
                             std::to_string(counter++);
    try {
      shm_ = internal::SharedSegment::Create(name, shape, 0);
      std::snprintf(announce.name, sizeof announce.name, "%s", name.c_str());
      announce.ok = 1;
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  int32_t ok = 0;
  try {
    run([&](MPI_Request* r) {
      return MPI_Ibcast(&announce, sizeof announce, MPI_BYTE, 0, comm_.comm(), r);
    });
    if (rank_ != 0 && announce.ok) {
      try {
        shm_ = internal::SharedSegment::Open(announce.name, shape, rank_);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    ok = shm_ ? 1 : 0;
    run([&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, &ok, 1, MPI_INT32_T, MPI_MIN, comm_.comm(), r);
    });
  } catch (...) {
    if (rank_ == 0 && announce.ok) internal::SharedSegment::Unlink(announce.name);
    MarkBroken("group creation failed");
    throw;
  }
  if (rank_ == 0 && announce.ok) internal::SharedSegment::Unlink(announce.name);
  if (!ok) {
    shm_.reset();
    shm_note_ = "no shared memory: " + (error.empty() ? std::string("a member could not map it") : error);
  }
}

// ---- Group ---------------------------------------------------------------------------------

Group::Group() = default;
Group::Group(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Group::Group(Group&&) noexcept = default;
Group& Group::operator=(Group&&) noexcept = default;
Group::~Group() = default;

Group Group::Create(const std::string& key, const std::vector<int>& world_ranks,
                    GroupOptions options) {
  return FromCommunicator(platform::Communicator::Create(key, world_ranks), std::move(options));
}

Group Group::FromCommunicator(platform::Communicator comm, GroupOptions options) {
  if (!comm.valid()) {
    throw Error("prism::collective::Group: the communicator is empty; make it with "
                "platform::Communicator::Create (or Duplicate)");
  }
  // Errors come back as return codes and become exceptions, rather than MPI's default abort
  // of the job.
  MPI_Comm_set_errhandler(comm.comm(), MPI_ERRORS_RETURN);
  auto impl = std::make_unique<Impl>(std::move(comm), std::move(options));
  impl->SetUpSharedMemory();
  impl->SetUpHierarchy();
  return Group(std::move(impl));
}

Group Group::Duplicate() const {
  if (!impl_) throw Error("prism::collective::Group::Duplicate: the group is empty");
  return Duplicate(impl_->options_);
}

Group Group::Duplicate(GroupOptions options) const {
  if (!impl_) throw Error("prism::collective::Group::Duplicate: the group is empty");
  return FromCommunicator(impl_->comm_.Duplicate(), std::move(options));
}

namespace {
Group::Impl& Need(const std::unique_ptr<Group::Impl>& impl, const char* what) {
  if (!impl) {
    throw Error(std::string("prism::collective::Group::") + what +
                ": the group is empty (default-constructed or moved from); make one with "
                "Group::Create");
  }
  return *impl;
}
}  // namespace

int Group::Rank() const { return Need(impl_, "Rank").rank_; }
int Group::Size() const { return Need(impl_, "Size").size_; }

std::string Group::Describe() const {
  const Impl& g = Need(impl_, "Describe");
  return g.comm_.Describe() + (g.shm_ ? ", shared memory" : ", " + g.shm_note_);
}

bool Group::HasSharedMemory() const { return Need(impl_, "HasSharedMemory").shm_ != nullptr; }

Algorithm Group::AllReduceAlgorithm(int64_t bytes) const {
  return Need(impl_, "AllReduceAlgorithm").ChooseAllReduce(bytes);
}

int64_t Group::CheckDivisible(int64_t n, const char* op) const {
  const Impl& g = Need(impl_, op);
  if (n % g.size_ != 0) {
    throw Error(g.Where(std::string(op)) + ": the input has " + std::to_string(n) +
                " elements, not a multiple of the group's size " + std::to_string(g.size_) +
                ": every member's share must be the same size");
  }
  return n / g.size_;
}

void Group::AllReduce(void* data, int64_t count, DataType type, ReduceOp op) {
  Impl& g = Need(impl_, "AllReduce");
  const std::string name = std::string("AllReduce (") + Name(op) + ")";
  g.CheckBuffer(data, count, type, name);
  if (!internal::Supports(type, op)) {
    throw Error(g.Where(name) + ": " + internal::UnsupportedText(type, op));
  }
  const int64_t bytes = count * SizeOf(type);
  auto o = g.Begin(name, bytes);
  if (g.size_ == 1) return;  // the identity, average included
  g.Run(o, [&] {
    Impl::OpWaiter w(g, o);
    switch (g.ChooseAllReduce(bytes)) {
      case Algorithm::kSharedMemory:
        g.shm_->AllReduce(data, count, type, op, w);
        return;
      case Algorithm::kHierarchical: {
        g.Agree(o, 1, count, type, static_cast<int>(op), 0);
        const ReduceOp sum_or_op = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
        g.local_.AllReduce(data, count, type, sum_or_op);
        if (g.leaders_.valid()) g.leaders_.AllReduce(data, count, type, sum_or_op);
        g.local_.Broadcast(data, count, type, 0);
        internal::Finish(type, op, data, count, g.size_);  // kAverage: the sum / size
        return;
      }
      case Algorithm::kRing:
        g.Agree(o, 1, count, type, static_cast<int>(op), 0);
        internal::RingAllReduce(g.Ring(), data, count, type, op, w);
        return;
      default: {
        g.Agree(o, 1, count, type, static_cast<int>(op), 0);
        const int64_t elem = SizeOf(type);
        const int64_t piece = std::max<int64_t>(1, internal::g_message_bytes.load() / elem);
        for (int64_t k = 0; k < internal::NumPieces(count, piece); ++k) {
          const Range r = internal::PieceOf(count, piece, k);
          char* stage = g.Stage(r.size() * elem);
          char* at = static_cast<char*>(data) + r.begin * elem;
          std::memcpy(stage, at, static_cast<size_t>(r.size() * elem));
          MPI_Request req = MPI_REQUEST_NULL;
          CheckMpi(MPI_Iallreduce(MPI_IN_PLACE, stage, static_cast<int>(r.size()), MpiType(type),
                                  MpiOp(op), g.comm_.comm(), &req),
                   "MPI_Iallreduce");
          g.Wait(req, o);
          internal::Finish(type, op, stage, r.size(), g.size_);
          std::memcpy(at, stage, static_cast<size_t>(r.size() * elem));
        }
      }
    }
  });
}

void Group::ReduceScatter(const void* send, void* recv, int64_t recv_count, DataType type,
                          ReduceOp op) {
  Impl& g = Need(impl_, "ReduceScatter");
  const std::string name = std::string("ReduceScatter (") + Name(op) + ")";
  g.CheckBuffer(send, recv_count, type, name);
  g.CheckBuffer(recv, recv_count, type, name);
  if (!internal::Supports(type, op)) {
    throw Error(g.Where(name) + ": " + internal::UnsupportedText(type, op));
  }
  const int64_t elem = SizeOf(type);
  const int64_t bytes = recv_count * elem * g.size_;
  auto o = g.Begin(name, bytes);
  if (g.size_ == 1) {
    if (send != recv) std::memmove(recv, send, static_cast<size_t>(recv_count * elem));
    return;
  }
  g.Run(o, [&] {
    Impl::OpWaiter w(g, o);
    const Algorithm a = g.Choose(bytes);
    if (a == Algorithm::kSharedMemory) {
      g.shm_->ReduceScatter(send, recv, recv_count, type, op, w);
      return;
    }
    g.Agree(o, 2, recv_count, type, static_cast<int>(op), 0);
    if (a == Algorithm::kMpi && bytes <= internal::g_message_bytes.load()) {
      char* stage = g.Stage(bytes + recv_count * elem);
      std::memcpy(stage, send, static_cast<size_t>(bytes));
      MPI_Request req = MPI_REQUEST_NULL;
      CheckMpi(MPI_Ireduce_scatter_block(stage, stage + bytes, static_cast<int>(recv_count),
                                         MpiType(type), MpiOp(op), g.comm_.comm(), &req),
               "MPI_Ireduce_scatter_block");
      g.Wait(req, o);
      internal::Finish(type, op, stage + bytes, recv_count, g.size_);
      std::memcpy(recv, stage + bytes, static_cast<size_t>(recv_count * elem));
      return;
    }
    // The ring works in place: on a copy, which is kept if the operation is abandoned.
    auto work = std::make_shared<std::vector<char>>(static_cast<size_t>(bytes));
    std::memcpy(work->data(), send, static_cast<size_t>(bytes));
    try {
      internal::RingReduceScatter(g.Ring(), work->data(), recv_count, type, op, w);
    } catch (...) {
      KeepForever(work);
      throw;
    }
    std::memcpy(recv, work->data() + g.rank_ * recv_count * elem,
                static_cast<size_t>(recv_count * elem));
  });
}

void Group::AllGather(const void* send, void* recv, int64_t count, DataType type) {
  Impl& g = Need(impl_, "AllGather");
  g.CheckBuffer(send, count, type, "AllGather");
  g.CheckBuffer(recv, count, type, "AllGather");
  const int64_t member_bytes = count * SizeOf(type);
  auto o = g.Begin("AllGather", member_bytes);
  char* out = static_cast<char*>(recv);
  if (g.size_ == 1) {
    if (send != recv) std::memmove(recv, send, static_cast<size_t>(member_bytes));
    return;
  }
  g.Run(o, [&] {
    Impl::OpWaiter w(g, o);
    const Algorithm a = g.Choose(member_bytes * g.size_);
    if (a == Algorithm::kSharedMemory) {
      g.shm_->AllGather(send, recv, count, type, w);
      return;
    }
    g.Agree(o, 4, count, type, 0, 0);
    if (a == Algorithm::kMpi && member_bytes * g.size_ <= internal::g_message_bytes.load()) {
      char* stage = g.Stage(member_bytes * (g.size_ + 1));
      std::memcpy(stage, send, static_cast<size_t>(member_bytes));
      MPI_Request req = MPI_REQUEST_NULL;
      CheckMpi(MPI_Iallgather(stage, static_cast<int>(member_bytes), MPI_BYTE, stage + member_bytes,
                              static_cast<int>(member_bytes), MPI_BYTE, g.comm_.comm(), &req),
               "MPI_Iallgather");
      g.Wait(req, o);
      std::memcpy(recv, stage + member_bytes, static_cast<size_t>(member_bytes * g.size_));
      return;
    }
    if (out + g.rank_ * member_bytes != send) {
      std::memmove(out + g.rank_ * member_bytes, send, static_cast<size_t>(member_bytes));
    }
    internal::RingAllGather(g.Ring(), recv, member_bytes, w);
  });
}

void Group::Broadcast(void* data, int64_t count, DataType type, int root) {
  Impl& g = Need(impl_, "Broadcast");
  g.CheckBuffer(data, count, type, "Broadcast");
  g.CheckRank(root, "root", "Broadcast");
  const int64_t bytes = count * SizeOf(type);
  auto o = g.Begin("Broadcast", bytes);
  if (g.size_ == 1) return;
  g.Run(o, [&] {
    Impl::OpWaiter w(g, o);
    if (g.Choose(bytes) == Algorithm::kSharedMemory) {
      g.shm_->Broadcast(data, count, type, root, w);
      return;
    }
    g.Agree(o, 5, count, type, 0, root);
    // MPI_Ibcast in pieces, each through the staging buffer.
    const int64_t piece = std::min<int64_t>(internal::g_message_bytes.load(), int64_t{16} << 20);
    auto* bytes_at = static_cast<char*>(data);
    for (int64_t k = 0; k < internal::NumPieces(bytes, piece); ++k) {
      const Range r = internal::PieceOf(bytes, piece, k);
      char* stage = g.Stage(r.size());
      if (g.rank_ == root) std::memcpy(stage, bytes_at + r.begin, static_cast<size_t>(r.size()));
      MPI_Request req = MPI_REQUEST_NULL;
      CheckMpi(MPI_Ibcast(stage, static_cast<int>(r.size()), MPI_BYTE, root, g.comm_.comm(), &req),
               "MPI_Ibcast");
      g.Wait(req, o);
      if (g.rank_ != root) std::memcpy(bytes_at + r.begin, stage, static_cast<size_t>(r.size()));
    }
  });
}

void Group::Barrier() {
  Impl& g = Need(impl_, "Barrier");
  auto o = g.Begin("Barrier", 0);
  if (g.size_ == 1) return;
  g.Run(o, [&] {
    Impl::OpWaiter w(g, o);
    if (g.Shm()) {
      g.shm_->Barrier(w);
      return;
    }
    // The argument check is an all-reduce, which no member leaves before all entered: a
    // barrier that also tells a Barrier from another operation on another member.
    g.Agree(o, 3, 0, DataType::kUInt8, 0, 0);
  });
}

namespace {

/// Point-to-point requests of a Send or Recv: on the way out of a failed wait, receives are
/// cancelled (given a second to finish) and unmatched sends are left to MPI.
struct P2pRequests {
  std::vector<MPI_Request> recvs, sends;
  ~P2pRequests() {
    for (MPI_Request& r : recvs) {
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    }
    const double until = MPI_Wtime() + 1.0;
    for (MPI_Request& r : recvs) {
      int done = 0;
      while (r != MPI_REQUEST_NULL && !done && MPI_Wtime() < until) {
        if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      }
    }
    for (MPI_Request& r : sends) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
  }
};

}  // namespace

void Group::Send(const void* data, int64_t count, DataType type, int peer) {
  Impl& g = Need(impl_, "Send");
  g.CheckBuffer(data, count, type, "Send");
  g.CheckRank(peer, "peer", "Send");
  if (peer == g.rank_) {
    throw Error(g.Where(std::string("Send")) + ": peer " + std::to_string(peer) +
                " is this member itself; copy the data instead");
  }
  const int64_t bytes = count * SizeOf(type);
  auto o = g.Begin("Send to member " + std::to_string(peer), bytes);
  g.Run(o, [&] {
    // The header lives in a group-owned buffer: an abandoned send may still read it.
    auto header = std::make_shared<std::vector<int64_t>>(2);
    (*header)[0] = count;
    (*header)[1] = static_cast<int64_t>(type);
    P2pRequests p;
    p.sends.push_back(MPI_REQUEST_NULL);
    try {
      CheckMpi(MPI_Isend(header->data(), 2, MPI_INT64_T, peer, kTagSendHeader, g.comm_.comm(),
                         &p.sends.back()),
               "MPI_Isend (header)");
      const int64_t piece = internal::g_message_bytes.load();
      const auto* at = static_cast<const char*>(data);
      for (int64_t k = 0; k < internal::NumPieces(bytes, piece); ++k) {
        const Range r = internal::PieceOf(bytes, piece, k);
        p.sends.push_back(MPI_REQUEST_NULL);
        CheckMpi(MPI_Isend(at + r.begin, static_cast<int>(r.size()), MPI_BYTE, peer, kTagSendData,
                           g.comm_.comm(), &p.sends.back()),
                 "MPI_Isend");
      }
      for (MPI_Request& r : p.sends) g.Wait(r, o);
    } catch (...) {
      KeepForever(header);
      throw;
    }
  });
}

void Group::Recv(void* data, int64_t count, DataType type, int peer) {
  Impl& g = Need(impl_, "Recv");
  g.CheckBuffer(data, count, type, "Recv");
  g.CheckRank(peer, "peer", "Recv");
  if (peer == g.rank_) {
    throw Error(g.Where(std::string("Recv")) + ": peer " + std::to_string(peer) +
                " is this member itself; copy the data instead");
  }
  const int64_t bytes = count * SizeOf(type);
  auto o = g.Begin("Recv from member " + std::to_string(peer), bytes);
  g.Run(o, [&] {
    auto header = std::make_shared<std::vector<int64_t>>(2);
    P2pRequests p;
    try {
      p.recvs.push_back(MPI_REQUEST_NULL);
      CheckMpi(MPI_Irecv(header->data(), 2, MPI_INT64_T, peer, kTagSendHeader, g.comm_.comm(),
                         &p.recvs.back()),
               "MPI_Irecv (header)");
      g.Wait(p.recvs.back(), o);
    } catch (...) {
      KeepForever(header);
      throw;
    }
    const int64_t their_count = (*header)[0];
    const auto their_type = static_cast<DataType>((*header)[1]);
    const int64_t their_bytes = their_count * std::max<int64_t>(SizeOf(their_type), 1);
    const bool same = their_count == count && their_type == type;
    // On a mismatch the sender's data is still received (into a scratch buffer), so that
    // its Send completes and both sides stay usable.
    std::shared_ptr<std::vector<char>> scratch;
    char* at = static_cast<char*>(data);
    if (!same) {
      scratch = std::make_shared<std::vector<char>>(
          static_cast<size_t>(std::min<int64_t>(std::max<int64_t>(their_bytes, 1),
                                                internal::g_message_bytes.load())));
    }
    const int64_t piece = internal::g_message_bytes.load();
    try {
      for (int64_t k = 0; k < internal::NumPieces(same ? bytes : their_bytes, piece); ++k) {
        const Range r = internal::PieceOf(same ? bytes : their_bytes, piece, k);
        p.recvs.push_back(MPI_REQUEST_NULL);
        CheckMpi(MPI_Irecv(same ? at + r.begin : scratch->data(), static_cast<int>(r.size()),
                           MPI_BYTE, peer, kTagSendData, g.comm_.comm(), &p.recvs.back()),
                 "MPI_Irecv");
        g.Wait(p.recvs.back(), o);
      }
    } catch (...) {
      if (scratch) KeepForever(scratch);
      throw;
    }
    if (!same) {
      throw internal::MismatchError(
          "member " + std::to_string(peer) + " sent " + std::to_string(their_count) + " " +
          (SizeOf(their_type) ? Name(their_type) : "unknown-dtype") + " elements, but this Recv takes " +
          std::to_string(count) + " " + Name(type) +
          ": Send and Recv must pass the same count and dtype");
    }
  });
}

// ---- AllToAllV -----------------------------------------------------------------------------

void Group::AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                      const std::vector<int64_t>& send_displs, void* recv,
                      const std::vector<int64_t>& recv_counts,
                      const std::vector<int64_t>& recv_displs, DataType type) {
  Impl& g = Need(impl_, "AllToAllV");
  const std::string name = "AllToAllV";
  const int n = g.size_;
  const auto check_vector = [&](const std::vector<int64_t>& v, const char* what) {
    if (static_cast<int>(v.size()) != n) {
      throw Error(g.Where(name) + ": " + what + " has " + std::to_string(v.size()) +
                  " entries; give one per member (" + std::to_string(n) + ")");
    }
    for (int j = 0; j < n; ++j) {
      if (v[j] < 0) {
        throw Error(g.Where(name) + ": " + what + "[" + std::to_string(j) + "] is " +
                    std::to_string(v[j]) + "; counts and displacements must be >= 0");
      }
    }
  };
  check_vector(send_counts, "send_counts");
  check_vector(send_displs, "send_displs");
  check_vector(recv_counts, "recv_counts");
  check_vector(recv_displs, "recv_displs");
  int64_t send_total = 0, recv_total = 0;
  for (int j = 0; j < n; ++j) {
    send_total += send_counts[j];
    recv_total += recv_counts[j];
  }
  g.CheckBuffer(send, send_total, type, name);
  g.CheckBuffer(recv, recv_total, type, name);
  const int64_t elem = SizeOf(type);
  auto o = g.Begin(name, (send_total + recv_total) * elem);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  const int me = g.rank_;
  if (n == 1) {
    if (send_counts[0] != recv_counts[0]) {
      throw Error(g.Where(name) + ": this member sends itself " + std::to_string(send_counts[0]) +
                  " elements but expects " + std::to_string(recv_counts[0]) +
                  " (send_counts[0] must equal recv_counts[0])");
    }
    std::memmove(out + recv_displs[0] * elem, in + send_displs[0] * elem,
                 static_cast<size_t>(send_counts[0] * elem));
    return;
  }
  g.Run(o, [&] {
    Impl::OpWaiter w(g, o);
    g.Agree(o, 6, n, type, 0, 0);
    // Every member's send and receive counts, so that all see any pair that disagrees.
    if (!g.counts_ || static_cast<int>(g.counts_->size()) < 2 * n * (n + 1)) {
      g.counts_ = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(2 * n * (n + 1)));
    }
    int64_t* mine = g.counts_->data();
    int64_t* all = mine + 2 * n;  // member i's row at all + 2 * n * i: send counts, recv counts
    std::copy(send_counts.begin(), send_counts.end(), mine);
    std::copy(recv_counts.begin(), recv_counts.end(), mine + n);
    MPI_Request req = MPI_REQUEST_NULL;
    CheckMpi(MPI_Iallgather(mine, 2 * n, MPI_INT64_T, all, 2 * n, MPI_INT64_T, g.comm_.comm(), &req),
             "MPI_Iallgather (AllToAllV counts)");
    g.Wait(req, o);
    auto sends = [&](int i, int j) { return all[2 * n * i + j]; };      // i's count for j
    auto expects = [&](int j, int i) { return all[2 * n * j + n + i]; };  // j's count from i
    std::string differ;
    int64_t largest = 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        largest = std::max(largest, sends(i, j) * elem);
        if (sends(i, j) != expects(j, i) && differ.size() < 400) {
          differ += (differ.empty() ? "" : "; ") + std::string("member ") + std::to_string(i) +
                    " sends " + std::to_string(sends(i, j)) + " to member " + std::to_string(j) +
                    ", which expects " + std::to_string(expects(j, i));
        }
      }
    }
    if (!differ.empty()) {
      throw internal::MismatchError("the members' counts do not match: " + differ +
                                    "; member j's recv_counts[i] must be member i's send_counts[j]");
    }
    std::memcpy(out + recv_displs[me] * elem, in + send_displs[me] * elem,
                static_cast<size_t>(send_counts[me] * elem));
    const int64_t piece_limit = internal::g_message_bytes.load();
    int64_t total_bytes = 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) total_bytes += i == j ? 0 : sends(i, j) * elem;
    }
    const bool mpi = g.options_.algorithm == Algorithm::kMpi ||
                     (g.options_.algorithm == Algorithm::kAuto && total_bytes < kRingMinBytes);
    if (mpi) {
      // Rounds of MPI_Ialltoallv on staging: each pair sends at most `piece` bytes a round.
      const int64_t piece = std::max<int64_t>(1, std::min<int64_t>(piece_limit / n, INT_MAX / n));
      const int64_t rounds = internal::NumPieces(largest, piece);
      std::vector<int> scounts(n), sdispls(n), rcounts(n), rdispls(n);
      for (int64_t k = 0; k < rounds; ++k) {
        int64_t s_at = 0, r_at = 0;
        for (int j = 0; j < n; ++j) {
          const Range sr = internal::PieceOf(j == me ? 0 : send_counts[j] * elem, piece, k);
          const Range rr = internal::PieceOf(j == me ? 0 : recv_counts[j] * elem, piece, k);
          // One byte to itself every round (the member's own part was copied above): Open
          // MPI 4.1's libnbc skips a tag for an Ialltoallv that moves no bytes on a rank,
          // and that rank's next collective then never matches the others' (reproduced: a
          // member with only zero counts hangs the Iallreduce after it).
          scounts[j] = j == me ? 1 : static_cast<int>(std::max<int64_t>(0, sr.size()));
          rcounts[j] = j == me ? 1 : static_cast<int>(std::max<int64_t>(0, rr.size()));
          sdispls[j] = static_cast<int>(s_at);
          rdispls[j] = static_cast<int>(r_at);
          s_at += scounts[j];
          r_at += rcounts[j];
        }
        char* stage = g.Stage(s_at + r_at);
        for (int j = 0; j < n; ++j) {
          if (scounts[j] > 0 && j != me) {
            std::memcpy(stage + sdispls[j], in + send_displs[j] * elem + k * piece,
                        static_cast<size_t>(scounts[j]));
          }
        }
        req = MPI_REQUEST_NULL;
        CheckMpi(MPI_Ialltoallv(stage, scounts.data(), sdispls.data(), MPI_BYTE, stage + s_at,
                                rcounts.data(), rdispls.data(), MPI_BYTE, g.comm_.comm(), &req),
                 "MPI_Ialltoallv");
        g.Wait(req, o);
        for (int j = 0; j < n; ++j) {
          if (rcounts[j] > 0 && j != me) {
            std::memcpy(out + recv_displs[j] * elem + k * piece, stage + s_at + rdispls[j],
                        static_cast<size_t>(rcounts[j]));
          }
        }
      }
      return;
    }
    // One message per pair, cut only at the message limit (1 GiB): over shared memory a
    // large message is one single-copy transfer (CMA), where 4 MiB pieces made each piece a
    // rendezvous of its own (the 2 GiB shuffle benchmark: 4 MiB pieces 2-3 s in AllToAllV,
    // whole messages 0.45 s, raw MPI_Alltoallv 0.24 s, same run).
    const int64_t p2p_piece = piece_limit;
    // Pairwise point-to-point between the callers' buffers: every receive, then every send,
    // each peer in turn from this member's right-hand neighbour on (so the members do not all
    // send to member 0 first).
    P2pRequests p;
    for (int step = 1; step < n; ++step) {
      const int from = (me - step + n) % n;
      const int64_t bytes = recv_counts[from] * elem;
      for (int64_t k = 0; k < internal::NumPieces(bytes, p2p_piece); ++k) {
        const Range r = internal::PieceOf(bytes, p2p_piece, k);
        p.recvs.push_back(MPI_REQUEST_NULL);
        CheckMpi(MPI_Irecv(out + recv_displs[from] * elem + r.begin, static_cast<int>(r.size()),
                           MPI_BYTE, from, kTagAllToAll, g.comm_.comm(), &p.recvs.back()),
                 "MPI_Irecv (AllToAllV)");
      }
    }
    for (int step = 1; step < n; ++step) {
      const int to = (me + step) % n;
      const int64_t bytes = send_counts[to] * elem;
      for (int64_t k = 0; k < internal::NumPieces(bytes, p2p_piece); ++k) {
        const Range r = internal::PieceOf(bytes, p2p_piece, k);
        p.sends.push_back(MPI_REQUEST_NULL);
        CheckMpi(MPI_Isend(in + send_displs[to] * elem + r.begin, static_cast<int>(r.size()),
                           MPI_BYTE, to, kTagAllToAll, g.comm_.comm(), &p.sends.back()),
                 "MPI_Isend (AllToAllV)");
      }
    }
    // Every request at once (MPI_Testsome): the pieces complete in any order, and each
    // completion restarts the waiter's spin, so a transfer that is moving is polled without
    // the sleeps of a long wait (the shared-memory transport advances only when tested).
    std::vector<int> done(std::max(p.recvs.size(), p.sends.size()) + 1);
    auto test_some = [&](std::vector<MPI_Request>& reqs) {
      if (reqs.empty()) return 0;
      int n_done = 0;
      CheckMpi(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &n_done, done.data(),
                            MPI_STATUSES_IGNORE),
               "MPI_Testsome (AllToAllV)");
      return n_done == MPI_UNDEFINED ? 0 : n_done;
    };
    size_t left = p.recvs.size() + p.sends.size();
    w.Start();
    while (left > 0) {
      const int finished = test_some(p.recvs) + test_some(p.sends);
      if (finished > 0) {
        left -= static_cast<size_t>(finished);
        w.Start();
        continue;
      }
      w.Poll();
    }
  });
}

std::vector<int64_t> Group::ExchangeCounts(const std::vector<int64_t>& send_counts,
                                           int64_t send_size) {
  Impl& g = Need(impl_, "AllToAllV");
  const int n = g.size_;
  if (static_cast<int>(send_counts.size()) != n) {
    throw Error(g.Where(std::string("AllToAllV")) + ": send_counts has " +
                std::to_string(send_counts.size()) + " entries; give one per member (" +
                std::to_string(n) + ")");
  }
  int64_t sum = 0;
  for (int j = 0; j < n; ++j) {
    if (send_counts[j] < 0) {
      throw Error(g.Where(std::string("AllToAllV")) + ": send_counts[" + std::to_string(j) +
                  "] is " + std::to_string(send_counts[j]) + "; counts must be >= 0");
    }
    sum += send_counts[j];
  }
  if (sum != send_size) {
    throw Error(g.Where(std::string("AllToAllV")) + ": send_counts add up to " +
                std::to_string(sum) + " elements but the input has " + std::to_string(send_size) +
                "; they must cover it exactly");
  }
  std::vector<int64_t> ones(n, 1), displs(n), from(n);
  std::iota(displs.begin(), displs.end(), 0);
  AllToAllV(send_counts.data(), ones, displs, from.data(), ones, displs, DataType::kInt64);
  return from;
}

}  // namespace prism::collective
