// `prism status`'s text (status.h): left-aligned columns as wide as their widest cell.
#include "dashboard/status.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>
#include <vector>

namespace prism::dashboard {

namespace {

using Json = nlohmann::json;

/// j[key], or null when `j` is not an object or has no such key (iterating null yields
/// nothing, so missing lists print as empty).
const Json& At(const Json& j, const char* key) {
  static const Json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

/// j[key] as text ("" when absent or null); numbers as JSON prints them.
std::string Text(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "";
  const Json& v = j[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

bool Bool(const Json& j, const char* key, bool otherwise) {
  const Json& v = At(j, key);
  return v.is_boolean() ? v.get<bool>() : otherwise;
}

double Number(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0;
}

std::string Bytes(double n) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (n >= 1024 && i < 4) {
    n /= 1024;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, i ? "%.1f %s" : "%.0f %s", n, kUnits[i]);
  return buf;
}

std::string Fixed(double x, int digits, const char* unit = "") {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f%s", digits, x, unit);
  return buf;
}

/// Milliseconds with about three significant digits.
std::string Ms(double ms) { return Fixed(ms, ms < 1 ? 3 : ms < 100 ? 1 : 0, " ms"); }

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::ostringstream out;
  for (const auto& r : rows) {
    std::string line = "  ";
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out << line << '\n';
  }
  return out.str();
}

}  // namespace

std::optional<Json> ReportSnapshot(const std::string& html) {
  const std::string start = "window.PRISM_REPORT = ";
  const size_t at = html.find(start);
  if (at == std::string::npos) return std::nullopt;
  const size_t end = html.find(";</script>", at);
  if (end == std::string::npos) return std::nullopt;
  Json data = Json::parse(html.substr(at + start.size(), end - at - start.size()), nullptr, false);
  if (data.is_discarded() || !data.contains("snapshot")) return std::nullopt;
  return data["snapshot"];
}

std::string StatusText(const Json& s, const std::string& source, bool live) {
  std::ostringstream out;
  const Json& job = At(s, "job");
  const double start_ns = Number(job, "start_time_ns"), now_ns = Number(job, "time_ns");
  const long secs = static_cast<long>(std::max(0.0, (now_ns - start_ns) / 1e9));
  out << "Prism job " << Text(job, "job_id") << ": " << Text(job, "num_ranks") << (Text(job, "num_ranks") == "1" ? " rank, " : " ranks, ")
      << Text(job, "launcher") << ", " << (live ? "up " : "ran ") << secs / 60 << " min " << secs % 60 << " s"
      << (live ? " (live: " : " (report: ") << source << ")\n";
  out << "  " << Text(job, "entrypoint") << "\n";
  if (const std::string why = Text(job, "ended_by"); !why.empty()) out << "  Stopped: " << why << "\n";
  out << "\nRanks\n";

  std::vector<std::vector<std::string>> rows = {
      {"rank", "host", "state", "CPU", "RSS", "host mem", "object store", "spilled", "running", "actors", "done"}};
  for (const Json& r : At(s, "ranks")) {
    const Json& proc = At(r, "proc");
    const Json& store = At(r, "store");
    const bool sampled = proc.is_object();
    rows.push_back({Text(r, "rank") + (Bool(r, "is_head", false) ? " (head)" : ""), Text(r, "host"),
                    Bool(r, "alive", true) ? "ALIVE" : "DEAD",
                    sampled ? Fixed(Number(proc, "process_cpu_percent"), 1, "%") : "",
                    sampled ? Bytes(Number(proc, "process_rss_bytes")) : "",
                    sampled ? Bytes(Number(proc, "host_mem_used_bytes")) + " / " + Bytes(Number(proc, "host_mem_total_bytes")) : "",
                    store.is_object() ? Bytes(Number(store, "used_bytes")) + " / " + Bytes(Number(store, "capacity_bytes")) : "",
                    store.is_object() ? Bytes(Number(store, "spilled_bytes")) : "", Text(r, "running_tasks"),
                    Text(r, "num_actors"), Text(r, "tasks_finished")});
  }
  out << Table(rows);

  const Json& tasks = At(s, "tasks");
  out << "\nTasks:";
  for (const auto& [state, n] : At(tasks, "by_state").items()) out << " " << state << " " << n.dump();
  out << "\n";
  const Json& times = At(tasks, "times");
  std::vector<std::vector<std::string>> fns = {{"function or class", "type", "states", "p50", "p99", "ended/s"}};
  for (const Json& f : At(tasks, "by_function")) {
    std::string states;
    for (const auto& [state, n] : At(f, "state_counts").items()) {
      states += (states.empty() ? "" : " ") + state + " " + n.dump();
    }
    const std::string name = Text(f, "func_or_class_name");
    const Json& t = At(times, name.c_str());
    fns.push_back({name, Text(f, "type"), states,
                   t.is_object() ? Ms(Number(t, "p50_ms")) : "",
                   t.is_object() ? Ms(Number(t, "p99_ms")) : "",
                   t.is_object() ? Fixed(Number(t, "per_s_last_min"), 2) : ""});
  }
  out << Table(fns);

  std::map<std::string, int> actors;
  for (const Json& a : At(s, "actors")) ++actors[Text(a, "state")];
  out << "\nActors:";
  if (actors.empty()) out << " none";
  for (const auto& [state, n] : actors) out << " " << state << " " << n;
  out << "\nPlacement groups: " << At(s, "placement_groups").size()
      << "    KV keys: " << At(At(s, "kv"), "keys").size() << "\n";

  for (const Json& p : At(s, "panels")) {
    out << "\n" << Text(p, "title") << "\n";
    for (const Json& line : At(p, "lines")) out << "  " << (line.is_string() ? line.get<std::string>() : "") << "\n";
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header;
    for (const Json& c : At(p, "columns")) header.push_back(c.is_string() ? c.get<std::string>() : "");
    rows.push_back(header);
    size_t shown = 0;
    const Json& body = At(p, "rows");
    for (const Json& r : body) {
      if (++shown > 20) break;
      std::vector<std::string> cells;
      for (const Json& c : r) cells.push_back(c.is_string() ? c.get<std::string>() : "");
      rows.push_back(cells);
    }
    out << Table(rows);
    if (body.size() > 20) out << "  ... " << body.size() - 20 << " more rows\n";
  }

  const Json& failures = At(tasks, "failures");
  if (!failures.empty()) {
    out << "\nLatest failures (newest last)\n";
    const size_t first = failures.size() > 5 ? failures.size() - 5 : 0;
    for (size_t i = first; i < failures.size(); ++i) {
      const Json& f = failures[i];
      out << "  " << Text(f, "func_name") << " on rank " << Text(f, "rank") << ": " << Text(f, "error_type")
          << ": " << Text(f, "error_message") << "\n";
    }
  }
  return out.str();
}

}  // namespace prism::dashboard
