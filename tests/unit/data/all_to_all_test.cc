// The all-to-all operators' pure logic (src/data/all_to_all.h): near-equal parts, block
// assignment by rank and bytes, shuffle keys, range boundaries and partitioning, stable
// ordering, gathering, grouping, aggregation, and the wire format read back in place.
#include "data/all_to_all.h"
#include "data/block_wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace {

using namespace prism::data;
using namespace prism::data::internal;
using ::testing::HasSubstr;

std::vector<int64_t> Ints(const Block& b, const std::string& name) {
  auto v = b.GetColumn(name).Values<int64_t>();
  return {v.begin(), v.end()};
}

TEST(AllToAllLogic, EqualPartsAreNearEqualAndCoverTheRows) {
  EXPECT_EQ(EqualParts(10, 3), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(EqualParts(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(EqualParts(0, 2), (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(EqualParts(5, 0).empty());
}

TEST(AllToAllLogic, BlocksStayOnTheirRankUnlessItHoldsTooMuch) {
  // Three members on ranks 0, 1, 2; blocks on ranks 2, 1, 1, -1 (unknown), 5 (no member).
  auto m = AssignBlocks({10, 10, 10, 10, 10}, {2, 1, 1, -1, 5}, {0, 1, 2});
  EXPECT_EQ(m[0], 2);
  EXPECT_EQ(m[1], 1);
  EXPECT_EQ(m[2], 1);
  EXPECT_EQ(m[3], 0);  // the least loaded
  EXPECT_NE(m[4], 1);
  // Everything on rank 0 (a driver's Puts): spread evenly by bytes instead.
  auto spread = AssignBlocks(std::vector<uint64_t>(9, 100), std::vector<int>(9, 0), {0, 1, 2});
  std::map<int, int> per;
  for (int x : spread) per[x]++;
  EXPECT_EQ(per, (std::map<int, int>{{0, 3}, {1, 3}, {2, 3}}));
  EXPECT_EQ(AssignBlocks({5, 5}, {3, 4}, {7}), (std::vector<int>{0, 0}));
}

TEST(AllToAllLogic, ShuffleKeysDependOnlyOnSeedBlockAndRow) {
  EXPECT_EQ(ShuffleKey(1, 2, 3), ShuffleKey(1, 2, 3));
  std::set<uint64_t> keys;
  for (int64_t b = 0; b < 10; ++b) {
    for (int64_t r = 0; r < 100; ++r) keys.insert(ShuffleKey(42, b, r));
  }
  EXPECT_EQ(keys.size(), 1000u);
  EXPECT_NE(ShuffleKey(1, 0, 0), ShuffleKey(2, 0, 0));
  // Destinations by key % 3 are roughly even.
  int counts[3] = {0, 0, 0};
  for (int64_t r = 0; r < 3000; ++r) counts[ShuffleKey(7, 0, r) % 3]++;
  for (int c : counts) EXPECT_NEAR(c, 1000, 150);
}

TEST(AllToAllLogic, RangePartitionSendsEqualKeysToOneMemberBothWays) {
  Column sample = Column::FromVector(std::vector<int64_t>{0, 10, 20, 30, 40, 50});
  auto b = ChooseBoundaries(6, 3);
  EXPECT_EQ(b, (std::vector<int64_t>{2, 4}));  // keys 20 and 40
  Column keys = Column::FromVector(std::vector<int64_t>{-5, 19, 20, 20, 39, 40, 99});
  EXPECT_EQ(RangePartition(keys, sample, b, false), (std::vector<int32_t>{0, 0, 1, 1, 1, 2, 2}));
  Column desc = Column::FromVector(std::vector<int64_t>{50, 40, 30, 20, 10, 0});
  EXPECT_EQ(RangePartition(keys, desc, b, true), (std::vector<int32_t>{2, 1, 1, 1, 0, 0, 0}));  // 30, 10
  Column strings = Column::FromStrings({"apple", "kiwi", "pear"});
  Column words = Column::FromStrings({"a", "kiwi", "zebra"});
  EXPECT_EQ(RangePartition(words, strings, ChooseBoundaries(3, 2), false), (std::vector<int32_t>{0, 1, 1}));
  EXPECT_TRUE(ChooseBoundaries(0, 3).empty());
}

TEST(AllToAllLogic, CompareRowsOrdersNumbersStringsAndNaNLast) {
  Column d = Column::FromVector(std::vector<double>{1.5, NAN, -2});
  EXPECT_LT(CompareRows(d, 2, d, 0), 0);
  EXPECT_GT(CompareRows(d, 1, d, 0), 0);
  EXPECT_EQ(CompareRows(d, 1, d, 1), 0);
  Column s = Column::FromStrings({"b", "a"});
  EXPECT_GT(CompareRows(s, 0, s, 1), 0);
}

TEST(AllToAllLogic, SortedOrderIsStableAndGatherKeepsColumnsTogether) {
  Block a = Block::FromColumns({{"k", Column::FromVector(std::vector<int64_t>{3, 1, 3})},
                                {"name", Column::FromStrings({"a0", "a1", "a2"})}});
  Block b = Block::FromColumns({{"k", Column::FromVector(std::vector<int64_t>{1, 2})},
                                {"name", Column::FromStrings({"b0", "b1"})}});
  auto order = SortedOrder({a, b}, "k", false);
  Block sorted = Gather({a, b}, order, 0, order.size());
  EXPECT_EQ(Ints(sorted, "k"), (std::vector<int64_t>{1, 1, 2, 3, 3}));
  std::vector<std::string> names;
  for (int64_t i = 0; i < sorted.num_rows(); ++i) names.emplace_back(sorted.GetColumn("name").StringAt(i));
  EXPECT_EQ(names, (std::vector<std::string>{"a1", "b0", "b1", "a0", "a2"}));
  auto desc = SortedOrder({a, b}, "k", true);
  Block down = Gather({a, b}, desc, 1, 3);  // a part of the order
  EXPECT_EQ(Ints(down, "k"), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(GroupRanges(sorted.GetColumn("k")),
            (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 3}, {3, 5}}));
}

TEST(AllToAllLogic, AGatheredBlockIsWrittenAsTheGatheredBlockWouldSerialize) {
  // Strings, a row shape and a slice that starts mid-buffer: the bytes written straight
  // from the runs equal Serializer<Block>::Write of the block Gather builds, pads included.
  Block a = Block::FromColumns({{"id", Column::FromVector(std::vector<int64_t>{0, 1, 2, 3, 4})},
                                {"img", Column::FromVector(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2})},
                                {"s", Column::FromStrings({"", "one", "two", "three", "four"})}});
  Block b = a.Slice(2, 5);
  const std::vector<Block> sources = {a, b};
  const std::vector<std::pair<int32_t, int64_t>> order = {{1, 1}, {1, 2}, {0, 0}, {0, 1}, {1, 0}, {0, 4}};
  const std::vector<RowRun> runs = {{1, 1, 2}, {0, 0, 2}, {1, 0, 1}, {0, 4, 1}};
  const prism::internal::Buffer expected = prism::internal::Serialize(Gather(sources, order, 0, order.size()));
  prism::internal::Buffer written;
  prism::internal::Writer w(written);
  WriteGatheredBlock(w, sources, runs);
  ASSERT_EQ(written.size(), expected.size());
  EXPECT_EQ(std::memcmp(written.data(), expected.data(), expected.size()), 0);
  EXPECT_GE(GatheredBlockBytes(sources, runs), written.size());
  Block back = prism::internal::Deserialize<Block>(written.data(), written.size());
  EXPECT_EQ(Ints(back, "id"), (std::vector<int64_t>{3, 4, 0, 1, 2, 4}));
  EXPECT_EQ(back.GetColumn("s").StringAt(1), "four");
  EXPECT_EQ(back.GetColumn("img").Values<float>()[1], 7.0f);
  // No runs: an empty block of the sources' schema; no sources with columns: Block().
  prism::internal::Buffer none;
  prism::internal::Writer wn(none);
  WriteGatheredBlock(wn, {Block()}, {});
  EXPECT_EQ(prism::internal::Deserialize<Block>(none.data(), none.size()).num_rows(), 0);
}

TEST(AllToAllLogic, CombinedPartialsMergeToWhatAggregatingEveryRowGives) {
  // Three "members" with overlapping keys (ints, and strings); partials made per member,
  // exchanged (concatenated here), sorted and merged equal AggregateSorted of all rows.
  auto make = [](std::vector<int64_t> k, std::vector<int32_t> i, std::vector<double> f) {
    return Block::FromColumns({{"k", Column::FromVector(std::move(k))},
                               {"i", Column::FromVector(std::move(i))},
                               {"f", Column::FromVector(std::move(f))}});
  };
  const std::vector<std::vector<Block>> members = {
      {make({1, 2, 1}, {5, -3, 7}, {1.5, 2, 4}), make({3}, {9}, {-1})},
      {make({2, 2, 4}, {1, 1, 2}, {0.25, 8, 3})},
      {},  // a member with no rows sends nothing
  };
  const std::vector<AggSpec> aggs = {{AggSpec::kCount, ""}, {AggSpec::kSum, "i"}, {AggSpec::kMin, "f"},
                                     {AggSpec::kMax, "i"},  {AggSpec::kMean, "f"}, {AggSpec::kStd, "f"},
                                     {AggSpec::kSum, "f"}};
  std::vector<Block> partials, all;
  for (const auto& blocks : members) {
    Block p = CombinePartials(blocks, blocks.empty() ? members[0][0].schema() : blocks[0].schema(), "k", aggs);
    if (p.num_rows() > 0) {
      EXPECT_EQ(p.schema(), PartialSchema(members[0][0].schema(), "k", aggs));
      partials.push_back(p);
    }
    all.insert(all.end(), blocks.begin(), blocks.end());
  }
  EXPECT_EQ(partials.size(), 2u);
  auto porder = SortedOrder(partials, "k", false);
  Block merged = MergePartialsSorted(Gather(partials, porder, 0, porder.size()), "k", aggs);
  auto order = SortedOrder(all, "k", false);
  Block expected = AggregateSorted(Gather(all, order, 0, order.size()), "k", aggs);
  ASSERT_EQ(merged.schema(), expected.schema());
  ASSERT_EQ(merged.num_rows(), 4);
  for (size_t c = 0; c < expected.num_columns(); ++c) {
    const auto& [name, col] = expected.column_at(c);
    for (int64_t r = 0; r < expected.num_rows(); ++r) {
      const double got = AsDouble(merged.GetColumn(name), r), want = AsDouble(col, r);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << name << " row " << r;  // std of one row (ddof 1)
      } else {
        EXPECT_NEAR(got, want, 1e-12) << name << " row " << r;
      }
    }
  }
  // String keys, and a non-numeric column named by an aggregation.
  Block s = Block::FromColumns({{"k", Column::FromStrings({"b", "a", "b"})},
                                {"v", Column::FromVector(std::vector<double>{1, 2, 3})}});
  Block ps = CombinePartials({s}, s.schema(), "k", {{AggSpec::kSum, "v"}});
  EXPECT_EQ(ps.num_rows(), 2);
  EXPECT_THROW(CombinePartials({s}, s.schema(), "k", {{AggSpec::kSum, "k"}}), prism::Error);
}

TEST(AllToAllLogic, AggregateSortedComputesRaysAggregations) {
  Block sorted = Block::FromColumns({{"k", Column::FromStrings({"x", "x", "x", "y"})},
                                     {"i", Column::FromVector(std::vector<int32_t>{1, 5, 3, 7})},
                                     {"f", Column::FromVector(std::vector<double>{1, 2, 4, 8})}});
  Block out = AggregateSorted(sorted, "k", {{AggSpec::kCount, "", 1}, {AggSpec::kSum, "i", 1}, {AggSpec::kMin, "i", 1},
                                           {AggSpec::kMax, "f", 1}, {AggSpec::kMean, "f", 1}, {AggSpec::kStd, "f", 1},
                                           {AggSpec::kStd, "i", 0}});
  EXPECT_EQ(out.column_names(), (std::vector<std::string>{"k", "count()", "sum(i)", "min(i)", "max(f)",
                                                          "mean(f)", "std(f)", "std(i)"}));
  std::vector<Row> rows = out.ToRows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(std::get<std::string>(rows[0].at("k")), "x");
  EXPECT_EQ(std::get<int64_t>(rows[0].at("count()")), 3);
  EXPECT_EQ(std::get<int64_t>(rows[0].at("sum(i)")), 9);
  EXPECT_EQ(std::get<int64_t>(rows[0].at("min(i)")), 1);
  EXPECT_EQ(std::get<double>(rows[0].at("max(f)")), 4);
  EXPECT_NEAR(std::get<double>(rows[0].at("mean(f)")), 7.0 / 3, 1e-12);
  EXPECT_TRUE(std::isnan(out.column_at(6).second.Values<double>()[1]));  // one row, ddof 1
  EXPECT_NEAR(out.column_at(6).second.Values<double>()[0], std::sqrt(42.0 / 9 / 2), 1e-9);
  EXPECT_NEAR(out.column_at(7).second.Values<double>()[0], std::sqrt(8.0 / 3), 1e-9);  // ddof 0
  EXPECT_EQ(out.column_at(7).second.Values<double>()[1], 0.0);
  EXPECT_THAT([&] {
    try {
      AggregateSorted(sorted, "k", {{AggSpec::kSum, "k", 1}});
    } catch (const prism::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }(), HasSubstr("sum(k) needs a numeric column"));
}

TEST(AllToAllLogic, BucketsRoundTripInPlaceWithStringsArraysAndKeys) {
  Block a = Block::FromColumns({{"id", Column::FromVector(std::vector<int64_t>{0, 1, 2, 3, 4})},
                                {"img", Column::FromVector(std::vector<float>(10, 0.5f), {2})},
                                {"s", Column::FromStrings({"", "one", "two", "three", "four"})}});
  Block b = a.Slice(1, 3);
  std::vector<BucketPiece> pieces(2);
  pieces[0].block = &a;
  pieces[0].input_block = 4;
  pieces[0].rows = {4, 0, 1};
  pieces[1].block = &b;
  pieces[1].input_block = 9;
  pieces[1].rows = {1};
  const std::vector<uint64_t> keys = {7, 8, 9, 10};
  const uint64_t bytes = BucketBytes(a.schema(), pieces, true);
  EXPECT_EQ(bytes % 64, 0u);
  std::shared_ptr<char> buf = ScratchBuffer(bytes);
  WriteBucket(a.schema(), pieces, keys.data(), buf.get());
  DecodedBucket d = ReadBucket(a.schema(), buf.get(), bytes, buf);
  EXPECT_EQ(Ints(d.block, "id"), (std::vector<int64_t>{4, 0, 1, 2}));
  EXPECT_EQ(d.block.GetColumn("s").StringAt(0), "four");
  EXPECT_EQ(d.block.GetColumn("s").StringAt(1), "");
  EXPECT_EQ(d.block.GetColumn("s").StringAt(3), "two");
  EXPECT_EQ(d.block.GetColumn("img").row_shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(d.block.GetColumn("id").data(), buf.get() + 64);  // read in place, no copy
  EXPECT_EQ(d.pieces, (std::vector<std::pair<int64_t, int64_t>>{{4, 3}, {9, 1}}));
  ASSERT_NE(d.keys, nullptr);
  EXPECT_EQ(d.keys[3], 10u);
  std::vector<BucketPiece> none;
  EXPECT_EQ(BucketBytes(a.schema(), none, false), 0u);
  EXPECT_EQ(ReadBucket(a.schema(), nullptr, 0, nullptr).block.num_rows(), 0);
}

TEST(AllToAllLogic, ScratchBuffersAreAlignedAndReused) {
  char* first = nullptr;
  {
    std::shared_ptr<char> a = ScratchBuffer(1000);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.get()) % 64, 0u);
    first = a.get();
  }
  std::shared_ptr<char> again = ScratchBuffer(900);  // fits the buffer given back
  EXPECT_EQ(again.get(), first);
}

TEST(AllToAllLogic, NamesAreRays) {
  AllToAllSpec s;
  s.kind = AllToAllSpec::kAggregate;
  s.key = "k";
  s.aggs = {{AggSpec::kCount, "", 1}, {AggSpec::kMean, "v", 1}};
  EXPECT_EQ(s.Name(), "Aggregate(k: count(), mean(v))");
  s.kind = AllToAllSpec::kSort;
  s.descending = true;
  EXPECT_EQ(s.Name(), "Sort(k, descending)");
  s.kind = AllToAllSpec::kRandomShuffle;
  s.has_seed = true;
  s.seed = 7;
  EXPECT_EQ(s.Name(), "RandomShuffle(seed=7)");
}

}  // namespace
