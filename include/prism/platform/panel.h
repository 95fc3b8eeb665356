#pragma once
// A library's view on the job's dashboard (README, "Dashboard"): a titled table with a few
// lines above it, shown in the dashboard's Libraries view, in its end-of-job report and by
// `prism status`. Tune shows its trials this way.
//
//   platform::Panel p;
//   p.title = "Tune: " + experiment;
//   p.lines = {"Trials at once: 4/4"};
//   p.columns = {"Trial name", "status", "lr"};
//   p.rows = {{"trial_00000", "RUNNING", "0.01"}};
//   if (platform::DashboardOn()) platform::PublishPanel("tune/" + experiment, p);
//
// A panel lives in the job's KV store under "prism.dashboard/panel/<name>" (so any rank may
// publish, and the head keeps it); rank 0's dashboard reads it when a page asks.

#include <string>
#include <vector>

namespace prism::platform {

struct Panel {
  std::string title;
  std::vector<std::string> lines;    // short lines above the table
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // at most 500 are kept
};

/// Whether this job's dashboard setting is on (Config::dashboard): a library may skip
/// building a panel when it is not. False outside Init and in an InProcessCluster.
/// Thread-safe.
bool DashboardOn();

/// Shows `panel` under `name` (non-empty, e.g. "tune/my_experiment"), replacing what `name`
/// showed; nothing is stored when DashboardOn() is false. One KV write; any rank, any
/// thread. Throws prism::Error from kv::Put (a panel above kv::kMaxValueBytes).
void PublishPanel(const std::string& name, const Panel& panel);

}  // namespace prism::platform
