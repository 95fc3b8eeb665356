#pragma once
// What feeds the dashboard (src/dashboard/) from a running session, with the `dashboard`
// setting on:
//
//   * every rank but 0: a RankReporter publishes a sample of itself (/proc, its object
//     store) once a second on the channel kDashboardChannel, from the transport's periodic
//     tick (the progress thread's 100 ms on_tick: no thread of its own). The heartbeat
//     would not do: a rank sends one only after rank_timeout/6 without other traffic, so a
//     busy rank never does, and the transport drops them on arrival.
//   * rank 0: the DashboardFeed reads that channel, samples itself, asks the state API for
//     the rest when a page asks (at most every 0.5 s), serves the dashboard, writes the
//     endpoint file <session_dir>/dashboard.url, and at Shutdown the report (or when a
//     SIGTERM ends the job outside a run that stops cleanly: the report says so). A thread
//     of its own ("prism-dash-hist") keeps the history the plots draw: once a second the
//     ranks' task counts (state::ListWorkers, one head call of O(ranks)) and memory.

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dashboard/dashboard.h"
#include "dashboard/history.h"
#include "dashboard/proc_sample.h"
#include "dashboard/setting.h"
#include "prism/internal/channel_inbox.h"

namespace prism::internal {

class Node;

/// Whether the running session's dashboard setting is on (runtime.cc); false without one.
bool DashboardSettingOn();

/// The channel the ranks' samples travel on, to rank 0.
inline constexpr const char* kDashboardChannel = "prism.dashboard";

/// A worker rank's half: Tick on the progress thread every ~100 ms. Not thread-safe (one
/// caller).
class RankReporter {
 public:
  /// Primes the CPU rates, so that the first sample sent has them.
  RankReporter(int rank, Node& node);
  void Tick();

 private:
  int rank_;
  Node& node_;
  int64_t last_ns_ = 0;
  dashboard::ProcSampler sampler_;
};

/// Rank 0's half. Start and Stop from the thread that runs Init and Shutdown.
class DashboardFeed {
 public:
  struct Options {
    dashboard::DashboardSetting setting;
    std::string session_dir;
    std::string log_dir;
    std::string job_id;
  };
  DashboardFeed(Options options, Node& node);
  ~DashboardFeed();

  /// Opens the samples' channel and, unless report-only, binds the server, prints its URL
  /// and writes the endpoint file. A server that cannot bind is a warning, not an error
  /// (the job runs without it).
  void Start();
  /// Stops the server and the history, removes the endpoint file, then writes the report
  /// (while the session still answers the state API) and prints its path; `ended_by`, if
  /// not empty, says in the report why the job ended (a preemption signal). Never throws.
  /// Idempotent: a second call does nothing.
  void Stop(const std::string& ended_by = "");

  /// Where the report goes: $PRISM_STORAGE_PATH (else ~/prism_results) +
  /// /prism-dashboard-<job id>.html, where Train and Tune keep their results
  /// (prism::DefaultStoragePath's rule; the core does not link prism::checkpoint).
  std::string ReportPath() const;
  std::string EndpointFile() const { return options_.session_dir + "/dashboard.url"; }

 private:
  /// The job now, with up to `ended_limit` of each of the latest finished and failed tasks
  /// (durations, rates, the timeline).
  dashboard::Snapshot Collect(size_t ended_limit);
  std::optional<std::string> LogTail(int rank) const;
  dashboard::LogSearchResult SearchLogs(const std::string& needle, std::optional<int> rank,
                                        const dashboard::LogSearchLimits& limits);
  /// Reads the samples that came in (under mu_).
  void DrainSamples();
  /// The history's thread: a point once a second until Stop.
  void RecordHistory();

  Options options_;
  Node& node_;
  std::shared_ptr<ChannelInbox> inbox_;
  std::mutex mu_;  // the samples and the self-sampler (the server's thread, then Stop's)
  std::map<int, dashboard::RankSample> samples_;
  dashboard::ProcSampler self_sampler_;
  dashboard::History history_;
  std::vector<int> ranks_;  // every rank, as the latest snapshot or history point saw them
  std::unique_ptr<dashboard::Dashboard> server_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread history_thread_;
};

}  // namespace prism::internal
