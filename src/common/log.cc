#include "common/log.h"

#include <cstdio>
#include <filesystem>
#include <mutex>

namespace prism::internal {

namespace {
std::atomic<int> g_rank{0};
std::atomic<int> g_level{1};
std::mutex g_file_mu;
std::string g_path;       // the rank's log file; created on the first line logged
FILE* g_file = nullptr;
bool g_file_failed = false;
const char* const kLevelNames[] = {"ERROR", "WARN", "INFO", "DEBUG"};
}  // namespace

void SetLogRank(int rank) { g_rank = rank; }
void SetLogLevelValue(int level) { g_level = level; }
bool LogEnabled(int level) { return level <= g_level.load(std::memory_order_relaxed); }

void SetLogFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_file_mu);
  if (g_file != nullptr) std::fclose(g_file);
  g_file = nullptr;
  g_file_failed = false;
  g_path = path;
}

void LogLine(int level, const std::string& text) {
  // One fprintf per line keeps lines from different threads whole.
  std::fprintf(stderr, "prism[%d] %s: %s\n", g_rank.load(), kLevelNames[level], text.c_str());
  std::lock_guard<std::mutex> lock(g_file_mu);
  if (g_file == nullptr && !g_path.empty() && !g_file_failed) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(g_path).parent_path(), ec);
    g_file = std::fopen(g_path.c_str(), "a");
    if (g_file == nullptr) {
      g_file_failed = true;
      std::fprintf(stderr, "prism[%d] WARN: cannot write log file %s; stderr only\n",
                   g_rank.load(), g_path.c_str());
    }
  }
  if (g_file != nullptr) {
    std::fprintf(g_file, "prism[%d] %s: %s\n", g_rank.load(), kLevelNames[level], text.c_str());
    std::fflush(g_file);
  }
}

}  // namespace prism::internal
