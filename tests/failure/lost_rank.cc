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
//   * a call to the actor raises ActorError naming the lost rank,
//   * a named actor with max_restarts 1 started there restarts on a live rank: its call in
//     flight at the kill runs again there (max_task_retries), its name still finds it,
//     and the state API shows one restart, and
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

/// Counts its calls: a restarted incarnation starts from zero again.
class Survivor {
 public:
  static Survivor* Create() { return new Survivor; }
  int SlowRank(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    ++calls_;
    return prism::GetRuntimeContext().GetRank();
  }
  int Calls() const { return calls_; }

 private:
  int calls_ = 0;
};

PRISM_REMOTE(Square, KillSelf, RankOfTask, Holder::Create, &Holder::Rank, Survivor::Create, &Survivor::SlowRank,
             &Survivor::Calls);

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

  auto survivor = prism::Actor(Survivor::Create)
                      .SetName("survivor")
                      .SetMaxRestarts(1)
                      .SetMaxTaskRetries(-1)
                      .SetSchedulingStrategy(prism::NodeAffinitySchedulingStrategy{victim, /*soft=*/true})
                      .Remote();
  if (*survivor.Task(&Survivor::SlowRank).Remote(0).Get(30000) != victim) {
    return Fail("the survivor actor is not on the last rank");
  }
  // In flight when its rank dies: it runs again on the new incarnation.
  auto in_flight = survivor.Task(&Survivor::SlowRank).Remote(300);

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
  // The survivor restarted on a live rank; the call in flight ran again there.
  int survivor_rank = -1;
  try {
    survivor_rank = *in_flight.Get(30000);
  } catch (const std::exception& e) {
    return Fail(std::string("the survivor's call in flight: ") + e.what());
  }
  const auto serving_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - killed_at).count();
  if (survivor_rank == victim || survivor_rank < 0) return Fail("the survivor's call ran on the lost rank");
  auto found = prism::GetActor<Survivor>("survivor");
  if (!found) return Fail("the restarted survivor lost its name");
  if (*found->Task(&Survivor::Calls).Remote().Get(10000) != 1) {
    return Fail("the restarted survivor is not a new incarnation (its calls did not start from 0)");
  }
  int restarts = -1;
  std::string state;
  for (const auto& a : prism::state::ListActors()) {
    if (a.name == "survivor") restarts = a.num_restarts, state = a.state;
  }
  if (restarts != 1 || state != "ALIVE") {
    return Fail("the survivor shows " + std::to_string(restarts) + " restarts, state " + state);
  }
  // New work runs on the live ranks only.
  std::vector<prism::ObjectRef<int>> after;
  for (int i = 0; i < 50; ++i) after.push_back(prism::Task(RankOfTask).Remote(i));
  std::set<int> ranks;
  for (auto& r : after) ranks.insert(*r.Get(30000));
  if (ranks.count(victim)) return Fail("a task ran on the lost rank");

  std::printf("lost_rank ok: %d results correct at %d ranks, rank %d DEAD %lld ms after its kill (the task's), "
              "the restarted actor answered on rank %d %lld ms after it, new tasks on %zu live ranks\n",
              kTasks, world, victim, static_cast<long long>(noticed_ms), survivor_rank,
              static_cast<long long>(serving_ms), ranks.size());
  std::fflush(stdout);
  prism::Shutdown();
  return 0;
}
