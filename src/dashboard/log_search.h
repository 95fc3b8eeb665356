#pragma once
// Log search for the dashboard (GET /api/logs/search): the lines of a rank's log files that
// contain a string, ignoring ASCII case. Bounded three ways, so that a search of a huge log
// costs rank 0 little: only the last `scan_bytes` of each file are read (and
// `total_scan_bytes` over a search of every rank's files), at most `max_matches` lines come
// back, and each line is cut to `max_line_bytes`.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace prism::dashboard {

struct LogSearchLimits {
  size_t max_matches = 200;
  size_t max_line_bytes = 512;
  int64_t scan_bytes = 16 << 20;        // of each file's end
  int64_t total_scan_bytes = 256 << 20;  // over every file of one search
};
/// The most a request may ask for (?limit=).
inline constexpr size_t kMaxLogSearchMatches = 1000;
/// The longest query accepted.
inline constexpr size_t kMaxLogQueryBytes = 256;

struct LogMatch {
  int rank = 0;
  std::string file;
  uint64_t line = 0;  // 1-based, counted from where the scan began
  std::string text;   // the line, cut to max_line_bytes
};

struct LogSearchResult {
  std::vector<LogMatch> matches;
  bool truncated = false;      // more lines matched than max_matches
  uint64_t scanned_bytes = 0;  // over every file read
  bool partial_scan = false;   // only the end of some file was read (scan_bytes, total_scan_bytes)
  /// Ranks with no log file rank 0 can read (on another host's local disk, or none written:
  /// rank 0's output goes to the terminal unless logged to a file).
  std::vector<int> unreadable_ranks;
};

/// Appends to `result` the lines of `text` that contain `needle` (ASCII case-insensitive;
/// an empty needle matches nothing), numbered from 1. Returns the number of lines seen.
uint64_t SearchText(const std::string& text, const std::string& needle, int rank, const std::string& file,
                    const LogSearchLimits& limits, LogSearchResult& result);

/// Searches the end of the file at `path`; false if it cannot be opened.
bool SearchLogFile(const std::string& path, const std::string& needle, int rank, const LogSearchLimits& limits,
                   LogSearchResult& result);

/// Percent-decodes a query string value ('+' is a space); nullopt for a bad %-escape.
std::optional<std::string> PercentDecode(const std::string& text);

}  // namespace prism::dashboard
