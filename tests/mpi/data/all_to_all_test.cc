// prism::data's all-to-all operators end to end (Repartition, RandomShuffle, Sort, GroupBy's
// Aggregate and MapGroups), each against a reference computed here: after a Map, before a
// Limit, over blocks of very uneven sizes, on an empty dataset, and with bad input. Runs
// under mpirun -n 1 and -n 3 (the exchange over collective::Group::AllToAllV), and on an
// in-process cluster of 3 ranks (one member does the exchange: no MPI there).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "prism/api.h"
#include "prism/data.h"
#include "../../common/test_util.h"
#include "../../common/data_test_util.h"

namespace {

using namespace prism::data;
using ::testing::HasSubstr;
using prism_test::ErrorOf;
using prism_test::Iota;

// id -> id, k = id % 7 (int64), v = id / 2 (float64), s = "s" + (id * 13 % 5) (string),
// r = a pseudo-random int64 with repeats.
Row Enrich(Row r) {
  const int64_t id = std::get<int64_t>(r["id"]);
  r["k"] = id % 7;
  r["v"] = static_cast<double>(id) / 2;
  r["s"] = "s" + std::to_string(id * 13 % 5);
  r["r"] = static_cast<int64_t>((id * 7919) % 101);
  return r;
}
// Keeps every row of the first 1000 ids and 1 in 50 of the rest: very uneven blocks.
bool Uneven(Row r) {
  const int64_t id = std::get<int64_t>(r["id"]);
  return id < 1000 || id % 50 == 0;
}
// One row per group: its key, its rows, and the sum of its ids.
Block Summarize(Block group) {
  auto ids = group.GetColumn("id").Values<int64_t>();
  int64_t sum = 0;
  for (int64_t x : ids) sum += x;
  return Block::FromColumns({{"k", Column::FromVector(std::vector<int64_t>{group.GetColumn("k").Values<int64_t>()[0]})},
                             {"n", Column::FromVector(std::vector<int64_t>{group.num_rows()})},
                             {"sum", Column::FromVector(std::vector<int64_t>{sum})}});
}
Block ThrowOnThree(Block group) {
  if (group.GetColumn("k").Values<int64_t>()[0] == 3) throw std::runtime_error("no threes");
  return group;
}
Block BlockSize(Block b) {
  return Block::FromColumns({{"n", Column::FromVector(std::vector<int64_t>{b.num_rows()})}});
}
PRISM_REMOTE(Enrich, Uneven, Summarize, ThrowOnThree, BlockSize);

struct Rows {
  std::vector<int64_t> id, k, r;
  std::vector<double> v;
  std::vector<std::string> s;
  std::vector<int64_t> block_rows;
};

Rows Collect(const Dataset& ds) {
  Rows out;
  auto it = ds.IterBatches(1 << 30);
  for (const Block& b : it) {
    auto add = [&](const char* name, std::vector<int64_t>& to) {
      if (!b.HasColumn(name)) return;
      for (int64_t x : b.GetColumn(name).Values<int64_t>()) to.push_back(x);
    };
    add("id", out.id);
    add("k", out.k);
    add("r", out.r);
    if (b.HasColumn("v")) {
      for (double x : b.GetColumn("v").Values<double>()) out.v.push_back(x);
    }
    if (b.HasColumn("s")) {
      for (int64_t i = 0; i < b.num_rows(); ++i) out.s.emplace_back(b.GetColumn("s").StringAt(i));
    }
  }
  return out;
}

// The rows of each block, in order: a MapBatches over whole blocks.
std::vector<int64_t> BlockRows(const Dataset& ds) {
  std::vector<int64_t> rows;
  for (const Block& b : ds.MapBatches(BlockSize, int64_t{1} << 40).IterBatches(1 << 30)) {
    for (int64_t n : b.GetColumn("n").Values<int64_t>()) rows.push_back(n);
  }
  return rows;
}

const OperatorStats* Find(const DatasetStats& stats, const std::string& prefix) {
  for (const OperatorStats& op : stats.operators) {
    if (op.name.rfind(prefix, 0) == 0) return &op;
  }
  return nullptr;
}

TEST(AllToAll, RepartitionKeepsOrderInNearEqualBlocks) {
  for (int64_t n : {1, 3, 4, 10}) {
    Dataset ds = Range(1000, 7).Repartition(n);
    Dataset m = ds.Materialize();
    EXPECT_EQ(m.NumBlocks(), n);
    const DatasetStats stats = m.Stats();
    const OperatorStats* op = Find(stats, "Repartition(");
    ASSERT_NE(op, nullptr) << stats.ToString();
    EXPECT_EQ(op->blocks, n);
    EXPECT_EQ(op->rows, 1000) << stats.ToString();
    EXPECT_EQ(op->bytes, 8000u);
    EXPECT_GE(op->seconds, 0.0);
    EXPECT_EQ(Collect(m).id, Iota(0, 1000)) << "n = " << n;
  }
  EXPECT_EQ(BlockRows(Range(1000, 3).Repartition(4)), (std::vector<int64_t>{250, 250, 250, 250}));
  EXPECT_EQ(BlockRows(Range(10, 7).Repartition(3)), (std::vector<int64_t>{4, 3, 3}));
}

TEST(AllToAll, RepartitionAfterAMapAndBeforeALimitOverUnevenBlocks) {
  Dataset ds = Range(5000, 5).Filter(Uneven).Map(Enrich).Repartition(3).Limit(700);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 5000 && expected.size() < 700; ++i) {
    if (i < 1000 || i % 50 == 0) expected.push_back(i);
  }
  Rows got = Collect(ds);
  EXPECT_EQ(got.id, expected);
  EXPECT_EQ(got.k.size(), 700u);
}

