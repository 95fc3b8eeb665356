// The pure logic of Split, StreamingSplit and Zip (no runtime): block ranges, equal row
// counts, cutting one run of blocks at another's boundaries, the streaming splitter's
// dispatch rule (equal and not, a consumer that stops early), Zip's column names, and
// assembling a block from pieces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <set>

#include "data/split.h"
#include "data/union_zip.h"

namespace {

using namespace prism::data;
using namespace prism::data::internal;

int64_t RowsOf(const std::vector<Piece>& pieces) {
  int64_t rows = 0;
  for (const Piece& p : pieces) rows += p.rows();
  return rows;
}

TEST(SplitBlockRanges, ConsecutiveRunsLongerFirst) {
  using R = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(SplitBlockRanges(10, 3), (R{{0, 4}, {4, 7}, {7, 10}}));
  EXPECT_EQ(SplitBlockRanges(2, 3), (R{{0, 1}, {1, 2}, {2, 2}}));
  EXPECT_EQ(SplitBlockRanges(0, 2), (R{{0, 0}, {0, 0}}));
  EXPECT_EQ(SplitBlockRanges(6, 1), (R{{0, 6}}));
}

TEST(EqualSplitRows, DropsAtMostNMinusOneRows) {
  EXPECT_EQ(EqualSplitRows(10, 3), (std::vector<int64_t>{3, 3, 3}));
  EXPECT_EQ(EqualSplitRows(2, 3), (std::vector<int64_t>{0, 0, 0}));
  for (int64_t total = 0; total < 50; ++total) {
    for (int n = 1; n < 7; ++n) {
      auto rows = EqualSplitRows(total, n);
      const int64_t kept = std::accumulate(rows.begin(), rows.end(), int64_t{0});
      EXPECT_LE(total - kept, n - 1);
      EXPECT_GE(total - kept, 0);
    }
  }
}

TEST(CutToBoundaries, RecutsOneSideToTheOthersBlocks) {
  // Zip: this side has blocks of 4, 4, 2 rows; the other 3, 5, 2.
  auto cuts = CutToBoundaries({4, 4, 2}, {3, 5, 2});
  ASSERT_EQ(cuts.size(), 3u);
  EXPECT_EQ(cuts[0], (std::vector<Piece>{{0, 0, 3}, {1, 0, 1}}));
  EXPECT_EQ(cuts[1], (std::vector<Piece>{{1, 1, 5}}));  // one block: a slice, no copy
  EXPECT_EQ(cuts[2], (std::vector<Piece>{{2, 0, 2}}));
}

TEST(CutToBoundaries, SkipsEmptyBlocksAndLeavesTheRest) {
  auto cuts = CutToBoundaries({2, 0, 3}, {0, 1, 0, 6});
  EXPECT_EQ(cuts[0], (std::vector<Piece>{{1, 0, 1}, {3, 0, 1}}));
  EXPECT_TRUE(cuts[1].empty());
  EXPECT_EQ(cuts[2], (std::vector<Piece>{{3, 1, 4}}));  // rows 4..5 of block 3 left out
}

TEST(CutToBoundaries, CoversEveryRowOnceInOrder) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<int64_t> sources(rng() % 8), targets(rng() % 8);
    int64_t total = 0;
    for (int64_t& r : sources) total += (r = rng() % 5);
    int64_t left = total;
    for (int64_t& r : targets) left -= (r = std::min<int64_t>(left, rng() % 6));
    auto cuts = CutToBoundaries(targets, sources);
    int64_t block = 0, offset = 0;
    for (size_t t = 0; t < targets.size(); ++t) {
      EXPECT_EQ(RowsOf(cuts[t]), targets[t]);
      for (const Piece& p : cuts[t]) {
        while (offset == sources[static_cast<size_t>(block)]) ++block, offset = 0;
        EXPECT_EQ(p.block, block);
        EXPECT_EQ(p.begin, offset);
        EXPECT_GT(p.end, p.begin);
        offset = p.end;
      }
    }
  }
}

TEST(CutToBoundaries, MoreTargetRowsThanSourceRowsIsAnError) {
  try {
    CutToBoundaries({5}, {2, 2});
    FAIL() << "no error";
  } catch (const prism::Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cannot cut 4 rows into runs of 5"));
  }
}

TEST(ZipColumnNames, DuplicatesGetSuffixesAsRaysZip) {
  EXPECT_EQ(ZipColumnNames({"id", "x"}, {"id", "y"}), (std::vector<std::string>{"id_1", "y"}));
  EXPECT_EQ(ZipColumnNames({"id", "id_1"}, {"id"}), (std::vector<std::string>{"id_2"}));
  EXPECT_EQ(ZipColumnNames({"a"}, {"b", "c"}), (std::vector<std::string>{"b", "c"}));
}

