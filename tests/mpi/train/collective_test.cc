// prism::train collectives, MPI backend, on 3 and 4 ranks. The driver starts one task per
// group member, pinned to the member's rank; the task builds the group (every member with
// the same ranks and group id, a communicator from the platform's communicator service) and
// checks what it sees, returning "" or a description of what was wrong. Every test uses a
// group id of its own: a group that was abandoned after an abort or a timeout keeps its
// communicator (and a pending request) for the rest of the process.
#include <gtest/gtest.h>
#include <prism/platform/communicator.h>
#include <prism/train/collective.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <numeric>
#include <sstream>
#include <thread>

#include "../test_util.h"

namespace prism::train::internal {
// mpi_collective.cc: the largest piece one MPI call moves (<= 0 restores the default).
void SetMpiChunkBytesForTesting(int64_t bytes);
}  // namespace prism::train::internal

using namespace prism_test;
using prism::train::Collective;
using prism::train::CollectiveAborted;
using prism::train::CollectiveOptions;
using prism::train::CollectiveTimeout;
using prism::platform::Communicator;
using prism::train::MakeMpiCollective;
using prism::train::ReduceOp;

namespace {

using Clock = std::chrono::steady_clock;

/// Collects what a task found wrong.
struct Problems {
  std::string text;
  void Expect(bool ok, const std::string& what) {
    if (!ok) text += (text.empty() ? "" : "; ") + what;
  }
};

int IndexOf(const Ranks& ranks, int w) {
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), w) - ranks.begin());
}

