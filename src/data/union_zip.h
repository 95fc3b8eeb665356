#pragma once
// Union and Zip (internal): plans whose source is other plans' output. union_zip.cc
// explains how they run.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/executor.h"

namespace prism::data::internal {

/// Runs `ops` over the plan `state` (any source: reads, blocks, Union, Zip). Defined in
/// dataset.cc; the Union and Zip executions call it for their inputs.
std::unique_ptr<StreamingExecutor> Execute(const DatasetState& state, const std::vector<Op>& ops);

/// Runs `ops` over a Union or Zip source (state.source->combine != kNone).
std::unique_ptr<StreamingExecutor> ExecuteCombined(const DatasetState& state, const std::vector<Op>& ops);

/// The schema a plan's blocks have, when it is known without running it (a Range or
/// stored blocks with no operators); std::nullopt otherwise.
std::optional<data::Schema> KnownSchema(const DatasetState& state);

/// Rows [begin, end) of block `block` (an index into a list of blocks).
struct Piece {
  int64_t block = 0;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t rows() const { return end - begin; }
  bool operator==(const Piece&) const = default;
};

/// Cuts a run of blocks with `source_rows` rows each into consecutive runs of
/// `target_rows` rows each: for every target, the pieces of source blocks that make it,
/// in order (Zip re-cuts the other side to this side's blocks; equal splits cut the rows
/// into equal runs). Source blocks with no rows are skipped. Pure. Throws prism::Error if
/// the targets hold more rows than the sources (fewer is fine: the rest is left out).
std::vector<std::vector<Piece>> CutToBoundaries(const std::vector<int64_t>& target_rows,
                                                const std::vector<int64_t>& source_rows);

/// Zip's names for the other side's columns: a name this side has gets "_1" (then "_2",
/// ... while that is taken too), as Ray's zip does. Pure.
std::vector<std::string> ZipColumnNames(const std::vector<std::string>& left,
                                        const std::vector<std::string>& right);

/// A block made of these pieces of stored blocks: a piece of one block is a slice (no
/// copy), several are concatenated. Runs where the blocks are (inside a task).
Block AssemblePieces(const std::vector<Block>& blocks, const std::vector<Piece>& pieces);

}  // namespace prism::data::internal
