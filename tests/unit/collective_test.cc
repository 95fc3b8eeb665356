// prism::collective's pieces without MPI: the reduction kernels, the cutting of buffers into
// parts, blocks and chunks, and the shared-memory engine with 1 to 4 members as threads of
// this process (each mapping the segment on its own, as processes do), compared against
// results computed here element by element.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../common/collective_reference.h"
#include "collective/kernels.h"
#include "collective/shared_memory.h"

namespace coll = prism::collective;
using coll::DataType;
using coll::ReduceOp;
using coll::internal::Range;
using coll::internal::SegmentShape;
using coll::internal::SharedSegment;
using prism_test::Expected;
using prism_test::Input;
using prism_test::Val;

namespace {

// ---- Cutting ---------------------------------------------------------------------------------

TEST(CollectiveParts, PartsCoverTheRangeInOrderAndDifferByAtMostOne) {
  for (int64_t count : {0, 1, 2, 3, 5, 7, 64, 1000, 1001}) {
    for (int n : {1, 2, 3, 4, 7}) {
      int64_t at = 0, lo = count, hi = 0;
      for (int i = 0; i < n; ++i) {
        Range r = coll::internal::PartOf(count, n, i);
        EXPECT_EQ(r.begin, at) << count << " elements, " << n << " parts, part " << i;
        at = r.end;
        lo = std::min(lo, r.size());
        hi = std::max(hi, r.size());
      }
      EXPECT_EQ(at, count);
      EXPECT_LE(hi - lo, 1) << count << " elements in " << n << " parts";
    }
  }
  // Fewer elements than parts: some parts are empty, none negative.
  EXPECT_EQ(coll::internal::PartOf(2, 3, 0).size() + coll::internal::PartOf(2, 3, 1).size() +
                coll::internal::PartOf(2, 3, 2).size(),
            2);
}

TEST(CollectiveParts, PiecesOfAtMostTheMaximumWithAShortLastOne) {
  EXPECT_EQ(coll::internal::NumPieces(0, 4), 0);
  EXPECT_EQ(coll::internal::NumPieces(1, 4), 1);
  EXPECT_EQ(coll::internal::NumPieces(8, 4), 2);
  EXPECT_EQ(coll::internal::NumPieces(9, 4), 3);
  EXPECT_EQ(coll::internal::PieceOf(9, 4, 2), (Range{8, 9}));
  EXPECT_EQ(coll::internal::PieceOf(9, 4, 1), (Range{4, 8}));
}

TEST(CollectiveShape, BlocksArePagesAndHoldEveryMembersShare) {
  SegmentShape s;
  s.members = 3;
  s.block_bytes = 100;
  s.slots = 1;
  SegmentShape n = s.Normalized();
  EXPECT_EQ(n.block_bytes % 4096, 0);
  EXPECT_GE(n.slots, 2);
  s.members = 1000;
  EXPECT_GE(s.Normalized().block_bytes, 64 * 1000);
}

// ---- Kernels ---------------------------------------------------------------------------------

template <typename T>
std::vector<T> Combined(ReduceOp op, const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> out(a.size());
  coll::internal::Combine(coll::DataTypeOf<T>::value, op, out.data(), a.data(), b.data(),
                          static_cast<int64_t>(a.size()));
  return out;
}

TEST(CollectiveKernels, EveryOpOnEveryType) {
  EXPECT_EQ(Combined<float>(ReduceOp::kSum, {1, 2.5f}, {3, -1}), (std::vector<float>{4, 1.5f}));
  EXPECT_EQ(Combined<double>(ReduceOp::kProduct, {2, -3}, {4, 5}), (std::vector<double>{8, -15}));
  EXPECT_EQ(Combined<int32_t>(ReduceOp::kMin, {2, -3}, {4, -5}), (std::vector<int32_t>{2, -5}));
  EXPECT_EQ(Combined<int64_t>(ReduceOp::kMax, {int64_t{1} << 40, -3}, {4, -5}),
            (std::vector<int64_t>{int64_t{1} << 40, -3}));
  EXPECT_EQ(Combined<uint8_t>(ReduceOp::kSum, {250, 1}, {10, 2}),
            (std::vector<uint8_t>{4, 3}));  // wraps, as MPI's and torch's do
  // In place (dst == a) too, on an odd length that leaves a vector tail.
  std::vector<float> a(37), b(37);
  for (int i = 0; i < 37; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>(i);
    b[static_cast<size_t>(i)] = static_cast<float>(2 * i);
  }
  coll::internal::Combine(DataType::kFloat32, ReduceOp::kMax, a.data(), a.data(), b.data(), 37);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(a[static_cast<size_t>(i)], 2.0f * static_cast<float>(i));
  // kAverage sums in Combine and divides in Finish.
  std::vector<double> d = Combined<double>(ReduceOp::kAverage, {1, 2}, {3, 5});
  coll::internal::Finish(DataType::kFloat64, ReduceOp::kAverage, d.data(), 2, 2);
  EXPECT_EQ(d, (std::vector<double>{2, 3.5}));
}

TEST(CollectiveKernels, AverageOnlyForFloatingTypes) {
  EXPECT_TRUE(coll::internal::Supports(DataType::kFloat32, ReduceOp::kAverage));
  EXPECT_FALSE(coll::internal::Supports(DataType::kInt64, ReduceOp::kAverage));
  EXPECT_TRUE(coll::internal::Supports(DataType::kUInt8, ReduceOp::kProduct));
  EXPECT_FALSE(coll::internal::Supports(static_cast<DataType>(42), ReduceOp::kSum));
  EXPECT_NE(coll::internal::UnsupportedText(DataType::kInt64, ReduceOp::kAverage).find("int64"),
            std::string::npos);
  EXPECT_EQ(coll::SizeOf(DataType::kFloat64), 8);
  EXPECT_STREQ(coll::Name(DataType::kUInt8), "uint8");
}

// ---- The shared-memory engine, members as threads ---------------------------------------------

/// Spins freely; throws CollectiveTimeout past a deadline (no member should wait that long).
class TestWaiter : public coll::internal::Waiter {
 public:
  explicit TestWaiter(std::chrono::milliseconds limit = std::chrono::seconds(20))
      : deadline_(std::chrono::steady_clock::now() + limit) {}
  void Start() override {}
  void Poll() override {
    if (std::chrono::steady_clock::now() > deadline_) throw coll::CollectiveTimeout("test wait timed out");
    std::this_thread::yield();
  }