TEST(AssemblePieces, OnePieceIsASliceSeveralAreConcatenated) {
  Block a = Block::FromColumns({{"v", Column::FromVector(std::vector<int64_t>{0, 1, 2, 3})}});
  Block b = Block::FromColumns({{"v", Column::FromVector(std::vector<int64_t>{4, 5, 6})}});
  Block one = AssemblePieces({a, b}, {{0, 1, 3}});
  EXPECT_EQ(one.GetColumn("v").data(),
            static_cast<const int64_t*>(a.GetColumn("v").data()) + 1);  // no copy
  Block two = AssemblePieces({a, b}, {{0, 2, 4}, {1, 0, 2}});
  auto v = two.GetColumn("v").Values<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(v.begin(), v.end()), (std::vector<int64_t>{2, 3, 4, 5}));
}

// Drives a splitter: each round the consumers in `active` ask once (pulling blocks of
// `block_rows` until they get one or the stream ends). Returns the rows each got.
std::vector<int64_t> Drive(int n, bool equal, int64_t blocks, int64_t block_rows,
                           const std::vector<bool>& active, std::vector<std::vector<Piece>>* got = nullptr) {
  StreamSplitter splitter(n, equal);
  std::vector<int64_t> rows(static_cast<size_t>(n), 0);
  int64_t next = 0;
  bool any = true;
  while (any) {
    any = false;
    for (int s = 0; s < n; ++s) {
      if (!active[static_cast<size_t>(s)]) continue;
      for (;;) {
        if (auto p = splitter.Take(s)) {
          rows[static_cast<size_t>(s)] += p->rows();
          if (got) (*got)[static_cast<size_t>(s)].push_back(*p);
          any = true;
          break;
        }
        if (splitter.finished()) break;
        if (next < blocks) {
          splitter.Add(next, block_rows + next % 3);  // uneven blocks
          ++next;
        } else {
          splitter.Finish();
        }
      }
    }
  }
  return rows;
}

TEST(StreamSplitter, EqualGivesEveryConsumerTheSameRows) {
  for (int n = 1; n <= 4; ++n) {
    for (int64_t blocks = 0; blocks < 12; ++blocks) {
      std::vector<std::vector<Piece>> got(static_cast<size_t>(n));
      auto rows = Drive(n, true, blocks, 5, std::vector<bool>(static_cast<size_t>(n), true), &got);
      int64_t total = 0;
      for (int64_t b = 0; b < blocks; ++b) total += 5 + b % 3;
      for (int64_t r : rows) EXPECT_EQ(r, total / n) << "n=" << n << " blocks=" << blocks;
      // No row is given twice.
      std::set<std::pair<int64_t, int64_t>> seen;
      for (const auto& pieces : got) {
        for (const Piece& p : pieces) {
          for (int64_t r = p.begin; r < p.end; ++r) EXPECT_TRUE(seen.insert({p.block, r}).second);
        }
      }
    }
  }
}

TEST(StreamSplitter, WithoutEqualEveryRowGoesToTheConsumerThatAsks) {
  auto rows = Drive(3, false, 10, 4, {true, true, true});
  int64_t total = 0;
  for (int64_t b = 0; b < 10; ++b) total += 4 + b % 3;
  EXPECT_EQ(rows[0] + rows[1] + rows[2], total);
  EXPECT_GT(rows[0], 0);
  EXPECT_GT(rows[2], 0);
}

TEST(StreamSplitter, AConsumerThatStopsDoesNotStallTheOthers) {
  // Consumer 1 never asks: consumer 0 still gets its equal share, and held-back blocks
  // are what make that possible.
  auto rows = Drive(2, true, 9, 4, {true, false});
  int64_t total = 0;
  for (int64_t b = 0; b < 9; ++b) total += 4 + b % 3;
  EXPECT_EQ(rows[0], total / 2);
  EXPECT_EQ(rows[1], 0);
}

TEST(StreamSplitter, EqualHoldsBlocksBackWhileOthersLag) {
  StreamSplitter s(2, true);
  s.Add(0, 10);
  EXPECT_FALSE(s.Take(0).has_value());  // 10 rows to 0 would need 10 more held back
  s.Add(1, 10);
  auto p = s.Take(0);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->block, 0);
  EXPECT_EQ(s.assigned(0), 10);
  EXPECT_FALSE(s.Take(0).has_value());
  EXPECT_TRUE(s.Take(1).has_value());
  s.Add(2, 3);
  s.Finish();
  // 23 rows: 11 each; 0 has 10 and 1 has 10 -> one row each from block 2, one dropped.
  auto a = s.Take(0), b = s.Take(1);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, (Piece{2, 0, 1}));
  EXPECT_EQ(*b, (Piece{2, 1, 2}));
  EXPECT_FALSE(s.Take(0).has_value());
  EXPECT_EQ(s.assigned(0), 11);
  EXPECT_EQ(s.assigned(1), 11);
}

}  // namespace
