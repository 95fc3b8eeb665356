// The end-of-job report of a big job: --tasks tiny tasks (default 1,000,000) in batches,
// then Shutdown, which writes the dashboard's report (run it with --prism-dashboard=report or
// loopback, and PRISM_STORAGE_PATH for where). Rank 0 keeps the last task_table_size ended
// tasks (default 10,000) whatever ran, so the report's size should not grow with --tasks.
//
//   mpirun -n 3 prism_dashboard_report_benchmark [--tasks=N] [--batch=N] --prism-dashboard=report
//
// Prints the tasks' rate, Shutdown's time (the report's write and the session's teardown),
// and the report's path and size; the runtime's own line "prism: dashboard report PATH
// (N KiB, M ms)" gives the report's time alone (gathering, rendering, writing).
#include <prism/api.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <string>
#include <vector>

namespace {

int Noop(int x) { return x; }
PRISM_REMOTE(Noop);

long Flag(int argc, char** argv, const char* name, long fallback) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return std::atol(argv[i] + n + 1);
  }
  return fallback;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  const long tasks = Flag(argc, argv, "--tasks", 1'000'000);
  const long batch = Flag(argc, argv, "--batch", 10'000);
  const std::string job = prism::GetRuntimeContext().GetJobId();
  const auto started = std::chrono::steady_clock::now();
  long sum = 0;
  for (long done = 0; done < tasks; done += batch) {
    std::vector<prism::ObjectRef<int>> refs;
    refs.reserve(static_cast<size_t>(batch));
    for (long i = 0; i < batch && done + i < tasks; ++i) refs.push_back(prism::Task(Noop).Remote(1));
    for (auto& r : refs) sum += *r.Get();
  }
  const double run_s = Seconds(started);
  if (sum != tasks) {
    std::fprintf(stderr, "wrong sum %ld of %ld tasks\n", sum, tasks);
    return 1;
  }
  const auto stopping = std::chrono::steady_clock::now();
  prism::Shutdown();
  const double shutdown_s = Seconds(stopping);
  const char* dir = std::getenv("PRISM_STORAGE_PATH");
  const std::string report = std::string(dir ? dir : "") + "/prism-dashboard-" + job + ".html";
  struct stat st {};
  const bool have = dir != nullptr && ::stat(report.c_str(), &st) == 0;
  std::printf("%ld tasks in %.1f s (%.0f tasks/s); Shutdown %.0f ms; report %s: %s\n", tasks, run_s,
              static_cast<double>(tasks) / run_s, shutdown_s * 1e3, report.c_str(),
              have ? (std::to_string(st.st_size >> 10) + " KiB").c_str()
                   : "not found (run with --prism-dashboard=report and PRISM_STORAGE_PATH set)");
  return have ? 0 : 1;
}