TEST(AllToAll, ATakeOfFewerRowsThanTheFirstOutputBlockAfterAnExchange) {
  std::vector<Row> rows = Range(100, 4).GroupBy("id").Aggregate({Count()}).Take(2);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(rows[1]["id"]), 1);
  rows = Range(100, 4).Sort("id", true).Take(3);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(std::get<int64_t>(rows[2]["id"]), 97);
}

TEST(AllToAll, RepartitionWithShuffleKeepsEveryRowOnce) {
  Rows got = Collect(Range(2000, 4).Repartition(5, true));
  EXPECT_NE(got.id, Iota(0, 2000));
  std::sort(got.id.begin(), got.id.end());
  EXPECT_EQ(got.id, Iota(0, 2000));
}

TEST(AllToAll, RandomShuffleIsAPermutationThatTheSeedFixes) {
  Dataset base = Range(3000, 6).Map(Enrich);
  Rows a = Collect(base.RandomShuffle(7)), b = Collect(base.RandomShuffle(7)), c = Collect(base.RandomShuffle(8));
  Rows none = Collect(base.RandomShuffle());
  EXPECT_EQ(a.id, b.id) << "the same seed gave two orders";
  EXPECT_NE(a.id, c.id);
  EXPECT_NE(a.id, Iota(0, 3000));
  // The columns travel together.
  for (size_t i = 0; i < a.id.size(); ++i) {
    ASSERT_EQ(a.k[i], a.id[i] % 7);
    ASSERT_EQ(a.s[i], "s" + std::to_string(a.id[i] * 13 % 5));
  }
  for (Rows* rows : {&a, &c, &none}) {
    std::sort(rows->id.begin(), rows->id.end());
    EXPECT_EQ(rows->id, Iota(0, 3000));
  }
  // Roughly uniform: the first tenth of the output holds ids from everywhere.
  std::vector<int64_t> head(b.id.begin(), b.id.begin() + 300);
  int64_t high = std::count_if(head.begin(), head.end(), [](int64_t x) { return x >= 1500; });
  EXPECT_GT(high, 100);
  EXPECT_LT(high, 200);
}

