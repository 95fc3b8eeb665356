// The shared-memory collectives of a same-host group.
//
// The segment: a control line per member (its counters, each on a cache line of its own, and
// its last two operation headers), then `slots` blocks of `block_bytes` per member. Counters
// only grow, and every member advances them by the same amounts: `arrive` counts operations,
// `written`, `reduced` and `done` count pipeline blocks (numbered on from one operation to the
// next, so nothing is ever reset). Block g of a member lives in its slot g % slots.
//
// Every operation starts with an arrival: a member writes its header (kind, count, type, op,
// root) and bumps `arrive`; once every member has arrived, each compares all headers, so a
// mismatch is the same MismatchError on every member before any data moves. A Barrier is an
// arrival alone.
//
// AllReduce is a reduce-scatter then an all-gather, pipelined block by block so the working
// set stays in cache: for block g, every member copies the parts of its block that others
// reduce into its slot (`written`), member i reduces part i of the block from its own buffer
// and every other member's slot into its slot and its buffer (`reduced`), and every member
// copies the other parts back out (`done`). A member copies block g + 1 in before it copies
// block g out, so it rarely waits; a slot is overwritten only once every member is done with
// the block it held (slots >= 2). Each byte of the user's buffer is thus read once and
// written once; the rest happens in cache-sized blocks.
// ReduceScatter: the member's n parts of a block go into its slot, member i reduces part i
// straight into its output. AllGather: every member copies into its slot and out of every
// other's. Broadcast: the root copies in, the others copy out.
//
// Waits spin on the counters (acquire loads; writers release-store after their copies) and
// call the Waiter every few dozen spins, which yields, sleeps, and throws on abort or timeout.
#include "shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "kernels.h"

namespace prism::collective::internal {

namespace {

constexpr size_t kLine = 64;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

enum Kind : int { kBarrier = 1, kAllReduce, kReduceScatter, kAllGather, kBroadcast };

const char* KindName(int kind) {
  switch (kind) {
    case kBarrier:
      return "Barrier";
    case kAllReduce:
      return "AllReduce";
    case kReduceScatter:
      return "ReduceScatter";
    case kAllGather:
      return "AllGather";
    case kBroadcast:
      return "Broadcast";
  }
  return "?";
}

/// Waits until `c` >= target.
void WaitAtLeast(const std::atomic<uint64_t>& c, uint64_t target, Waiter& w) {
  if (c.load(std::memory_order_acquire) >= target) return;
  w.Start();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (c.load(std::memory_order_acquire) >= target) return;
      CpuRelax();
    }
    w.Poll();
  }
}

std::string ErrnoText(const std::string& what, const std::string& name, int err) {
  return "prism::collective: " + what + " of shared-memory segment " + name + " failed: " +
         std::strerror(err);
}

}  // namespace

struct SharedSegment::Header {
  std::atomic<int64_t> kind{0}, count{0}, type{0}, op{0}, root{0};
};