 private:
  std::chrono::steady_clock::time_point deadline_;
};

std::string UniqueName() {
  static std::atomic<int> n{0};
  return "/prism-coll-unit-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

/// Runs body(segment, member) on `members` threads, each with its own mapping of one segment;
/// returns what the members threw ("" each if nothing).
std::vector<std::string> OnMembers(int members, int64_t block_bytes,
                                   const std::function<void(SharedSegment&, int)>& body) {
  SegmentShape shape;
  shape.members = members;
  shape.block_bytes = block_bytes;
  const std::string name = UniqueName();
  std::vector<std::unique_ptr<SharedSegment>> segs;
  segs.push_back(SharedSegment::Create(name, shape, 0));
  for (int m = 1; m < members; ++m) segs.push_back(SharedSegment::Open(name, shape, m));
  EXPECT_TRUE(SharedSegment::Unlink(name));
  std::vector<std::string> errors(static_cast<size_t>(members));
  std::vector<std::thread> threads;
  for (int m = 0; m < members; ++m) {
    threads.emplace_back([&, m] {
      try {
        body(*segs[static_cast<size_t>(m)], m);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(m)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}


template <typename T>
void CheckAllReduce(int members, int64_t count, int64_t block_bytes) {
  const int64_t shift = std::is_same_v<T, uint8_t> ? 6 : 0;  // uint8 stays non-negative
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                      ReduceOp::kAverage}) {
    if (!coll::internal::Supports(coll::DataTypeOf<T>::value, op)) continue;
    std::vector<std::vector<T>> out(static_cast<size_t>(members));
    auto errors = OnMembers(members, block_bytes, [&](SharedSegment& s, int m) {
      TestWaiter w;
      std::vector<T> v = Input<T>(m, count, shift);
      s.AllReduce(v.data(), count, coll::DataTypeOf<T>::value, op, w);
      out[static_cast<size_t>(m)] = std::move(v);
    });
    for (int m = 0; m < members; ++m) {
      ASSERT_EQ(errors[static_cast<size_t>(m)], "") << "member " << m;
      for (int64_t i = 0; i < count; ++i) {
        const double want = static_cast<double>(static_cast<T>(Expected(members, i, op, shift)));
        ASSERT_NEAR(static_cast<double>(out[static_cast<size_t>(m)][static_cast<size_t>(i)]), want,
                    1e-6 * std::max(1.0, std::abs(want)))
            << coll::Name(coll::DataTypeOf<T>::value) << " " << coll::Name(op) << ", " << members
            << " members, " << count << " elements, member " << m << ", element " << i;
      }
    }
  }
}

TEST(CollectiveSharedMemory, AllReduceEveryOpTypeAndGroupSizeAgainstALocalReference) {
  for (int members : {1, 2, 3, 4}) {
    // 0, fewer than the members, odd, and several blocks of one page (4096 B) each.
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1001}, int64_t{10007}}) {
      CheckAllReduce<float>(members, count, 4096);
      CheckAllReduce<double>(members, count, 4096);
      CheckAllReduce<int32_t>(members, count, 4096);
      CheckAllReduce<int64_t>(members, count, 4096);
      CheckAllReduce<uint8_t>(members, count, 4096);
    }
  }
}

TEST(CollectiveSharedMemory, ManyOperationsInARowReuseSlotsCorrectly) {
  // 50 all-reduces of 9 blocks each on 3 members: slots are reused many times over.
  auto errors = OnMembers(3, 4096, [&](SharedSegment& s, int m) {
    TestWaiter w;
    for (int k = 0; k < 50; ++k) {
      std::vector<int64_t> v(4500, m + k);
      s.AllReduce(v.data(), 4500, DataType::kInt64, ReduceOp::kSum, w);
      for (int64_t x : v) {
        if (x != 3 + 3 * k) throw std::runtime_error("round " + std::to_string(k) + ": " + std::to_string(x));
      }
      if (k % 10 == 0) s.Barrier(w);
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(CollectiveSharedMemory, ReduceScatterAllGatherAndBroadcast) {
  for (int members : {1, 2, 3, 4}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{3001}}) {
      auto errors = OnMembers(members, 4096, [&](SharedSegment& s, int m) {
        TestWaiter w;
        // ReduceScatter (max, int32): member m gets part m of the element-wise max.
        std::vector<int32_t> send = Input<int32_t>(m, count * members, 0);
        std::vector<int32_t> recv(static_cast<size_t>(count));
        s.ReduceScatter(send.data(), recv.data(), count, DataType::kInt32, ReduceOp::kMax, w);
        for (int64_t i = 0; i < count; ++i) {
          const auto want = static_cast<int32_t>(Expected(members, m * count + i, ReduceOp::kMax, 0));
          if (recv[static_cast<size_t>(i)] != want) {
            throw std::runtime_error("ReduceScatter element " + std::to_string(i) + " is " +
                                     std::to_string(recv[static_cast<size_t>(i)]) + ", expected " +
                                     std::to_string(want));
          }
        }
        // AllGather (float64): member q's buffer at q * count.
        std::vector<double> mine = Input<double>(m, count, 100 * m);
        std::vector<double> all(static_cast<size_t>(count * members));
        s.AllGather(mine.data(), all.data(), count, DataType::kFloat64, w);
        for (int q = 0; q < members; ++q) {
          for (int64_t i = 0; i < count; ++i) {
            if (all[static_cast<size_t>(q * count + i)] != static_cast<double>(Val(q, i) + 100 * q)) {
              throw std::runtime_error("AllGather: member " + std::to_string(q) + "'s element " +
                                       std::to_string(i) + " is wrong");
            }
          }
        }
        // Broadcast (uint8) from the last member.
        const int root = members - 1;
        std::vector<uint8_t> b = Input<uint8_t>(m, count, 6 + m);
        s.Broadcast(b.data(), count, DataType::kUInt8, root, w);
        if (b != Input<uint8_t>(root, count, 6 + root)) throw std::runtime_error("Broadcast: not the root's");
      });
      for (int m = 0; m < members; ++m) {
        EXPECT_EQ(errors[static_cast<size_t>(m)], "")
            << members << " members, " << count << " elements, member " << m;
      }
    }
  }
}

TEST(CollectiveSharedMemory, MismatchedCallsAreTheSameErrorOnEveryMemberAndLeaveItUsable) {
  auto errors = OnMembers(3, 4096, [&](SharedSegment& s, int m) {
    TestWaiter w;
    std::vector<float> v(m == 2 ? 11 : 10, 1.0f);
    try {
      s.AllReduce(v.data(), static_cast<int64_t>(v.size()), DataType::kFloat32, ReduceOp::kSum, w);
      throw std::runtime_error("no error for mismatched counts");
    } catch (const coll::internal::MismatchError& e) {
      const std::string text = e.what();
      if (text.find("member 2: AllReduce(sum) of 11 float32") == std::string::npos ||
          text.find("member 0: AllReduce(sum) of 10 float32") == std::string::npos) {
        throw std::runtime_error("unclear mismatch: " + text);
      }
    }
    // A different operation on one member.
    try {
      if (m == 1) {
        s.Barrier(w);
      } else {
        s.Broadcast(v.data(), 10, DataType::kFloat32, 0, w);
      }
      throw std::runtime_error("no error for Barrier against Broadcast");
    } catch (const coll::internal::MismatchError& e) {
      if (std::string(e.what()).find("member 1: Barrier") == std::string::npos) {
        throw std::runtime_error(std::string("unclear mismatch: ") + e.what());
      }
    }
    std::vector<float> ok(10, 1.0f);
    s.AllReduce(ok.data(), 10, DataType::kFloat32, ReduceOp::kSum, w);
    if (ok[9] != 3.0f) throw std::runtime_error("the segment does not work after a mismatch");
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(CollectiveSharedMemory, AMemberThatNeverComesEndsInTheWaitersError) {
  auto errors = OnMembers(2, 4096, [&](SharedSegment& s, int m) {
    if (m == 1) return;  // never joins
    TestWaiter w(std::chrono::milliseconds(200));
    std::vector<float> v(100, 1.0f);
    s.AllReduce(v.data(), 100, DataType::kFloat32, ReduceOp::kSum, w);
  });
  EXPECT_EQ(errors[0], "test wait timed out");
  EXPECT_EQ(errors[1], "");
}

TEST(CollectiveSharedMemory, OpeningAMissingOrMisshapenSegmentIsAClearError) {
  SegmentShape shape;
  shape.members = 2;
  try {
    SharedSegment::Open("/prism-coll-unit-missing", shape, 1);
    ADD_FAILURE() << "no error";
  } catch (const prism::Error& e) {
    EXPECT_NE(std::string(e.what()).find("prism-coll-unit-missing"), std::string::npos) << e.what();
  }
  const std::string name = UniqueName();
  auto seg = SharedSegment::Create(name, shape, 0);
  SegmentShape other = shape;
  other.members = 3;
  try {
    SharedSegment::Open(name, other, 2);
    ADD_FAILURE() << "no error";
  } catch (const prism::Error& e) {
    EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(SharedSegment::Unlink(name));
}

}  // namespace