TEST(AllToAll, SortMatchesStableSortForNumbersAndStringsBothWays) {
  Dataset base = Range(4000, 5).Filter(Uneven).Map(Enrich);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 4000; ++i) {
    if (i < 1000 || i % 50 == 0) ids.push_back(i);
  }
  auto r_of = [](int64_t id) { return (id * 7919) % 101; };
  auto s_of = [](int64_t id) { return "s" + std::to_string(id * 13 % 5); };
  {
    std::vector<int64_t> want = ids;
    std::stable_sort(want.begin(), want.end(), [&](int64_t a, int64_t b) { return r_of(a) < r_of(b); });
    Rows got = Collect(base.Sort("r"));
    EXPECT_EQ(got.id, want) << "ascending int64 key, stable";
    std::vector<int64_t> desc = ids;
    std::stable_sort(desc.begin(), desc.end(), [&](int64_t a, int64_t b) { return r_of(a) > r_of(b); });
    EXPECT_EQ(Collect(base.Sort("r", true)).id, desc) << "descending, stable";
  }
  {
    std::vector<int64_t> want = ids;
    std::stable_sort(want.begin(), want.end(), [&](int64_t a, int64_t b) { return s_of(a) < s_of(b); });
    EXPECT_EQ(Collect(base.Sort("s")).id, want) << "string key";
  }
  {
    std::vector<int64_t> want = ids;
    std::stable_sort(want.begin(), want.end(), [&](int64_t a, int64_t b) { return a > b; });
    Dataset sorted = base.Sort("v", true).Limit(50);
    EXPECT_EQ(Collect(sorted).id, std::vector<int64_t>(want.begin(), want.begin() + 50))
        << "float64 key, before a Limit";
    const DatasetStats stats = sorted.Stats();
    const OperatorStats* op = Find(stats, "Sort(v, descending)");
    ASSERT_NE(op, nullptr) << stats.ToString();
    EXPECT_EQ(op->rows, static_cast<int64_t>(ids.size()));
    EXPECT_GT(op->bytes, 0u);
    EXPECT_GE(op->tasks, 1);
  }
}

TEST(AllToAll, GroupByAggregateMatchesAMapSortedByKey) {
  Dataset base = Range(5000, 6).Filter(Uneven).Map(Enrich);
  struct Acc {
    int64_t n = 0, sum_id = 0, min_r = INT64_MAX, max_r = INT64_MIN;
    double sum_v = 0, sum_v2 = 0;
  };
  std::map<std::string, Acc> ref;
  for (int64_t id = 0; id < 5000; ++id) {
    if (!(id < 1000 || id % 50 == 0)) continue;
    Acc& a = ref["s" + std::to_string(id * 13 % 5)];
    a.n += 1;
    a.sum_id += id;
    a.min_r = std::min<int64_t>(a.min_r, (id * 7919) % 101);
    a.max_r = std::max<int64_t>(a.max_r, (id * 7919) % 101);
    a.sum_v += id / 2.0;
    a.sum_v2 += (id / 2.0) * (id / 2.0);
  }
  Dataset agg = base.GroupBy("s").Aggregate({Count(), Sum("id"), Min("r"), Max("r"), Mean("v"), Std("v")});
  std::vector<Row> rows = agg.Take(100);
  ASSERT_EQ(rows.size(), ref.size());
  size_t i = 0;
  for (const auto& [key, a] : ref) {
    const Row& row = rows[i++];
    EXPECT_EQ(std::get<std::string>(row.at("s")), key);
    EXPECT_EQ(std::get<int64_t>(row.at("count()")), a.n);
    EXPECT_EQ(std::get<int64_t>(row.at("sum(id)")), a.sum_id);
    EXPECT_EQ(std::get<int64_t>(row.at("min(r)")), a.min_r);
    EXPECT_EQ(std::get<int64_t>(row.at("max(r)")), a.max_r);
    const double mean = a.sum_v / a.n;
    EXPECT_NEAR(std::get<double>(row.at("mean(v)")), mean, 1e-9 * std::abs(mean));
    const double var = (a.sum_v2 - a.n * mean * mean) / (a.n - 1);
    EXPECT_NEAR(std::get<double>(row.at("std(v)")), std::sqrt(var), 1e-6 * std::sqrt(var));
  }
  // An int64 key, and the schema Ray gives.
  Dataset by_k = base.GroupBy("k").Aggregate({Count()});
  std::vector<Row> k_rows = by_k.Take(10);
  ASSERT_EQ(k_rows.size(), 7u);
  for (int64_t k = 0; k < 7; ++k) EXPECT_EQ(std::get<int64_t>(k_rows[k].at("k")), k);
  EXPECT_EQ(by_k.Schema().names(), (std::vector<std::string>{"k", "count()"}));
}

