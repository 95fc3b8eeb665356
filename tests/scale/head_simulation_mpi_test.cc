// The head simulation against a real MPI job: tests/scale/gated_scenario.h's nine tasks run
// on four MPI ranks (mpirun -n 4 ... --prism-num-cpus=1), then on the simulation (in rank
// 0's process), and both must place every task where the scenario says. The gates are
// files in a directory the driver makes (the ranks share this host's file system, as under
// mpirun on one machine); a gate that waited through the control plane (kv::Get) would
// mark its task blocked and give its CPU back, which changes the decisions.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gated_scenario.h"
#include "head_simulation.h"
#include "prism/api.h"

namespace {
/// Waits (up to 60 s) for the file `dir/i`, then runs 2 ms and says where it ran.
int MpiGated(std::string dir, int i) {
  const std::string gate = dir + "/" + std::to_string(i);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(gate) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return prism::GetRuntimeContext().GetRank();
}
}  // namespace
PRISM_REMOTE(MpiGated);

namespace {

std::string Show(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}


}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);  // ranks 1..3 serve here until Shutdown
  const int world = prism::GetRuntimeContext().GetWorldSize();
  if (world != prism_scale::kRanks) {
    std::fprintf(stderr,
                 "head_simulation_mpi_test: needs %d ranks with --prism-num-cpus=1, got %d\n",
                 prism_scale::kRanks, world);
    prism::Shutdown();
    return 2;
  }
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("prism_scale_gates_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < prism_scale::kTasks; ++i) {
    const auto s = prism_scale::StrategyOf(i);
    auto task = prism::Task(MpiGated);
    using Kind = prism::internal::SchedulingStrategy::Kind;
    if (s.kind == Kind::kSpread) task.SetSchedulingStrategy(prism::SpreadSchedulingStrategy{});
    if (s.kind == Kind::kNodeAffinity) {
      task.SetSchedulingStrategy(prism::NodeAffinitySchedulingStrategy{s.rank, s.soft});
    }
    refs.push_back(task.Remote(dir, i));
  }
  std::vector<int> real(prism_scale::kTasks, -1);
  int status = 0;
  try {
    for (int i : prism_scale::kFinishOrder) {
      std::ofstream(dir + "/" + std::to_string(i)).put('1');
      real[static_cast<size_t>(i)] = *refs[static_cast<size_t>(i)].Get(30000);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "head_simulation_mpi_test: %s\n", e.what());
    status = 1;
  }
  std::filesystem::remove_all(dir);
  const std::vector<int> simulated = prism_scale::SimulatedRun("MpiGated");
  std::printf("MPI job:    %s\nsimulation: %s\nexpected:   %s\n", Show(real).c_str(),
              Show(simulated).c_str(), Show(prism_scale::kExpectedRanks).c_str());
  if (real != simulated || real != prism_scale::kExpectedRanks) {
    std::fprintf(stderr, "head_simulation_mpi_test: the placements differ\n");
    status = 1;
  }
  prism::Shutdown();
  return status;
}