struct alignas(kLine) SharedSegment::Control {
  alignas(kLine) std::atomic<uint64_t> arrive{0};
  alignas(kLine) std::atomic<uint64_t> written{0};
  alignas(kLine) std::atomic<uint64_t> reduced{0};
  alignas(kLine) std::atomic<uint64_t> done{0};
  alignas(kLine) Header header[2];  // by operation parity: a peer one operation ahead writes the other
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free");

SegmentShape SegmentShape::Normalized() const {
  SegmentShape s = *this;
  s.slots = std::max(2, s.slots);
  const int64_t min_block = std::max<int64_t>(4096, int64_t{64} * std::max(1, s.members));
  s.block_bytes = std::max(s.block_bytes, min_block);
  s.block_bytes = (s.block_bytes + 4095) / 4096 * 4096;
  return s;
}

size_t SegmentShape::Bytes() const {
  const size_t control = (sizeof(SharedSegment::Control) * static_cast<size_t>(members) + 4095) /
                         4096 * 4096;
  return control + static_cast<size_t>(members) * static_cast<size_t>(slots) *
                       static_cast<size_t>(block_bytes);
}

SharedSegment::SharedSegment(void* base, SegmentShape shape, int rank)
    : base_(base), shape_(shape), rank_(rank) {}

SharedSegment::~SharedSegment() { munmap(base_, shape_.Bytes()); }

std::unique_ptr<SharedSegment> SharedSegment::Create(const std::string& name, SegmentShape shape,
                                                     int rank) {
  return Map(name, shape.Normalized(), rank, /*create=*/true);
}

std::unique_ptr<SharedSegment> SharedSegment::Open(const std::string& name, SegmentShape shape,
                                                   int rank) {
  return Map(name, shape.Normalized(), rank, /*create=*/false);
}

bool SharedSegment::Unlink(const std::string& name) { return shm_unlink(name.c_str()) == 0; }

std::unique_ptr<SharedSegment> SharedSegment::Map(const std::string& name, SegmentShape shape,
                                                  int rank, bool create) {
  if (shape.members < 1 || rank < 0 || rank >= shape.members) {
    throw Error("prism::collective: member " + std::to_string(rank) + " of a segment for " +
                std::to_string(shape.members) + " members");
  }
  const size_t bytes = shape.Bytes();
  const int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) throw Error(ErrnoText(create ? "shm_open (create)" : "shm_open", name, errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  if (create) {
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int err = errno;
      shm_unlink(name.c_str());
      throw Error(ErrnoText("ftruncate", name, err));
    }
    // Reserve the pages now: on a full /dev/shm this fails here with ENOSPC, where touching
    // a page of a sparse object later would kill the process with SIGBUS.
    if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
      shm_unlink(name.c_str());
      throw Error(ErrnoText("posix_fallocate (" + std::to_string(bytes) + " bytes; is /dev/shm full?)",
                            name, err));
    }
  } else {
    struct stat st {};
    if (fstat(fd, &st) != 0) throw Error(ErrnoText("fstat", name, errno));
    if (static_cast<size_t>(st.st_size) != bytes) {
      throw Error("prism::collective: shared-memory segment " + name + " has " +
                  std::to_string(st.st_size) + " bytes, expected " + std::to_string(bytes) +
                  " (members disagree on its shape)");
    }
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    if (create) shm_unlink(name.c_str());
    throw Error(ErrnoText("mmap", name, err));
  }
  // A new object reads as zeros: every counter starts at 0. Construct the atomics in place
  // only where they are new (placement-new on zeros writes zeros).
  if (create) {
    auto* ctl = static_cast<Control*>(base);
    for (int i = 0; i < shape.members; ++i) new (&ctl[i]) Control();
  }
  return std::unique_ptr<SharedSegment>(new SharedSegment(base, shape, rank));
}

SharedSegment::Control& SharedSegment::Ctl(int member) const {
  return static_cast<Control*>(base_)[member];
}

char* SharedSegment::Slot(int member, uint64_t block) const {
  const size_t control =
      (sizeof(Control) * static_cast<size_t>(shape_.members) + 4095) / 4096 * 4096;
  const size_t slot = static_cast<size_t>(block % static_cast<uint64_t>(shape_.slots));
  return static_cast<char*>(base_) + control +
         (static_cast<size_t>(member) * static_cast<size_t>(shape_.slots) + slot) *
             static_cast<size_t>(shape_.block_bytes);
}

void SharedSegment::WaitAll(std::atomic<uint64_t> Control::*counter, uint64_t target,
                            Waiter& w) const {
  for (int q = 0; q < shape_.members; ++q) WaitAtLeast(Ctl(q).*counter, target, w);
}

void SharedSegment::EndOperation(uint64_t end) {
  Control& me = Me();
  for (auto c : {&Control::written, &Control::reduced, &Control::done}) {
    if ((me.*c).load(std::memory_order_relaxed) < end) (me.*c).store(end, std::memory_order_release);
  }
  block_ = end;
}

void SharedSegment::Arrive(int kind, int64_t count, DataType type, int op, int root, Waiter& w) {
  const uint64_t seq = ++seq_;
  Header& h = Me().header[seq % 2];
  h.kind.store(kind, std::memory_order_relaxed);
  h.count.store(count, std::memory_order_relaxed);
  h.type.store(static_cast<int64_t>(type), std::memory_order_relaxed);
  h.op.store(op, std::memory_order_relaxed);
  h.root.store(root, std::memory_order_relaxed);
  Me().arrive.store(seq, std::memory_order_release);
  WaitAll(&Control::arrive, seq, w);
  bool same = true;
  for (int q = 0; q < shape_.members && same; ++q) {
    const Header& o = Ctl(q).header[seq % 2];
    same = o.kind.load(std::memory_order_relaxed) == kind &&
           o.count.load(std::memory_order_relaxed) == count &&
           o.type.load(std::memory_order_relaxed) == static_cast<int64_t>(type) &&
           o.op.load(std::memory_order_relaxed) == op &&
           o.root.load(std::memory_order_relaxed) == root;
  }
  if (same) return;
  std::string text = "the members called different operations or passed different arguments:";
  for (int q = 0; q < shape_.members; ++q) {
    const Header& o = Ctl(q).header[seq % 2];
    const int k = static_cast<int>(o.kind.load(std::memory_order_relaxed));
    text += std::string(q ? ";" : "") + " member " + std::to_string(q) + ": " + KindName(k);
    if (k == kAllReduce || k == kReduceScatter) {
      text += std::string("(") + Name(static_cast<ReduceOp>(o.op.load(std::memory_order_relaxed))) + ")";
    }
    if (k == kBroadcast) text += "(root " + std::to_string(o.root.load(std::memory_order_relaxed)) + ")";
    if (k != kBarrier) {
      text += " of " + std::to_string(o.count.load(std::memory_order_relaxed)) + " " +
              Name(static_cast<DataType>(o.type.load(std::memory_order_relaxed)));
    }
  }
  // Every member reads the same headers and throws too; no block moved, so the counters
  // still agree and the group stays usable.
  throw MismatchError(text);
}