TEST(AllToAll, MapGroupsCallsTheFunctionOncePerGroupWithAllItsRows) {
  Dataset out = Range(3000, 5).Map(Enrich).GroupBy("k").MapGroups(Summarize);
  std::vector<Row> rows = out.Take(100);
  ASSERT_EQ(rows.size(), 7u);
  for (int64_t k = 0; k < 7; ++k) {
    int64_t n = 0, sum = 0;
    for (int64_t id = k; id < 3000; id += 7) {
      ++n;
      sum += id;
    }
    EXPECT_EQ(std::get<int64_t>(rows[k].at("k")), k);
    EXPECT_EQ(std::get<int64_t>(rows[k].at("n")), n);
    EXPECT_EQ(std::get<int64_t>(rows[k].at("sum")), sum);
  }
  std::string error = ErrorOf([] { Range(100, 3).Map(Enrich).GroupBy("k").MapGroups(ThrowOnThree).Count(); });
  EXPECT_THAT(error, HasSubstr("MapGroups(k"));
  EXPECT_THAT(error, HasSubstr("ThrowOnThree"));
  EXPECT_THAT(error, HasSubstr("no threes"));
  EXPECT_THAT(error, HasSubstr("key 3"));
  EXPECT_THAT(error, HasSubstr("failed on member"));
  EXPECT_THAT(error, HasSubstr("std::runtime_error: no threes"));
  // The other members were stopped and the reservation given back: the next exchange runs.
  EXPECT_EQ(Range(100, 3).Map(Enrich).GroupBy("k").Aggregate({Count()}).Count(), 7);
}

TEST(AllToAll, EmptyDatasetsGiveEmptyResults) {
  EXPECT_EQ(Range(0).Sort("id").Count(), 0);
  EXPECT_EQ(Range(0).RandomShuffle(1).Count(), 0);
  EXPECT_EQ(Range(0).GroupBy("id").Aggregate({Count()}).Count(), 0);
  Dataset four = Range(0).Repartition(4).Materialize();
  EXPECT_EQ(four.NumBlocks(), 4);
  EXPECT_EQ(four.Count(), 0);
  EXPECT_EQ(Range(100, 4).Filter(Uneven).Filter(Uneven).Map(Enrich).Sort("v").Count(), 100);
}

TEST(AllToAll, BadInputIsAClearError) {
  EXPECT_THAT(ErrorOf([] { Range(100, 2).Sort("nope").Count(); }),
              HasSubstr("Sort(nope): there is no column \"nope\" to sort by; the dataset has id"));
  EXPECT_THAT(ErrorOf([] { Range(100, 2).GroupBy("nope").Aggregate({Count()}).Count(); }),
              HasSubstr("no column \"nope\" to group by"));
  EXPECT_THAT(ErrorOf([] { Range(100, 2).Map(Enrich).GroupBy("k").Aggregate({Sum("s")}).Count(); }),
              HasSubstr("sum(s) needs a numeric column of scalars"));
  EXPECT_THAT(ErrorOf([] { Range(100, 2).Map(Enrich).GroupBy("k").Aggregate({Mean("missing")}).Count(); }),
              HasSubstr("no column \"missing\" to aggregate"));
  EXPECT_THAT(ErrorOf([] { Range(10).Repartition(0); }), HasSubstr("num_blocks must be a positive"));
  EXPECT_THAT(ErrorOf([] { Range(10).Sort(""); }), HasSubstr("the key is empty"));
  EXPECT_THAT(ErrorOf([] { Range(10).GroupBy("id").Aggregate({}); }), HasSubstr("no aggregations"));
}

}  // namespace
