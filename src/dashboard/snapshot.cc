// The snapshot's assembly and its JSON views. Each state API struct turns into JSON through
// its own Fields visitor (prism/state.h), so a field added there shows up here unasked.
#include "dashboard/snapshot.h"

#include <algorithm>
#include <type_traits>
#include <utility>

namespace prism::dashboard {

namespace {

template <class T, class = void>
struct HasFields : std::false_type {};
template <class T>
struct HasFields<T, std::void_t<decltype(std::declval<T&>().Fields(
                        [](const char*, auto&) {}))>> : std::true_type {};

template <class T>
nlohmann::json ToJson(const T& value);

template <class T>
nlohmann::json FieldJson(const T& field) {
  if constexpr (HasFields<T>::value) {
    return ToJson(field);
  } else if constexpr (std::is_same_v<T, std::vector<state::TaskEvent>>) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : field) a.push_back(ToJson(e));
    return a;
  } else {
    return nlohmann::json(field);
  }
}

/// {"name": value, ...} in the struct's field order.
template <class T>
nlohmann::json ToJson(const T& value) {
  T copy = value;  // Fields visits non-const members
  nlohmann::json j = nlohmann::json::object();
  copy.Fields([&j](const char* name, auto& field) { j[name] = FieldJson(field); });
  return j;
}

template <class T>
nlohmann::json ListJson(const std::vector<T>& items) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& item : items) a.push_back(ToJson(item));
  return a;
}

nlohmann::json ProcJson(const ProcSample& p) {
  return {{"process_cpu_percent", p.process_cpu_percent},
          {"process_rss_bytes", p.process_rss_bytes},
          {"host_cpu_percent", p.host_cpu_percent},
          {"host_cpus", p.host_cpus},
          {"host_mem_total_bytes", p.host_mem_total_bytes},
          {"host_mem_used_bytes", p.host_mem_used_bytes}};
}

ProcSample ProcFromJson(const nlohmann::json& j) {
  ProcSample p;
  p.process_cpu_percent = j.at("process_cpu_percent").get<double>();
  p.process_rss_bytes = j.at("process_rss_bytes").get<uint64_t>();
  p.host_cpu_percent = j.at("host_cpu_percent").get<double>();
  p.host_cpus = j.at("host_cpus").get<unsigned>();
  p.host_mem_total_bytes = j.at("host_mem_total_bytes").get<uint64_t>();
  p.host_mem_used_bytes = j.at("host_mem_used_bytes").get<uint64_t>();
  return p;
}

int64_t EventTime(const state::TaskState& t, const char* name) {
  for (const auto& e : t.events) {
    if (e.state == name) return e.time_ns;
  }
  return 0;
}

double Quantile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t i = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

/// Spans and per-function times of the ended tasks that have both a RUNNING and an end time.
void MeasureEnded(const std::vector<state::TaskState>& ended, int64_t now_ns, Snapshot& s) {
  struct Acc {
    std::vector<double> ms;
    uint64_t last_min = 0;
  };
  std::map<std::string, Acc> by_name;
  for (const auto& t : ended) {
    const int64_t start = EventTime(t, "RUNNING");
    const int64_t end = EventTime(t, t.state == "FAILED" ? "FAILED" : "FINISHED");
    if (start == 0 || end < start) continue;
    const std::string& name = t.func_name.empty() ? t.name : t.func_name;
    Acc& a = by_name[name];
    a.ms.push_back(static_cast<double>(end - start) / 1e6);
    if (now_ns - end <= 60'000'000'000) ++a.last_min;
    s.spans.push_back({t.rank, name, start, end, t.state == "FAILED"});
  }
  std::sort(s.spans.begin(), s.spans.end(), [](const TaskSpan& a, const TaskSpan& b) { return a.start_ns < b.start_ns; });
  for (auto& [name, a] : by_name) {
    std::sort(a.ms.begin(), a.ms.end());
    s.times.push_back({name, a.ms.size(), Quantile(a.ms, 0.5), Quantile(a.ms, 0.99),
                       static_cast<double>(a.last_min) / 60.0});
  }
}

bool IsLive(const std::string& task_state) {
  return task_state == "SUBMITTED_TO_WORKER" || task_state == "RUNNING_IN_RAY_GET";
}

}  // namespace

