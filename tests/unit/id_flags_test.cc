// IdFlags: the window of flags ObjectPuller keeps for the results this rank expects.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "node_manager/id_flags.h"

namespace prism::internal {
namespace {

TEST(IdFlagsTest, FlagsInOrderAndOutOfOrderAndTheWindowShrinksToWhatIsFlagged) {
  IdFlags f;
  EXPECT_TRUE(f.Empty());
  EXPECT_EQ(f.Get(5), 0);
  for (uint64_t n = 100; n < 110; ++n) f.Set(n, 1);
  f.Set(98, 2);  // minted earlier, expected later (another thread)
  EXPECT_EQ(f.Get(98), 2);
  EXPECT_EQ(f.Get(99), 0);
  EXPECT_EQ(f.Get(105), 1);
  EXPECT_EQ(f.WindowSize(), 12u);
  f.Clear(98);
  f.Clear(100);
  EXPECT_EQ(f.WindowSize(), 9u) << "101..109";
  f.Clear(109);
  EXPECT_EQ(f.WindowSize(), 9u) << "the end stays: the next ids go there";
  f.Clear(12345);  // never flagged: no effect
  for (uint64_t n = 101; n < 109; ++n) f.Clear(n);
  EXPECT_TRUE(f.Empty());
  EXPECT_EQ(f.WindowSize(), 0u);
  f.Set(7, 1);  // an empty window starts anywhere
  EXPECT_EQ(f.Get(7), 1);
  EXPECT_EQ(f.WindowSize(), 1u);
}

TEST(IdFlagsTest, AnOldFlagMovesOutOfTheWindowWhichStaysBounded) {
  IdFlags f;
  const uint64_t base = uint64_t{3} << 48;  // rank 3's ids
  f.Set(base, 2);                           // waited for, and long outstanding
  for (uint64_t n = 1; n <= IdFlags::kMaxSpan + 10; ++n) {
    f.Set(base + n, 1);
    f.Clear(base + n);  // a short task: heard of at once
  }
  EXPECT_EQ(f.Get(base), 2) << "kept, in the map";
  const uint64_t moved = base + IdFlags::kMaxSpan / 2;  // flagged, then moved to the map
  f.Set(base + IdFlags::kMaxSpan + 20, 1);
  f.Set(moved, 1);
  for (uint64_t n = 21; n <= IdFlags::kMaxSpan; ++n) f.Set(base + IdFlags::kMaxSpan + n, 1);  // restart
  for (uint64_t n = 21; n <= IdFlags::kMaxSpan; ++n) f.Clear(base + IdFlags::kMaxSpan + n);
  f.Clear(base + IdFlags::kMaxSpan + 20);
  f.Set(moved, 2);  // a reader waits for it: updated where it is
  EXPECT_EQ(f.Get(moved), 2);
  f.Clear(moved);
  EXPECT_EQ(f.Get(moved), 0) << "no stale copy left behind";
  EXPECT_LE(f.WindowSize(), IdFlags::kMaxSpan);
  f.Set(base + 5, 1);  // far before the window: in the map too
  EXPECT_LE(f.WindowSize(), IdFlags::kMaxSpan);
  f.Set(uint64_t{9} << 48, 1);  // another rank's id (never expected, but bounded anyway)
  EXPECT_EQ(f.Get(uint64_t{9} << 48), 1);
  EXPECT_LE(f.WindowSize(), IdFlags::kMaxSpan);
  f.Clear(uint64_t{9} << 48);
  EXPECT_EQ(f.Get(base + 5), 1);
  f.Clear(base);
  f.Clear(base + 5);
  EXPECT_TRUE(f.Empty());
}

TEST(IdFlagsTest, AgreesWithAMapUnderRandomUse) {
  IdFlags f;
  std::map<uint64_t, uint8_t> want;
  std::mt19937_64 rng(7);
  uint64_t next = 1000;
  for (int step = 0; step < 200000; ++step) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0) {
      const uint64_t n = next++ - rng() % 3;  // mostly in order
      const uint8_t flag = 1 + rng() % 2;
      f.Set(n, flag);
      want[n] = flag;
    } else if (!want.empty()) {
      auto it = want.lower_bound(next - 1 - rng() % 64);
      if (it == want.end()) it = want.begin();
      if (op == 1) {
        EXPECT_EQ(f.Get(it->first), it->second);
      } else {
        f.Clear(it->first);
        want.erase(it);
      }
    }
    if (step % 1000 == 0) {
      for (uint64_t n = next - 100; n < next; ++n) {
        auto w = want.find(n);
        ASSERT_EQ(f.Get(n), w == want.end() ? 0 : w->second) << n;
      }
    }
  }
  EXPECT_EQ(f.Empty(), want.empty());
}

}  // namespace
}  // namespace prism::internal
