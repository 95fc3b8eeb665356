#include "common/log.h"

#include <cstdio>

namespace prism::internal {

namespace {
std::atomic<int> g_rank{0};
std::atomic<int> g_level{1};
const char* const kLevelNames[] = {"ERROR", "WARN", "INFO", "DEBUG"};
}  // namespace

void SetLogRank(int rank) { g_rank = rank; }
void SetLogLevelValue(int level) { g_level = level; }
bool LogEnabled(int level) { return level <= g_level.load(std::memory_order_relaxed); }

void LogLine(int level, const std::string& text) {
  // One fprintf per line keeps lines from different threads whole.
  std::fprintf(stderr, "prism[%d] %s: %s\n", g_rank.load(), kLevelNames[level], text.c_str());
}

}  // namespace prism::internal
