// A driver that keeps working while a host is lost, under `mpirun --enable-recovery`
// (issue 44, issue 46 item 5). tests/multihost/host_lost_recovery.sh runs it with 2 ranks
// on prism-h1 and 1 on prism-h2, kills every process of the job on prism-h2 mid-run and
// checks what it prints and its exit status.
//
//   prism_multihost_recovery_app <dir> [seconds after the loss, default 2]
//
// The driver submits tasks in rounds of 32 (Square, 5-9 ms each, max_retries 5) over every
// rank and checks each result. Once a round has run tasks on the last rank it writes
// <dir>/ready (the script kills then). A watcher thread reads the state API every 10 ms and
// notes the wall-clock time (ms since the epoch, comparable with the script's `date`) at
// which the last rank turns DEAD. The driver goes on for a few seconds after that, then
// checks that every result was i * i, that tasks ran on the lost rank before the loss and
// on the live ranks only after it, prints "recovery_app ok: ..." and shuts down (status 0).
// Any wrong result, an error, or no DEAD rank within 60 s of ready: "recovery_app FAILED"
// and status 1.
#include <prism/api.h>
#include <prism/state.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

std::vector<int> Square(int x) {
  std::this_thread::sleep_for(std::chrono::milliseconds(5 + x % 5));
  return {x * x, prism::GetRuntimeContext().GetRank()};
}
PRISM_REMOTE(Square);

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "recovery_app FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  prism::Shutdown();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  if (argc < 2) return Fail("usage: prism_multihost_recovery_app <dir> [seconds after the loss]");
  const std::string dir = argv[1];
  const int after_s = argc > 2 ? std::atoi(argv[2]) : 2;
  const int world = prism::GetRuntimeContext().GetWorldSize();
  const int victim = world - 1;
  if (world < 3) return Fail("needs 3 ranks or more");
  std::string victim_host;
  for (const auto& n : prism::state::ListNodes()) {
    if (n.rank == victim) victim_host = n.host;
  }

  // The watcher: the wall-clock time at which the victim turned DEAD (0 while ALIVE).
  std::atomic<int64_t> dead_at_ms{0};
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!stop && dead_at_ms == 0) {
      try {
        for (const auto& n : prism::state::ListNodes()) {
          if (n.rank == victim && n.state == "DEAD") dead_at_ms = WallMs();
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "recovery_app: ListNodes: %s\n", e.what());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  // Stops the watcher before Shutdown (it reads the state API).
  auto fail = [&](const std::string& what) {
    stop = true;
    watcher.join();
    return Fail(what);
  };

  constexpr int kRound = 32;
  int next = 0;
  int64_t ready_at_ms = 0;
  std::map<int, int> before, after;  // tasks per rank: ended before the loss was seen, after
  while (true) {
    const int64_t round_start = WallMs();
    const bool dead_before_round = dead_at_ms != 0;
    std::vector<prism::ObjectRef<std::vector<int>>> refs;
    for (int k = 0; k < kRound; ++k) refs.push_back(prism::Task(Square).SetMaxRetries(5).Remote(next + k));
    for (int k = 0; k < kRound; ++k) {
      const int i = next + k;
      std::vector<int> v;
      try {
        v = *refs[k].Get(60000);
      } catch (const std::exception& e) {
        return fail("task " + std::to_string(i) + ": " + e.what());
      }
      if (v.size() != 2 || v[0] != i * i) return fail("task " + std::to_string(i) + " returned a wrong value");
      ++(dead_before_round ? after : before)[v[1]];
      if (dead_before_round && v[1] == victim) {
        return fail("task " + std::to_string(i) + " ran on rank " + std::to_string(victim) + " after it was DEAD");
      }
    }
    next += kRound;
    if (ready_at_ms == 0 && before[victim] > 0) {
      ready_at_ms = WallMs();
      std::ofstream(dir + "/ready") << ready_at_ms << "\n";
      std::printf("recovery_app: rank %d (host %s) runs tasks; ready for the loss\n", victim, victim_host.c_str());
      std::fflush(stdout);
    }
    const int64_t dead = dead_at_ms;
    if (dead != 0 && round_start > dead + after_s * 1000) break;
    if (ready_at_ms != 0 && dead == 0 && WallMs() > ready_at_ms + 60000) {
      return fail("rank " + std::to_string(victim) + " is not DEAD 60 s after ready");
    }
    if (ready_at_ms == 0 && next > 20000) return fail("no task ran on rank " + std::to_string(victim));
  }
  stop = true;
  watcher.join();

  std::string state;
  for (const auto& n : prism::state::ListNodes()) {
    if (n.rank == victim) state = n.state;
  }
  if (state != "DEAD") return Fail("rank " + std::to_string(victim) + " is " + state + " at the end");
  auto list = [](const std::map<int, int>& m) {
    std::string s;
    for (const auto& [rank, n] : m) s += (s.empty() ? "" : ", ") + std::to_string(n) + " on rank " + std::to_string(rank);
    return s;
  };
  std::printf("recovery_app: rank %d (host %s) DEAD at %lld ms\n", victim, victim_host.c_str(),
              static_cast<long long>(dead_at_ms.load()));
  std::printf("recovery_app ok: %d results correct (before the loss: %s; after: %s); rank %d DEAD\n", next,
              list(before).c_str(), list(after).c_str(), victim);
  std::fflush(stdout);
  prism::Shutdown();
  return 0;
}
