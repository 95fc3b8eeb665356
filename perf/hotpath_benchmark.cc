// prism_hotpath_benchmark: Prism's hot paths, each repeated K times between callgrind's
// CALLGRIND_START_INSTRUMENTATION and CALLGRIND_STOP_INSTRUMENTATION, so that
// `valgrind --tool=callgrind --instr-atstart=no` counts the instructions of exactly those
// calls. perf/run_callgrind.sh runs it and divides by K. Outside valgrind the macros do
// nothing and the program prints wall-clock times (a sanity check, not the metric).
//
//   ./prism_hotpath_benchmark [--iterations=K] [--only=NAME]   (one rank, no launcher)
//
// The paths (NAME), each after a warm-up of K calls that is not counted:
//   task_roundtrip       Task(NoOp).Remote() then Get: submit + execute + Get of a no-op task
//   serialize_1kib       prism's Serialize of a 1 KiB struct with a Boost serialize() member
//   deserialize_1kib     Deserialize of the same bytes
//   serialize_1kib_pod   Serialize of a trivially copyable 1 KiB struct (the memcpy path)
//   actor_call           actor.Task(&HotActor::NoOp).Remote() then Get: one sync actor call
//
// Each path runs in its own process when --only is given; run_callgrind.sh does that, so one
// path's background activity cannot land in another's count. The task and actor paths are
// counted over every thread (their work spans the driver, executor and actor threads, and
// the head runs on whichever of them posts to it), minus what the threads spend waiting for
// each other, which perf/suite.py subtracts from the dump; the serialization paths only
// inside their HotPath* function (see perf/README.md, "Instruction counts (callgrind)").
#include <prism/api.h>
#include <prism/serialization.h>
#include <dirent.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"

int NoOp() { return 0; }

class HotActor {
 public:
  static HotActor* Create() { return new HotActor(); }
  int NoOp() { return 0; }
};

PRISM_REMOTE(NoOp, HotActor::Create, &HotActor::NoOp);

namespace {

/// 1 KiB on the Boost path: a header and a vector of 126 doubles (8 + 8 + 126 * 8 = 1024).
struct Record {
  int64_t id = 0;
  int64_t version = 0;
  std::vector<double> values;
  template <class A>
  void serialize(A& ar, unsigned) {
    ar & id & version & values;
  }
};

/// 1 KiB, trivially copyable: prism copies its bytes.
struct PodRecord {
  int64_t id = 0;
  double values[127] = {};
};
static_assert(sizeof(PodRecord) == 1024);

constexpr int kGetTimeoutMs = 60000;

// The single-threaded paths' loops, each its own function so that callgrind can count only
// the instructions executed inside it (--toggle-collect=*HotPath*), on the calling thread,
// without the runtime's background threads that happen to run during the window.
__attribute__((noinline)) int64_t HotPathSerialize1KiB(const Record& record, int n) {
  int64_t sink = 0;
  for (int i = 0; i < n; ++i) sink += static_cast<int64_t>(prism::internal::Serialize(record).size());
  return sink;
}
__attribute__((noinline)) int64_t HotPathDeserialize1KiB(const prism::internal::Buffer& bytes, int n) {
  int64_t sink = 0;
  for (int i = 0; i < n; ++i) sink += prism::internal::Deserialize<Record>(bytes.data(), bytes.size()).id;
  return sink;
}
__attribute__((noinline)) int64_t HotPathSerialize1KiBPod(const PodRecord& pod, int n) {
  int64_t sink = 0;
  for (int i = 0; i < n; ++i) sink += static_cast<int64_t>(prism::internal::Serialize(pod).size());
  return sink;
}

/// The process's thread count (entries of /proc/self/task), -1 if unreadable.
int CountThreads() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

struct Path {
  std::string name;
  std::function<void(int)> run;  // runs the path n times
};

}  // namespace

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_hotpath_benchmark",
                       "The hot paths between callgrind's start/stop macros (perf/run_callgrind.sh)");
  int iterations = 1000;
  std::string only;
  cli.app.add_option("--iterations", iterations, "calls of each path (default 1000)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--only", only,
                     "one path: task_roundtrip, serialize_1kib, deserialize_1kib, "
                     "serialize_1kib_pod or actor_call");
  cli.Parse(argc, argv);
  alarm(600);  // watchdog: under valgrind a path runs ~50x slower; a hang still ends

  Record record;
  record.id = 7;
  record.version = 3;
  record.values.assign(126, 1.5);
  PodRecord pod;
  pod.id = 7;
  const prism::internal::Buffer record_bytes = prism::internal::Serialize(record);
  int64_t sink = 0;

  std::vector<Path> paths = {
      {"task_roundtrip",
       [&](int n) {
         for (int i = 0; i < n; ++i) sink += *prism::Task(NoOp).Remote().Get(kGetTimeoutMs);
       }},
      {"serialize_1kib", [&](int n) { sink += HotPathSerialize1KiB(record, n); }},
      {"deserialize_1kib", [&](int n) { sink += HotPathDeserialize1KiB(record_bytes, n); }},
      {"serialize_1kib_pod", [&](int n) { sink += HotPathSerialize1KiBPod(pod, n); }},
  };

  prism::Init(argc, argv);  // one rank: a one-rank cluster, tasks run on this rank's threads
  auto actor = prism::Actor(HotActor::Create).Remote();
  paths.push_back({"actor_call", [&](int n) {
                     for (int i = 0; i < n; ++i) sink += *actor.Task(&HotActor::NoOp).Remote().Get(kGetTimeoutMs);
                   }});

  int status = 0, ran = 0;
  const bool under_valgrind = RUNNING_ON_VALGRIND;
  std::printf("prism_hotpath_benchmark: %d iterations per path%s\n", iterations,
              under_valgrind ? " (under valgrind: wall times are not meaningful)" : "");
  for (const auto& p : paths) {
    if (!only.empty() && p.name != only) continue;
    ++ran;
    try {
      p.run(iterations);  // warm-up: caches, pools, the scheduler's view of the task
      const int threads_before = CountThreads();
      auto t0 = std::chrono::steady_clock::now();
      CALLGRIND_ZERO_STATS;
      CALLGRIND_START_INSTRUMENTATION;
      p.run(iterations);
      CALLGRIND_STOP_INSTRUMENTATION;
      CALLGRIND_DUMP_STATS_AT(p.name.c_str());
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      // A thread started inside the window (the executor grows when a task finds no idle
      // thread) adds its start-up to the count: the thread counts show it.
      std::printf("path %s iterations %d wall_us_per_op %.3f threads_at_start %d threads_at_end %d\n",
                  p.name.c_str(), iterations, us / iterations, threads_before, CountThreads());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism_hotpath_benchmark: %s failed: %s\n", p.name.c_str(), e.what());
      status = 1;
    }
  }
  if (ran == 0) {
    std::fprintf(stderr, "prism_hotpath_benchmark: no path named '%s' (see --help)\n", only.c_str());
    status = 2;
  }
  std::fflush(stdout);
  if (sink == -1) std::printf("unreachable\n");
  actor.Kill();
  prism::Shutdown();
  return status;
}
