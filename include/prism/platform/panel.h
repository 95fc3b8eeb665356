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
// A panel may also carry numbers for the dashboard's /metrics (Prometheus: Serve's request
// counts and latency histograms under Ray's names, Tune's trials by state, Train's reports)
// and curves that the page and the report plot (a run's loss by report, each trial's
// metric by iteration).
//
// A panel lives in the job's KV store under "prism.dashboard/panel/<name>" (so any rank may
// publish, and the head keeps it); rank 0's dashboard reads it when a page asks.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace prism::platform {

/// One series of a Prometheus metric. Samples of one name from every panel are written
/// together under the first one's type and help.
struct PanelMetric {
  std::string name;  // e.g. "ray_serve_num_http_requests"; a counter's samples get "_total"
  std::string type;  // "counter", "gauge" or "histogram"
  std::string help;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;  // counter and gauge
  // histogram: upper bounds (ascending, +Inf implied), the count at or below each
  // (cumulative, as Prometheus's le buckets), and the count and sum of every observation
  std::vector<double> bounds;
  std::vector<uint64_t> buckets;
  uint64_t count = 0;
  double sum = 0;
};

/// A curve the dashboard plots: y against x (a report's number, a trial's iteration).
struct PanelSeries {
  std::string name;   // the line's label, e.g. "loss" or "trial_00001"
  std::string plot;   // series of one plot share it, e.g. "score by iteration"
  std::vector<std::pair<double, double>> points;  // at most 500 are kept (evenly thinned)
};

struct Panel {
  std::string title;
  std::vector<std::string> lines;    // short lines above the table
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // at most 500 are kept
  std::vector<PanelMetric> metrics;  // at most 2000 are kept
  std::vector<PanelSeries> series;   // at most 32 are kept
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
