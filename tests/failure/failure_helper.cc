// Small Prism programs that end badly on purpose; tests/failure/CMakeLists.txt runs them
// under mpiexec through expect_failure.sh and checks the exit status and the output.
//
//   failure_helper <mode> [--prism-* flags]
//     driver_throws     the driver throws an exception nobody catches
//     no_shutdown       the driver returns 4 from main without prism::Shutdown()
//     worker_sigkill    a task on the last rank kills its own process with SIGKILL
//     worker_sigstop    a task on the last rank stops its own process (SIGSTOP): it hangs
//     worker_sigkill_guarded  worker_sigkill while the driver holds a PreemptionGuard (as a
//                       training run does): mpirun's clean-up SIGTERM is no preemption
//     driver_sigstop    the driver process stops itself (SIGSTOP): the workers must notice
//     worker_exit       a task (ExitThree) on the last rank calls exit(3)
//     worker_terminate  a thread started by a task on the last rank throws (std::terminate)
//     init_only         Init and Shutdown (for bad flags/environment: Init must refuse)
//     shutdown_busy     Shutdown while tasks still sleep on every rank: must exit 0 promptly
//     idle_rank         (4+ ranks, a short PRISM_RANK_TIMEOUT) the head keeps ranks 1 and 2
//                       busy for three timeouts while the last rank has no work: the idle
//                       rank must still hear the head's heartbeats, and not end the job
//     lifecycle         API calls before Init / after Shutdown throw RuntimeError, refs may
//                       outlive Shutdown; prints "lifecycle ok" and exits 0
//     listeners         prints how many TCP sockets each rank's process listens on
//                       ("listening TCP sockets per rank: a b c"), exits 0
//     spill_check SEED  Puts 40 objects of 4 MiB whose bytes depend on SEED (with a small
//                       object store they spill), reads them all back twice and checks
//                       every byte; prints "spill_check ok" or what was wrong (exit 1)
//     heartbeat DIR     every rank appends a line to DIR/rank<r> every 20 ms for 60 s (a
//                       task holds each worker rank; the driver writes its own): what a
//                       rank still writes after its launcher is killed shows in the files
#include <prism/api.h>
#include <prism/platform/preemption.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

int Square(int x) { return x * x; }
/// Appends a line to dir/rank<r> every 20 ms for 60 s.
int Heartbeat(std::string dir) {
  const int rank = prism::GetRuntimeContext().GetRank();
  const std::string path = dir + "/rank" + std::to_string(rank);
  for (int i = 0; i < 3000; ++i) {
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      std::fprintf(f, "%d\n", i);
      std::fclose(f);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return rank;
}
int KillSelf(int sig) {
  std::fprintf(stderr, "failure_helper: rank %d raising signal %d\n",
               prism::GetRuntimeContext().GetRank(), sig);
  std::fflush(stderr);
  raise(sig);
  return 0;
}
int ThrowInThread(int) {
  std::thread([] { throw std::logic_error("thrown in a worker thread on purpose"); }).join();
  return 0;
}
/// TCP sockets this process listens on: rows of /proc/net/tcp{,6} in state 0A (LISTEN)
/// whose inode is one of this process's open sockets.
int ListeningSockets(int) {
  std::set<std::string> mine;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) mine.insert(target.substr(8, target.size() - 9));
  }
  int n = 0;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state == "0A" && mine.count(inode)) ++n;
    }
  }
  return n;
}
int ExitThree(int) {
  std::exit(3);
}
int SleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
PRISM_REMOTE(Square, KillSelf, ThrowInThread, ListeningSockets, ExitThree, SleepMs, Heartbeat);

int LastRank() { return prism::GetRuntimeContext().GetWorldSize() - 1; }
std::string RankRes(int r) { return "rank:" + std::to_string(r); }

// Runs `f` and checks that it throws prism::RuntimeError.
template <typename F>
bool ThrowsRuntimeError(const char* what, F f) {
  try {
    f();
  } catch (const prism::RuntimeError&) {
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lifecycle: %s threw the wrong exception: %s\n", what, e.what());
    return false;
  }
  std::fprintf(stderr, "lifecycle: %s did not throw\n", what);
  return false;
}

