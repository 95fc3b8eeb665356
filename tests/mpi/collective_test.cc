// prism::collective on 1, 3 and 4 ranks. The driver starts one task per group member, pinned
// to the member's rank; the task makes the group and checks what it sees against values
// computed locally, returning "" or a description of what was wrong. Every algorithm runs
// (shared memory, the ring, MPI's collectives), with pieces and blocks lowered to 4 KiB so the
// chunked and pipelined paths run with small buffers. Every test uses group keys of its own: a
// group abandoned after an abort or a timeout keeps its communicator for the process's life.
#include <gtest/gtest.h>
#include <unistd.h>
#include <prism/collective.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>
#include <thread>

#include "../common/collective_reference.h"
#include "prism/internal/collective_testing.h"
#include "test_util.h"

using namespace prism_test;
namespace coll = prism::collective;
using coll::Algorithm;
using coll::DataType;
using coll::Group;
using coll::GroupOptions;
using coll::ReduceOp;

namespace {

using Clock = std::chrono::steady_clock;

struct Problems {
  std::string text;
  void Expect(bool ok, const std::string& what) {
    if (!ok && text.size() < 2000) text += (text.empty() ? "" : "; ") + what;
  }
};

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string Key(int tag) { return "collective_test/" + std::to_string(tag); }


/// Small pieces and blocks for the life of a task.
struct SmallPieces {
  SmallPieces() {
    coll::internal::SetMessageBytesForTesting(4096);
    coll::internal::SetSharedBlockBytesForTesting(4096);
  }
  ~SmallPieces() {
    coll::internal::SetMessageBytesForTesting(0);
    coll::internal::SetSharedBlockBytesForTesting(0);
  }
};

template <typename T>
void CheckAllReduce(Group& g, Problems& p, int64_t count, const std::string& label) {
  const int m = g.Rank(), n = g.Size();
  const int64_t shift = std::is_same_v<T, uint8_t> ? 6 : 0;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                      ReduceOp::kAverage}) {
    std::vector<T> v = Input<T>(m, count, shift);
    const std::string what = label + " AllReduce " + coll::Name(coll::DataTypeOf<T>::value) + " " +
                             coll::Name(op) + " of " + std::to_string(count);
    if (op == ReduceOp::kAverage && !std::is_floating_point_v<T>) {
      try {
        g.AllReduce(v, op);
        p.Expect(false, what + ": no error for kAverage on integers");
      } catch (const prism::Error& e) {
        p.Expect(Contains(e.what(), "kAverage") && Contains(e.what(), "floating"),
                 what + ": unclear error: " + e.what());
      }
      continue;
    }
    g.AllReduce(v, op);
    int bad = 0;
    for (int64_t i = 0; i < count && bad < 2; ++i) {
      const double want = static_cast<double>(static_cast<T>(Expected(n, i, op, shift)));
      const double got = static_cast<double>(v[static_cast<size_t>(i)]);
      if (std::abs(got - want) > 1e-6 * std::max(1.0, std::abs(want))) {
        ++bad;
        p.Expect(false, what + ": element " + std::to_string(i) + " is " + std::to_string(got) +
                            ", expected " + std::to_string(want));
      }
    }
  }
}

