// Log search (log_search.h): one pass over each file's end, a line at a time, comparing
// lowercase copies; no regular expressions (a user's pattern never costs more than a
// substring search).
#include "dashboard/log_search.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <string_view>

namespace prism::dashboard {

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

uint64_t SearchText(const std::string& text, const std::string& needle, int rank, const std::string& file,
                    const LogSearchLimits& limits, LogSearchResult& result) {
  const std::string lowered_needle = Lower(needle);
  uint64_t line = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    ++line;
    const std::string_view view(text.data() + at, end - at);
    const auto hit = std::search(view.begin(), view.end(), lowered_needle.begin(), lowered_needle.end(),
                                 [](char a, char b) {
                                   return std::tolower(static_cast<unsigned char>(a)) == static_cast<unsigned char>(b);
                                 });
    if (!needle.empty() && hit != view.end()) {
      if (result.matches.size() == limits.max_matches) {
        result.truncated = true;
        return line;
      }
      std::string cut(view.substr(0, std::min(view.size(), limits.max_line_bytes)));
      if (view.size() > limits.max_line_bytes) cut += " [...]";
      result.matches.push_back({rank, file, line, std::move(cut)});
    }
    at = end + 1;
  }
  return line;
}

bool SearchLogFile(const std::string& path, const std::string& needle, int rank, const LogSearchLimits& limits,
                   LogSearchResult& result) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const std::streamoff size = in.tellg();
  const int64_t budget = std::min<int64_t>(limits.scan_bytes, limits.total_scan_bytes -
                                                                  static_cast<int64_t>(result.scanned_bytes));
  if (budget <= 0) {
    result.partial_scan = size > 0;
    return true;
  }
  const std::streamoff from = size > budget ? size - budget : 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (from > 0) {
    result.partial_scan = true;
    const size_t nl = text.find('\n');  // from the first whole line
    text.erase(0, nl == std::string::npos ? text.size() : nl + 1);
  }
  result.scanned_bytes += text.size();
  SearchText(text, needle, rank, path, limits, result);
  return true;
}

std::optional<std::string> PercentDecode(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = HexValue(text[i + 1]), lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace prism::dashboard
