// Prometheus's text format: per metric one "# HELP" and one "# TYPE" line, then its samples
// `name{label="value",...} number`, each metric's samples together. Numbers print with
// enough digits to read back exactly (%.17g); byte counts are exact integers.
#include "dashboard/metrics.h"

#include <cstdio>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

namespace prism::dashboard {

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Writer {
 public:
  /// Starts a metric (its samples follow with Sample).
  void Metric(const char* name, const char* type, const char* help) {
    name_ = name;
    out_ << "# HELP " << name << ' ' << help << '\n' << "# TYPE " << name << ' ' << type << '\n';
  }
  void Sample(const Labels& labels, double value) { Sample("", labels, value); }
  /// A sample of the current metric named with `suffix` ("_total", "_bucket", ...).
  void Sample(const char* suffix, const Labels& labels, double value) {
    out_ << name_ << suffix;
    if (!labels.empty()) {
      out_ << '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        out_ << (i ? "," : "") << labels[i].first << "=\"" << EscapeLabelValue(labels[i].second) << '"';
      }
      out_ << '}';
    }
    char number[40];
    std::snprintf(number, sizeof number, "%.17g", value);
    out_ << ' ' << number << '\n';
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::string name_;
};

Labels With(Labels labels, std::string name, std::string value) {
  labels.emplace_back(std::move(name), std::move(value));
  return labels;
}

bool ValidName(const std::string& name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string Number(double value) {
  char number[40];
  std::snprintf(number, sizeof number, "%.17g", value);
  return number;
}

/// The libraries' metrics (platform::PanelMetric), each name's samples together under its
/// first sample's type and help; a sample of another type, or with a name or label the
/// format does not allow, is left out (one library's mistake does not spoil the page).
void PanelMetrics(const Snapshot& s, Writer& w) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const platform::PanelMetric*>> by_name;
  for (const auto& [panel, p] : s.panels) {
    for (const platform::PanelMetric& m : p.metrics) {
      if (!ValidName(m.name, true) || (m.type != "counter" && m.type != "gauge" && m.type != "histogram")) continue;
      bool labels_ok = true;
      for (const auto& [k, v] : m.labels) labels_ok = labels_ok && ValidName(k, false) && k != "le";
      if (!labels_ok) continue;
      auto& list = by_name[m.name];
      if (list.empty()) order.push_back(m.name);
      if (!list.empty() && list.front()->type != m.type) continue;
      list.push_back(&m);
    }
  }
  for (const std::string& name : order) {
    const auto& list = by_name[name];
    const platform::PanelMetric& first = *list.front();
    // A counter is named with _total on its TYPE line too (as Ray 2.10+ writes them, and
    // as the 0.0.4 parsers expect: they read the family as the name without it).
    const bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    const std::string written = first.type == "counter" && !total ? name + "_total" : name;
    w.Metric(written.c_str(), first.type.c_str(), first.help.empty() ? name.c_str() : first.help.c_str());
    for (const platform::PanelMetric* m : list) {
      const Labels labels(m->labels.begin(), m->labels.end());
      if (m->type == "counter" || m->type == "gauge") {
        w.Sample(labels, m->value);
      } else {
        for (size_t i = 0; i < m->bounds.size() && i < m->buckets.size(); ++i) {
          w.Sample("_bucket", With(labels, "le", Number(m->bounds[i])), static_cast<double>(m->buckets[i]));
        }
        w.Sample("_bucket", With(labels, "le", "+Inf"), static_cast<double>(m->count));
        w.Sample("_sum", labels, m->sum);
        w.Sample("_count", labels, static_cast<double>(m->count));
      }
    }
  }
}

Labels RankLabels(const RankView& r) { return {{"rank", std::to_string(r.rank)}, {"host", r.host}}; }

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PrometheusText(const Snapshot& s) {
  Writer w;
  w.Metric("ray_tasks", "gauge", "Tasks now in each state, by function or actor class.");
  for (const auto& [name, entry] : s.summary.summary) {
    for (const auto& [state, count] : entry.state_counts) {
      w.Sample({{"Name", name}, {"State", state}}, static_cast<double>(count));
    }
  }
  w.Metric("ray_actors", "gauge", "Actors by class and state.");
  std::map<std::pair<std::string, std::string>, int> actors;
  for (const auto& a : s.actors) ++actors[{a.class_name, a.state}];
  for (const auto& [key, count] : actors) w.Sample({{"Name", key.first}, {"State", key.second}}, count);
  w.Metric("ray_placement_groups", "gauge", "Live placement groups by state.");
  std::map<std::string, int> groups;
  for (const auto& g : s.placement_groups) ++groups[g.state];
  for (const auto& [state, count] : groups) w.Sample({{"State", state}}, count);

  // Per-rank series: only ranks that reported a sample.
  auto per_rank = [&](const char* name, const char* type, const char* help, auto value) {
    w.Metric(name, type, help);
    for (const auto& r : s.ranks) {
      if (r.sample) value(r, *r.sample);
    }
  };
  per_rank("ray_object_store_memory", "gauge",
           "Object store bytes: in memory (Location=MMAP_SHM) and spilled to disk (Location=SPILLED).",
           [&](const RankView& r, const RankSample& x) {
             w.Sample(With(RankLabels(r), "Location", "MMAP_SHM"), static_cast<double>(x.store.used_bytes));
             w.Sample(With(RankLabels(r), "Location", "SPILLED"), static_cast<double>(x.store.spilled_bytes));
           });
  per_rank("ray_object_store_num_local_objects", "gauge", "Objects in the rank's store, in memory or spilled.",
           [&](const RankView& r, const RankSample& x) {
             w.Sample(RankLabels(r), static_cast<double>(x.store.num_objects));
           });
  per_rank("prism_object_store_capacity_bytes", "gauge", "The rank's object_store_memory.",
           [&](const RankView& r, const RankSample& x) {
             w.Sample(RankLabels(r), static_cast<double>(x.store.capacity_bytes));
           });
  per_rank("prism_spilled_bytes_total", "counter", "Bytes ever spilled to disk to make room.",
           [&](const RankView& r, const RankSample& x) {
             w.Sample(RankLabels(r), static_cast<double>(x.store.spilled_bytes_total));
           });
  per_rank("ray_node_cpu_utilization", "gauge", "The rank's host: CPU use in percent of all its cores.",
           [&](const RankView& r, const RankSample& x) { w.Sample(RankLabels(r), x.proc.host_cpu_percent); });
  per_rank("ray_node_cpu_count", "gauge", "The rank's host: cores.",
           [&](const RankView& r, const RankSample& x) { w.Sample(RankLabels(r), x.proc.host_cpus); });
  per_rank("ray_node_mem_used", "gauge", "The rank's host: memory in use (MemTotal - MemAvailable), bytes.",
           [&](const RankView& r, const RankSample& x) {
             w.Sample(RankLabels(r), static_cast<double>(x.proc.host_mem_used_bytes));
           });
  per_rank("ray_node_mem_total", "gauge", "The rank's host: memory, bytes.",
           [&](const RankView& r, const RankSample& x) {
             w.Sample(RankLabels(r), static_cast<double>(x.proc.host_mem_total_bytes));
           });
  per_rank("prism_rank_cpu_percent", "gauge", "The rank's process: CPU use in percent of one core.",
           [&](const RankView& r, const RankSample& x) { w.Sample(RankLabels(r), x.proc.process_cpu_percent); });
  per_rank("prism_rank_rss_bytes", "gauge", "The rank's process: resident memory, bytes.",
           [&](const RankView& r, const RankSample& x) {
             w.Sample(RankLabels(r), static_cast<double>(x.proc.process_rss_bytes));
           });

  w.Metric("prism_rank_running_tasks", "gauge", "Tasks dispatched to the rank and not yet ended.");
  for (const auto& r : s.ranks) w.Sample(RankLabels(r), static_cast<double>(r.running_tasks));
  w.Metric("prism_rank_alive", "gauge", "1 while the rank is alive.");
  for (const auto& r : s.ranks) w.Sample(RankLabels(r), r.alive ? 1 : 0);
  w.Metric("prism_kv_keys", "gauge", "Keys in the job's internal KV store (at most 1000 counted).");
  w.Sample({}, static_cast<double>(s.kv_keys.size()));
  w.Metric("prism_actor_pending_calls", "gauge", "Calls submitted to the actor and not ended (queued or running).");
  for (const auto& a : s.actors) {
    auto it = s.pending_calls.find(a.actor_id);
    if (it != s.pending_calls.end()) {
      w.Sample({{"actor_id", a.actor_id}, {"Name", a.class_name}, {"actor_name", a.name}}, static_cast<double>(it->second));
    }
  }
  PanelMetrics(s, w);
  return w.str();
}

}  // namespace prism::dashboard
