// The dashboard's feed from a running session (dashboard_feed.h). Rank 0 gathers a
// snapshot with the public state API, in process (each call a round to its own head, no
// other rank asked), plus the latest sample each rank published; logs are read from
// <log_dir>/rank-N.log and .out where rank 0 can see them (its own host, or a log_dir on a
// shared file system).
#include "runtime/dashboard_feed.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/log.h"
#include "http/server.h"
#include "node_manager/node.h"
#include "prism/errors.h"
#include "prism/kv.h"
#include "prism/platform/panel.h"
#include "prism/preemption.h"
#include "prism/state.h"
#include "common/thread_name.h"
#include "runtime/stop_signals.h"

namespace prism::internal {

namespace {

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// How many bytes of a log's end the page shows (and the report keeps per rank).
constexpr std::streamoff kLogTailBytes = 64 << 10;
/// Ended tasks of each outcome a live snapshot measures; the report takes every one rank 0
/// keeps (task_table_size).
constexpr size_t kLiveEndedTasks = 2000;
/// Tasks dispatched and not ended that a snapshot counts per rank (at most this many of each
/// of the two states: a million queued tasks are not copied twice a second).
constexpr size_t kLiveTasks = 10000;
constexpr size_t kReportEndedTasks = size_t{1} << 40;

/// The last `bytes` of `path`, from a line start; nullopt if it cannot be opened.
std::optional<std::string> Tail(const std::string& path, std::streamoff bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > bytes ? size - bytes : 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (from > 0) {
    const size_t nl = text.find('\n');
    text = "[... " + std::to_string(from) + " bytes before]\n" + (nl == std::string::npos ? text : text.substr(nl + 1));
  }
  return text;
}

}  // namespace

RankReporter::RankReporter(int rank, Node& node) : rank_(rank), node_(node) { sampler_.Sample(SteadyNs()); }

void RankReporter::Tick() {
  const int64_t now = SteadyNs();
  if (last_ns_ != 0 && now - last_ns_ < 1'000'000'000) return;
  last_ns_ = now;
  dashboard::RankSample sample;
  sample.rank = rank_;
  sample.time_ns = WallNs();
  sample.proc = sampler_.Sample(now);
  sample.store = node_.LocalObjectStore();
  const std::string bytes = dashboard::EncodeRankSample(sample);
  node_.Publish(kDashboardChannel, Buffer(bytes.data(), bytes.size()));
}

DashboardFeed::DashboardFeed(Options options, Node& node) : options_(std::move(options)), node_(node) {}

DashboardFeed::~DashboardFeed() {
  SetLastWordsOnSigterm({});
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (history_thread_.joinable()) history_thread_.join();
  if (server_) server_->Stop();
}

void DashboardFeed::Start() {
  inbox_ = node_.OpenChannel(kDashboardChannel);
  {
    std::lock_guard<std::mutex> lock(mu_);
    self_sampler_.Sample(SteadyNs());  // primes the CPU rates of the first snapshot
  }
  history_thread_ = std::thread([this] {
    NameThisThread("prism-dash-hist");
    std::unique_lock<std::mutex> lock(stop_mu_);
    while (!stopping_) {
      lock.unlock();
      RecordHistory();
      lock.lock();
      stop_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
    }
  });
  // A SIGTERM outside a guarded run ends rank 0 without Shutdown: the report first.
  SetLastWordsOnSigterm([this] { Stop("SIGTERM outside a run that stops cleanly: the job was ended"); });
  if (options_.setting.mode != dashboard::DashboardSetting::Mode::kServe) return;
  dashboard::DashboardSources sources;
  sources.snapshot = [this] { return Collect(kLiveEndedTasks); };
  sources.log_tail = [this](int rank) { return LogTail(rank); };
  sources.log_search = [this](const std::string& needle, std::optional<int> rank,
                              const dashboard::LogSearchLimits& limits) { return SearchLogs(needle, rank, limits); };
  try {
    server_ = std::make_unique<dashboard::Dashboard>(options_.setting, std::move(sources));
    http::WriteEndpointFile(EndpointFile(), server_->url());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism: the dashboard is off for this job: %s\n", e.what());
    server_.reset();
    return;
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string port = std::to_string(server_->port());
  std::fprintf(stderr, "prism: dashboard at %s (also in %s)%s\n", server_->url().c_str(),
               EndpointFile().c_str(),
               options_.setting.NeedsToken()
                   ? ""
                   : ("; from another machine: ssh -L " + port + ":localhost:" + port + " " + host +
                      ", then http://localhost:" + port + "/").c_str());
  PRISM_LOG_INFO("dashboard at " << server_->url());
}

dashboard::Snapshot DashboardFeed::Collect(size_t ended_limit) {
  dashboard::StateLists lists;
  lists.jobs = state::ListJobs();
  lists.nodes = state::ListNodes();
  lists.workers = state::ListWorkers();
  lists.summary = state::SummarizeTasks();
  for (const char* live : {"SUBMITTED_TO_WORKER", "RUNNING_IN_RAY_GET"}) {
    state::TaskFilter f;
    f.state = live;
    f.limit = kLiveTasks;
    for (auto& t : state::ListTasks(f)) lists.live_tasks.push_back(std::move(t));
  }
  for (const char* waiting : {"PENDING_ARGS_AVAIL", "PENDING_NODE_ASSIGNMENT"}) {  // actors' pending calls
    state::TaskFilter f;
    f.state = waiting;
    f.type = "ACTOR_TASK";
    f.limit = kLiveTasks;
    for (auto& t : state::ListTasks(f)) lists.live_tasks.push_back(std::move(t));
  }
  for (const char* end : {"FINISHED", "FAILED"}) {
    state::TaskFilter f;
    f.state = end;
    f.limit = ended_limit;
    for (auto& t : state::ListTasks(f)) lists.ended.push_back(std::move(t));
  }
  for (const auto& t : lists.ended) {
    if (t.state == "FAILED") lists.failures.push_back(t);  // oldest first; Assemble keeps the newest
  }
  lists.actors = state::ListActors();
  lists.placement_groups = state::ListPlacementGroups();
  lists.kv_keys = kv::List("");
  for (const auto& key : lists.kv_keys) {
    if (key.rfind(dashboard::kPanelKeyPrefix, 0) != 0) continue;
    if (lists.panels.size() == dashboard::kMaxPanels) break;
    if (auto bytes = kv::Get(key)) {
      if (auto panel = dashboard::DecodePanel(*bytes)) {
        lists.panels.emplace_back(key.substr(std::string(dashboard::kPanelKeyPrefix).size()), std::move(*panel));
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  DrainSamples();
  ranks_.clear();
  for (const auto& w : lists.workers) ranks_.push_back(w.rank);
  dashboard::Snapshot snapshot = dashboard::Assemble(std::move(lists), samples_, WallNs());
  snapshot.history = history_.points();
  return snapshot;
}

void DashboardFeed::DrainSamples() {
  for (auto& m : inbox_->Drain()) {
    if (auto s = dashboard::DecodeRankSample(m.bytes)) samples_[s->rank] = std::move(*s);
  }
  dashboard::RankSample self;
  self.rank = node_.rank();
  self.time_ns = WallNs();
  self.proc = self_sampler_.Sample(SteadyNs());
  self.store = node_.LocalObjectStore();
  samples_[self.rank] = self;
}

void DashboardFeed::RecordHistory() {
  dashboard::HistoryPoint point;
  std::vector<int> ranks;
  try {
    for (const auto& w : state::ListWorkers()) {
      point.tasks_ended += w.num_tasks_finished;
      ranks.push_back(w.rank);
    }
  } catch (const std::exception&) {
    return;  // the session is ending
  }
  std::lock_guard<std::mutex> lock(mu_);
  DrainSamples();
  ranks_ = std::move(ranks);
  point.time_ns = WallNs();
  for (const auto& [rank, sample] : samples_) {
    point.rss_bytes[rank] = sample.proc.process_rss_bytes;
    point.store_bytes[rank] = sample.store.used_bytes;
  }
  history_.Add(std::move(point));
}

dashboard::LogSearchResult DashboardFeed::SearchLogs(const std::string& needle, std::optional<int> rank,
                                                     const dashboard::LogSearchLimits& limits) {
  std::vector<int> ranks;
  if (rank) {
    ranks.push_back(*rank);
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    ranks = ranks_;
  }
  dashboard::LogSearchResult result;
  for (int r : ranks) {
    const std::string base = options_.log_dir + "/rank-" + std::to_string(r);
    bool read = false;
    for (const char* ext : {".log", ".out"}) {
      if (result.truncated) break;
      read = dashboard::SearchLogFile(base + ext, needle, r, limits, result) || read;
    }
    if (!read) result.unreadable_ranks.push_back(r);
    if (result.truncated) break;
  }
  return result;
}

std::optional<std::string> DashboardFeed::LogTail(int rank) const {
  const std::string base = options_.log_dir + "/rank-" + std::to_string(rank);
  std::optional<std::string> log = Tail(base + ".log", kLogTailBytes);
  std::optional<std::string> out = Tail(base + ".out", kLogTailBytes);
  if (!log && !out) return std::nullopt;
  std::string text;
  if (log) text += "== " + base + ".log\n" + *log;
  if (out) text += std::string(text.empty() ? "" : "\n") + "== " + base + ".out (stdout and stderr)\n" + *out;
  return text;
}

std::string DashboardFeed::ReportPath() const {
  std::string dir;
  if (const char* s = std::getenv("PRISM_STORAGE_PATH"); s && *s) {
    dir = s;
  } else {
    const char* home = std::getenv("HOME");
    dir = std::string(home && *home ? home : ".") + "/prism_results";
  }
  return dir + "/prism-dashboard-" + options_.job_id + ".html";
}

void DashboardFeed::Stop(const std::string& ended_by) {
  // Called by Shutdown, or on the signal watcher's thread just before a SIGTERM ends the
  // process: the first caller writes the report; a later one returns at once.
  std::unique_lock<std::mutex> stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  stop_cv_.notify_all();
  stop_lock.unlock();
  SetLastWordsOnSigterm({});
  if (history_thread_.joinable() && history_thread_.get_id() != std::this_thread::get_id()) history_thread_.join();
  stop_lock.lock();
  if (server_) {
    server_->Stop();
    ::unlink(EndpointFile().c_str());
  }
  if (!options_.setting.WritesReport()) return;
  std::string why = ended_by;
  if (why.empty() && prism::PreemptionSignal() != 0) {
    why = std::string(StopSignalName(prism::PreemptionSignal())) +
          " received during the job (preemption or time limit)";
  }
  const std::string path = ReportPath();
  try {
    const auto started = std::chrono::steady_clock::now();
    dashboard::Snapshot snapshot = Collect(kReportEndedTasks);
    snapshot.ended_by = why;
    std::map<int, std::string> logs;
    for (const auto& r : snapshot.ranks) {
      if (auto text = LogTail(r.rank)) logs[r.rank] = std::move(*text);
    }
    const std::string html = dashboard::ReportHtml(snapshot, logs);
    const std::string dir = path.substr(0, path.rfind('/'));
    if (!dir.empty()) {
      // mkdir -p, without <filesystem>'s exceptions.
      for (size_t at = 1; at != std::string::npos; at = dir.find('/', at + 1)) {
        ::mkdir(dir.substr(0, at).c_str(), 0755);
      }
      ::mkdir(dir.c_str(), 0755);
    }
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << html;
      if (!out.flush()) throw std::runtime_error("cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp + " to " + path);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    std::fprintf(stderr, "prism: dashboard report %s (%zu KiB, %.0f ms)\n", path.c_str(), html.size() >> 10, ms);
    PRISM_LOG_INFO("dashboard report " << path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism: could not write the dashboard report %s: %s\n", path.c_str(), e.what());
  }
}

}  // namespace prism::internal

namespace prism::platform {

bool DashboardOn() { return internal::DashboardSettingOn(); }

void PublishPanel(const std::string& name, const Panel& panel) {
  if (name.empty()) throw Error("prism: platform::PublishPanel needs a name (e.g. \"tune/<experiment>\")");
  if (!DashboardOn()) return;
  kv::Put(dashboard::kPanelKeyPrefix + name, dashboard::EncodePanel(panel));
}

}  // namespace prism::platform