/// Every operation and dtype on group `tag` with `algorithm`, at counts 0, 1, 2 (fewer than
/// 3 or 4 members), odd, and many 4 KiB pieces.
std::string CgEveryOp(Ranks ranks, int tag, int algorithm) {
  SmallPieces small;
  Problems p;
  GroupOptions o;
  o.algorithm = static_cast<Algorithm>(algorithm);
  o.timeout = std::chrono::seconds(60);
  Group g = Group::Create(Key(tag), ranks, o);
  const int m = g.Rank(), n = g.Size();
  const std::string label = std::string(coll::Name(o.algorithm)) + " (" + g.Describe() + ")";
  p.Expect(m == static_cast<int>(std::find(ranks.begin(), ranks.end(), MyRank()) - ranks.begin()),
           label + ": wrong Rank()");
  p.Expect(n == static_cast<int>(ranks.size()), label + ": wrong Size()");
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{1001}, int64_t{20011}}) {
    CheckAllReduce<float>(g, p, count, label);
    CheckAllReduce<double>(g, p, count, label);
    CheckAllReduce<int32_t>(g, p, count, label);
    CheckAllReduce<int64_t>(g, p, count, label);
    CheckAllReduce<uint8_t>(g, p, count, label);

    // ReduceScatter (sum, int64): member m gets part m.
    std::vector<int64_t> rs = g.ReduceScatter(Input<int64_t>(m, count * n, 0), ReduceOp::kSum);
    p.Expect(static_cast<int64_t>(rs.size()) == count, label + ": ReduceScatter size");
    for (int64_t i = 0; i < count && i < static_cast<int64_t>(rs.size()); ++i) {
      if (rs[static_cast<size_t>(i)] !=
          static_cast<int64_t>(Expected(n, m * count + i, ReduceOp::kSum, 0))) {
        p.Expect(false, label + ": ReduceScatter of " + std::to_string(count) + " element " +
                            std::to_string(i) + " is wrong");
        break;
      }
    }
    // AllGather (float32).
    std::vector<float> all = g.AllGather(Input<float>(m, count, 100 * m));
    for (int q = 0; q < n; ++q) {
      if (!std::equal(all.begin() + q * count, all.begin() + (q + 1) * count,
                      Input<float>(q, count, 100 * q).begin())) {
        p.Expect(false, label + ": AllGather of " + std::to_string(count) + ": member " +
                            std::to_string(q) + "'s part is wrong");
      }
    }
    // Broadcast (int32) from the last member.
    std::vector<int32_t> b = Input<int32_t>(m, count, 1000 * m);
    g.Broadcast(b, n - 1);
    p.Expect(b == Input<int32_t>(n - 1, count, 1000 * (n - 1)),
             label + ": Broadcast of " + std::to_string(count) + ": not the root's values");
    g.Barrier();
  }
  return p.text;
}

/// Send/Recv around the ring: member m sends to m + 1 and receives from m - 1 (member 0 sends
/// first, the others receive first, so blocking sends cannot all wait at once); then a
/// mismatched count is an error on the receiver only, and the pair still works.
std::string CgSendRecv(Ranks ranks, int tag) {
  SmallPieces small;
  Problems p;
  GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  Group g = Group::Create(Key(tag), ranks, o);
  const int m = g.Rank(), n = g.Size();
  const int right = (m + 1) % n, left = (m + n - 1) % n;
  for (int64_t count : {int64_t{0}, int64_t{3}, int64_t{5001}}) {  // 5001 doubles: 10 pieces
    std::vector<double> out = Input<double>(m, count, 10 * m), in(static_cast<size_t>(count));
    if (m == 0) {
      g.Send(out, right);
      g.Recv(in, left);
    } else {
      g.Recv(in, left);
      g.Send(out, right);
    }
    p.Expect(in == Input<double>(left, count, 10 * left),
             "Recv of " + std::to_string(count) + " from member " + std::to_string(left) + " is wrong");
  }
  if (n >= 2) {
    // Member 1 expects 11 int32 where member 0 sends 10 float32.
    if (m == 0) {
      g.Send(std::vector<float>(10, 1.0f), 1);
    } else if (m == 1) {
      std::vector<int32_t> wrong(11);
      try {
        g.Recv(wrong, 0);
        p.Expect(false, "no error for a mismatched Recv");
      } catch (const prism::Error& e) {
        p.Expect(Contains(e.what(), "sent 10 float32") && Contains(e.what(), "takes 11 int32"),
                 std::string("unclear mismatch: ") + e.what());
      }
    }
    if (m == 0) {
      g.Send(std::vector<int64_t>{7, 8}, 1);
    } else if (m == 1) {
      std::vector<int64_t> ok(2);
      g.Recv(ok, 0);
      p.Expect(ok == std::vector<int64_t>{7, 8}, "Send/Recv after a mismatch is wrong");
    }
  }
  return p.text;
}

