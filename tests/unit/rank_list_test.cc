// RankList: the head's 16-byte list of ranks (two inline, more on the heap).
#include "head/rank_list.h"

#include <gtest/gtest.h>

#include <vector>

namespace prism::internal {
namespace {

std::vector<int> Of(const RankList& l) { return {l.begin(), l.end()}; }

TEST(RankListTest, GrowsPastItsTwoInlineRanksAndKeepsOrder) {
  RankList l;
  EXPECT_TRUE(l.empty());
  for (int r = 0; r < 100; ++r) l.push_back(r * 3);
  ASSERT_EQ(l.size(), 100u);
  for (int r = 0; r < 100; ++r) EXPECT_EQ(l.begin()[r], r * 3);
  l.erase(l.begin());        // the first
  l.erase(l.begin() + 50);   // one in the middle
  l.erase(l.end() - 1);      // the last
  ASSERT_EQ(l.size(), 97u);
  EXPECT_EQ(l.begin()[0], 3);
  EXPECT_EQ(l.begin()[49], 150);
  EXPECT_EQ(l.begin()[50], 156);
  EXPECT_EQ(*(l.end() - 1), 294);
  l.clear();
  EXPECT_TRUE(l.empty());
  l.push_back(7);
  EXPECT_EQ(Of(l), std::vector<int>{7});
}

TEST(RankListTest, CopiesAndMovesInlineAndHeapLists) {
  RankList small;
  small.push_back(1);
  small.push_back(2);
  RankList big;
  for (int r = 0; r < 5; ++r) big.push_back(r);
  RankList a = small;
  RankList b = big;
  EXPECT_EQ(Of(a), (std::vector<int>{1, 2}));
  EXPECT_EQ(Of(b), (std::vector<int>{0, 1, 2, 3, 4}));
  b.push_back(9);  // the copy has its own storage
  EXPECT_EQ(big.size(), 5u);
  a = big;   // inline <- heap
  EXPECT_EQ(Of(a), Of(big));
  b = small;  // heap <- inline (keeps its storage)
  EXPECT_EQ(Of(b), (std::vector<int>{1, 2}));
  RankList moved = std::move(big);
  EXPECT_EQ(Of(moved), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(big.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  big.push_back(4);
  EXPECT_EQ(Of(big), std::vector<int>{4});
  moved = std::move(small);
  EXPECT_EQ(Of(moved), (std::vector<int>{1, 2}));
  moved = moved;  // self-assignment keeps it
  EXPECT_EQ(Of(moved), (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace prism::internal