void SharedSegment::Barrier(Waiter& w) { Arrive(kBarrier, 0, DataType::kUInt8, 0, 0, w); }

void SharedSegment::AllReduce(void* data, int64_t count, DataType type, ReduceOp op, Waiter& w) {
  Arrive(kAllReduce, count, type, static_cast<int>(op), 0, w);
  const int n = shape_.members;
  const int64_t elem = SizeOf(type);
  const int64_t per_block = shape_.block_bytes / elem;
  const int64_t blocks = NumPieces(count, per_block);
  const uint64_t base = block_;
  const uint64_t slots = static_cast<uint64_t>(shape_.slots);
  auto* bytes = static_cast<char*>(data);

  // A member's own part of a block never goes through its slot on the way in: it reduces
  // it straight from its buffer, and writes the result to the buffer and to the slot (for
  // the others) in the same pass over cache-hot lines.
  auto copy_in = [&](int64_t b) {
    const uint64_t g = base + static_cast<uint64_t>(b);
    const Range r = PieceOf(count, per_block, b);
    if (g >= slots) WaitAll(&Control::done, g - slots + 1, w);
    for (int q = 0; q < n; ++q) {
      if (q == rank_) continue;
      const Range part = PartOf(r.size(), n, q);
      std::memcpy(Slot(rank_, g) + part.begin * elem, bytes + (r.begin + part.begin) * elem,
                  static_cast<size_t>(part.size() * elem));
    }
    Me().written.store(g + 1, std::memory_order_release);
  };
  auto reduce = [&](int64_t b) {
    const uint64_t g = base + static_cast<uint64_t>(b);
    const Range r = PieceOf(count, per_block, b);
    const Range part = PartOf(r.size(), n, rank_);
    WaitAll(&Control::written, g + 1, w);
    char* dst = Slot(rank_, g) + part.begin * elem;
    char* mine = bytes + (r.begin + part.begin) * elem;
    if (n == 1) {
      std::memcpy(dst, mine, static_cast<size_t>(part.size() * elem));
    } else {
      Combine(type, op, dst, mine, Slot((rank_ + 1) % n, g) + part.begin * elem, part.size());
      for (int k = 2; k < n; ++k) {
        Combine(type, op, dst, dst, Slot((rank_ + k) % n, g) + part.begin * elem, part.size());
      }
    }
    Finish(type, op, dst, part.size(), n);
    Me().reduced.store(g + 1, std::memory_order_release);
    std::memcpy(mine, dst, static_cast<size_t>(part.size() * elem));
  };
  auto copy_out = [&](int64_t b) {
    const uint64_t g = base + static_cast<uint64_t>(b);
    const Range r = PieceOf(count, per_block, b);
    for (int k = 1; k < n; ++k) {
      const int q = (rank_ + k) % n;
      const Range part = PartOf(r.size(), n, q);
      WaitAtLeast(Ctl(q).reduced, g + 1, w);
      std::memcpy(bytes + (r.begin + part.begin) * elem, Slot(q, g) + part.begin * elem,
                  static_cast<size_t>(part.size() * elem));
    }
    Me().done.store(g + 1, std::memory_order_release);
  };

  if (blocks > 0) copy_in(0);
  for (int64_t b = 0; b < blocks; ++b) {
    reduce(b);
    if (b + 1 < blocks) copy_in(b + 1);
    copy_out(b);
  }
  EndOperation(base + static_cast<uint64_t>(blocks));
}