std::string RankList(const Ranks& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// Element i on world rank w: differs between ranks and elements, and the rank holding the
/// maximum (or minimum) changes from element to element. In -5..5.
int64_t Val(int w, int64_t i) { return (w * 7 + i * 3) % 11 - 5; }

/// A tensor of `shape` and dtype whose element i is Val(w, i) + shift.
torch::Tensor Filled(int w, std::vector<int64_t> shape, torch::ScalarType dtype, int64_t shift) {
  torch::Tensor t = torch::empty(shape, torch::kInt64);
  auto* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = Val(w, i) + shift;
  return t.to(dtype);
}

double Expected(const Ranks& ranks, int64_t i, ReduceOp op, int64_t shift) {
  double sum = 0, mx = -1e300, mn = 1e300;
  for (int w : ranks) {
    double v = static_cast<double>(Val(w, i) + shift);
    sum += v;
    mx = std::max(mx, v);
    mn = std::min(mn, v);
  }
  switch (op) {
    case ReduceOp::kSum:
      return sum;
    case ReduceOp::kAverage:
      return sum / static_cast<double>(ranks.size());
    case ReduceOp::kMax:
      return mx;
    case ReduceOp::kMin:
      return mn;
  }
  return 0;
}

const char* OpName(ReduceOp op) {
  return op == ReduceOp::kSum       ? "sum"
         : op == ReduceOp::kAverage ? "avg"
         : op == ReduceOp::kMax     ? "max"
                                    : "min";
}

std::string Text(const std::exception& e) { return e.what(); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// ---- Tasks (run on the members' ranks) ---------------------------------------------------

/// Group `tag` of the test over `ranks`: a communicator from the service, keyed by the tag.
std::unique_ptr<Collective> Group(const Ranks& ranks, int tag, CollectiveOptions options = {}) {
  return MakeMpiCollective(Communicator::Create("collective_test/" + std::to_string(tag), ranks),
                           std::move(options));
}

/// AllReduce of every op on float, double, int64, int32 and uint8 tensors.
std::string CtReduce(Ranks ranks, int tag) {
  Problems p;
  const int me = MyRank();
  auto c = Group(ranks, tag);
  p.Expect(c->Rank() == IndexOf(ranks, me), "Rank() is " + std::to_string(c->Rank()) +
                                                ", expected " + std::to_string(IndexOf(ranks, me)));
  p.Expect(c->Size() == static_cast<int>(ranks.size()), "Size() is " + std::to_string(c->Size()));
  p.Expect(c->Backend() == "mpi", "Backend() is " + c->Backend());
  for (auto dtype :
       {torch::kFloat32, torch::kFloat64, torch::kInt64, torch::kInt32, torch::kUInt8}) {
    const int64_t shift = dtype == torch::kUInt8 ? 5 : 0;  // uint8 stays non-negative
    for (auto op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax, ReduceOp::kMin}) {
      const std::string label = std::string(c10::toString(dtype)) + " " + OpName(op);
      torch::Tensor t = Filled(me, {5, 7}, dtype, shift);
      const bool floating = t.is_floating_point();
      if (op == ReduceOp::kAverage && !floating) {
        try {
          c->AllReduce(t, op);
          p.Expect(false, label + ": no error for kAverage on integers");
        } catch (const prism::Error& e) {
          p.Expect(Contains(Text(e), "kAverage") && Contains(Text(e), "floating"),
                   label + ": unclear error: " + Text(e));
        }
        continue;
      }
      c->AllReduce(t, op);
      p.Expect(t.scalar_type() == dtype && t.sizes() == torch::IntArrayRef({5, 7}),
               label + ": dtype or shape changed");
      torch::Tensor got = t.to(torch::kFloat64).contiguous();
      int bad = 0;
      for (int64_t i = 0; i < got.numel(); ++i) {
        const double want = Expected(ranks, i, op, shift);
        const double tol =
            floating && op == ReduceOp::kAverage ? 1e-6 * std::max(1.0, std::abs(want)) : 0;
        if (std::abs(got.data_ptr<double>()[i] - want) > tol && bad++ < 2) {
          p.Expect(false, label + ": element " + std::to_string(i) + " is " +
                              std::to_string(got.data_ptr<double>()[i]) + ", expected " +
                              std::to_string(want));
        }
      }
    }
  }
  return p.text;
}

/// Broadcast from group rank `root` of float, int64 and bool tensors; a bad root throws.
std::string CtBroadcast(Ranks ranks, int tag, int root) {
  Problems p;
  const int me = MyRank();
  const int root_world = ranks[static_cast<size_t>(root)];
  auto c = Group(ranks, tag);
  for (auto dtype : {torch::kFloat32, torch::kInt64, torch::kBool}) {
    const int64_t shift = 100 * me;
    torch::Tensor t = Filled(me, {4, 9}, torch::kInt64, shift);
    if (dtype == torch::kBool) t = t.remainder(2).to(torch::kBool);
    t = t.to(dtype);
    c->Broadcast(t, root);
    torch::Tensor want = Filled(root_world, {4, 9}, torch::kInt64, 100 * root_world);
    if (dtype == torch::kBool) want = want.remainder(2).to(torch::kBool);
    p.Expect(torch::equal(t, want.to(dtype)),
             std::string(c10::toString(dtype)) + ": not the root's values after Broadcast");
  }
  torch::Tensor t = torch::zeros({3});
  try {
    c->Broadcast(t, c->Size());
    p.Expect(false, "no error for root " + std::to_string(c->Size()));
  } catch (const prism::Error& e) {
    p.Expect(Contains(Text(e), "root"), "unclear error for a bad root: " + Text(e));
  }
  return p.text;
}

/// AllGather: every member's tensor, in group rank order; a non-contiguous input is fine.
std::string CtAllGather(Ranks ranks, int tag) {
  Problems p;
  const int me = MyRank();
  auto c = Group(ranks, tag);
  torch::Tensor mine =
      (torch::arange(6, torch::kFloat32) + 100.0 * me).view({3, 2}).t();  // 2x3 view
  auto all = c->AllGather(mine);
  p.Expect(all.size() == ranks.size(),
           "AllGather returned " + std::to_string(all.size()) + " tensors");
  for (size_t j = 0; j < all.size() && j < ranks.size(); ++j) {
    torch::Tensor want = (torch::arange(6, torch::kFloat32) + 100.0 * ranks[j]).view({3, 2}).t();
    p.Expect(
        all[j].sizes() == torch::IntArrayRef({2, 3}) && all[j].scalar_type() == torch::kFloat32,
        "float tensor " + std::to_string(j) + " has the wrong shape or dtype");
    p.Expect(torch::equal(all[j], want), "float tensor " + std::to_string(j) +
                                             " is not world rank " + std::to_string(ranks[j]) +
                                             "'s");
  }
  torch::Tensor ints = torch::full({4}, static_cast<int64_t>(me), torch::kInt64) - torch::arange(4);
  auto all_ints = c->AllGather(ints);
  for (size_t j = 0; j < all_ints.size() && j < ranks.size(); ++j) {
    p.Expect(
        torch::equal(all_ints[j], torch::full({4}, static_cast<int64_t>(ranks[j]), torch::kInt64) -
                                      torch::arange(4)),
        "int64 tensor " + std::to_string(j) + " is not world rank " + std::to_string(ranks[j]) +
            "'s");
  }
  return p.text;
}

/// Member 0 enters the Barrier 400 ms late: the others must wait for it.
std::string CtBarrier(Ranks ranks, int tag) {
  Problems p;
  auto c = Group(ranks, tag);
  if (c->Rank() == 0) SleepMs(400);
  auto t0 = Clock::now();
  c->Barrier();
  const double waited = SecondsSince(t0);
  if (c->Rank() != 0) {
    p.Expect(waited > 0.25, "Barrier returned after " + std::to_string(waited) +
                                " s although member 0 came 0.4 s late");
  }
  for (int i = 0; i < 5; ++i) c->Barrier();
  return p.text;
}

/// Tensors split into many MPI calls (the chunk size lowered to 4 KiB in this process).
std::string CtChunked(Ranks ranks, int tag) {
  struct Restore {
    ~Restore() { prism::train::internal::SetMpiChunkBytesForTesting(0); }
  } restore;
  prism::train::internal::SetMpiChunkBytesForTesting(4096);
  Problems p;
  const int me = MyRank();
  auto c = Group(ranks, tag);

  const int64_t n = 10001;  // 80008 bytes of doubles: 20 pieces, the last one short
  torch::Tensor d = Filled(me, {n}, torch::kFloat64, 0) * 0.5;
  c->AllReduce(d, ReduceOp::kSum);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (d.data_ptr<double>()[i] != 0.5 * Expected(ranks, i, ReduceOp::kSum, 0) && bad++ < 2) {
      p.Expect(false, "chunked AllReduce: element " + std::to_string(i) + " is wrong");
    }
  }
  torch::Tensor u = Filled(me, {5000}, torch::kUInt8, 5);  // 2 pieces of bytes
  c->AllReduce(u, ReduceOp::kMax);
  p.Expect(torch::equal(u.to(torch::kInt64),
                        [&] {
                          torch::Tensor w = torch::empty({5000}, torch::kInt64);
                          for (int64_t i = 0; i < 5000; ++i) {
                            w.data_ptr<int64_t>()[i] =
                                static_cast<int64_t>(Expected(ranks, i, ReduceOp::kMax, 5));
                          }
                          return w;
                        }()),
           "chunked uint8 AllReduce(max) is wrong");

  const int last = c->Size() - 1;
  torch::Tensor f = Filled(me, {n}, torch::kFloat32, me);
  c->Broadcast(f, last);
  p.Expect(torch::equal(f, Filled(ranks.back(), {n}, torch::kFloat32, ranks.back())),
           "chunked Broadcast: not the root's values");

  torch::Tensor g = torch::arange(3001, torch::kInt64) + 100000 * me;  // 24008 bytes: 6 pieces
  auto all = c->AllGather(g);
  for (size_t j = 0; j < all.size(); ++j) {
    p.Expect(torch::equal(all[j], torch::arange(3001, torch::kInt64) + 100000 * ranks[j]),
             "chunked AllGather: tensor " + std::to_string(j) + " is wrong");
  }
  return p.text;
}