/// The last member passes one element more (mode 0) or calls Barrier (mode 1): every member
/// gets a clear error, and the group works afterwards.
std::string CgMismatch(Ranks ranks, int tag, int algorithm, int mode) {
  Problems p;
  GroupOptions o;
  o.algorithm = static_cast<Algorithm>(algorithm);
  o.timeout = std::chrono::seconds(20);  // a hang becomes an error instead of a stuck test
  Group g = Group::Create(Key(tag), ranks, o);
  const bool odd_one = g.Rank() == g.Size() - 1;
  std::vector<float> v(odd_one && mode == 0 ? 101 : 100, 1.0f);
  try {
    if (odd_one && mode == 1) {
      g.Barrier();
    } else {
      g.AllReduce(v, ReduceOp::kSum);
    }
    p.Expect(false, "no error for mismatched calls");
  } catch (const coll::CollectiveTimeout& e) {
    p.Expect(false, std::string("mismatched calls hung: ") + e.what());
  } catch (const prism::Error& e) {
    p.Expect(Contains(e.what(), "different"), std::string("unclear error: ") + e.what());
  }
  std::vector<float> ok(100, 1.0f);
  g.AllReduce(ok, ReduceOp::kSum);
  p.Expect(ok[99] == static_cast<float>(g.Size()), "the group does not work after the mismatch");
  return p.text;
}

// Abort: members poll a flag that a second task on their rank sets.
std::atomic<int> g_abort_tag{-1};
std::atomic<int64_t> g_abort_set_ns{0};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::atomic<int> g_created_tag{-1};  // the tag of the last group CgAbortMember created here
bool CgCreated(int tag) { return g_created_tag.load() == tag; }

std::string CgSetAbort(int tag) {
  g_abort_set_ns = NowNs();
  g_abort_tag = tag;
  return "";
}

/// A member of group `tag` whose AllReduce the last member never joins (joins), or that last
/// member, which waits for the abort and leaves.
std::string CgAbortMember(Ranks ranks, int tag, int algorithm, bool joins) {
  Problems p;
  GroupOptions o;
  o.algorithm = static_cast<Algorithm>(algorithm);
  o.aborted = [tag] { return g_abort_tag.load() == tag; };
  o.timeout = std::chrono::seconds(20);
  Group g = Group::Create(Key(tag), ranks, o);
  g_created_tag = tag;
  if (!joins) {
    auto t0 = Clock::now();
    while (!o.aborted() && SecondsSince(t0) < 30) SleepMs(5);
    return "";  // the group sees the abort and keeps its communicator
  }
  std::vector<float> v(1 << 18, 1.0f);  // 1 MiB: the ring, when it is the ring
  try {
    g.AllReduce(v, ReduceOp::kSum);
    p.Expect(false, "AllReduce finished although a member never joined");
  } catch (const coll::CollectiveAborted& e) {
    const double after_flag = static_cast<double>(NowNs() - g_abort_set_ns.load()) * 1e-9;
    p.Expect(g_abort_set_ns.load() != 0, "threw CollectiveAborted before the flag was set");
    p.Expect(after_flag >= 0 && after_flag < 1.0,
             "threw " + std::to_string(after_flag) + " s after the flag was set (wanted < 1 s)");
    p.Expect(Contains(e.what(), "aborted") && Contains(e.what(), "AllReduce"),
             std::string("unclear message: ") + e.what());
  } catch (const std::exception& e) {
    p.Expect(false, std::string("threw something else than CollectiveAborted: ") + e.what());
  }
  auto t1 = Clock::now();
  try {
    g.Barrier();
    p.Expect(false, "Barrier on an aborted group did not throw");
  } catch (const coll::CollectiveAborted&) {
    p.Expect(SecondsSince(t1) < 0.1, "Barrier on an aborted group was slow to throw");
  }
  return p.text;
}

