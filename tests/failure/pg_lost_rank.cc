// A placement group's bundle lost with its rank under `mpirun --enable-recovery` (issue 44,
// item 3): the bundle is placed again on a live rank and the group is CREATED again.
//
//   prism_pg_lost_rank_test --prism-ranks-per-node=1 --prism-num-cpus=2   (4 ranks)
//
// Every rank is a node of its own, so a SPREAD group of 3 bundles takes ranks 0, 1 and 2. A
// task in a bundle on a worker rank runs for a while; a task in the last bundle on another
// worker rank kills its own process with SIGKILL. Then:
//   * the lost rank is DEAD in the state API,
//   * the group is CREATED again in ListPlacementGroups, the lost bundle on a live rank,
//   * a task asked to run in that bundle runs there, and PlacementGroup::Wait and GetState
//     agree the group is whole,
//   * the task in the bundle that stayed ran once, on its rank, untouched;
// it prints "pg_lost_rank ok: ..." and Shutdown ends the job with status 0.
#include <prism/api.h>
#include <prism/platform/placement.h>
#include <prism/state.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

int KillSelf(int delay_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  ::kill(::getpid(), SIGKILL);
  return 0;
}
int RankOfTask(int sleep_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  return prism::GetRuntimeContext().GetRank();
}

PRISM_REMOTE(KillSelf, RankOfTask);

int Fail(const std::string& what) {
  std::fprintf(stderr, "pg_lost_rank FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  prism::Shutdown();
  return 1;
}

const prism::state::PlacementGroupState* Find(const std::vector<prism::state::PlacementGroupState>& all,
                                              const std::string& id) {
  for (const auto& g : all) {
    if (g.placement_group_id == id) return &g;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  const int world = prism::GetRuntimeContext().GetWorldSize();
  if (world < 4) return Fail("needs 4 ranks or more");

  auto pg = prism::CreatePlacementGroup({"pg_lost", {{{"CPU", 0.5}}, {{"CPU", 0.5}}, {{"CPU", 0.5}}},
                                         prism::PlacementStrategy::SPREAD});
  if (!pg.Wait(30)) return Fail("the group was not created within 30 s");
  std::vector<int> ranks;
  for (const auto& b : prism::platform::BundleLocations(pg)) ranks.push_back(b.rank);
  // The lost bundle: the last one on a worker rank; the one that stays: another worker's.
  int lost = -1;
  int stays = -1;
  for (int b = static_cast<int>(ranks.size()) - 1; b >= 0; --b) {
    if (ranks[b] <= 0) continue;
    if (lost < 0) {
      lost = b;
    } else if (ranks[b] != ranks[lost] && stays < 0) {
      stays = b;
    }
  }
  if (lost < 0 || stays < 0) return Fail("the bundles are not on two worker ranks (ranks per node not 1?)");
  const int victim = ranks[lost];

  // Runs through the loss in the bundle that stays.
  auto steady = prism::Task(RankOfTask).SetPlacementGroup(pg, stays).SetResource("CPU", 0.25).Remote(1500);
  const auto killed_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  auto kill = prism::Task(KillSelf).SetPlacementGroup(pg, lost).SetResource("CPU", 0).SetMaxRetries(0).Remote(200);

  bool dead = false;
  while (!dead && std::chrono::steady_clock::now() < killed_at + std::chrono::seconds(20)) {
    for (const auto& n : prism::state::ListNodes()) dead |= n.rank == victim && n.state == "DEAD";
    if (!dead) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!dead) return Fail("rank " + std::to_string(victim) + " is not DEAD in ListNodes 20 s after its kill");

  // CREATED again, the lost bundle on a live rank.
  int moved_to = -1;
  std::string state;
  while (std::chrono::steady_clock::now() < killed_at + std::chrono::seconds(30)) {
    const auto groups = prism::state::ListPlacementGroups();
    const auto* g = Find(groups, pg.GetID());
    if (g == nullptr) return Fail("the group is gone from ListPlacementGroups");
    state = g->state;
    if (state == "CREATED" && g->bundle_ranks.size() == ranks.size() && g->bundle_ranks[lost] != victim) {
      moved_to = g->bundle_ranks[lost];
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto created_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at).count();
  if (moved_to < 0) return Fail("the group is " + state + ", not CREATED again, 30 s after the kill");

  int ran_on = -1;
  try {
    ran_on = *prism::Task(RankOfTask).SetPlacementGroup(pg, lost).SetResource("CPU", 0.25).Remote(0).Get(30000);
  } catch (const std::exception& e) {
    return Fail(std::string("a task in the rescheduled bundle failed: ") + e.what());
  }
  if (ran_on != moved_to) {
    return Fail("a task in bundle " + std::to_string(lost) + " ran on rank " + std::to_string(ran_on) +
                ", not on its new rank " + std::to_string(moved_to));
  }
  if (!pg.Wait(10) || pg.GetState() != prism::PlacementGroupState::CREATED) {
    return Fail("Wait or GetState does not see the group created again");
  }
  int steady_rank = -1;
  try {
    steady_rank = *steady.Get(30000);
  } catch (const std::exception& e) {
    return Fail(std::string("the task in the bundle that stayed failed: ") + e.what());
  }
  if (steady_rank != ranks[stays]) return Fail("the task in the bundle that stayed moved");
  try {
    kill.Get(10000);
    return Fail("the task that killed its rank returned");
  } catch (const std::exception&) {
  }
  std::printf("pg_lost_rank ok: bundle %d moved from lost rank %d to rank %d, group CREATED again %lld ms after "
              "the kill; the bundle on rank %d served on\n",
              lost, victim, moved_to, static_cast<long long>(created_ms), ranks[stays]);
  std::fflush(stdout);
  prism::Shutdown();
  return 0;
}