/// 16 MiB: large messages (other protocols and algorithms in MPI than the small tests).
std::string CtLarge(Ranks ranks, int tag) {
  Problems p;
  const int me = MyRank();
  auto c = Group(ranks, tag);
  const int64_t n = 4 << 20;
  torch::Tensor t = torch::arange(n, torch::kInt64).remainder(1000).to(torch::kFloat32) + me;
  c->AllReduce(t, ReduceOp::kSum);
  int64_t rank_sum = std::accumulate(ranks.begin(), ranks.end(), int64_t{0});
  torch::Tensor want = torch::arange(n, torch::kInt64).remainder(1000).to(torch::kFloat32) *
                           static_cast<float>(ranks.size()) +
                       static_cast<float>(rank_sum);
  p.Expect(torch::equal(t, want), "16 MiB AllReduce(sum) is wrong");
  torch::Tensor b = torch::full({n}, static_cast<float>(me));
  c->Broadcast(b, 0);
  p.Expect(torch::equal(b, torch::full({n}, static_cast<float>(ranks[0]))),
           "16 MiB Broadcast is wrong");
  return p.text;
}

/// `rounds` AllReduces and AllGathers on `c` whose values depend on `salt`, so that two
/// groups (or two streams of one group) running at once would see each other's data if
/// they crossed. Returns "" or what was wrong.
std::string SaltedRounds(Collective& c, const Ranks& ranks, int salt, int rounds,
                         const std::string& label) {
  Problems p;
  const int me = MyRank();
  p.Expect(c.Rank() == IndexOf(ranks, me), label + ": Rank() is " + std::to_string(c.Rank()));
  for (int k = 0; k < rounds; ++k) {
    torch::Tensor t =
        torch::full({1000}, static_cast<double>(salt * 1000 + me + k), torch::kFloat64);
    c.AllReduce(t, ReduceOp::kSum);
    double want = 0;
    for (int w : ranks) want += salt * 1000 + w + k;
    p.Expect(t.eq(want).all().item<bool>(),
             label + " round " + std::to_string(k) + ": sum is " +
                 std::to_string(t[0].item<double>()) + ", expected " + std::to_string(want));
    auto all =
        c.AllGather(torch::full({2}, static_cast<int64_t>(salt * 1000 + me), torch::kInt64));
    for (size_t j = 0; j < all.size(); ++j) {
      p.Expect(all[j][0].item<int64_t>() == salt * 1000 + ranks[j],
               label + ": AllGather entry " + std::to_string(j) + " is wrong");
    }
    if (!p.text.empty()) break;
  }
  return p.text;
}

