#include "common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "common/private_dir.h"

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
    std::string why = MakePrivateDir(std::filesystem::path(g_path).parent_path().string());
    if (why.empty()) {
      // Private to the user (0600), and never through a link someone else left there.
      int fd = ::open(g_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd < 0 || (g_file = ::fdopen(fd, "a")) == nullptr) {
        why = "cannot write log file " + g_path + ": " + std::strerror(errno);
        if (fd >= 0) ::close(fd);
      }
    }
    if (g_file == nullptr) {
      g_file_failed = true;
      std::fprintf(stderr, "prism[%d] WARN: %s; logging to stderr only\n", g_rank.load(), why.c_str());
    }
  }
  if (g_file != nullptr) {
    std::fprintf(g_file, "prism[%d] %s: %s\n", g_rank.load(), kLevelNames[level], text.c_str());
    std::fflush(g_file);
  }
}

}  // namespace prism::internal
