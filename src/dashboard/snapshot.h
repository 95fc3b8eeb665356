#pragma once
// What the dashboard shows: one Snapshot of the job, assembled on rank 0 from the state API
// (prism/state.h) and the ranks' periodic samples, then turned into the JSON the pages poll,
// the Prometheus text of /metrics and the data inlined in the end-of-job report.
//
// Pure logic: Assemble takes the lists and the samples as values, so the collector is
// tested without MPI (tests/unit/dashboard_test.cc); the runtime gathers them
// (runtime/dashboard_feed.cc).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dashboard/proc_sample.h"
#include "prism/platform/panel.h"
#include "prism/state.h"

namespace prism::dashboard {

/// What a rank reports about itself each period (rank 0 samples itself when asked).
struct RankSample {
  int rank = 0;
  int64_t time_ns = 0;  // wall clock of the sampling rank
  ProcSample proc;
  state::ObjectStoreState store;
};

/// Bytes for the sample channel, and back (nullopt for bytes it did not write).
std::string EncodeRankSample(const RankSample& sample);
std::optional<RankSample> DecodeRankSample(const std::string& bytes);

/// Where libraries' panels live in the KV store (prism/platform/panel.h), and the most the
/// dashboard shows.
inline constexpr const char* kPanelKeyPrefix = "prism.dashboard/panel/";
inline constexpr size_t kMaxPanels = 16;
inline constexpr size_t kMaxPanelRows = 500;
inline constexpr size_t kMaxPanelMetrics = 2000;
inline constexpr size_t kMaxPanelSeries = 32;
inline constexpr size_t kMaxSeriesPoints = 500;

/// At most `max` of `points`, evenly spaced, the first and the last among them.
std::vector<std::pair<double, double>> ThinPoints(const std::vector<std::pair<double, double>>& points, size_t max);

/// A panel as the KV store holds it (JSON), and back (nullopt for bytes it did not write).
std::string EncodePanel(const platform::Panel& panel);
std::optional<platform::Panel> DecodePanel(const std::string& bytes);

/// One row of the ranks table.
struct RankView {
  int rank = 0;
  std::string host;
  std::string node_id;
  int pid = 0;
  bool is_head = false;
  bool alive = true;
  double num_cpus = 0;                 // the rank's CPU resource
  std::optional<RankSample> sample;    // none yet (a rank reports once a second)
  int64_t sample_age_ms = -1;          // -1 without a sample
  uint64_t running_tasks = 0;          // SUBMITTED_TO_WORKER or RUNNING_IN_RAY_GET here
  int num_actors = 0;                  // live actors it hosts
  uint64_t tasks_finished = 0;
};

/// How long one function's recent tasks ran (from RUNNING to their end), and how many ended
/// in the last minute.
struct FunctionTimes {
  std::string name;
  uint64_t count = 0;        // ended tasks kept and measured
  double p50_ms = 0;
  double p99_ms = 0;
  double per_s_last_min = 0;  // ended in the 60 s before the snapshot, per second
};

/// One point of the job's history (dashboard/history.h): what rank 0 sampled once a period.
struct HistoryPoint {
  int64_t time_ns = 0;                   // wall clock
  uint64_t tasks_ended = 0;              // tasks (and actor calls) the ranks ended so far
  std::map<int, uint64_t> rss_bytes;     // by rank: the process's resident memory
  std::map<int, uint64_t> store_bytes;   // by rank: its object store's bytes in memory
};

/// One ended task on the timeline: where and when it ran.
struct TaskSpan {
  int rank = -1;
  std::string name;
  int64_t start_ns = 0;  // RUNNING
  int64_t end_ns = 0;    // FINISHED or FAILED
  bool failed = false;
};

/// The job at one moment.
struct Snapshot {
  int64_t time_ns = 0;
  state::JobState job;
  std::vector<RankView> ranks;
  state::TaskSummary summary;
  std::map<std::string, uint64_t> tasks_by_state;  // over every function and type
  std::vector<state::TaskState> failures;          // the latest failed tasks, newest last
  std::vector<FunctionTimes> times;                // by function, of the ended tasks kept
  std::vector<TaskSpan> spans;                     // the ended tasks kept, oldest first
  std::vector<state::ActorState> actors;
  /// By actor id: calls submitted to it and not ended (waiting for arguments or resources,
  /// queued on its rank, or running). Actors without any are absent.
  std::map<std::string, uint64_t> pending_calls;
  std::vector<state::PlacementGroupState> placement_groups;
  std::vector<std::string> kv_keys;
  bool kv_keys_truncated = false;
  std::vector<std::pair<std::string, platform::Panel>> panels;  // by name
  std::vector<HistoryPoint> history;  // oldest first (the feed adds it)
  /// Why the job ended, in a report written on a preemption signal ("" otherwise).
  std::string ended_by;
};

/// The inputs of one snapshot, as the state API returns them.
struct StateLists {
  std::vector<state::JobState> jobs;
  std::vector<state::NodeState> nodes;
  std::vector<state::WorkerState> workers;
  state::TaskSummary summary;
  /// Tasks not yet ended: per-rank counts (SUBMITTED_TO_WORKER, RUNNING_IN_RAY_GET) and
  /// actors' pending calls (every live state of ACTOR_TASKs).
  std::vector<state::TaskState> live_tasks;
  std::vector<state::TaskState> failures;
  /// Ended tasks (FINISHED and FAILED, in any order) for durations, rates and the timeline.
  std::vector<state::TaskState> ended;
  std::vector<state::ActorState> actors;
  std::vector<state::PlacementGroupState> placement_groups;
  std::vector<std::string> kv_keys;
  std::vector<std::pair<std::string, platform::Panel>> panels;
};

/// The most keys the KV view lists (the rest are counted as truncated).
inline constexpr size_t kMaxKvKeys = 1000;
/// The most failures the tasks view lists (the newest).
inline constexpr size_t kMaxFailures = 20;

/// Joins the lists and the latest sample of each rank (by rank; missing ones are fine)
/// into a Snapshot taken at `now_ns` (wall clock, for the samples' ages).
Snapshot Assemble(StateLists lists, const std::map<int, RankSample>& samples, int64_t now_ns);

// The JSON views the pages poll (GET /api/<name>) and the report inlines, all of them
// together as SnapshotJson.
nlohmann::json RanksJson(const Snapshot& s);
nlohmann::json TasksJson(const Snapshot& s);
nlohmann::json ActorsJson(const Snapshot& s);
nlohmann::json PlacementGroupsJson(const Snapshot& s);
nlohmann::json KvJson(const Snapshot& s);
/// [{"name", "title", "lines", "columns", "rows"}, ...]
nlohmann::json PanelsJson(const Snapshot& s);
/// {"origin_ns", "now_ns", "names": [...], "spans": [[rank, name index, start ms, end ms,
/// failed], ...]}: times in ms since the job's start, compact for thousands of spans.
nlohmann::json TimelineJson(const Snapshot& s);
nlohmann::json JobJson(const Snapshot& s);
/// {"t_ms": [ms since the job's start], "tasks_ended": [...], "tasks_per_s": [rate since the
/// point before; 0 for the first], "ranks": {"<rank>": {"rss": [...], "store": [...]}}},
/// a rank's value null where that point lacks it.
nlohmann::json HistoryJson(const Snapshot& s);
nlohmann::json SnapshotJson(const Snapshot& s);

}  // namespace prism::dashboard