/// SaltedRounds on group `tag`.
std::string CtSalted(Ranks ranks, int tag, int salt, int rounds) {
  auto c = Group(ranks, tag);
  return SaltedRounds(*c, ranks, salt, rounds, "group " + std::to_string(tag));
}

/// Two Duplicates of group `tag`'s communicator, each driven by its own thread at the same
/// time (the training loop and the gradient reducer do this): neither sees the other's data.
std::string CtDuplicateStreams(Ranks ranks, int tag, int rounds) {
  auto base = Communicator::Create("collective_test/" + std::to_string(tag), ranks);
  Problems p;
  p.Expect(base.Size() == static_cast<int>(ranks.size()) && base.Rank() == IndexOf(ranks, MyRank()),
           base.Describe() + ": wrong size or rank");
  auto a = MakeMpiCollective(base.Duplicate());
  auto b = MakeMpiCollective(base.Duplicate());
  std::string from_a;
  std::thread other([&] { from_a = SaltedRounds(*a, ranks, 1, rounds, "stream a"); });
  std::string from_b = SaltedRounds(*b, ranks, 2, rounds, "stream b");
  other.join();
  return p.text + from_a + from_b;
}

/// AllGather with the last member passing a different shape (mode 0) or dtype (mode 1):
/// every member gets a clear error, and the group still works afterwards.
std::string CtGatherMismatch(Ranks ranks, int tag, int mode) {
  Problems p;
  CollectiveOptions o;
  o.timeout = std::chrono::seconds(20);  // a hang becomes an error instead of a stuck test
  auto c = Group(ranks, tag, o);
  const bool odd_one = c->Rank() == c->Size() - 1;
  torch::Tensor t = torch::ones({2});
  if (odd_one) t = mode == 0 ? torch::ones({3}) : torch::ones({2}, torch::kFloat64);
  try {
    c->AllGather(t);
    p.Expect(false, "AllGather of mismatched tensors did not throw");
  } catch (const CollectiveTimeout& e) {
    p.Expect(false, "AllGather of mismatched tensors hung: " + Text(e));
  } catch (const prism::Error& e) {
    const std::string odd = "world rank " + std::to_string(ranks.back()) +
                            "): " + (mode == 0 ? "Float [3]" : "Double [2]");
    p.Expect(Contains(Text(e), "same shape and dtype") && Contains(Text(e), odd),
             "unclear error (wanted '" + odd + "'): " + Text(e));
  }
  torch::Tensor one = torch::ones({4});
  c->AllReduce(one, ReduceOp::kSum);
  p.Expect(one.eq(static_cast<float>(ranks.size())).all().item<bool>(),
           "the group does not work after the mismatch");
  return p.text;
}

