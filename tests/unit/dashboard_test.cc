// The dashboard without MPI (src/dashboard/): /proc sampling against a fake /proc, samples
// on the wire, the snapshot's assembly, the Prometheus text (a strict line check here, and
// python3-prometheus-client's parser when installed), the routes with and without a token,
// the report, and the server over a real loopback socket.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "dashboard/dashboard.h"
#include "dashboard/history.h"
#include "dashboard/log_search.h"
#include "dashboard/metrics.h"
#include "dashboard/proc_sample.h"
#include "dashboard/setting.h"
#include "dashboard/snapshot.h"
#include "dashboard/status.h"
#include "prism/errors.h"
#include "runtime/launch.h"
#include "runtime/settings.h"

namespace prism::dashboard {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

struct FakeProc {
  fs::path root = fs::temp_directory_path() / ("prism-dashboard-proc-" + std::to_string(::getpid()));
  FakeProc() { fs::remove_all(root); }
  ~FakeProc() { fs::remove_all(root); }
  /// utime/stime of the process and the host's cpu line (user idle), in ticks.
  void Set(uint64_t utime, uint64_t stime, uint64_t host_user, uint64_t host_idle) {
    // A command name with spaces and a ')' inside, as /proc allows.
    Write(root / "self/stat", "4242 (my (odd) app) S 1 1 1 0 -1 0 0 0 0 0 " + std::to_string(utime) + " " +
                                  std::to_string(stime) + " 0 0 20 0 9 0 100 0 0\n");
    Write(root / "self/statm", "1000 250 100 1 0 200 0\n");
    Write(root / "stat", "cpu  " + std::to_string(host_user) + " 0 0 " + std::to_string(host_idle) +
                             " 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\ncpu1 1 0 0 1 0 0 0 0 0 0\nintr 1\n");
    Write(root / "meminfo", "MemTotal:       16000000 kB\nMemFree:         1000 kB\nMemAvailable:   4000000 kB\n");
  }
};

TEST(DashboardProcTest, RatesComeFromTheDifferenceBetweenTwoSamples) {
  FakeProc proc;
  proc.Set(100, 50, 1000, 1000);
  ProcSampler sampler(proc.root.string());
  ProcSample first = sampler.Sample(1'000'000'000);
  EXPECT_EQ(first.process_cpu_percent, 0);  // no rate yet
  EXPECT_EQ(first.process_rss_bytes, 250u * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(first.host_mem_total_bytes, 16000000ull * 1024);
  EXPECT_EQ(first.host_mem_used_bytes, 12000000ull * 1024);
  EXPECT_EQ(first.host_cpus, 2u);
  const long hz = ::sysconf(_SC_CLK_TCK);
  // One second later: the process used hz/2 ticks (half a core); the host 3/4 busy.
  proc.Set(100 + hz / 4, 50 + hz / 4, 1000 + 300, 1000 + 100);
  ProcSample second = sampler.Sample(2'000'000'000);
  EXPECT_NEAR(second.process_cpu_percent, 50.0, 1.0);
  EXPECT_NEAR(second.host_cpu_percent, 75.0, 0.01);
}

TEST(DashboardProcTest, ReadsTheRealProcAndNeverThrowsOnAMissingOne) {
  ProcSampler real;
  ProcSample s = real.Sample(1);
  EXPECT_GT(s.process_rss_bytes, 0u);
  EXPECT_GT(s.host_mem_total_bytes, 0u);
  EXPECT_GT(s.host_cpus, 0u);
  ProcSampler none("/nonexistent-proc");
  ProcSample z = none.Sample(1);
  EXPECT_EQ(z.process_rss_bytes, 0u);
  EXPECT_EQ(z.host_mem_total_bytes, 0u);
}

RankSample Sample(int rank, int64_t time_ns, uint64_t used) {
  RankSample s;
  s.rank = rank;
  s.time_ns = time_ns;
  s.proc.process_cpu_percent = 12.5 * (rank + 1);
  s.proc.process_rss_bytes = 100 << 20;
  s.proc.host_cpu_percent = 40;
  s.proc.host_cpus = 8;
  s.proc.host_mem_total_bytes = 16ull << 30;
  s.proc.host_mem_used_bytes = 4ull << 30;
  s.store.rank = rank;
  s.store.capacity_bytes = 1ull << 30;
  s.store.used_bytes = used;
  s.store.spilled_bytes = 7;
  s.store.num_objects = 3;
  return s;
}

TEST(DashboardSnapshotTest, SamplesRoundTripAndGarbageIsRefused) {
  RankSample s = Sample(2, 123456789, 4096);
  std::optional<RankSample> back = DecodeRankSample(EncodeRankSample(s));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->time_ns, 123456789);
  EXPECT_EQ(back->proc.process_cpu_percent, 37.5);
  EXPECT_EQ(back->store.used_bytes, 4096u);
  EXPECT_EQ(back->store.spilled_bytes, 7u);
  EXPECT_FALSE(DecodeRankSample("not json"));
  EXPECT_FALSE(DecodeRankSample("{\"rank\": 1}"));
}

/// A job of 3 ranks: tasks of two functions, a failure, two actors, a group, KV keys.
StateLists ThreeRanks() {
  StateLists l;
  state::JobState job;
  job.job_id = "job-1";
  job.num_ranks = 3;
  job.start_time_ns = 1'000'000'000;
  l.jobs.push_back(job);
  for (int r = 0; r < 3; ++r) {
    state::NodeState n;
    n.rank = r;
    n.host = "host" + std::to_string(r / 2);
    n.state = "ALIVE";
    n.resources_total = {{"CPU", 2}};
    l.nodes.push_back(n);
    state::WorkerState w;
    w.rank = r;
    w.host = n.host;
    w.pid = 100 + r;
    w.worker_type = r == 0 ? "DRIVER" : "WORKER";
    w.num_tasks_finished = 10 * r;
    w.num_actors = r == 1 ? 2 : 0;
    l.workers.push_back(w);
  }
  state::TaskSummaryEntry square{"Square", "NORMAL_TASK", {{"FINISHED", 5}, {"SUBMITTED_TO_WORKER", 2}}};
  state::TaskSummaryEntry fail{"Fail", "NORMAL_TASK", {{"FAILED", 1}}};
  l.summary.summary = {{"Square", square}, {"Fail", fail}};
  l.summary.total_tasks = 8;
  for (int r : {1, 1, 2}) {
    state::TaskState t;
    t.state = "SUBMITTED_TO_WORKER";
    t.rank = r;
    l.live_tasks.push_back(t);
  }
  state::TaskState failed;
  failed.task_id = "00000000000000aa";
  failed.func_name = "Fail";
  failed.state = "FAILED";
  failed.error_type = "std::runtime_error";
  failed.error_message = "boom \"quoted\"\n</script><b>";
  l.failures.push_back(failed);
  // Ended tasks: Square ran 10, 20, ..., 100 ms on ranks 1 and 2, ending at 9.1 .. 10 s;
  // the failed one ran 5 ms; one without a RUNNING time is left out.
  for (int i = 1; i <= 10; ++i) {
    state::TaskState t;
    t.func_name = "Square";
    t.state = "FINISHED";
    t.rank = 1 + i % 2;
    const int64_t end = 9'000'000'000 + i * 100'000'000;
    t.events = {{"SUBMITTED_TO_WORKER", 1}, {"RUNNING", end - i * 10'000'000}, {"FINISHED", end}};
    l.ended.push_back(t);
  }
  failed.events = {{"RUNNING", 2'000'000'000}, {"FAILED", 2'005'000'000}};
  failed.rank = 2;
  l.ended.push_back(failed);
  state::TaskState never_ran;
  never_ran.func_name = "Square";
  never_ran.state = "FAILED";
  never_ran.events = {{"FAILED", 3}};
  l.ended.push_back(never_ran);
  for (const char* state : {"ALIVE", "DEAD"}) {
    state::ActorState a;
    a.actor_id = std::string("actor-") + state;
    a.class_name = "Counter";
    a.state = state;
    a.rank = 1;
    l.actors.push_back(a);
  }
  state::PlacementGroupState g;
  g.placement_group_id = "pg1";
  g.state = "CREATED";
  g.strategy = "PACK";
  g.bundles = {{{"CPU", 1}}};
  g.bundle_ranks = {2};
  l.placement_groups.push_back(g);
  l.kv_keys = {"a", "b"};
  platform::Panel tune;
  tune.title = "Tune: exp";
  tune.lines = {"Number of trials: 2"};
  tune.columns = {"Trial name", "status"};
  tune.rows = {{"t0", "RUNNING"}, {"t1", "TERMINATED"}};
  l.panels.emplace_back("tune/exp", tune);
  return l;
}

TEST(DashboardSnapshotTest, AssemblesRanksTasksActorsAndCountsRunningTasksPerRank) {
  std::map<int, RankSample> samples = {{0, Sample(0, 9'000'000'000, 100)}, {1, Sample(1, 8'500'000'000, 200)}};
  Snapshot s = Assemble(ThreeRanks(), samples, 10'000'000'000);
  ASSERT_EQ(s.ranks.size(), 3u);
  EXPECT_TRUE(s.ranks[0].is_head);
  EXPECT_EQ(s.ranks[0].num_cpus, 2);
  EXPECT_EQ(s.ranks[1].running_tasks, 2u);
  EXPECT_EQ(s.ranks[2].running_tasks, 1u);
  EXPECT_EQ(s.ranks[1].num_actors, 2);
  EXPECT_EQ(s.ranks[0].sample_age_ms, 1000);
  EXPECT_EQ(s.ranks[1].sample_age_ms, 1500);
  EXPECT_FALSE(s.ranks[2].sample);  // rank 2 has not reported yet
  EXPECT_EQ(s.ranks[2].sample_age_ms, -1);
  EXPECT_EQ(s.tasks_by_state["FINISHED"], 5u);
  EXPECT_EQ(s.tasks_by_state["FAILED"], 1u);
  EXPECT_EQ(s.tasks_by_state["SUBMITTED_TO_WORKER"], 2u);

  nlohmann::json j = SnapshotJson(s);
  EXPECT_EQ(j["job"]["job_id"], "job-1");
  EXPECT_EQ(j["ranks"].size(), 3u);
  EXPECT_EQ(j["ranks"][1]["store"]["used_bytes"], 200);
  EXPECT_TRUE(j["ranks"][2]["proc"].is_null());
  EXPECT_EQ(j["tasks"]["by_state"]["FINISHED"], 5);
  EXPECT_EQ(j["tasks"]["failures"][0]["error_type"], "std::runtime_error");
  EXPECT_EQ(j["actors"][1]["state"], "DEAD");
  EXPECT_EQ(j["placement_groups"][0]["bundle_ranks"][0], 2);
  EXPECT_EQ(j["kv"]["keys"].size(), 2u);
}

TEST(DashboardSnapshotTest, DurationsRatesAndTheTimelineComeFromTheEndedTasks) {
  StateLists l = ThreeRanks();
  for (int i = 0; i < 30; ++i) l.failures.push_back(l.failures.front());
  Snapshot s = Assemble(std::move(l), {}, 10'000'000'000);
  EXPECT_EQ(s.failures.size(), kMaxFailures) << "the newest 20 failures";
  ASSERT_EQ(s.times.size(), 2u);
  const FunctionTimes& sq = s.times[1].name == "Square" ? s.times[1] : s.times[0];
  EXPECT_EQ(sq.count, 10u);
  EXPECT_NEAR(sq.p50_ms, 60, 0.001);  // of 10..100 ms, the nearest rank to the middle
  EXPECT_NEAR(sq.p99_ms, 100, 0.001);
  EXPECT_NEAR(sq.per_s_last_min, 10 / 60.0, 1e-9);
  ASSERT_EQ(s.spans.size(), 11u);
  EXPECT_EQ(s.spans.front().name, "Fail") << "oldest first";
  EXPECT_TRUE(s.spans.front().failed);
  nlohmann::json t = TimelineJson(s);
  EXPECT_EQ(t["origin_ns"], 1'000'000'000);
  EXPECT_EQ(t["names"], nlohmann::json::array({"Fail", "Square"}));
  EXPECT_EQ(t["spans"][0], nlohmann::json::array({2, 0, 1000.0, 1005.0, 1}));
  nlohmann::json tasks = TasksJson(s);
  EXPECT_EQ(tasks["times"]["Square"]["count"], 10);
}

TEST(DashboardSnapshotTest, PanelsRoundTripAndShowInTheJson) {
  platform::Panel p;
  p.title = "T";
  p.lines = {"a line"};
  p.columns = {"x"};
  for (size_t i = 0; i < kMaxPanelRows + 3; ++i) p.rows.push_back({std::to_string(i)});
  std::optional<platform::Panel> back = DecodePanel(EncodePanel(p));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->title, "T");
  EXPECT_EQ(back->lines, p.lines);
  EXPECT_EQ(back->rows.size(), kMaxPanelRows) << "rows beyond the cap are dropped";
  EXPECT_FALSE(DecodePanel("{}"));
  nlohmann::json j = PanelsJson(Assemble(ThreeRanks(), {}, 2));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["name"], "tune/exp");
  EXPECT_EQ(j[0]["rows"][1][1], "TERMINATED");
}

TEST(DashboardSnapshotTest, ListsAtMostAThousandKvKeys) {
  StateLists l = ThreeRanks();
  l.kv_keys.assign(kMaxKvKeys + 5, "k");
  Snapshot s = Assemble(std::move(l), {}, 1);
  EXPECT_EQ(s.kv_keys.size(), kMaxKvKeys);
  EXPECT_TRUE(s.kv_keys_truncated);
}

/// Every line of `text` is a comment (# HELP/# TYPE) or a sample of the metric last typed:
/// name{label="value",...} number, with labels escaped as the format says.
void CheckExpositionFormat(const std::string& text) {
  static const std::regex kHelp(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*)");
  static const std::regex kType(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|histogram))");
  static const std::regex kSample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? (-?[0-9.eE+-]+|NaN|[+-]Inf))");
  std::istringstream lines(text);
  std::string line, typed, type;
  std::set<std::string> seen;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    std::smatch m;
    if (std::regex_match(line, m, kType)) {
      typed = m[1];
      type = m[2];
      EXPECT_TRUE(seen.insert(typed).second) << "metric typed twice: " << typed;
    } else if (std::regex_match(line, kHelp)) {
    } else {
      ASSERT_TRUE(std::regex_match(line, m, kSample)) << "line " << n << " is not a sample: " << line;
      // A counter's samples may end in _total; a histogram's are _bucket, _sum and _count.
      std::set<std::string> names = {typed};
      if (type == "counter") names.insert(typed + "_total");
      if (type == "histogram") names = {typed + "_bucket", typed + "_sum", typed + "_count"};
      EXPECT_TRUE(names.count(m[1])) << "line " << n << ": a sample outside its metric's block: " << line;
    }
  }
  EXPECT_EQ(text.back(), '\n');
}

TEST(DashboardMetricsTest, RaysNamesInAStrictTextFormat) {
  StateLists l = ThreeRanks();
  l.summary.summary["we\"ird\\name\n"] = {"we\"ird\\name\n", "NORMAL_TASK", {{"FINISHED", 1}}};
  std::map<int, RankSample> samples = {{0, Sample(0, 1, 100)}, {1, Sample(1, 1, 200)}};
  const std::string text = PrometheusText(Assemble(std::move(l), samples, 2));
  CheckExpositionFormat(text);
  for (const char* expected : {
           "ray_tasks{Name=\"Square\",State=\"FINISHED\"} 5\n",
           "ray_tasks{Name=\"Fail\",State=\"FAILED\"} 1\n",
           "ray_tasks{Name=\"we\\\"ird\\\\name\\n\",State=\"FINISHED\"} 1\n",
           "ray_actors{Name=\"Counter\",State=\"ALIVE\"} 1\n",
           "ray_actors{Name=\"Counter\",State=\"DEAD\"} 1\n",
           "ray_placement_groups{State=\"CREATED\"} 1\n",
           "ray_object_store_memory{rank=\"1\",host=\"host0\",Location=\"MMAP_SHM\"} 200\n",
           "ray_object_store_memory{rank=\"1\",host=\"host0\",Location=\"SPILLED\"} 7\n",
           "ray_node_cpu_utilization{rank=\"0\",host=\"host0\"} 40\n",
           "ray_node_mem_used{rank=\"0\",host=\"host0\"} 4294967296\n",
           "prism_rank_running_tasks{rank=\"2\",host=\"host1\"} 1\n",
           "prism_rank_alive{rank=\"2\",host=\"host1\"} 1\n",
           "prism_kv_keys 2\n"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing " << expected << " in\n" << text;
  }
  // Rank 2 sent no sample: no per-rank sample series for it.
  EXPECT_EQ(text.find("ray_node_mem_used{rank=\"2\""), std::string::npos);
}

/// What prometheus_client's parser made of `text`: the exit status of a Python script that
/// parses it into `fams` (name to family) and then runs `checks`, and its first line.
struct ParserRun {
  int status = -1;
  bool read = false;  // the script printed a line
  std::string first_line;
};
ParserRun RunPrometheusParser(const std::string& text, const std::string& checks, const std::string& tag) {
  const fs::path file = fs::temp_directory_path() / ("prism-" + tag + "-" + std::to_string(::getpid()) + ".txt");
  std::ofstream(file) << text;
  const std::string cmd =
      "/usr/bin/python3 -c 'import sys\n"
      "from prometheus_client.parser import text_string_to_metric_families as parse\n"
      "fams = {f.name: f for f in parse(open(sys.argv[1]).read())}\n" +
      checks + "' " + file.string();
  ParserRun run;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return run;
  char buf[64] = {};
  run.read = std::fgets(buf, sizeof buf, p) != nullptr;
  run.first_line = buf;
  run.status = ::pclose(p);
  fs::remove(file);
  return run;
}

TEST(DashboardMetricsTest, PrometheusClientsParserReadsItBack) {
  if (std::system("/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-prometheus-client is not installed";
  }
  std::map<int, RankSample> samples = {{0, Sample(0, 1, 100)}, {1, Sample(1, 1, 200)}};
  const std::string text = PrometheusText(Assemble(ThreeRanks(), samples, 2));
  const ParserRun run = RunPrometheusParser(text,
      "t = {tuple(sorted(s.labels.items())): s.value for s in fams[\"ray_tasks\"].samples}\n"
      "assert t[((\"Name\", \"Square\"), (\"State\", \"FINISHED\"))] == 5, t\n"
      "m = [s for s in fams[\"ray_object_store_memory\"].samples if s.labels[\"rank\"] == \"1\"]\n"
      "assert sorted(s.value for s in m) == [7, 200], m\n"
      "assert fams[\"prism_spilled_bytes\"].type == \"counter\", fams[\"prism_spilled_bytes\"].type\n"
      "print(len(fams))", "metrics");
  ASSERT_NE(run.status, -1) << "popen failed";
  ASSERT_EQ(run.status, 0) << "the parser refused the text:\n" << text;
  ASSERT_TRUE(run.read);
  EXPECT_GE(std::atoi(run.first_line.c_str()), 15) << "metric families parsed";
}

TEST(DashboardSettingTest, ParsesEveryFormAndRefusesOthers) {
  DashboardSetting s;
  std::string why;
  ASSERT_TRUE(ParseDashboardSetting("off", &s, &why));
  EXPECT_EQ(s.mode, DashboardSetting::Mode::kOff);
  EXPECT_FALSE(s.WritesReport());
  ASSERT_TRUE(ParseDashboardSetting("Loopback", &s, &why));
  EXPECT_EQ(s.mode, DashboardSetting::Mode::kServe);
  EXPECT_EQ(s.host, "127.0.0.1");
  EXPECT_EQ(s.port, 0);
  EXPECT_FALSE(s.NeedsToken());
  ASSERT_TRUE(ParseDashboardSetting("*:8265", &s, &why));
  EXPECT_EQ(s.host, "0.0.0.0");
  EXPECT_EQ(s.port, 8265);
  EXPECT_TRUE(s.NeedsToken());
  ASSERT_TRUE(ParseDashboardSetting("10.1.2.3:0", &s, &why));
  EXPECT_TRUE(s.NeedsToken());
  ASSERT_TRUE(ParseDashboardSetting("localhost:9000", &s, &why));
  EXPECT_FALSE(s.NeedsToken());
  ASSERT_TRUE(ParseDashboardSetting("report", &s, &why));
  EXPECT_EQ(s.mode, DashboardSetting::Mode::kReportOnly);
  EXPECT_TRUE(s.WritesReport());
  for (const char* bad : {"yes please", "1.2.3.4:", ":80", "host:99999", "host:8x"}) {
    EXPECT_FALSE(ParseDashboardSetting(bad, &s, &why)) << bad;
    EXPECT_NE(why.find("expected off, loopback"), std::string::npos) << why;
  }
}

internal::Settings ResolveWith(std::map<std::string, std::string> vars, std::vector<std::string> args,
                               const Config& code = {}) {
  internal::EnvFn env = [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  return internal::ResolveSettings(code, args, env, internal::DetectLaunch(env),
                                   internal::HostFacts{8, 8ull << 30, "node1"}, "launch");
}

TEST(DashboardSettingTest, OffByDefaultThenCodeEnvironmentAndFlagInThatOrder) {
  EXPECT_EQ(ResolveWith({}, {}).dashboard.mode, DashboardSetting::Mode::kOff);
  Config code;
  code.dashboard = "*:0";
  EXPECT_EQ(ResolveWith({}, {}, code).dashboard.host, "0.0.0.0");
  internal::Settings env = ResolveWith({{"PRISM_DASHBOARD", "loopback"}}, {}, code);
  EXPECT_EQ(env.dashboard.mode, DashboardSetting::Mode::kServe);
  EXPECT_EQ(env.dashboard.host, "127.0.0.1");
  EXPECT_EQ(ResolveWith({{"PRISM_DASHBOARD", "loopback"}}, {"--prism-dashboard=report"}).dashboard.mode,
            DashboardSetting::Mode::kReportOnly);
  try {
    ResolveWith({{"PRISM_DASHBOARD", "everywhere"}}, {});
    FAIL() << "PRISM_DASHBOARD=everywhere was taken";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("PRISM_DASHBOARD=\"everywhere\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected off, loopback"), std::string::npos) << e.what();
  }
}

http::Request Get(const std::string& path, const std::string& query = "") {
  http::Request r;
  r.method = "GET";
  r.path = path;
  r.query = query;
  r.target = path + (query.empty() ? "" : "?" + query);
  return r;
}

TEST(DashboardRoutesTest, AnswersEachViewAndCachesTheSnapshot) {
  int calls = 0;
  DashboardSources sources;
  sources.snapshot = [&] {
    ++calls;
    return Assemble(ThreeRanks(), {{1, Sample(1, 1, 200)}}, 2);
  };
  sources.log_tail = [](int rank) -> std::optional<std::string> {
    if (rank == 1) return std::string("line of rank 1\n");
    return std::nullopt;
  };
  Routes routes(sources, "", 60.0);
  http::Response page = routes.Answer(Get("/"));
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("ranks-table"), std::string::npos);
  http::Response metrics = routes.Answer(Get("/metrics"));
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4; charset=utf-8");
  CheckExpositionFormat(metrics.body);
  for (const char* view : {"job", "ranks", "tasks", "actors", "placement_groups", "kv", "timeline", "panels", "snapshot"}) {
    http::Response r = routes.Answer(Get(std::string("/api/") + view));
    EXPECT_EQ(r.status, 200) << view;
    EXPECT_TRUE(nlohmann::json::accept(r.body)) << view;
  }
  EXPECT_EQ(calls, 1) << "one snapshot serves every view within min_refresh_s";
  nlohmann::json log = nlohmann::json::parse(routes.Answer(Get("/api/logs", "rank=1")).body);
  EXPECT_TRUE(log["reachable"]);
  EXPECT_EQ(log["text"], "line of rank 1\n");
  EXPECT_FALSE(nlohmann::json::parse(routes.Answer(Get("/api/logs", "rank=2")).body)["reachable"]);
  EXPECT_EQ(routes.Answer(Get("/api/logs", "rank=x")).status, 400);
  EXPECT_EQ(routes.Answer(Get("/nope")).status, 404);
  http::Request post = Get("/metrics");
  post.method = "POST";
  EXPECT_EQ(routes.Answer(post).status, 405);
}

TEST(DashboardRoutesTest, ATokenGuardsEveryPathAndAFailingSnapshotIs503) {
  DashboardSources sources;
  sources.snapshot = []() -> Snapshot { throw std::runtime_error("the session ended"); };
  Routes routes(sources, "abc123", 0);
  EXPECT_EQ(routes.Answer(Get("/")).status, 403);
  EXPECT_EQ(routes.Answer(Get("/metrics", "token=wrong")).status, 403);
  EXPECT_EQ(routes.Answer(Get("/", "token=abc123")).status, 200);
  http::Response r = routes.Answer(Get("/api/ranks", "x=1&token=abc123"));
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("the session ended"), std::string::npos);
}

TEST(DashboardReportTest, InlinesTheSnapshotSoThatNoStringEndsTheScript) {
  Snapshot s = Assemble(ThreeRanks(), {{1, Sample(1, 1, 200)}}, 2);
  const std::string html = ReportHtml(s, {{1, "log </script> line"}});
  EXPECT_NE(html.find("<title>Prism report: job job-1</title>"), std::string::npos);
  const std::string start = "window.PRISM_REPORT = ";
  const size_t at = html.find(start);
  ASSERT_NE(at, std::string::npos);
  const size_t end = html.find(";</script>", at);
  ASSERT_NE(end, std::string::npos);
  const std::string data = html.substr(at + start.size(), end - at - start.size());
  EXPECT_EQ(data.find('<'), std::string::npos) << "a '<' in the inlined JSON";
  nlohmann::json j = nlohmann::json::parse(data);
  EXPECT_EQ(j["snapshot"]["tasks"]["failures"][0]["error_message"], "boom \"quoted\"\n</script><b>");
  EXPECT_EQ(j["logs"]["1"], "log </script> line");
  EXPECT_LT(at, html.find("const REPORT")) << "the data comes before the page's script";
}

TEST(DashboardStatusTest, TheTerminalSummaryReadsTheSnapshotOrAReport) {
  Snapshot s = Assemble(ThreeRanks(), {{1, Sample(1, 1, 200)}}, 10'000'000'000);
  const std::string text = StatusText(SnapshotJson(s), "http://127.0.0.1:1/", true);
  for (const char* expected : {"Prism job job-1: 3 ranks", "up 0 min 9 s (live: http://127.0.0.1:1/)",
                               "0 (head)", "200 B / 1.0 GiB", "Square", "FINISHED 5", "60.0 ms",
                               "Actors: ALIVE 1 DEAD 1", "Placement groups: 1    KV keys: 2",
                               "Fail on rank -1: std::runtime_error: boom", "Tune: exp\n  Number of trials: 2",
                               "t1          TERMINATED"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing \"" << expected << "\" in\n" << text;
  }
  // From a report: the same snapshot, read back out of the HTML.
  std::optional<nlohmann::json> back = ReportSnapshot(ReportHtml(s, {}));
  ASSERT_TRUE(back);
  EXPECT_EQ(StatusText(*back, "r.html", false), StatusText(SnapshotJson(s), "r.html", false));
  EXPECT_FALSE(ReportSnapshot("<html>not a report</html>"));
  // Missing fields print as blanks.
  EXPECT_NE(StatusText(nlohmann::json::object(), "x", true).find("Ranks"), std::string::npos);
  EXPECT_NE(StatusText(nlohmann::json::array(), "x", true).find("Actors: none"), std::string::npos);
}

TEST(DashboardReportTest, TenThousandEndedTasksMakeASmallReportQuickly) {
  // Rank 0 keeps task_table_size (default 10000) ended tasks however many ran (1M or more):
  // the report's timeline holds at most that many.
  StateLists l = ThreeRanks();
  for (int64_t i = 0; i < 10000; ++i) {
    state::TaskState t;
    t.func_name = i % 3 ? "Square" : "Train::Step";
    t.state = "FINISHED";
    t.rank = static_cast<int>(i % 3);
    t.events = {{"RUNNING", 2'000'000'000 + i * 1'000'000}, {"FINISHED", 2'000'500'000 + i * 1'000'000}};
    l.ended.push_back(t);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string html = ReportHtml(Assemble(std::move(l), {}, 20'000'000'000), {});
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ report ] 10000 ended tasks: %zu KiB in %.0f ms\n", html.size() >> 10, ms);
  EXPECT_LT(html.size(), 2u << 20);
  EXPECT_LT(ms, 2000);
}

platform::PanelMetric Metric(std::string name, std::string type, std::vector<std::pair<std::string, std::string>> labels,
                             double value) {
  platform::PanelMetric m;
  m.name = std::move(name);
  m.type = std::move(type);
  m.help = "help of " + m.name;
  m.labels = std::move(labels);
  m.value = value;
  return m;
}

/// Two libraries' panels with metrics: a Serve-like counter and histogram, a gauge, and
/// mistakes that must be left out.
StateLists WithLibraryMetrics() {
  StateLists l = ThreeRanks();
  platform::Panel serve;
  serve.title = "Serve";
  for (const char* status : {"200", "404"}) {
    serve.metrics.push_back(Metric("ray_serve_num_http_requests", "counter",
                                   {{"route", "/g"}, {"method", "GET"}, {"application", "a"}, {"status_code", status}},
                                   status[0] == '2' ? 3 : 1));
  }
  platform::PanelMetric latency = Metric("ray_serve_http_request_latency_ms", "histogram", {{"route", "/g"}}, 0);
  latency.bounds = {1, 5, 10};
  latency.buckets = {1, 2, 2};  // cumulative: one at <= 1 ms, one at <= 5, one above 10
  latency.count = 3;
  latency.sum = 17.5;
  serve.metrics.push_back(latency);
  serve.metrics.push_back(Metric("bad name", "gauge", {}, 1));
  serve.metrics.push_back(Metric("prism_x", "gauge", {{"le", "1"}}, 1));  // le is the histogram's
  serve.metrics.push_back(Metric("prism_x", "summary", {}, 1));           // no such type here
  l.panels.emplace_back("serve", serve);
  platform::Panel tune;
  tune.title = "Tune: b";
  tune.metrics.push_back(Metric("prism_tune_trials", "gauge", {{"experiment", "b"}, {"state", "RUNNING"}}, 2));
  tune.metrics.push_back(Metric("ray_serve_num_http_requests", "gauge", {}, 9));  // clashes: left out
  tune.metrics.push_back(Metric("ray_serve_num_http_requests", "counter", {{"route", "/h"}}, 4));
  l.panels.emplace_back("tune/b", tune);
  return l;
}

TEST(DashboardMetricsTest, LibrariesMetricsJoinTheirNamesWithHistogramsAndCountersAsRayWritesThem) {
  // Through the KV store's encoding, as the feed reads them.
  StateLists l = WithLibraryMetrics();
  for (auto& [name, panel] : l.panels) panel = *DecodePanel(EncodePanel(panel));
  const std::string text = PrometheusText(Assemble(std::move(l), {}, 2));
  CheckExpositionFormat(text);
  for (const char* expected : {
           "# TYPE ray_serve_num_http_requests_total counter\n",
           "ray_serve_num_http_requests_total{route=\"/g\",method=\"GET\",application=\"a\",status_code=\"200\"} 3\n",
           "ray_serve_num_http_requests_total{route=\"/g\",method=\"GET\",application=\"a\",status_code=\"404\"} 1\n",
           "ray_serve_num_http_requests_total{route=\"/h\"} 4\n",
           "# TYPE ray_serve_http_request_latency_ms histogram\n",
           "ray_serve_http_request_latency_ms_bucket{route=\"/g\",le=\"1\"} 1\n",
           "ray_serve_http_request_latency_ms_bucket{route=\"/g\",le=\"10\"} 2\n",
           "ray_serve_http_request_latency_ms_bucket{route=\"/g\",le=\"+Inf\"} 3\n",
           "ray_serve_http_request_latency_ms_sum{route=\"/g\"} 17.5\n",
           "ray_serve_http_request_latency_ms_count{route=\"/g\"} 3\n",
           "prism_tune_trials{experiment=\"b\",state=\"RUNNING\"} 2\n"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing " << expected << " in\n" << text;
  }
  EXPECT_EQ(text.find("bad name"), std::string::npos);
  EXPECT_EQ(text.find("prism_x"), std::string::npos);
  EXPECT_EQ(text.find("} 9\n"), std::string::npos) << "a sample of another type than its name's first";
}

TEST(DashboardMetricsTest, PrometheusClientsParserReadsTheLibrariesHistogramsAndCounters) {
  if (std::system("/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-prometheus-client is not installed";
  }
  const std::string text = PrometheusText(Assemble(WithLibraryMetrics(), {}, 2));
  const ParserRun run = RunPrometheusParser(text,
      "r = fams[\"ray_serve_num_http_requests\"]\n"
      "assert r.type == \"counter\", r.type\n"
      "assert sorted(s.value for s in r.samples) == [1, 3, 4], r.samples\n"
      "h = fams[\"ray_serve_http_request_latency_ms\"]\n"
      "assert h.type == \"histogram\", h.type\n"
      "b = {s.labels[\"le\"]: s.value for s in h.samples if s.name.endswith(\"_bucket\")}\n"
      "assert b == {\"1.0\": 1, \"5.0\": 2, \"10.0\": 2, \"+Inf\": 3} or b == {\"1\": 1, \"5\": 2, \"10\": 2, \"+Inf\": 3}, b\n"
      "assert [s.value for s in h.samples if s.name.endswith(\"_sum\")] == [17.5]\n"
      "print(\"ok\")", "metrics-lib");
  ASSERT_NE(run.status, -1) << "popen failed";
  ASSERT_EQ(run.status, 0) << "the parser refused the text:\n" << text;
  ASSERT_TRUE(run.read);
  EXPECT_EQ(run.first_line, "ok\n");
}

TEST(DashboardSnapshotTest, PendingCallsCountEachActorsCallsNotEnded) {
  StateLists l = ThreeRanks();
  for (const char* state : {"PENDING_ARGS_AVAIL", "SUBMITTED_TO_WORKER", "SUBMITTED_TO_WORKER"}) {
    state::TaskState t;
    t.type = "ACTOR_TASK";
    t.actor_id = "actor-ALIVE";
    t.state = state;
    t.rank = 1;
    l.live_tasks.push_back(t);
  }
  Snapshot s = Assemble(std::move(l), {}, 2);
  EXPECT_EQ(s.pending_calls["actor-ALIVE"], 3u);
  nlohmann::json actors = ActorsJson(s);
  ASSERT_EQ(actors.size(), 2u);
  EXPECT_EQ(actors[0]["actor_id"], "actor-ALIVE");
  EXPECT_EQ(actors[0]["pending_calls"], 3);
  EXPECT_EQ(actors[1]["pending_calls"], 0);
  EXPECT_EQ(SnapshotJson(s)["actors"][0]["pending_calls"], 3);
  EXPECT_NE(PrometheusText(s).find("prism_actor_pending_calls{actor_id=\"actor-ALIVE\",Name=\"Counter\",actor_name=\"\"} 3\n"),
            std::string::npos);
}

TEST(DashboardSnapshotTest, SeriesRoundTripThinnedEvenlyAndShowInThePanelsJson) {
  platform::Panel p;
  p.title = "Train: run";
  platform::PanelSeries loss{"loss", "metrics by report", {}};
  for (int i = 0; i < 2000; ++i) loss.points.emplace_back(i, 1.0 / (i + 1));
  p.series.push_back(loss);
  for (size_t i = 0; i < kMaxPanelSeries + 4; ++i) p.series.push_back({"s" + std::to_string(i), "x", {{0, 1}}});
  std::optional<platform::Panel> back = DecodePanel(EncodePanel(p));
  ASSERT_TRUE(back);
  ASSERT_EQ(back->series.size(), kMaxPanelSeries);
  const auto& points = back->series[0].points;
  ASSERT_EQ(points.size(), kMaxSeriesPoints);
  EXPECT_EQ(points.front().first, 0);
  EXPECT_EQ(points.back().first, 1999) << "the last point is kept";
  EXPECT_NEAR(points[250].first, 1000, 3) << "evenly spaced";
  StateLists l = ThreeRanks();
  l.panels = {{"train/run", *back}};
  nlohmann::json j = PanelsJson(Assemble(std::move(l), {}, 2));
  EXPECT_EQ(j[0]["series"][0]["plot"], "metrics by report");
  EXPECT_EQ(j[0]["series"][0]["points"][0][1], 1.0);
}

TEST(DashboardHistoryTest, KeepsABoundedHistoryOfTheWholeJobAndRatesComeFromIt) {
  History h(8, 1'000'000'000);
  for (int64_t t = 0; t < 40; ++t) {
    HistoryPoint p;
    p.time_ns = 1'000'000'000 + t * 1'000'000'000;  // a point a second
    p.tasks_ended = static_cast<uint64_t>(t * 10);   // 10 tasks/s
    p.rss_bytes = {{0, 100 + static_cast<uint64_t>(t)}, {1, 200}};
    p.store_bytes = {{0, 5}};
    h.Add(p);
    HistoryPoint too_soon = p;
    too_soon.time_ns += 400'000'000;
    h.Add(too_soon);  // within the period: dropped
  }
  ASSERT_LE(h.points().size(), 8u);
  ASSERT_GE(h.points().size(), 4u);
  EXPECT_EQ(h.points().front().time_ns, 1'000'000'000) << "the job's start stays";
  EXPECT_GE(h.points().back().time_ns, 1'000'000'000 + 32'000'000'000LL) << "the history reaches the end";
  EXPECT_EQ(h.period_ns(), 8'000'000'000) << "doubled at each thinning";
  Snapshot s = Assemble(ThreeRanks(), {}, 50'000'000'000);
  s.history = h.points();
  nlohmann::json j = HistoryJson(s);
  ASSERT_EQ(j["t_ms"].size(), h.points().size());
  EXPECT_EQ(j["t_ms"][0], 0.0) << "ms since the job's start (1 s)";
  EXPECT_EQ(j["tasks_per_s"][0], 0.0);
  for (size_t i = 1; i < j["tasks_per_s"].size(); ++i) EXPECT_DOUBLE_EQ(j["tasks_per_s"][i].get<double>(), 10.0);
  EXPECT_EQ(j["ranks"]["1"]["rss"][0], 200);
  EXPECT_TRUE(j["ranks"]["1"]["store"][0].is_null()) << "a value the point lacks is null";
  EXPECT_EQ(SnapshotJson(s)["history"], j);
}

TEST(DashboardLogSearchTest, FindsLinesIgnoringCaseWithinItsBounds) {
  const fs::path dir = fs::temp_directory_path() / ("prism-log-search-" + std::to_string(::getpid()));
  std::string log;
  for (int i = 1; i <= 50; ++i) log += "line " + std::to_string(i) + (i % 10 == 0 ? " an ERROR here" : "") + "\n";
  log += std::string(2000, 'x') + " error in a long line\n";
  Write(dir / "rank-1.log", log);
  LogSearchLimits limits;
  limits.max_line_bytes = 100;
  LogSearchResult r;
  ASSERT_TRUE(SearchLogFile((dir / "rank-1.log").string(), "eRRoR", 1, limits, r));
  ASSERT_EQ(r.matches.size(), 6u);
  EXPECT_EQ(r.matches[0].line, 10u);
  EXPECT_EQ(r.matches[0].text, "line 10 an ERROR here");
  EXPECT_EQ(r.matches[0].rank, 1);
  EXPECT_EQ(r.matches[5].text.size(), 100u + 6) << "cut, with a mark";
  EXPECT_FALSE(r.truncated);
  EXPECT_FALSE(r.partial_scan);
  LogSearchResult few;
  limits.max_matches = 2;
  SearchLogFile((dir / "rank-1.log").string(), "error", 1, limits, few);
  EXPECT_EQ(few.matches.size(), 2u);
  EXPECT_TRUE(few.truncated);
  LogSearchResult tail;
  limits.max_matches = 100;
  limits.scan_bytes = 2030;  // the long line (2022 bytes) and the end of the line before
  SearchLogFile((dir / "rank-1.log").string(), "error", 1, limits, tail);
  EXPECT_TRUE(tail.partial_scan);
  EXPECT_EQ(tail.matches.size(), 1u) << "only the end was read";
  LogSearchResult budget;
  limits.scan_bytes = 1 << 20;
  limits.total_scan_bytes = 2030;  // the whole search: the first file's end, nothing of the second
  SearchLogFile((dir / "rank-1.log").string(), "error", 1, limits, budget);
  SearchLogFile((dir / "rank-1.log").string(), "error", 2, limits, budget);
  EXPECT_EQ(budget.matches.size(), 1u);
  EXPECT_TRUE(budget.partial_scan);
  EXPECT_LE(budget.scanned_bytes, 2030u);
  LogSearchResult none;
  EXPECT_FALSE(SearchLogFile((dir / "rank-9.log").string(), "error", 9, limits, none));
  fs::remove_all(dir);
  EXPECT_EQ(PercentDecode("a%20b+c%2Fd"), "a b c/d");
  EXPECT_FALSE(PercentDecode("bad%2"));
  EXPECT_FALSE(PercentDecode("bad%zz"));
}

TEST(DashboardRoutesTest, LogSearchAnswersMatchesAndRefusesBadInputWith400) {
  DashboardSources sources;
  sources.snapshot = [] { return Assemble(ThreeRanks(), {}, 2); };
  std::string asked;
  std::optional<int> asked_rank;
  size_t asked_limit = 0;
  sources.log_search = [&](const std::string& needle, std::optional<int> rank, const LogSearchLimits& limits) {
    asked = needle;
    asked_rank = rank;
    asked_limit = limits.max_matches;
    LogSearchResult r;
    r.matches.push_back({2, "/logs/rank-2.log", 7, "Hold on rank 2"});
    r.unreadable_ranks = {1};
    return r;
  };
  Routes routes(sources, "", 60.0);
  http::Response ok = routes.Answer(Get("/api/logs/search", "q=hold%20ON&rank=all"));
  ASSERT_EQ(ok.status, 200) << ok.body;
  nlohmann::json j = nlohmann::json::parse(ok.body);
  EXPECT_EQ(asked, "hold ON");
  EXPECT_FALSE(asked_rank);
  EXPECT_EQ(asked_limit, 200u);
  EXPECT_EQ(j["matches"][0]["line"], 7);
  EXPECT_EQ(j["matches"][0]["text"], "Hold on rank 2");
  EXPECT_EQ(j["unreadable_ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(routes.Answer(Get("/api/logs/search", "q=x&rank=2&limit=5")).status, 200);
  EXPECT_EQ(asked_rank, 2);
  EXPECT_EQ(asked_limit, 5u);
  for (const char* bad : {"", "q=", "rank=1", "q=%zz", "q=a%0Ab", "q=x&rank=-1", "q=x&rank=one", "q=x&limit=0",
                          "q=x&limit=1001"}) {
    http::Response r = routes.Answer(Get("/api/logs/search", bad));
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body.find("/api/logs/search"), std::string::npos) << bad << ": " << r.body;
  }
  EXPECT_EQ(routes.Answer(Get("/api/logs/search", "q=" + std::string(kMaxLogQueryBytes + 1, 'a'))).status, 400);
  EXPECT_EQ(routes.Answer(Get("/api/history")).status, 200);
}

/// GET over a real socket; returns the status line, headers and body.
std::string HttpGet(uint16_t port, const std::string& target) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  (void)::write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST(DashboardServerTest, ServesOnLoopbackAtAPortTheKernelPicked) {
  DashboardSetting where;
  ASSERT_TRUE(ParseDashboardSetting("loopback", &where, nullptr));
  DashboardSources sources;
  sources.snapshot = [] { return Assemble(ThreeRanks(), {}, 2); };
  Dashboard d(where, sources);
  ASSERT_GT(d.port(), 0);
  EXPECT_EQ(d.url(), "http://127.0.0.1:" + std::to_string(d.port()) + "/");
  const std::string metrics = HttpGet(d.port(), "/metrics");
  EXPECT_EQ(metrics.rfind("HTTP/1.1 200", 0), 0u) << metrics;
  EXPECT_NE(metrics.find("ray_tasks{Name=\"Square\",State=\"FINISHED\"} 5"), std::string::npos);
  d.Stop();
  EXPECT_EQ(HttpGet(d.port(), "/metrics"), "");
}

TEST(DashboardServerTest, BeyondLoopbackTheUrlCarriesATokenThatIsRequired) {
  DashboardSetting where;
  ASSERT_TRUE(ParseDashboardSetting("*:0", &where, nullptr));
  DashboardSources sources;
  sources.snapshot = [] { return Assemble(ThreeRanks(), {}, 2); };
  Dashboard d(where, sources);
  const size_t at = d.url().find("?token=");
  ASSERT_NE(at, std::string::npos) << d.url();
  const std::string token = d.url().substr(at + 7);
  EXPECT_EQ(token.size(), 32u);
  EXPECT_EQ(HttpGet(d.port(), "/api/ranks").rfind("HTTP/1.1 403", 0), 0u);
  EXPECT_EQ(HttpGet(d.port(), "/api/ranks?token=" + token).rfind("HTTP/1.1 200", 0), 0u);
}

}  // namespace
}  // namespace prism::dashboard
