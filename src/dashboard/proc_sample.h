#pragma once
// One rank's CPU and memory, read from /proc (Linux), for the dashboard and /metrics.
//
// CPU figures are rates, so a sampler keeps the previous reading: the first Sample after
// construction reports 0 % and the rates start with the second. The process figures are
// this rank's (/proc/self/stat, /proc/self/statm); the host figures are the whole machine's
// (/proc/stat, /proc/meminfo), which ranks sharing a host all report.

#include <cstdint>
#include <string>

namespace prism::dashboard {

struct ProcSample {
  double process_cpu_percent = 0;  // of one core: a rank busy on 4 cores shows 400
  uint64_t process_rss_bytes = 0;
  double host_cpu_percent = 0;     // of all the host's cores, 0..100
  unsigned host_cpus = 0;          // cores /proc/stat lists
  uint64_t host_mem_total_bytes = 0;
  uint64_t host_mem_used_bytes = 0;  // MemTotal - MemAvailable
};

/// Reads /proc under `proc_root` ("/proc"; a directory laid out the same way in tests).
/// Not thread-safe: one owner calls Sample.
class ProcSampler {
 public:
  explicit ProcSampler(std::string proc_root = "/proc");
  /// What /proc says now; CPU rates over the time since the previous call (`now_ns`, any
  /// monotonic clock). A file that cannot be read leaves its fields 0. Never throws.
  ProcSample Sample(int64_t now_ns);

 private:
  std::string root_;
  bool primed_ = false;
  int64_t last_ns_ = 0;
  uint64_t last_process_ticks_ = 0;
  uint64_t last_host_busy_ = 0;
  uint64_t last_host_total_ = 0;
  long ticks_per_second_ = 100;
  long page_bytes_ = 4096;
};

}  // namespace prism::dashboard
