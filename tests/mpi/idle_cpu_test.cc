// An idle cluster must not burn CPU: each rank's process CPU time over 3 s of driver sleep
// stays below 10% of one core.
#include <gtest/gtest.h>
#include <prism/api.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
PRISM_REMOTE(ProcessCpuSeconds);

int World() { return prism::GetRuntimeContext().GetWorldSize(); }

std::vector<double> CpuOfEveryRank() {
  std::vector<prism::ObjectRef<double>> refs;
  for (int r = 0; r < World(); ++r) {
    refs.push_back(prism::Task(ProcessCpuSeconds)
                       .SetResource("rank:" + std::to_string(r), 0.01)
                       .SetResource("CPU", 0)
                       .Remote());
  }
  std::vector<double> out;
  for (auto& v : prism::Get(refs, 30000)) out.push_back(*v);
  return out;
}

}  // namespace

TEST(IdleCpu, RanksSleepWhenIdle) {
  // Warm up (threads started, first messages exchanged), then let things settle.
  CpuOfEveryRank();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto before = CpuOfEveryRank();
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  auto after = CpuOfEveryRank();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int r = 0; r < World(); ++r) {
    double pct = 100.0 * (after[r] - before[r]) / wall;
    std::printf("rank %d idle CPU: %.1f%% of one core (%.3f s CPU in %.2f s)%s\n", r, pct,
                after[r] - before[r], wall, r == 0 ? " [includes the sleeping driver]" : "");
    EXPECT_LT(pct, 10.0) << "rank " << r << " is busy while the cluster is idle";
  }
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  int status = RUN_ALL_TESTS();
  prism::Shutdown();
  return status;
}
