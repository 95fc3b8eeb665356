#pragma once
// The experiment's status as the driver prints it (Ray Tune's console table): one header
// block, a row per trial (status, parameters, iterations, time, the metric), and the
// counts by status; the final one names the best trial. The dashboard's Tune panel shows
// the same rows.

#include <cstdint>
#include <string>
#include <vector>

#include "prism/platform/panel.h"
#include "prism/tune/schedulers.h"

namespace prism::tune::internal {

struct StatusView {
  std::string experiment, path, metric, mode, scheduler_line;
  double elapsed_s = 0;
  size_t capacity = 0, running = 0;
  int64_t total = -1;  // trials the searcher will make; -1: unknown
  bool final = false;
  std::vector<const Trial*> trials;
  std::vector<std::string> params;  // the searched parameters (constants are not shown)
  size_t max_rows = 20;  // more trials: the first and last rows, and a count in between
};

std::string FormatStatus(const StatusView& view);
/// The same status as a panel of the job's dashboard (prism/platform/panel.h): every trial,
/// and the best so far.
platform::Panel StatusPanel(const StatusView& view);

}  // namespace prism::tune::internal