std::vector<std::pair<double, double>> ThinPoints(const std::vector<std::pair<double, double>>& points, size_t max) {
  if (points.size() <= max) return points;
  std::vector<std::pair<double, double>> out;
  if (max == 0) return out;
  if (max == 1) return {points.back()};
  out.reserve(max);
  const double step = static_cast<double>(points.size() - 1) / static_cast<double>(max - 1);
  for (size_t i = 0; i < max; ++i) out.push_back(points[static_cast<size_t>(static_cast<double>(i) * step + 0.5)]);
  return out;
}

std::string EncodePanel(const platform::Panel& panel) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < panel.rows.size() && i < kMaxPanelRows; ++i) rows.push_back(panel.rows[i]);
  nlohmann::json metrics = nlohmann::json::array();
  for (size_t i = 0; i < panel.metrics.size() && i < kMaxPanelMetrics; ++i) {
    const platform::PanelMetric& m = panel.metrics[i];
    nlohmann::json labels = nlohmann::json::array();
    for (const auto& [k, v] : m.labels) labels.push_back({k, v});
    nlohmann::json jm = {{"name", m.name}, {"type", m.type}, {"help", m.help}, {"labels", std::move(labels)}};
    if (m.type == "histogram") {
      jm["bounds"] = m.bounds;
      jm["buckets"] = m.buckets;
      jm["count"] = m.count;
      jm["sum"] = m.sum;
    } else {
      jm["value"] = m.value;
    }
    metrics.push_back(std::move(jm));
  }
  nlohmann::json series = nlohmann::json::array();
  for (size_t i = 0; i < panel.series.size() && i < kMaxPanelSeries; ++i) {
    const platform::PanelSeries& x = panel.series[i];
    series.push_back({{"name", x.name}, {"plot", x.plot}, {"points", ThinPoints(x.points, kMaxSeriesPoints)}});
  }
  nlohmann::json j = {{"title", panel.title}, {"lines", panel.lines},   {"columns", panel.columns},
                      {"rows", std::move(rows)}, {"metrics", std::move(metrics)}, {"series", std::move(series)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<platform::Panel> DecodePanel(const std::string& bytes) {
  try {
    const nlohmann::json j = nlohmann::json::parse(bytes);
    platform::Panel p;
    p.title = j.at("title").get<std::string>();
    p.lines = j.at("lines").get<std::vector<std::string>>();
    p.columns = j.at("columns").get<std::vector<std::string>>();
    p.rows = j.at("rows").get<std::vector<std::vector<std::string>>>();
    for (const auto& jm : j.value("metrics", nlohmann::json::array())) {
      platform::PanelMetric m;
      m.name = jm.at("name").get<std::string>();
      m.type = jm.at("type").get<std::string>();
      m.help = jm.at("help").get<std::string>();
      for (const auto& kv : jm.at("labels")) m.labels.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
      if (m.type == "histogram") {
        m.bounds = jm.at("bounds").get<std::vector<double>>();
        m.buckets = jm.at("buckets").get<std::vector<uint64_t>>();
        m.count = jm.at("count").get<uint64_t>();
        m.sum = jm.at("sum").get<double>();
        if (m.bounds.size() != m.buckets.size()) continue;
      } else {
        m.value = jm.at("value").get<double>();
      }
      p.metrics.push_back(std::move(m));
    }
    for (const auto& jx : j.value("series", nlohmann::json::array())) {
      platform::PanelSeries x;
      x.name = jx.at("name").get<std::string>();
      x.plot = jx.at("plot").get<std::string>();
      x.points = jx.at("points").get<std::vector<std::pair<double, double>>>();
      p.series.push_back(std::move(x));
    }
    return p;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::string EncodeRankSample(const RankSample& sample) {
  nlohmann::json j = {{"rank", sample.rank},
                      {"time_ns", sample.time_ns},
                      {"proc", ProcJson(sample.proc)},
                      {"store", ToJson(sample.store)}};
  return j.dump();
}

std::optional<RankSample> DecodeRankSample(const std::string& bytes) {
  try {
    const nlohmann::json j = nlohmann::json::parse(bytes);
    RankSample s;
    s.rank = j.at("rank").get<int>();
    s.time_ns = j.at("time_ns").get<int64_t>();
    s.proc = ProcFromJson(j.at("proc"));
    const nlohmann::json& st = j.at("store");
    s.store.Fields([&st](const char* name, auto& field) {
      field = st.at(name).get<std::decay_t<decltype(field)>>();
    });
    return s;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

Snapshot Assemble(StateLists lists, const std::map<int, RankSample>& samples, int64_t now_ns) {
  Snapshot s;
  s.time_ns = now_ns;
  if (!lists.jobs.empty()) s.job = std::move(lists.jobs.front());
  std::map<int, const state::NodeState*> node_of;
  for (const auto& n : lists.nodes) node_of[n.rank] = &n;
  std::map<int, uint64_t> running;
  for (const auto& t : lists.live_tasks) {
    if (IsLive(t.state) && t.rank >= 0) ++running[t.rank];
    if (t.type == "ACTOR_TASK" && !t.actor_id.empty()) ++s.pending_calls[t.actor_id];
  }
  for (const auto& w : lists.workers) {
    RankView r;
    r.rank = w.rank;
    r.host = w.host;
    r.node_id = w.node_id;
    r.pid = w.pid;
    r.is_head = w.worker_type == "DRIVER";
    r.alive = w.is_alive;
    r.num_actors = w.num_actors;
    r.tasks_finished = w.num_tasks_finished;
    r.running_tasks = running[w.rank];
    if (auto n = node_of.find(w.rank); n != node_of.end()) {
      auto cpu = n->second->resources_total.find("CPU");
      if (cpu != n->second->resources_total.end()) r.num_cpus = cpu->second;
      r.alive = r.alive && n->second->state == "ALIVE";
    }
    if (auto it = samples.find(w.rank); it != samples.end()) {
      r.sample = it->second;
      r.sample_age_ms = std::max<int64_t>(0, (now_ns - it->second.time_ns) / 1'000'000);
    }
    s.ranks.push_back(std::move(r));
  }
  std::sort(s.ranks.begin(), s.ranks.end(), [](const RankView& a, const RankView& b) { return a.rank < b.rank; });
  s.summary = std::move(lists.summary);
  for (const auto& [name, entry] : s.summary.summary) {
    for (const auto& [state, count] : entry.state_counts) s.tasks_by_state[state] += count;
  }
  s.failures = std::move(lists.failures);
  if (s.failures.size() > kMaxFailures) s.failures.erase(s.failures.begin(), s.failures.end() - kMaxFailures);
  MeasureEnded(lists.ended, now_ns, s);
  s.actors = std::move(lists.actors);
  s.placement_groups = std::move(lists.placement_groups);
  s.kv_keys = std::move(lists.kv_keys);
  s.panels = std::move(lists.panels);
  if (s.kv_keys.size() > kMaxKvKeys) {
    s.kv_keys.resize(kMaxKvKeys);
    s.kv_keys_truncated = true;
  }
  return s;
}

nlohmann::json RanksJson(const Snapshot& s) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : s.ranks) {
    nlohmann::json j = {{"rank", r.rank},
                        {"host", r.host},
                        {"node_id", r.node_id},
                        {"pid", r.pid},
                        {"is_head", r.is_head},
                        {"alive", r.alive},
                        {"num_cpus", r.num_cpus},
                        {"running_tasks", r.running_tasks},
                        {"num_actors", r.num_actors},
                        {"tasks_finished", r.tasks_finished},
                        {"sample_age_ms", r.sample_age_ms}};
    if (r.sample) {
      j["proc"] = ProcJson(r.sample->proc);
      j["store"] = ToJson(r.sample->store);
    } else {
      j["proc"] = nullptr;
      j["store"] = nullptr;
    }
    a.push_back(std::move(j));
  }
  return a;
}

nlohmann::json TasksJson(const Snapshot& s) {
  nlohmann::json by_function = nlohmann::json::array();
  for (const auto& [name, entry] : s.summary.summary) by_function.push_back(ToJson(entry));
  nlohmann::json times = nlohmann::json::object();
  for (const auto& t : s.times) {
    times[t.name] = {{"count", t.count}, {"p50_ms", t.p50_ms}, {"p99_ms", t.p99_ms},
                     {"per_s_last_min", t.per_s_last_min}};
  }
  return {{"by_state", s.tasks_by_state},
          {"by_function", std::move(by_function)},
          {"times", std::move(times)},
          {"total_tasks", s.summary.total_tasks},
          {"total_actor_tasks", s.summary.total_actor_tasks},
          {"total_actor_scheduled", s.summary.total_actor_scheduled},
          {"failures", ListJson(s.failures)}};
}

nlohmann::json ActorsJson(const Snapshot& s) {
  nlohmann::json a = ListJson(s.actors);
  for (auto& actor : a) {
    auto it = s.pending_calls.find(actor["actor_id"].get<std::string>());
    actor["pending_calls"] = it == s.pending_calls.end() ? 0 : it->second;
  }
  return a;
}

nlohmann::json PlacementGroupsJson(const Snapshot& s) { return ListJson(s.placement_groups); }

nlohmann::json KvJson(const Snapshot& s) {
  return {{"keys", s.kv_keys}, {"truncated", s.kv_keys_truncated}};
}

nlohmann::json PanelsJson(const Snapshot& s) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& [name, p] : s.panels) {
    nlohmann::json series = nlohmann::json::array();
    for (const auto& x : p.series) series.push_back({{"name", x.name}, {"plot", x.plot}, {"points", x.points}});
    a.push_back({{"name", name}, {"title", p.title}, {"lines", p.lines}, {"columns", p.columns}, {"rows", p.rows},
                 {"series", std::move(series)}});
  }
  return a;
}

nlohmann::json TimelineJson(const Snapshot& s) {
  const int64_t origin = s.job.start_time_ns;
  std::map<std::string, size_t> index;
  nlohmann::json names = nlohmann::json::array();
  nlohmann::json spans = nlohmann::json::array();
  auto ms = [origin](int64_t t) { return static_cast<double>(t - origin) / 1e6; };
  for (const auto& span : s.spans) {
    auto [it, fresh] = index.try_emplace(span.name, index.size());
    if (fresh) names.push_back(span.name);
    spans.push_back({span.rank, it->second, ms(span.start_ns), ms(span.end_ns), span.failed ? 1 : 0});
  }
  return {{"origin_ns", origin}, {"now_ns", s.time_ns}, {"names", std::move(names)}, {"spans", std::move(spans)}};
}

nlohmann::json JobJson(const Snapshot& s) {
  nlohmann::json j = ToJson(s.job);
  j["time_ns"] = s.time_ns;
  j["ended_by"] = s.ended_by;
  return j;
}

nlohmann::json HistoryJson(const Snapshot& s) {
  const int64_t origin = s.job.start_time_ns;
  nlohmann::json t_ms = nlohmann::json::array(), ended = nlohmann::json::array(), rate = nlohmann::json::array();
  std::map<int, std::pair<nlohmann::json, nlohmann::json>> ranks;  // rss, store
  for (const auto& p : s.history) {
    for (const auto& [rank, bytes] : p.rss_bytes) ranks[rank];
  }
  for (size_t i = 0; i < s.history.size(); ++i) {
    const HistoryPoint& p = s.history[i];
    t_ms.push_back(static_cast<double>(p.time_ns - origin) / 1e6);
    ended.push_back(p.tasks_ended);
    double per_s = 0;
    if (i > 0) {
      const HistoryPoint& before = s.history[i - 1];
      const double dt = static_cast<double>(p.time_ns - before.time_ns) / 1e9;
      if (dt > 0 && p.tasks_ended >= before.tasks_ended) per_s = static_cast<double>(p.tasks_ended - before.tasks_ended) / dt;
    }
    rate.push_back(per_s);
    for (auto& [rank, series] : ranks) {
      auto rss = p.rss_bytes.find(rank);
      auto store = p.store_bytes.find(rank);
      series.first.push_back(rss == p.rss_bytes.end() ? nlohmann::json() : nlohmann::json(rss->second));
      series.second.push_back(store == p.store_bytes.end() ? nlohmann::json() : nlohmann::json(store->second));
    }
  }
  nlohmann::json by_rank = nlohmann::json::object();
  for (auto& [rank, series] : ranks) {
    by_rank[std::to_string(rank)] = {{"rss", std::move(series.first)}, {"store", std::move(series.second)}};
  }
  return {{"t_ms", std::move(t_ms)}, {"tasks_ended", std::move(ended)}, {"tasks_per_s", std::move(rate)},
          {"ranks", std::move(by_rank)}};
}

nlohmann::json SnapshotJson(const Snapshot& s) {
  return {{"job", JobJson(s)},
          {"ranks", RanksJson(s)},
          {"tasks", TasksJson(s)},
          {"actors", ActorsJson(s)},
          {"placement_groups", PlacementGroupsJson(s)},
          {"kv", KvJson(s)},
          {"timeline", TimelineJson(s)},
          {"panels", PanelsJson(s)},
          {"history", HistoryJson(s)}};
}

}  // namespace prism::dashboard