// Abort: members poll a flag that a second task on their rank sets.
std::atomic<int> g_abort_tag{-1};
std::atomic<int64_t> g_abort_set_ns{0};

std::atomic<int> g_created_tag{-1};  // the tag of the last group CtAbortMember created here
bool CtCreated(int tag) { return g_created_tag.load() == tag; }

std::string CtSetAbort(int tag) {
  g_abort_set_ns = NowNs();
  g_abort_tag = tag;
  return "";
}

/// A member of group `tag` whose AllReduce a missing member never joins (joins) or that
/// missing member itself (!joins), which waits for the abort and leaves.
std::string CtAbortMember(Ranks ranks, int tag, bool joins) {
  Problems p;
  CollectiveOptions o;
  o.aborted = [tag] { return g_abort_tag.load() == tag; };
  o.timeout = std::chrono::seconds(20);
  auto c = Group(ranks, tag, o);
  g_created_tag = tag;
  if (!joins) {
    auto t0 = Clock::now();
    while (!o.aborted() && SecondsSince(t0) < 30) SleepMs(5);
    return "";  // the destructor sees the abort and keeps the communicator (see the backend)
  }
  torch::Tensor t = torch::ones({1000});
  try {
    c->AllReduce(t, ReduceOp::kSum);
    p.Expect(false, "AllReduce finished although a member never joined");
  } catch (const CollectiveAborted& e) {
    const double after_flag = static_cast<double>(NowNs() - g_abort_set_ns.load()) * 1e-9;
    p.Expect(g_abort_set_ns.load() != 0, "threw CollectiveAborted before the flag was set");
    p.Expect(after_flag >= 0 && after_flag < 1.0,
             "threw " + std::to_string(after_flag) + " s after the flag was set (wanted < 1 s)");
    p.Expect(Contains(Text(e), "aborted") && Contains(Text(e), "AllReduce"),
             "unclear message: " + Text(e));
  } catch (const std::exception& e) {
    p.Expect(false, std::string("threw something else than CollectiveAborted: ") + e.what());
  }
  // The communicator has a pending request now: every later call must refuse at once.
  auto t1 = Clock::now();
  try {
    c->Barrier();
    p.Expect(false, "Barrier on an aborted group did not throw");
  } catch (const CollectiveAborted& e) {
    p.Expect(SecondsSince(t1) < 0.1, "Barrier on an aborted group took " +
                                         std::to_string(SecondsSince(t1)) + " s to throw");
  }
  return p.text;
}

/// A member of group `tag` with a 300 ms timeout whose AllReduce the other member never
/// joins (joins), or that other member (!joins), which stays away for 1 s.
std::string CtTimeoutMember(Ranks ranks, int tag, bool joins) {
  Problems p;
  CollectiveOptions o;
  if (joins) {
    o.timeout = std::chrono::milliseconds(300);
  } else {
    // Past this point the group counts as aborted: the destructor then keeps the
    // communicator, which the timed-out peer still has an operation pending on.
    auto deadline = Clock::now() + std::chrono::milliseconds(800);
    o.aborted = [deadline] { return Clock::now() > deadline; };
  }
  auto c = Group(ranks, tag, o);
  if (!joins) {
    SleepMs(1000);
    return "";
  }
  torch::Tensor t = torch::ones({1000});
  auto t0 = Clock::now();
  try {
    c->AllReduce(t, ReduceOp::kSum);
    p.Expect(false, "AllReduce finished although a member never joined");
  } catch (const CollectiveTimeout& e) {
    const double s = SecondsSince(t0);
    p.Expect(s >= 0.29 && s < 3.0, "timed out after " + std::to_string(s) + " s (timeout 0.3 s)");
    for (const std::string& part : {std::string("AllReduce"), std::string("4000 bytes"),
                                    RankList(ranks), std::string("300 ms")}) {
      p.Expect(Contains(Text(e), part), "the message lacks '" + part + "': " + Text(e));
    }
  } catch (const std::exception& e) {
    p.Expect(false, std::string("threw something else than CollectiveTimeout: ") + e.what());
  }
  try {
    c->Broadcast(t, 0);
    p.Expect(false, "Broadcast on a timed-out group did not throw");
  } catch (const CollectiveAborted& e) {
    p.Expect(Contains(Text(e), "timed out"), "the message does not say why: " + Text(e));
  }
  return p.text;
}