void SharedSegment::ReduceScatter(const void* send, void* recv, int64_t recv_count, DataType type,
                                  ReduceOp op, Waiter& w) {
  Arrive(kReduceScatter, recv_count, type, static_cast<int>(op), 0, w);
  const int n = shape_.members;
  const int64_t elem = SizeOf(type);
  // A slot holds one piece of every member's share, piece q at q * per_piece.
  const int64_t per_piece = std::max<int64_t>(1, shape_.block_bytes / elem / n);
  const int64_t blocks = NumPieces(recv_count, per_piece);
  const uint64_t base = block_;
  const uint64_t slots = static_cast<uint64_t>(shape_.slots);
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);

  auto copy_in = [&](int64_t b) {
    const uint64_t g = base + static_cast<uint64_t>(b);
    const Range r = PieceOf(recv_count, per_piece, b);
    if (g >= slots) WaitAll(&Control::done, g - slots + 1, w);
    for (int q = 0; q < n; ++q) {
      std::memcpy(Slot(rank_, g) + q * per_piece * elem, in + (q * recv_count + r.begin) * elem,
                  static_cast<size_t>(r.size() * elem));
    }
    Me().written.store(g + 1, std::memory_order_release);
  };
  auto reduce = [&](int64_t b) {
    const uint64_t g = base + static_cast<uint64_t>(b);
    const Range r = PieceOf(recv_count, per_piece, b);
    WaitAll(&Control::written, g + 1, w);
    char* dst = out + r.begin * elem;
    const int64_t at = rank_ * per_piece * elem;
    if (n == 1) {
      std::memcpy(dst, Slot(0, g) + at, static_cast<size_t>(r.size() * elem));
    } else {
      Combine(type, op, dst, Slot(rank_, g) + at, Slot((rank_ + 1) % n, g) + at, r.size());
      for (int k = 2; k < n; ++k) Combine(type, op, dst, dst, Slot((rank_ + k) % n, g) + at, r.size());
    }
    Finish(type, op, dst, r.size(), n);
    Me().done.store(g + 1, std::memory_order_release);
  };

  if (blocks > 0) copy_in(0);
  for (int64_t b = 0; b < blocks; ++b) {
    if (b + 1 < blocks) copy_in(b + 1);
    reduce(b);
  }
  EndOperation(base + static_cast<uint64_t>(blocks));
}

void SharedSegment::AllGather(const void* send, void* recv, int64_t count, DataType type,
                              Waiter& w) {
  Arrive(kAllGather, count, type, 0, 0, w);
  const int n = shape_.members;
  const int64_t member_bytes = count * SizeOf(type);
  const int64_t blocks = NumPieces(member_bytes, shape_.block_bytes);
  const uint64_t base = block_;
  const uint64_t slots = static_cast<uint64_t>(shape_.slots);
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);
  if (out + rank_ * member_bytes != in) {
    std::memmove(out + rank_ * member_bytes, in, static_cast<size_t>(member_bytes));
  }
  // From here on this member's share is read from its place in `recv` (which `send` may be).
  in = out + rank_ * member_bytes;

  auto copy_in = [&](int64_t b) {
    const uint64_t g = base + static_cast<uint64_t>(b);
    const Range r = PieceOf(member_bytes, shape_.block_bytes, b);
    if (g >= slots) WaitAll(&Control::done, g - slots + 1, w);
    std::memcpy(Slot(rank_, g), in + r.begin, static_cast<size_t>(r.size()));
    Me().written.store(g + 1, std::memory_order_release);
  };
  auto copy_out = [&](int64_t b) {
    const uint64_t g = base + static_cast<uint64_t>(b);
    const Range r = PieceOf(member_bytes, shape_.block_bytes, b);
    for (int k = 1; k < n; ++k) {
      const int q = (rank_ + k) % n;
      WaitAtLeast(Ctl(q).written, g + 1, w);
      std::memcpy(out + q * member_bytes + r.begin, Slot(q, g), static_cast<size_t>(r.size()));
    }
    Me().done.store(g + 1, std::memory_order_release);
  };

  if (blocks > 0) copy_in(0);
  for (int64_t b = 0; b < blocks; ++b) {
    if (b + 1 < blocks) copy_in(b + 1);
    copy_out(b);
  }
  EndOperation(base + static_cast<uint64_t>(blocks));
}

void SharedSegment::Broadcast(void* data, int64_t count, DataType type, int root, Waiter& w) {
  Arrive(kBroadcast, count, type, 0, root, w);
  const int64_t total = count * SizeOf(type);
  const int64_t blocks = NumPieces(total, shape_.block_bytes);
  const uint64_t base = block_;
  const uint64_t slots = static_cast<uint64_t>(shape_.slots);
  auto* bytes = static_cast<char*>(data);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint64_t g = base + static_cast<uint64_t>(b);
    const Range r = PieceOf(total, shape_.block_bytes, b);
    if (rank_ == root) {
      if (g >= slots) WaitAll(&Control::done, g - slots + 1, w);
      std::memcpy(Slot(root, g), bytes + r.begin, static_cast<size_t>(r.size()));
      Me().written.store(g + 1, std::memory_order_release);
      Me().done.store(g + 1, std::memory_order_release);  // the root reads nothing
    } else {
      WaitAtLeast(Ctl(root).written, g + 1, w);
      std::memcpy(bytes + r.begin, Slot(root, g), static_cast<size_t>(r.size()));
      Me().done.store(g + 1, std::memory_order_release);
    }
  }
  EndOperation(base + static_cast<uint64_t>(blocks));
}

}  // namespace prism::collective::internal
