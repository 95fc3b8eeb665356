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
  void Sample(const Labels& labels, double value) {
    out_ << name_;
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

Labels RankLabels(const RankView& r) { return {{"rank", std::to_string(r.rank)}, {"host", r.host}}; }

Labels With(Labels labels, std::string name, std::string value) {
  labels.emplace_back(std::move(name), std::move(value));
  return labels;
}

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
  return w.str();
}

}  // namespace prism::dashboard