/// A member with a 300 ms timeout whose operation (AllReduce, or Recv when `recv`) the other
/// member never joins (joins), or that other member (!joins), which stays away for 1 s.
std::string CgTimeoutMember(Ranks ranks, int tag, int algorithm, bool recv, bool joins) {
  Problems p;
  GroupOptions o;
  o.algorithm = static_cast<Algorithm>(algorithm);
  if (joins) {
    o.timeout = std::chrono::milliseconds(300);
  } else {
    // Past this point the group counts as aborted, so it keeps its communicator, which the
    // timed-out peer still has requests pending on.
    auto deadline = Clock::now() + std::chrono::milliseconds(800);
    o.aborted = [deadline] { return Clock::now() > deadline; };
  }
  Group g = Group::Create(Key(tag), ranks, o);
  if (!joins) {
    SleepMs(1000);
    return "";
  }
  std::vector<float> v(1 << 18, 1.0f);
  auto t0 = Clock::now();
  try {
    if (recv) {
      g.Recv(v, 1 - g.Rank());
    } else {
      g.AllReduce(v, ReduceOp::kSum);
    }
    p.Expect(false, "the operation finished although a member never joined");
  } catch (const coll::CollectiveTimeout& e) {
    const double s = SecondsSince(t0);
    p.Expect(s >= 0.29 && s < 3.0, "timed out after " + std::to_string(s) + " s (timeout 0.3 s)");
    for (const std::string& part : {std::string(recv ? "Recv" : "AllReduce"),
                                   std::string("1048576 bytes"), std::string("300 ms")}) {
      p.Expect(Contains(e.what(), part), "the message lacks '" + part + "': " + e.what());
    }
  } catch (const std::exception& e) {
    p.Expect(false, std::string("threw something else than CollectiveTimeout: ") + e.what());
  }
  try {
    g.Broadcast(v, 0);
    p.Expect(false, "Broadcast on a timed-out group did not throw");
  } catch (const coll::CollectiveAborted& e) {
    p.Expect(Contains(e.what(), "timed out"), std::string("the message does not say why: ") + e.what());
  }
  return p.text;
}

/// Two Duplicates of one group, each driven by its own thread at once: neither sees the
/// other's data.
std::string CgDuplicateStreams(Ranks ranks, int tag) {
  Group base = Group::Create(Key(tag), ranks);
  Group a = base.Duplicate();
  Group b = base.Duplicate();
  auto rounds = [&](Group& g, int salt) {
    std::string wrong;
    for (int k = 0; k < 30 && wrong.empty(); ++k) {
      std::vector<double> v(3000, salt * 1000.0 + g.Rank() + k);
      g.AllReduce(v, ReduceOp::kSum);
      double want = 0;
      for (int q = 0; q < g.Size(); ++q) want += salt * 1000.0 + q + k;
      if (v[2999] != want) wrong = "stream " + std::to_string(salt) + " round " + std::to_string(k);
    }
    return wrong;
  };
  std::string from_a;
  std::thread other([&] { from_a = rounds(a, 1); });
  std::string from_b = rounds(b, 2);
  other.join();
  return from_a + from_b;
}

/// ReduceScatter's input must split evenly among the members: an error before anything is
/// sent, and the group stays usable.
std::string CgIndivisible(Ranks ranks, int tag) {
  Group g = Group::Create(Key(tag), ranks);
  Problems p;
  try {
    g.ReduceScatter(std::vector<float>(static_cast<size_t>(g.Size()) + 1, 1.0f), ReduceOp::kSum);
    p.Expect(false, "no error for an input that does not split evenly");
  } catch (const prism::Error& e) {
    p.Expect(Contains(e.what(), "not a multiple"), std::string("unclear error: ") + e.what());
  }
  std::vector<float> share = g.ReduceScatter(std::vector<float>(static_cast<size_t>(g.Size()), 1.0f),
                                             ReduceOp::kSum);
  p.Expect(share.size() == 1 && share[0] == static_cast<float>(g.Size()), "ReduceScatter after the error is wrong");
  return p.text;
}

