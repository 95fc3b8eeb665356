#pragma once
// Rank 0's dashboard: a live page of the job, its JSON views and Prometheus /metrics on
// prism_http's server, and the same page frozen into one self-contained HTML report.
//
// The dashboard knows nothing of the runtime: it is handed a function that returns a
// Snapshot (runtime/dashboard_feed.cc gathers it from the state API and the ranks'
// samples) and one that returns a rank's log tail. Requests:
//
//   GET /                      the page (HTML and JS from the binary; no CDN)
//   GET /api/<view>            job, ranks, tasks, actors, placement_groups, kv, timeline,
//                              panels (the libraries'), snapshot (all of them)
//   GET /api/logs?rank=N       the end of rank N's log, if rank 0 can read it
//   GET /api/logs/search?q=TEXT[&rank=N][&limit=M]
//                              the lines of each rank's log (or rank N's) that contain
//                              TEXT, ignoring case (dashboard/log_search.h's bounds; 400 for
//                              an empty or overlong TEXT, a bad N or M)
//   GET /api/history           the job's samples over time (tasks/s, memory per rank)
//   GET /metrics               Prometheus text (dashboard/metrics.h)
//
// Bound beyond loopback, every request needs ?token=<the dashboard's token> (403 without);
// the logged URL carries it. Snapshots are cached for `min_refresh_s`, so any number of
// open pages costs the head at most one state API round per period.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "dashboard/log_search.h"
#include "dashboard/setting.h"
#include "dashboard/snapshot.h"
#include "http/server.h"

namespace prism::dashboard {

/// 32 hex digits from std::random_device.
std::string RandomToken();

struct DashboardSources {
  /// The job now. Called on the server's thread, at most once per min_refresh_s; an
  /// exception answers 503 with its message.
  std::function<Snapshot()> snapshot;
  /// The end of rank `rank`'s log, or nullopt when rank 0 cannot read it.
  std::function<std::optional<std::string>(int rank)> log_tail;
  /// Searches every rank's log (`rank` nullopt) or one rank's, within `limits`.
  std::function<LogSearchResult(const std::string& needle, std::optional<int> rank, const LogSearchLimits& limits)>
      log_search;
};

/// What the server answers, without the server (tests call it directly). Thread-safe.
class Routes {
 public:
  Routes(DashboardSources sources, std::string token, double min_refresh_s);
  http::Response Answer(const http::Request& request);

 private:
  Snapshot Current();
  http::Response SearchLogs(const std::string& query);
  DashboardSources sources_;
  std::string token_;
  int64_t min_refresh_ns_;
  std::mutex mu_;
  bool have_ = false;
  int64_t taken_ns_ = 0;  // steady clock
  Snapshot cached_;
};

/// The live dashboard: binds at construction (throws prism::Error naming the address when
/// it cannot), serves on one I/O thread until Stop.
class Dashboard {
 public:
  Dashboard(const DashboardSetting& where, DashboardSources sources, double min_refresh_s = 0.5);
  ~Dashboard();
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  /// "http://host:port/", with "?token=..." when one is needed: what to open.
  std::string url() const { return url_; }
  uint16_t port() const;
  /// Closes the socket and joins the thread. Idempotent.
  void Stop();

 private:
  std::unique_ptr<Routes> routes_;
  std::unique_ptr<http::Server> server_;
  std::string url_;
};

/// The page: the live one polls the JSON views; the report (below) reads inlined data.
const std::string& PageHtml();

/// The end-of-job report: the page with the snapshot and each readable rank's log tail
/// inlined as JSON, no requests needed. One file, opened from any browser.
std::string ReportHtml(const Snapshot& snapshot, const std::map<int, std::string>& log_tails);

}  // namespace prism::dashboard
