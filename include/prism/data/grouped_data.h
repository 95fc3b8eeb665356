#pragma once
// prism::data::GroupedData: a Dataset grouped by a key column (Ray Data's GroupedData), and
// the aggregations it computes.
//
//   using namespace prism::data;
//   Dataset stats = ds.GroupBy("user").Aggregate({Count(), Sum("clicks"), Mean("dwell"), Std("dwell")});
//   // columns: user, count(), sum(clicks), mean(dwell), std(dwell); one row per user, sorted by user
//
//   Block Normalize(Block group) { ... }   // all rows of one key; returns any rows
//   PRISM_REMOTE(Normalize);
//   Dataset normalized = ds.GroupBy("user").MapGroups(Normalize);
//
// Rows are range-partitioned by key over one task per rank (see Dataset::Sort), so a group
// never spans tasks and the output comes sorted by key. Keys are scalar columns of any dtype
// (numeric, bool or string).

#include <string>
#include <type_traits>
#include <vector>

#include "prism/data/dataset.h"

namespace prism::data {

/// One aggregation of GroupedData::Aggregate: Count(), Sum(col), Min(col), Max(col),
/// Mean(col), Std(col, ddof). Output columns are named as Ray names them: "count()",
/// "sum(x)", "min(x)", "max(x)", "mean(x)", "std(x)". Sum, Min and Max of an integer column
/// are int64, of a float column float64; Count is int64; Mean and Std are float64 (Std is
/// NaN for a group of at most ddof rows).
struct AggregateFn {
  enum Kind { kCount, kSum, kMin, kMax, kMean, kStd };
  Kind kind = kCount;
  std::string column;
  int ddof = 1;
};

/// The number of rows of each group.
AggregateFn Count();
/// The sum of numeric column `column` over each group.
AggregateFn Sum(const std::string& column);
/// The smallest value of numeric column `column` in each group.
AggregateFn Min(const std::string& column);
/// The largest value of numeric column `column` in each group.
AggregateFn Max(const std::string& column);
/// The mean of numeric column `column` over each group.
AggregateFn Mean(const std::string& column);
/// The standard deviation of numeric column `column` over each group, with `ddof` delta
/// degrees of freedom (Ray's default 1: the sample standard deviation).
AggregateFn Std(const std::string& column, int ddof = 1);

/// A Dataset grouped by a key column (Dataset::GroupBy). A cheap value.
class GroupedData {
 public:
  GroupedData(Dataset dataset, std::string key);

  /// One row per distinct key, sorted by key: the key column, then one column per
  /// aggregation in order (Ray's aggregate). A missing column, or Sum/Min/Max/Mean/Std of a
  /// column that is not numeric, fails the consumption with a prism::Error naming it.
  /// Throws prism::Error for an empty list.
  Dataset Aggregate(const std::vector<AggregateFn>& aggs) const;

  /// Calls `fn` (Block -> Block, registered with PRISM_REMOTE) once per group with all the
  /// group's rows (sorted by key, each group's rows in input order) and concatenates what it
  /// returns (Ray's map_groups); every result must have the same columns. An exception in fn
  /// fails the consumption with a prism::Error naming MapGroups, the function and the key.
  template <typename F>
  Dataset MapGroups(F fn) const {
    static_assert(std::is_invocable_r_v<Block, F, const Block&>,
                  "prism::data::GroupedData::MapGroups takes a function Block -> Block registered "
                  "with PRISM_REMOTE");
    return WithMapGroups(platform::RegisteredName(fn, "prism::data::GroupedData::MapGroups"));
  }

  /// MapGroups of a binding's function (BoundUdf): the trampoline gets each group.
  Dataset MapGroups(const BoundUdf& fn) const;

  /// The key column's name.
  const std::string& key() const { return key_; }

 private:
  Dataset WithMapGroups(const std::string& fn) const;

  Dataset dataset_;
  std::string key_;
};

}  // namespace prism::data