PRISM_REMOTE(CtReduce, CtBroadcast, CtAllGather, CtBarrier, CtChunked, CtLarge, CtSalted,
             CtDuplicateStreams, CtGatherMismatch, CtSetAbort, CtAbortMember, CtTimeoutMember, CtCreated);

// ---- Driver helpers -----------------------------------------------------------------------

Ranks AllRanks() {
  Ranks r(static_cast<size_t>(World()));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

/// Task(f) on world rank w, taking no CPU (members block in MPI, not compute).

// ---- Tests --------------------------------------------------------------------------------

TEST(MpiCollective, AllReduceEveryOpAndDtypeOnAllRanks) {
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CtReduce, 100), ranks, "AllReduce");
}

TEST(MpiCollective, BroadcastFromGroupRankOne) {
  if (World() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CtBroadcast, 101, 1), ranks, "Broadcast");
}

TEST(MpiCollective, AllGatherReturnsEveryMembersTensorInOrder) {
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CtAllGather, 102), ranks, "AllGather");
}

TEST(MpiCollective, BarrierWaitsForTheLastMember) {
  if (World() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CtBarrier, 103), ranks, "Barrier");
}

TEST(MpiCollective, LargeTensorsSplitIntoPiecesStayExact) {
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CtChunked, 104), ranks, "chunked");
  ExpectAllOk(OnMembers(ranks, CtLarge, 105), ranks, "16 MiB");
}

TEST(MpiCollective, SubGroupsInAnyOrderWhileOtherRanksDoNothing) {
  if (World() < 3) GTEST_SKIP() << "needs 3 ranks";
  // Group rank order is the order given, not world rank order.
  Ranks reversed = {World() - 1, 1};
  ExpectAllOk(OnMembers(reversed, CtReduce, 200), reversed, "sub-group " + RankList(reversed));
  ExpectAllOk(OnMembers(reversed, CtAllGather, 201), reversed, "sub-group " + RankList(reversed));
  Ranks with_head = {0, 2};
  ExpectAllOk(OnMembers(with_head, CtReduce, 202), with_head, "sub-group " + RankList(with_head));
}

TEST(MpiCollective, TwoGroupsOnTheSameRanksAtOnceDoNotCross) {
  if (World() < 2) GTEST_SKIP() << "needs 2 ranks";
  Ranks forward = AllRanks();
  Ranks backward(forward.rbegin(), forward.rend());
  auto a = OnMembers(forward, CtSalted, 300, 1, 20);
  auto b = OnMembers(backward, CtSalted, 301, 2, 20);
  ExpectAllOk(a, forward, "group 300");
  ExpectAllOk(b, backward, "group 301");
  // And disjoint groups at once, when there are ranks enough.
  if (World() >= 4) {
    Ranks low = {0, 1}, high = {3, 2};
    auto c = OnMembers(low, CtSalted, 302, 3, 20);
    auto d = OnMembers(high, CtSalted, 303, 4, 20);
    ExpectAllOk(c, low, "group 302");
    ExpectAllOk(d, high, "group 303");
  }
}

TEST(MpiCollective, DuplicatesOfOneGroupRunOnTwoThreadsAtOnceWithoutCrossing) {
  if (World() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CtDuplicateStreams, 310, 20), ranks, "two streams of group 310");
  // The same key again once the first group is made: a new group, not a clash.
  ExpectAllOk(OnMembers(ranks, CtDuplicateStreams, 310, 2), ranks, "group 310 made again");
}

