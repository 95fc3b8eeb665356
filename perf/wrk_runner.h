// wrk_runner.h: running wrk (the HTTP load generator, Debian's `wrk`) from a benchmark and
// reading its --latency report, for prism_serve_http_benchmark and prism_serve_benchmark.
// Header-only, like bench_report.h.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace prism_bench {

/// One wrk run. `ok` is false (with `error`) when wrk failed, saw a non-2xx response or a
/// socket error, or printed nothing readable.
struct WrkResult {
  bool ok = false;
  std::string error;  // why not ok
  double requests_per_s = 0;
  double p50_us = 0, p99_us = 0;
  long long requests = 0;
  double server_cpu_us = 0;  // this process's CPU time per request during the run
};

/// Runs `command` through the shell; returns its stdout and stderr, its exit status in
/// `exit_code` (-1 when it could not run or was killed).
inline std::string RunCapture(const std::string& command, int* exit_code) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) {
    *exit_code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int status = ::pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

/// Whether `program` is on PATH.
inline bool OnPath(const std::string& program) {
  int rc = 0;
  RunCapture("command -v " + program + " >/dev/null", &rc);
  return rc == 0;
}

/// wrk's version ("wrk 4.1.0"), or "" without wrk.
inline std::string WrkVersion() {
  if (!OnPath("wrk")) return "";
  int rc = 0;
  std::string v = RunCapture("wrk --version", &rc);  // "wrk 4.1.0 [epoll] ..." (exit 1)
  v = v.substr(0, v.find('\n'));
  return v.substr(0, v.find(" ["));
}

/// "38.00us", "1.20ms", "2.00s" -> microseconds; -1 if unreadable.
inline double ParseWrkDuration(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? std::string(end) : "";
  if (unit == "us") return v;
  if (unit == "ms") return v * 1e3;
  if (unit == "s") return v * 1e6;
  if (unit == "m") return v * 60e6;
  return -1;
}

/// Reads wrk's --latency report: "50%  38.00us", "99%  90.00us", "Requests/sec: 24691.20",
/// "N requests in ...", and the error lines that make a run invalid.
inline WrkResult ParseWrk(const std::string& out) {
  WrkResult r;
  std::stringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::stringstream words(line);
    std::string first, second;
    words >> first >> second;
    if (first == "50%") r.p50_us = ParseWrkDuration(second);
    if (first == "99%") r.p99_us = ParseWrkDuration(second);
    if (first == "Requests/sec:") r.requests_per_s = std::atof(second.c_str());
    if (second == "requests" && line.find(" in ") != std::string::npos) r.requests = std::atoll(first.c_str());
    if (line.find("Non-2xx or 3xx responses") != std::string::npos || line.find("Socket errors") != std::string::npos)
      r.error += (r.error.empty() ? "" : "; ") + line.substr(line.find_first_not_of(' '));
  }
  if (r.error.empty() && (r.requests_per_s <= 0 || r.p50_us <= 0 || r.p99_us <= 0))
    r.error = "could not read wrk's output:\n" + out;
  r.ok = r.error.empty();
  return r;
}

/// User + system CPU time of this process (the server's threads while wrk runs: wrk is
/// another process). Per request, it is the server's cost, which the machine's other load
/// does not inflate the way it inflates latency.
inline double ProcessCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

/// Runs `wrk -t threads -c connections -d duration_s --latency url`, bounded by `timeout`
/// (duration + 30 s) and wrk's own 5 s per-request timeout.
inline WrkResult RunWrk(const std::string& url, int connections, int threads, double duration_s) {
  threads = std::max(1, std::min(threads, connections));
  char cmd[512];
  std::snprintf(cmd, sizeof cmd, "timeout %d wrk -t%d -c%d -d%.3gs --timeout 5s --latency %s",
                static_cast<int>(duration_s) + 30, threads, connections, duration_s, url.c_str());
  int rc = 0;
  double cpu_before = ProcessCpuSeconds();
  std::string out = RunCapture(cmd, &rc);
  double cpu = ProcessCpuSeconds() - cpu_before;
  if (rc != 0) {
    WrkResult r;
    r.error = std::string(cmd) + " exited with " + std::to_string(rc) + ":\n" + out;
    return r;
  }
  WrkResult r = ParseWrk(out);
  if (r.requests > 0) r.server_cpu_us = cpu * 1e6 / static_cast<double>(r.requests);
  return r;
}

}  // namespace prism_bench
