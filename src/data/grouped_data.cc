// The all-to-all transforms of the Dataset API (Repartition, RandomShuffle, Sort, GroupBy)
// and GroupedData: each appends one all-to-all operator to the plan (all_to_all.h).

#include "prism/data/grouped_data.h"

#include <utility>

#include "data/all_to_all.h"
#include "data/executor.h"
#include "data/plan.h"

namespace prism::data {

using internal::AggSpec;
using internal::AllToAllSpec;

Dataset Dataset::WithAllToAll(const AllToAllSpec& spec) const {
  auto state = std::make_shared<internal::DatasetState>();
  state->source = state_->source;
  state->ops = state_->ops;
  internal::Op op;
  op.kind = internal::Op::kAllToAll;
  op.exchange = spec;
  state->ops.push_back(std::move(op));
  state->options = state_->options;
  return Dataset(std::move(state));
}

Dataset Dataset::Repartition(int64_t num_blocks, bool shuffle) const {
  if (num_blocks <= 0) {
    throw Error("prism::data::Dataset::Repartition(" + std::to_string(num_blocks) +
                "): num_blocks must be a positive number of blocks");
  }
  AllToAllSpec spec;
  spec.kind = AllToAllSpec::kRepartition;
  spec.num_blocks = num_blocks;
  spec.shuffle = shuffle;
  return WithAllToAll(spec);
}

Dataset Dataset::RandomShuffle(std::optional<uint64_t> seed) const {
  AllToAllSpec spec;
  spec.kind = AllToAllSpec::kRandomShuffle;
  spec.has_seed = seed.has_value();
  spec.seed = seed.value_or(0);
  return WithAllToAll(spec);
}

Dataset Dataset::Sort(const std::string& key, bool descending) const {
  if (key.empty()) throw Error("prism::data::Dataset::Sort: the key is empty; name the column to sort by");
  AllToAllSpec spec;
  spec.kind = AllToAllSpec::kSort;
  spec.key = key;
  spec.descending = descending;
  return WithAllToAll(spec);
}

GroupedData Dataset::GroupBy(const std::string& key) const {
  if (key.empty()) throw Error("prism::data::Dataset::GroupBy: the key is empty; name the column to group by");
  return GroupedData(*this, key);
}

GroupedData::GroupedData(Dataset dataset, std::string key) : dataset_(std::move(dataset)), key_(std::move(key)) {}

Dataset GroupedData::Aggregate(const std::vector<AggregateFn>& aggs) const {
  if (aggs.empty()) {
    throw Error("prism::data::GroupedData::Aggregate: no aggregations given (Count(), Sum(col), Min(col), "
                "Max(col), Mean(col), Std(col))");
  }
  AllToAllSpec spec;
  spec.kind = AllToAllSpec::kAggregate;
  spec.key = key_;
  for (const AggregateFn& a : aggs) {
    if (a.kind != AggregateFn::kCount && a.column.empty()) {
      throw Error("prism::data::GroupedData::Aggregate: an aggregation other than Count() has no column");
    }
    spec.aggs.push_back({static_cast<int32_t>(a.kind), a.column, a.ddof});
  }
  return dataset_.WithAllToAll(spec);
}

Dataset GroupedData::WithMapGroups(const std::string& fn) const {
  AllToAllSpec spec;
  spec.kind = AllToAllSpec::kMapGroups;
  spec.key = key_;
  spec.fn = fn;
  return dataset_.WithAllToAll(spec);
}

Dataset GroupedData::MapGroups(const BoundUdf& fn) const {
  AllToAllSpec spec;
  spec.kind = AllToAllSpec::kMapGroups;
  spec.key = key_;
  spec.fn = fn.trampoline;
  spec.has_bound = true;
  spec.bound = fn.bound;
  spec.display = fn.name;
  return dataset_.WithAllToAll(spec);
}

AggregateFn Count() { return {AggregateFn::kCount, "", 1}; }
AggregateFn Sum(const std::string& column) { return {AggregateFn::kSum, column, 1}; }
AggregateFn Min(const std::string& column) { return {AggregateFn::kMin, column, 1}; }
AggregateFn Max(const std::string& column) { return {AggregateFn::kMax, column, 1}; }
AggregateFn Mean(const std::string& column) { return {AggregateFn::kMean, column, 1}; }
AggregateFn Std(const std::string& column, int ddof) { return {AggregateFn::kStd, column, ddof}; }

}  // namespace prism::data
