#pragma once
// Minimal leveled logging to stderr, prefixed with the rank: "prism[2] WARN: ...".

#include <atomic>
#include <sstream>
#include <string>

namespace prism::internal {

void SetLogRank(int rank);
void SetLogLevelValue(int level);  // 0 error, 1 warn, 2 info, 3 debug
/// Also append every line to this file (the rank's log in the job's log directory).
void SetLogFile(const std::string& path);
bool LogEnabled(int level);
void LogLine(int level, const std::string& text);

}  // namespace prism::internal

#define PRISM_LOG_AT(level, expr)                                       \
  do {                                                                  \
    if (::prism::internal::LogEnabled(level)) {                         \
      std::ostringstream prism_log_os;                                  \
      prism_log_os << expr;                                             \
      ::prism::internal::LogLine(level, prism_log_os.str());            \
    }                                                                   \
  } while (0)
#define PRISM_LOG_ERROR(expr) PRISM_LOG_AT(0, expr)
#define PRISM_LOG_WARN(expr) PRISM_LOG_AT(1, expr)
#define PRISM_LOG_INFO(expr) PRISM_LOG_AT(2, expr)
#define PRISM_LOG_DEBUG(expr) PRISM_LOG_AT(3, expr)
