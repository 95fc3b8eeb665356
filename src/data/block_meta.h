#pragma once
// BlockMeta (internal): what the driver knows of a block without fetching it. Made by the
// tasks that produce blocks (the executor's stages, actor pools, all-to-all members);
// defined in executor.cc.

#include <cstdint>
#include <string>
#include <vector>

#include "prism/data/block.h"

namespace prism::data::internal {

/// What the driver learns about a block without fetching it (a task's second return).
struct BlockMeta {
  int64_t rows = 0;
  uint64_t bytes = 0;
  std::vector<std::string> names;
  std::vector<int32_t> dtypes;
  std::vector<std::vector<int64_t>> shapes;
  std::string part_file;  // a Write's part ("" when the block had no rows)
  int64_t part_rows = 0;
  uint64_t part_bytes = 0;
  int32_t rank = -1;  // where the task that made it ran (its object lives there); -1 unknown
  int32_t part_rank = -1;  // who wrote part_file: CommitParts names them when it is missing
  std::string part_host;

  /// The metadata of `block` (rows, bytes, schema; no part file, rank unknown).
  static BlockMeta Of(const Block& block);
  /// The schema named by names, dtypes and shapes.
  data::Schema ToSchema() const;
  /// Records this rank and host as part_file's writer (a write task calls it).
  void SetPartWriter();

  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & rows & bytes & names & dtypes & shapes & part_file & part_rows & part_bytes & rank & part_rank & part_host;
  }
};

}  // namespace prism::data::internal