/// The count member i sends member j in `round` of the AllToAllV test: uneven, some zero
/// (every member sends member (i + 1) % n nothing in round 1), and one large pair.
int64_t AllToAllCount(int i, int j, int n, int round, int64_t large) {
  if (round == 1 && j == (i + 1) % n) return 0;
  if (round == 2 && i == 0 && j == n - 1) return large;
  return (i * 7 + j * 3 + round) % 5 * 13 + (i == j ? 1 : 0);
}

template <typename T>
T AllToAllValue(int from, int to, int64_t index) {
  return static_cast<T>(from * 1000003 + to * 10007 + index);
}

/// AllToAllV with `algorithm` over uneven and zero counts, int64 and bytes, small and
/// large (pieces of 4 KiB: many rounds and pieces), at displacements with gaps; the typed
/// form; then one member's counts disagreeing with its receiver's: an error on every
/// member, and the group still works.
std::string CgAllToAllV(Ranks ranks, int tag, int algorithm) {
  SmallPieces small;
  Problems p;
  GroupOptions o;
  o.algorithm = static_cast<Algorithm>(algorithm);
  o.timeout = std::chrono::seconds(60);
  Group g = Group::Create(Key(tag), ranks, o);
  const int m = g.Rank(), n = g.Size();
  const std::string label = std::string(coll::Name(o.algorithm)) + " AllToAllV";
  auto run = [&]<typename T>(T, int round, int64_t large) {
    const DataType type = coll::DataTypeOf<T>::value;
    std::vector<int64_t> sc(n), sd(n), rc(n), rd(n);
    int64_t s_at = 3, r_at = 5;  // gaps before and between the parts
    for (int j = 0; j < n; ++j) {
      sc[j] = AllToAllCount(m, j, n, round, large);
      sd[j] = s_at;
      s_at += sc[j] + 2;
      rc[j] = AllToAllCount(j, m, n, round, large);
      rd[j] = r_at;
      r_at += rc[j] + 1;
    }
    std::vector<T> send(static_cast<size_t>(s_at)), recv(static_cast<size_t>(r_at), T(0));
    for (int j = 0; j < n; ++j) {
      for (int64_t k = 0; k < sc[j]; ++k) send[static_cast<size_t>(sd[j] + k)] = AllToAllValue<T>(m, j, k);
    }
    g.AllToAllV(send.data(), sc, sd, recv.data(), rc, rd, type);
    for (int i = 0; i < n; ++i) {
      for (int64_t k = 0; k < rc[i]; ++k) {
        if (recv[static_cast<size_t>(rd[i] + k)] != AllToAllValue<T>(i, m, k)) {
          p.Expect(false, label + " " + coll::Name(type) + " round " + std::to_string(round) +
                              ": element " + std::to_string(k) + " from member " + std::to_string(i) +
                              " is wrong");
          break;
        }
      }
      if (i + 1 < n && recv[static_cast<size_t>(rd[i] + rc[i])] != T(0)) {
        p.Expect(false, label + ": wrote into the gap after member " + std::to_string(i) + "'s part");
      }
    }
  };
  for (int round = 0; round < 3; ++round) {
    run(int64_t{0}, round, 40000);    // 320 KB for one pair: point-to-point under kAuto
    run(uint8_t{0}, round, 300000);   // bytes
  }
  // The typed form: counts unknown to the receivers.
  std::vector<int64_t> counts(n);
  std::vector<double> mine;
  for (int j = 0; j < n; ++j) {
    counts[j] = (m + 2 * j) % 4;
    for (int64_t k = 0; k < counts[j]; ++k) mine.push_back(m * 100 + j * 10 + k);
  }
  std::vector<int64_t> got_counts;
  std::vector<double> got = g.AllToAllV(mine, counts, &got_counts);
  std::vector<double> want;
  for (int i = 0; i < n; ++i) {
    for (int64_t k = 0; k < (i + 2 * m) % 4; ++k) want.push_back(i * 100 + m * 10 + k);
  }
  p.Expect(got == want, label + ": the typed form returned the wrong elements");
  p.Expect(static_cast<int>(got_counts.size()) == n && (n < 1 || got_counts[0] == (2 * m) % 4),
           label + ": the typed form returned the wrong counts");
  if (n >= 2) {
    // Member 0 sends member 1 one element more than member 1 expects.
    std::vector<int64_t> sc(n, 2), rc(n, 2), d(n);
    for (int j = 0; j < n; ++j) d[j] = 3 * j;
    if (m == 0) sc[1] = 3;
    std::vector<int32_t> send(static_cast<size_t>(3 * n), 7), recv(static_cast<size_t>(3 * n));
    try {
      g.AllToAllV(send.data(), sc, d, recv.data(), rc, d, DataType::kInt32);
      p.Expect(false, label + ": no error for mismatched counts");
    } catch (const coll::CollectiveTimeout& e) {
      p.Expect(false, label + ": mismatched counts hung: " + e.what());
    } catch (const prism::Error& e) {
      p.Expect(Contains(e.what(), "member 0 sends 3 to member 1, which expects 2"),
               label + ": unclear mismatch: " + e.what());
    }
    std::vector<int64_t> ones(n, 1);
    std::vector<int64_t> ok = g.AllToAllV(std::vector<int64_t>(static_cast<size_t>(n), m), ones);
    std::vector<int64_t> ranks_seen(static_cast<size_t>(n));
    std::iota(ranks_seen.begin(), ranks_seen.end(), 0);
    p.Expect(ok == ranks_seen, label + ": the group does not work after the mismatch");
  }
  return p.text;
}

