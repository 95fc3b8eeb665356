// /proc, read the way top does: the process's utime+stime ticks (fields 14 and 15 of
// /proc/self/stat, counted after the parenthesised command name, which may hold spaces),
// its resident pages (/proc/self/statm, second field), the host's busy and total jiffies
// (the first "cpu" line of /proc/stat: busy is everything but idle and iowait) and its
// memory (/proc/meminfo's MemTotal and MemAvailable, in kB).
#include "dashboard/proc_sample.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace prism::dashboard {

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// utime + stime of /proc/<pid>/stat, in clock ticks (0 if unreadable).
uint64_t ProcessTicks(const std::string& stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat.substr(close + 1));
  // After ")": field 3 (state) onwards; utime and stime are fields 14 and 15.
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return utime + stime;
}

struct HostCpu {
  uint64_t busy = 0;
  uint64_t total = 0;
  unsigned cpus = 0;
};

HostCpu ReadHostCpu(const std::string& stat) {
  HostCpu h;
  std::istringstream lines(stat);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("cpu", 0) != 0) break;
    if (line.size() > 3 && line[3] != ' ') {
      ++h.cpus;  // cpu0, cpu1, ...
      continue;
    }
    std::istringstream in(line.substr(3));
    std::vector<uint64_t> v;
    for (uint64_t x; in >> x;) v.push_back(x);
    for (uint64_t x : v) h.total += x;
    // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
    // already inside user and nice.
    if (v.size() > 8) h.total -= v[8];
    if (v.size() > 9) h.total -= v[9];
    const uint64_t idle = (v.size() > 3 ? v[3] : 0) + (v.size() > 4 ? v[4] : 0);
    h.busy = h.total > idle ? h.total - idle : 0;
  }
  return h;
}

uint64_t MeminfoBytes(const std::string& meminfo, const std::string& key) {
  const size_t at = meminfo.find(key + ":");
  if (at == std::string::npos) return 0;
  return std::strtoull(meminfo.c_str() + at + key.size() + 1, nullptr, 10) * 1024;
}

}  // namespace

ProcSampler::ProcSampler(std::string proc_root) : root_(std::move(proc_root)) {
  if (long t = ::sysconf(_SC_CLK_TCK); t > 0) ticks_per_second_ = t;
  if (long p = ::sysconf(_SC_PAGESIZE); p > 0) page_bytes_ = p;
}

ProcSample ProcSampler::Sample(int64_t now_ns) {
  ProcSample s;
  const uint64_t ticks = ProcessTicks(ReadFile(root_ + "/self/stat"));
  const HostCpu host = ReadHostCpu(ReadFile(root_ + "/stat"));
  {
    std::istringstream statm(ReadFile(root_ + "/self/statm"));
    uint64_t size = 0, resident = 0;
    if (statm >> size >> resident) s.process_rss_bytes = resident * static_cast<uint64_t>(page_bytes_);
  }
  const std::string meminfo = ReadFile(root_ + "/meminfo");
  s.host_mem_total_bytes = MeminfoBytes(meminfo, "MemTotal");
  const uint64_t available = MeminfoBytes(meminfo, "MemAvailable");
  s.host_mem_used_bytes = s.host_mem_total_bytes > available ? s.host_mem_total_bytes - available : 0;
  s.host_cpus = host.cpus;
  if (primed_ && now_ns > last_ns_) {
    const double seconds = static_cast<double>(now_ns - last_ns_) / 1e9;
    if (ticks >= last_process_ticks_) {
      s.process_cpu_percent = 100.0 * static_cast<double>(ticks - last_process_ticks_) /
                              static_cast<double>(ticks_per_second_) / seconds;
    }
    if (host.total > last_host_total_ && host.busy >= last_host_busy_) {
      s.host_cpu_percent = 100.0 * static_cast<double>(host.busy - last_host_busy_) /
                           static_cast<double>(host.total - last_host_total_);
    }
  }
  primed_ = true;
  last_ns_ = now_ns;
  last_process_ticks_ = ticks;
  last_host_busy_ = host.busy;
  last_host_total_ = host.total;
  return s;
}

}  // namespace prism::dashboard
