#pragma once
// Progress lines of an execution on the driver (Ray Data's per-operator progress bars):
//
//   ReadHdf5->Map(AddOne): 12/40 blocks, 1.2M rows
//   MapBatches(Model): 9/40 blocks, 0.9M rows, peak 4 actors
//
// The formatting is pure; ProgressBars writes to a stream at most once per interval, in
// place on a terminal (ANSI cursor moves), as plain lines otherwise.

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "prism/data/dataset.h"

namespace prism::data::internal {

/// A row count for people: "950", "12.3K", "1.2M", "3.4B".
std::string FormatCount(int64_t n);

/// One operator's line: "<name>: <blocks>/<total> blocks, <rows> rows" (total < 0:
/// "<blocks> blocks"), with ", peak <n> actors" for an actor pool and ", <n> retries" if any.
std::string FormatProgressLine(const OperatorStats& op, int64_t total_blocks);

/// Draws one line per operator. Not thread-safe (the executor's thread).
class ProgressBars {
 public:
  using Clock = std::chrono::steady_clock;
  /// `terminal`: redraw in place; else append the lines at each update.
  ProgressBars(std::ostream& out, bool terminal,
               std::chrono::milliseconds interval = std::chrono::milliseconds(200));
  /// Draws the lines of `stats` (totals[i]: operator i's total blocks, -1 unknown) if
  /// `interval` passed since the last draw, or `force`, and they changed.
  void Update(const DatasetStats& stats, const std::vector<int64_t>& totals, Clock::time_point now,
              bool force = false);

 private:
  std::ostream& out_;
  bool terminal_;
  std::chrono::milliseconds interval_;
  std::optional<Clock::time_point> last_;
  std::string drawn_;      // the text last drawn
  size_t drawn_lines_ = 0;
};

}  // namespace prism::data::internal