/// This member's host name, then "shm" or "no shm" for group `tag` over `ranks` (with
/// the group's own description), e.g. "prism-h1 shm (communicator ...)".
std::string CgHostAndShm(Ranks ranks, int tag) {
  Group g = Group::Create(Key(tag), ranks);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + (g.HasSharedMemory() ? " shm (" : " no shm (") + g.Describe() +
         ") all-reduce of 1 MiB: " + coll::Name(g.AllReduceAlgorithm(1 << 20));
}

PRISM_REMOTE(CgHostAndShm, CgCreated, CgIndivisible, CgEveryOp, CgSendRecv, CgMismatch, CgSetAbort, CgAbortMember, CgTimeoutMember,
             CgDuplicateStreams, CgAllToAllV);

// ---- Driver helpers -----------------------------------------------------------------------

Ranks AllRanks() {
  Ranks r(static_cast<size_t>(World()));
  std::iota(r.begin(), r.end(), 0);
  return r;
}


constexpr int kShm = static_cast<int>(Algorithm::kSharedMemory);
constexpr int kRing = static_cast<int>(Algorithm::kRing);
constexpr int kMpi = static_cast<int>(Algorithm::kMpi);
constexpr int kHierarchical = static_cast<int>(Algorithm::kHierarchical);

// ---- Tests --------------------------------------------------------------------------------

TEST(Collective, EveryOpAndDtypeWithEveryAlgorithmMatchesALocalReference) {
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CgEveryOp, 100, kShm), ranks, "shared memory");
  ExpectAllOk(OnMembers(ranks, CgEveryOp, 101, kRing), ranks, "ring");
  ExpectAllOk(OnMembers(ranks, CgEveryOp, 102, kMpi), ranks, "mpi");
  ExpectAllOk(OnMembers(ranks, CgEveryOp, 103, kHierarchical), ranks, "hierarchical");
}