int Lifecycle(int argc, char** argv) {
  bool ok = true;
  // Before Init (every rank runs this part).
  ok &= !prism::IsInitialized();
  ok &= ThrowsRuntimeError("GetRuntimeContext before Init", [] { prism::GetRuntimeContext(); });
  ok &= ThrowsRuntimeError("Put before Init", [] { prism::Put(1); });
  ok &= ThrowsRuntimeError("Remote before Init", [] { prism::Task(Square).Remote(2); });
  ok &= ThrowsRuntimeError("ClusterResources before Init", [] { prism::ClusterResources(); });
  prism::Shutdown();  // no-op when not initialized
  if (!ok) return 10;

  prism::Init(argc, argv);
  ok &= prism::IsInitialized();
  // Refs that outlive Shutdown: their destructors run after it and must be harmless.
  static prism::ObjectRef<int> kept_small;
  static prism::ObjectRef<std::vector<char>> kept_large;
  kept_small = prism::Task(Square).SetResource(RankRes(LastRank()), 0.01).Remote(6);
  kept_large = prism::Put(std::vector<char>(1 << 20, 'x'));
  auto local_ref = prism::Put(5);
  ok &= *kept_small.Get() == 36;
  prism::Shutdown();
  ok &= !prism::IsInitialized();
  prism::Shutdown();  // twice: no-op
  ok &= ThrowsRuntimeError("Put after Shutdown", [] { prism::Put(1); });
  ok &= ThrowsRuntimeError("Get after Shutdown", [] { kept_small.Get(); });
  ok &= ThrowsRuntimeError("Remote after Shutdown", [] { prism::Task(Square).Remote(2); });
  prism::Init();  // after Shutdown: a new session, as in Ray
  ok &= prism::IsInitialized() && *prism::Task(Square).SetResource(RankRes(LastRank()), 0.01).Remote(7).Get() == 49;
  prism::Shutdown();
  local_ref = prism::ObjectRef<int>();  // a ref released after Shutdown
  std::printf("lifecycle %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

/// The bytes of object `i` of launch `seed`.
std::vector<uint8_t> SpillObject(int seed, int i) {
  std::vector<uint8_t> v(4 << 20);
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<uint8_t>((k * 7 + i * 13 + seed * 101) & 0xff);
  return v;
}

int SpillCheck(int seed) {
  std::vector<prism::ObjectRef<std::vector<uint8_t>>> refs;
  for (int i = 0; i < 40; ++i) refs.push_back(prism::Put(SpillObject(seed, i)));
  int wrong = 0, lost = 0;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 40; ++i) {
      try {
        if (*refs[static_cast<size_t>(i)].Get(60000) != SpillObject(seed, i)) ++wrong;
      } catch (const prism::ObjectLostError& e) {
        ++lost;
        std::fprintf(stderr, "spill_check: object %d lost: %s\n", i, e.what());
      }
    }
  }
  std::printf("spill_check %s: launch %d, %d of 80 reads held other bytes, %d lost\n",
              wrong + lost == 0 ? "ok" : "FAILED", seed, wrong, lost);
  prism::Shutdown();
  return wrong + lost == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <mode> [--prism-* flags]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "lifecycle") return Lifecycle(argc, argv);
  if (mode == "early_signal") {
    // A preemption warning while the ranks are still starting (issue 14, item 3): with
    // PRISM_SIGNAL_ACK_FILE set Prism catches it from load time, so it neither ends the rank
    // nor is lost; Init hands it on. Every rank signals itself before Init.
    if (const char* ack = std::getenv("PRISM_SIGNAL_ACK_FILE")) std::remove(ack);
    raise(SIGUSR1);
  }
  prism::Init(argc, argv);
  // Only the driver gets here. Make sure the cluster works before breaking it.
  if (*prism::Task(Square).Remote(7).Get() != 49) return 3;

  if (mode == "driver_throws") {
    throw std::runtime_error("boom from the driver");
  } else if (mode == "no_shutdown") {
    // Shut down at exit, as Ray does; the job's exit status is main's.
    std::printf("no_shutdown: %d, returning 4\n", *prism::Task(Square).SetResource(RankRes(LastRank()), 0.01).Remote(3).Get());
    std::fflush(stdout);
    return 4;
  } else if (mode == "worker_sigkill" || mode == "worker_sigstop" || mode == "worker_sigkill_guarded") {
    int sig = mode == "worker_sigstop" ? SIGSTOP : SIGKILL;
    std::optional<prism::platform::PreemptionGuard> guard;
    if (mode == "worker_sigkill_guarded") guard.emplace();
    auto ref = prism::Task(KillSelf).SetResource(RankRes(LastRank()), 0.01).Remote(sig);
    ref.Get();  // never returns: the job must end without us
    std::fprintf(stderr, "failure_helper: Get returned after the rank was lost\n");
    prism::Shutdown();
    return 0;
  } else if (mode == "driver_sigkill") {
    std::fprintf(stderr, "failure_helper: the driver kills itself\n");
    std::fflush(stderr);
    raise(SIGKILL);
    return 0;
  } else if (mode == "driver_sigstop") {
    std::fprintf(stderr, "failure_helper: the driver stops itself\n");
    std::fflush(stderr);
    raise(SIGSTOP);
    std::fprintf(stderr, "failure_helper: the driver was continued\n");
    prism::Shutdown();
    return 0;
  } else if (mode == "listeners") {
    std::string counts;
    for (int r = 0; r <= LastRank(); ++r) {
      counts += " " + std::to_string(
                          *prism::Task(ListeningSockets).SetResource(RankRes(r), 0.01).Remote(0).Get(30000));
    }
    std::printf("listening TCP sockets per rank:%s\n", counts.c_str());
    prism::Shutdown();
    return 0;
  } else if (mode == "worker_exit") {
    prism::Task(ExitThree).SetResource(RankRes(LastRank()), 0.01).Remote(0).Get();
    prism::Shutdown();
    return 0;
  } else if (mode == "worker_terminate") {
    auto ref = prism::Task(ThrowInThread).SetResource(RankRes(LastRank()), 0.01).Remote(0);
    ref.Get();
    prism::Shutdown();
    return 0;
  } else if (mode == "early_signal") {
    const char* ack = std::getenv("PRISM_SIGNAL_ACK_FILE");
    std::string heard;
    for (int i = 0; i < 100 && heard.empty(); ++i) {  // the watcher writes it as Init returns
      if (FILE* f = std::fopen(ack, "r")) {
        char line[64] = {0};
        if (std::fgets(line, sizeof line, f) != nullptr) heard = line;
        std::fclose(f);
      }
      if (heard.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const bool ok = prism::PreemptionSignal() == SIGUSR1 && heard == "SIGUSR1\n";
    std::printf("early_signal %s: PreemptionSignal() %d, acknowledged '%s'\n", ok ? "ok" : "FAILED",
                prism::PreemptionSignal(), heard.c_str());
    prism::Shutdown();
    return ok ? 0 : 1;
  } else if (mode == "init_only") {
    prism::Shutdown();
    return 0;
  } else if (mode == "cpus") {
    std::printf("failure_helper: the cluster's CPU: %g\n", prism::ClusterResources()["CPU"]);
    prism::Shutdown();
    return 0;
  } else if (mode == "idle_rank") {
    const char* env = std::getenv("PRISM_RANK_TIMEOUT");
    const double timeout_s = env != nullptr ? std::atof(env) : 30;
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int>(3000 * timeout_s));
    int calls = 0;
    while (std::chrono::steady_clock::now() < until) {
      auto a = prism::Task(Square).SetResource(RankRes(1), 0.01).Remote(calls);
      auto b = prism::Task(Square).SetResource(RankRes(2), 0.01).Remote(calls);
      calls += *a.Get(30000) == *b.Get(30000) ? 1 : 0;
    }
    const int last = *prism::Task(Square).SetResource(RankRes(LastRank()), 0.01).Remote(7).Get(30000);
    std::printf("failure_helper: idle rank %d alive after %d calls to ranks 1 and 2 (%d)\n",
                LastRank(), calls, last);
    prism::Shutdown();
    return 0;
  } else if (mode == "heartbeat" && argc > 2) {
    for (int r = 1; r <= LastRank(); ++r) {
      prism::Task(Heartbeat).SetResource(RankRes(r), 0.01).Remote(std::string(argv[2]));
    }
    Heartbeat(argv[2]);
    prism::Shutdown();
    return 0;
  } else if (mode == "spill_check") {
    return SpillCheck(argc > 2 ? std::atoi(argv[2]) : 0);
  } else if (mode == "shutdown_busy") {
    for (int r = 0; r <= LastRank(); ++r) {
      prism::Task(SleepMs).SetResource(RankRes(r), 0.01).Remote(60000);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let them start
    prism::Shutdown();
    std::printf("failure_helper: shutdown with busy ranks done\n");
    return 0;
  }
  std::fprintf(stderr, "failure_helper: unknown mode %s\n", mode.c_str());
  prism::Shutdown();
  return 2;
}
