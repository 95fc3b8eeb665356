#include "tune/status_table.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "tune/metric_mode.h"

namespace prism::tune::internal {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.5g", v);
  return buf;
}

std::string Duration(double s) {
  char buf[32];
  const long total = static_cast<long>(s);
  std::snprintf(buf, sizeof buf, "%02ld:%02ld:%05.2f", total / 3600, (total / 60) % 60,
                s - static_cast<double>(total - total % 60));
  return buf;
}

/// A table with a header row, columns padded to their widest cell.
std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  auto rule = [&] {
    std::string s = "+";
    for (size_t w : width) s += std::string(w + 2, '-') + "+";
    return s + "\n";
  };
  auto line = [&](const std::vector<std::string>& r) {
    std::string s = "|";
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string& cell = c < r.size() ? r[c] : "";
      s += " " + cell + std::string(width[c] - cell.size(), ' ') + " |";
    }
    return s + "\n";
  };
  std::string out = rule() + line(header) + rule();
  for (const auto& r : rows) out += line(r);
  return out + rule();
}

/// The columns: the parameters searched, then iterations, time and the metric.
std::vector<std::string> Header(const StatusView& v) {
  std::vector<std::string> header = {"Trial name", "status"};
  header.insert(header.end(), v.params.begin(), v.params.end());
  header.push_back("iter");
  header.push_back("total time (s)");
  if (!v.metric.empty()) header.push_back(v.metric);
  return header;
}

std::vector<std::string> RowOf(const StatusView& v, const Trial* trial) {
  std::vector<std::string> r = {trial->id, StatusName(trial->status)};
  for (const auto& p : v.params) r.push_back(trial->config.Get(p, ""));
  r.push_back(std::to_string(trial->iterations));
  r.push_back(Number(trial->time_total_s));
  if (!v.metric.empty()) {
    auto m = trial->last_result.find(v.metric);
    r.push_back(m == trial->last_result.end() ? "" : Number(m->second));
  }
  return r;
}

std::string CountsLine(const StatusView& v) {
  std::map<std::string, int> counts;
  for (const Trial* trial : v.trials) ++counts[StatusName(trial->status)];
  std::string by_status;
  for (const auto& [name, n] : counts) by_status += (by_status.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  return "Number of trials: " + std::to_string(v.trials.size()) +
         (v.total >= 0 ? "/" + std::to_string(v.total) : "") + " (" + by_status + ")";
}

/// "Best trial: ..." of the trials' last results, or "" without a metric or a result.
std::string BestLine(const StatusView& v) {
  if (v.metric.empty()) return "";
  const Trial* best = nullptr;
  double best_score = 0;
  for (const Trial* trial : v.trials) {
    auto m = trial->last_result.find(v.metric);
    if (m == trial->last_result.end()) continue;
    const double score = Score(m->second, v.mode);
    if (best == nullptr || score > best_score) {
      best = trial;
      best_score = score;
    }
  }
  if (best == nullptr) return "";
  std::string cfg;
  for (const auto& [k, value] : best->config.Values()) cfg += (cfg.empty() ? "" : ", ") + k + "=" + value;
  return "Best trial: " + best->id + " with " + v.metric + "=" + Number(best->last_result.at(v.metric)) +
         " (last result) and config {" + cfg + "}";
}

}  // namespace

platform::Panel StatusPanel(const StatusView& v) {
  platform::Panel p;
  p.title = "Tune: " + v.experiment + (v.final ? " (final)" : "");
  p.lines.push_back("Running for " + Duration(v.elapsed_s) + "; trials at once: " + std::to_string(v.running) + "/" +
                    std::to_string(v.capacity) + "; result logdir: " + v.path);
  if (!v.scheduler_line.empty()) p.lines.push_back(v.scheduler_line);
  p.lines.push_back(CountsLine(v));
  if (std::string best = BestLine(v); !best.empty()) p.lines.push_back(best + (v.final ? "" : " so far"));
  p.columns = Header(v);
  for (const Trial* trial : v.trials) p.rows.push_back(RowOf(v, trial));
  return p;
}

std::string FormatStatus(const StatusView& v) {
  std::string out = v.final ? "== Status (final) ==\n" : "== Status ==\n";
  char now[64];
  std::time_t t = std::time(nullptr);
  std::strftime(now, sizeof now, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  out += "Current time: " + std::string(now) + " (running for " + Duration(v.elapsed_s) + ")\n";
  if (!v.scheduler_line.empty()) out += v.scheduler_line + "\n";
  out += "Trials at once: " + std::to_string(v.running) + "/" + std::to_string(v.capacity) + "\n";
  out += "Result logdir: " + v.path + "\n";
  out += CountsLine(v) + "\n";
  const std::vector<std::string> header = Header(v);
  std::vector<std::vector<std::string>> rows;
  const size_t n = v.trials.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > v.max_rows && i == v.max_rows / 2) {
      const size_t skipped = n - v.max_rows;
      std::vector<std::string> gap = {"... " + std::to_string(skipped) + " more trials"};
      rows.push_back(gap);
      i += skipped - 1;
      continue;
    }
    rows.push_back(RowOf(v, v.trials[i]));
  }
  out += Table(header, rows);
  if (v.final) {
    if (std::string best = BestLine(v); !best.empty()) out += best + "\n";
  }
  return out;
}

}  // namespace prism::tune::internal
