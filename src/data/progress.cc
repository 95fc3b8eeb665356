// Progress lines (progress.h): formatting, and a throttled writer that redraws the lines in
// place on a terminal (cursor up over the previous lines, clear each, write again).

#include "data/progress.h"

#include <cstdio>
#include <sstream>

namespace prism::data::internal {

std::string FormatCount(int64_t n) {
  const char* suffix[] = {"", "K", "M", "B", "T"};
  double v = static_cast<double>(n);
  int s = 0;
  while ((v >= 1000 || v <= -1000) && s < 4) {
    v /= 1000;
    ++s;
  }
  if (s == 0) return std::to_string(n);
  char text[32];
  std::snprintf(text, sizeof text, v >= 100 || v <= -100 ? "%.0f%s" : "%.1f%s", v, suffix[s]);
  return text;
}

std::string FormatProgressLine(const OperatorStats& op, int64_t total_blocks) {
  std::ostringstream line;
  line << op.name << ": " << op.blocks;
  if (total_blocks >= 0) line << "/" << total_blocks;
  line << " blocks, " << FormatCount(op.rows) << " rows";
  if (op.actors_started > 0) line << ", peak " << op.peak_actors << (op.peak_actors == 1 ? " actor" : " actors");
  if (op.retries > 0) line << ", " << op.retries << (op.retries == 1 ? " retry" : " retries");
  return line.str();
}

ProgressBars::ProgressBars(std::ostream& out, bool terminal, std::chrono::milliseconds interval)
    : out_(out), terminal_(terminal), interval_(interval) {}

void ProgressBars::Update(const DatasetStats& stats, const std::vector<int64_t>& totals,
                          Clock::time_point now, bool force) {
  if (!force && last_ && now - *last_ < interval_) return;
  std::string text;
  for (size_t i = 0; i < stats.operators.size(); ++i) {
    text += FormatProgressLine(stats.operators[i], i < totals.size() ? totals[i] : -1) + "\n";
  }
  if (text == drawn_) return;
  last_ = now;
  std::string frame;
  if (terminal_ && drawn_lines_ > 0) frame += "\x1b[" + std::to_string(drawn_lines_) + "F";
  if (terminal_) {
    for (size_t at = 0, next; (next = text.find('\n', at)) != std::string::npos; at = next + 1) {
      frame += "\x1b[2K" + text.substr(at, next + 1 - at);
    }
  } else {
    frame = text;
  }
  out_ << frame << std::flush;
  drawn_ = std::move(text);
  drawn_lines_ = stats.operators.size();
}

}  // namespace prism::data::internal