// Shared memory exactly when every member is on one host: on one host every group has it;
// across the two-host test bed (ranks 0, 1 on one host, the rest on the other) a group
// within a host has it and a group across hosts does not.
TEST(Collective, SharedMemoryExactlyWhenEveryMemberIsOnOneHost) {
  if (World() < 2) GTEST_SKIP() << "needs 2 ranks";
  int tag = 120;
  std::vector<Ranks> groups = {AllRanks(), {0, 1}, {1, World() - 1}};
  for (const Ranks& ranks : groups) {
    auto refs = OnMembers(ranks, CgHostAndShm, tag++);
    std::set<std::string> hosts;
    std::vector<std::string> answers;
    for (auto& r : refs) {
      answers.push_back(*r.Get(120000));
      hosts.insert(answers.back().substr(0, answers.back().find(' ')));
    }
    const std::string want = hosts.size() == 1 ? " shm (" : " no shm (";
    // A large all-reduce: shared memory on one host; across hosts, hierarchical where a host
    // holds several members, else the ring.
    const std::string algorithm = hosts.size() == 1            ? "shared memory"
                                  : hosts.size() < ranks.size() ? "hierarchical"
                                                                : "ring";
    for (size_t i = 0; i < answers.size(); ++i) {
      EXPECT_NE(answers[i].find(want), std::string::npos)
          << "member on world rank " << ranks[i] << " of a group on " << hosts.size()
          << " host(s): " << answers[i];
      EXPECT_NE(answers[i].find("all-reduce of 1 MiB: " + algorithm), std::string::npos)
          << "wanted " << algorithm << ": " << answers[i];
    }
  }
}

TEST(Collective, SubGroupInReverseOrderWhileOtherRanksDoNothing) {
  if (World() < 3) GTEST_SKIP() << "needs 3 ranks";
  Ranks reversed = {World() - 1, 1};
  ExpectAllOk(OnMembers(reversed, CgEveryOp, 110, kShm), reversed, "shared memory, reversed");
  ExpectAllOk(OnMembers(reversed, CgEveryOp, 111, kRing), reversed, "ring, reversed");
}

TEST(Collective, SendRecvAroundTheRingAndAMismatchedRecvIsAnError) {
  auto ranks = AllRanks();
  if (ranks.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  ExpectAllOk(OnMembers(ranks, CgSendRecv, 200), ranks, "send/recv");
}

TEST(Collective, MismatchedCallsAreAnErrorOnEveryMemberWithEveryAlgorithm) {
  auto ranks = AllRanks();
  if (ranks.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  int tag = 300;
  for (int a : {kShm, kRing, kMpi}) {
    for (int mode : {0, 1}) {
      ExpectAllOk(OnMembers(ranks, CgMismatch, tag++, a, mode), ranks,
                  "mismatch " + std::to_string(mode) + " with " + coll::Name(static_cast<Algorithm>(a)));
    }
  }
}

TEST(Collective, AbortEndsAWaitForAMemberThatNeverJoins) {
  auto ranks = AllRanks();
  if (ranks.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  int tag = 400;
  for (int a : {kShm, kRing}) {
    std::vector<prism::ObjectRef<std::string>> refs;
    for (int w : ranks) refs.push_back(Member(w, CgAbortMember).Remote(ranks, tag, a, w != ranks.back()));
    // The abort is for the AllReduce: set it once every member has the group (creation
    // takes longer than the wait below across hosts), while the others wait in AllReduce.
    for (int w : ranks) {
      for (int i = 0; i < 6000 && !*Member(w, CgCreated).Remote(tag).Get(60000); ++i) SleepMs(10);
    }
    SleepMs(300);
    std::vector<prism::ObjectRef<std::string>> setters;
    for (int w : ranks) setters.push_back(Member(w, CgSetAbort).Remote(tag));
    ExpectAllOk(refs, ranks, std::string("abort with ") + coll::Name(static_cast<Algorithm>(a)));
    ExpectAllOk(setters, ranks, "setting the abort flag");
    ++tag;
  }
}

TEST(Collective, TimeoutEndsAWaitForAMemberThatNeverJoins) {
  if (World() < 3) GTEST_SKIP() << "needs 3 ranks";
  Ranks ranks = {1, World() - 1};  // rank 0 stays out
  int tag = 500;
  for (int a : {kShm, kRing}) {
    for (bool recv : {false, true}) {
      std::vector<prism::ObjectRef<std::string>> refs;
      for (int w : ranks) {
        refs.push_back(Member(w, CgTimeoutMember).Remote(ranks, tag, a, recv, w == ranks[0]));
      }
      ExpectAllOk(refs, ranks, std::string("timeout with ") + coll::Name(static_cast<Algorithm>(a)) +
                                   (recv ? ", Recv" : ", AllReduce"));
      ++tag;
    }
  }
}

TEST(Collective, AllToAllVWithUnevenAndZeroCountsMatchesALocalReference) {
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CgAllToAllV, 800, static_cast<int>(Algorithm::kAuto)), ranks, "auto");
  ExpectAllOk(OnMembers(ranks, CgAllToAllV, 801, kMpi), ranks, "mpi");
  ExpectAllOk(OnMembers(ranks, CgAllToAllV, 802, kRing), ranks, "point-to-point");
}

TEST(Collective, DuplicatesRunOnTwoThreadsAtOnceWithoutCrossing) {
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CgDuplicateStreams, 600), ranks, "two streams");
}