TEST(MpiCollective, AllGatherShapeOrDtypeMismatchIsAnErrorOnEveryMember) {
  if (World() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto ranks = AllRanks();
  ExpectAllOk(OnMembers(ranks, CtGatherMismatch, 400, 0), ranks, "shape mismatch");
  ExpectAllOk(OnMembers(ranks, CtGatherMismatch, 401, 1), ranks, "dtype mismatch");
}

TEST(MpiCollective, AbortEndsAWaitForAMemberThatNeverJoins) {
  if (World() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int tag = 500;
  auto ranks = AllRanks();
  std::vector<prism::ObjectRef<std::string>> refs;
  for (int w : ranks)
    refs.push_back(Member(w, CtAbortMember).Remote(ranks, tag, w != ranks.back()));
  // The abort is for the AllReduce: set it once every member has the group (creation takes
  // longer than the wait below across hosts), while the others wait in AllReduce.
  for (int w : ranks) {
    for (int i = 0; i < 6000 && !*Member(w, CtCreated).Remote(tag).Get(60000); ++i) SleepMs(10);
  }
  SleepMs(200);
  std::vector<prism::ObjectRef<std::string>> setters;
  for (int w : ranks) setters.push_back(Member(w, CtSetAbort).Remote(tag));
  ExpectAllOk(refs, ranks, "abort");
  ExpectAllOk(setters, ranks, "setting the abort flag");
}

TEST(MpiCollective, TimeoutEndsAWaitForAMemberThatNeverJoins) {
  if (World() < 3) GTEST_SKIP() << "needs 3 ranks";
  Ranks ranks = {1, World() - 1};  // rank 0 stays out
  std::vector<prism::ObjectRef<std::string>> refs;
  for (int w : ranks) refs.push_back(Member(w, CtTimeoutMember).Remote(ranks, 600, w == ranks[0]));
  ExpectAllOk(refs, ranks, "timeout");
}

TEST(MpiCollective, BadGroupsAndArgumentsAreClearErrors) {
  const int n = World();
  ExpectErrorMentioning([] { Group({}, 700); }, {"no ranks"});
  ExpectErrorMentioning([] { Group({0, 0}, 700); }, {"[0]", "more than once"});
  ExpectErrorMentioning(
      [n] {
        Group({0, n}, 700);
      },
      {"[" + std::to_string(n) + "]", "0.." + std::to_string(n - 1)});
  ExpectErrorMentioning([] { Group({0, -1}, 700); }, {"[-1]"});
  ExpectErrorMentioning([] { Communicator::Create("", {0}); }, {"key", "empty"});
  ExpectErrorMentioning([] { MakeMpiCollective(Communicator()); }, {"communicator is empty"});
  if (n >= 2)
    ExpectErrorMentioning([n] { Group({n - 1}, 700); }, {"this rank (0)", "not in the group"});

  // A group of the driver alone: the operations work and check their arguments.
  auto c = Group({0}, 701);
  EXPECT_EQ(c->Rank(), 0);
  EXPECT_EQ(c->Size(), 1);
  torch::Tensor t = torch::arange(6, torch::kFloat32);
  c->AllReduce(t, ReduceOp::kAverage);
  EXPECT_TRUE(torch::equal(t, torch::arange(6, torch::kFloat32)));
  EXPECT_EQ(c->AllGather(t).size(), 1u);
  c->Barrier();
  torch::Tensor shorts = torch::ones({4}, torch::kInt16);
  ExpectErrorMentioning([&] { c->AllReduce(shorts, ReduceOp::kSum); },
               {"Short", "not supported", "float32"});
  torch::Tensor view = torch::ones({4, 4}).t();
  ExpectErrorMentioning([&] { c->AllReduce(view, ReduceOp::kSum); }, {"not contiguous", ".contiguous()"});
  ExpectErrorMentioning([&] { c->Broadcast(t, 1); }, {"root 1", "0..0"});
  torch::Tensor undefined;
  ExpectErrorMentioning([&] { c->AllReduce(undefined, ReduceOp::kSum); }, {"undefined"});
  if (!prism::train::HaveNccl()) {
    ExpectErrorMentioning([&] { prism::train::MakeNcclCollective(*c, 0); },
                 {"without NCCL", "PRISM_WITH_NCCL=ON"});
  }
  // An argument error leaves the group usable.
  c->AllReduce(t, ReduceOp::kSum);
  EXPECT_TRUE(torch::equal(t, torch::arange(6, torch::kFloat32)));
}

}  // namespace
