// A worker rank lost mid-job under `mpirun --enable-recovery` (issue 44): the job goes on.
// tests/failure/lost_rank.sh runs it at 3 and 4 ranks and checks its output and status.
//
//   prism_lost_rank_test
//
// The driver starts a graph of 1,000 tasks (Square, 2-6 ms each, max_retries 3) over every
// rank, with an actor pinned to the last rank; a task there kills its own process with
// SIGKILL while the graph is under way. Then:
//   * every result is i * i (the tasks the lost rank held ran again elsewhere),
//   * the lost rank is DEAD in the state API, within a bound of the kill,
//   * a call to the actor raises ActorError naming the lost rank, and
//   * new tasks run on the live ranks only;
// it prints "lost_rank ok: ..." and Shutdown ends the job with status 0.
#include <prism/api.h>
#include <prism/state.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

int Square(int x) {
  std::this_thread::sleep_for(std::chrono::milliseconds(2 + x % 5));
  return x * x;
}
int KillSelf(int delay_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  ::kill(::getpid(), SIGKILL);
  return 0;
}
int RankOfTask(int) { return prism::GetRuntimeContext().GetRank(); }

class Holder {
 public:
  static Holder* Create() { return new Holder; }
  int Rank() const { return prism::GetRuntimeContext().GetRank(); }
};

PRISM_REMOTE(Square, KillSelf, RankOfTask, Holder::Create, &Holder::Rank);

std::string RankRes(int r) { return "rank:" + std::to_string(r); }

int Fail(const std::string& what) {
  std::fprintf(stderr, "lost_rank FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  prism::Shutdown();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  const int world = prism::GetRuntimeContext().GetWorldSize();
  const int victim = world - 1;
  if (world < 3) return Fail("needs 3 ranks or more");

  auto holder = prism::Actor(Holder::Create).SetResource(RankRes(victim), 0.01).Remote();
  if (*holder.Task(&Holder::Rank).Remote().Get(30000) != victim) return Fail("the actor is not on the last rank");

  constexpr int kTasks = 1000;
  std::vector<prism::ObjectRef<int>> refs;
  refs.reserve(kTasks);
  for (int i = 0; i < kTasks; ++i) refs.push_back(prism::Task(Square).SetMaxRetries(3).Remote(i));
  const auto killed_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  auto kill = prism::Task(KillSelf).SetResource(RankRes(victim), 0.01).SetResource("CPU", 0).SetMaxRetries(0).Remote(150);

  // The lost rank, in the state API: DEAD within a bound of the kill.
  bool dead = false;
  while (!dead && std::chrono::steady_clock::now() < killed_at + std::chrono::seconds(20)) {
    for (const auto& n : prism::state::ListNodes()) dead |= n.rank == victim && n.state == "DEAD";
    if (!dead) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!dead) return Fail("rank " + std::to_string(victim) + " is not DEAD in ListNodes 20 s after its kill");
  const auto noticed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - killed_at).count();

  // Every result, correct, with a timeout (a hang is a failure, not a stuck test).
  for (int i = 0; i < kTasks; ++i) {
    int v = -1;
    try {
      v = *refs[i].Get(60000);
    } catch (const std::exception& e) {
      return Fail("task " + std::to_string(i) + ": " + e.what());
    }
    if (v != i * i) return Fail("task " + std::to_string(i) + " returned " + std::to_string(v));
  }

  // The task that killed its rank: it failed as a crashed worker (no retries).
  try {
    kill.Get(10000);
    return Fail("the task that killed its rank returned");
  } catch (const prism::TaskError& e) {
    if (std::string(e.what()).find("was lost") == std::string::npos) return Fail(std::string("kill: ") + e.what());
  }
  // The actor there died with its rank.
  try {
    holder.Task(&Holder::Rank).Remote().Get(10000);
    return Fail("the actor on the lost rank answered");
  } catch (const prism::ActorError& e) {
    if (std::string(e.what()).find("rank " + std::to_string(victim) + " was lost") == std::string::npos) {
      return Fail(std::string("actor: ") + e.what());
    }
  }
  // New work runs on the live ranks only.
  std::vector<prism::ObjectRef<int>> after;
  for (int i = 0; i < 50; ++i) after.push_back(prism::Task(RankOfTask).Remote(i));
  std::set<int> ranks;
  for (auto& r : after) ranks.insert(*r.Get(30000));
  if (ranks.count(victim)) return Fail("a task ran on the lost rank");

  std::printf("lost_rank ok: %d results correct at %d ranks, rank %d DEAD %lld ms after its kill (the task's), "
              "new tasks on %zu live ranks\n",
              kTasks, world, victim, static_cast<long long>(noticed_ms), ranks.size());
  std::fflush(stdout);
  prism::Shutdown();
  return 0;
}