TEST(Collective, BadArgumentsAreClearErrorsAndLeaveTheGroupUsable) {
  ExpectErrorMentioning([] { Group::Create(Key(700), {}); }, {"no ranks"});
  ExpectErrorMentioning([] { Group::FromCommunicator(prism::platform::Communicator()); },
               {"communicator is empty"});
  Group empty;
  ExpectErrorMentioning([&] { empty.Barrier(); }, {"empty"});

  Group g = Group::Create(Key(701), {0});  // the driver alone
  EXPECT_EQ(g.Rank(), 0);
  EXPECT_EQ(g.Size(), 1);
  std::vector<float> v = {1, 2, 3};
  g.AllReduce(v, ReduceOp::kAverage);  // the identity
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(g.AllGather(v), v);
  std::vector<int64_t> ints = {1, 2, 3};
  ExpectErrorMentioning([&] { g.AllReduce(ints, ReduceOp::kAverage); }, {"kAverage", "int64"});
  ExpectErrorMentioning([&] { g.Broadcast(v, 1); }, {"root 1", "0..0"});
  ExpectErrorMentioning([&] { g.Send(v, 0); }, {"peer 0", "itself"});
  ExpectErrorMentioning([&] { g.Recv(v, -1); }, {"peer -1", "0..0"});
  ExpectErrorMentioning([&] { g.AllReduce(v.data(), -1, ReduceOp::kSum); }, {"count -1", "negative"});
  ExpectErrorMentioning([&] { g.AllReduce(static_cast<float*>(nullptr), 4, ReduceOp::kSum); }, {"null"});
  ExpectErrorMentioning([&] { g.AllReduce(v.data(), 3, static_cast<DataType>(9), ReduceOp::kSum); },
               {"not a DataType"});
  std::vector<int64_t> one = {1}, zero = {0}, two = {1, 1};
  ExpectErrorMentioning([&] { g.AllToAllV(v.data(), two, two, v.data(), one, zero, DataType::kFloat32); },
                        {"send_counts has 2 entries", "one per member (1)"});
  ExpectErrorMentioning([&] { g.AllToAllV(v.data(), one, {-1}, v.data() + 1, one, zero, DataType::kFloat32); },
                        {"send_displs[0] is -1"});
  ExpectErrorMentioning([&] { g.AllToAllV(nullptr, one, zero, v.data(), one, zero, DataType::kFloat32); },
                        {"null"});
  ExpectErrorMentioning([&] { g.AllToAllV(v, {2}); }, {"add up to 2", "has 3"});
  std::vector<float> out(3);
  g.AllToAllV(v.data(), {3}, zero, out.data(), {3}, zero, DataType::kFloat32);  // a copy
  EXPECT_EQ(out, v);
  g.Barrier();  // still usable
  if (World() >= 2) {
    Ranks ranks = AllRanks();
    ExpectAllOk(OnMembers(ranks, CgIndivisible, 702), ranks, "indivisible ReduceScatter");
  }
}

}  // namespace
