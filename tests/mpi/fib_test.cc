// Deeply nested tasks on ranks with one CPU each (prism::Config{num_cpus = 1}): recursive
// Fibonacci only finishes if a task blocked in Get gives its CPU back.
#include <gtest/gtest.h>
#include <prism/api.h>

#include <chrono>
#include <cstdio>
#include <set>

namespace {

int Fib(int n) {
  if (n < 2) return n;
  auto a = prism::Task(Fib).Remote(n - 1);
  auto b = prism::Task(Fib).Remote(n - 2);
  return *a.Get() + *b.Get();
}
// Like Fib, but waits for both children at once and reports where the leaves ran.
std::set<int> FibRanks(int n) {
  if (n < 2) return {prism::GetRuntimeContext().GetRank()};
  std::vector<prism::ObjectRef<std::set<int>>> kids{prism::Task(FibRanks).Remote(n - 1),
                                                    prism::Task(FibRanks).Remote(n - 2)};
  std::set<int> out{prism::GetRuntimeContext().GetRank()};
  for (auto& s : prism::Get(kids)) out.insert(s->begin(), s->end());
  return out;
}
PRISM_REMOTE(Fib, FibRanks);

int World() { return prism::GetRuntimeContext().GetWorldSize(); }

}  // namespace

TEST(Fib, OneCpuPerRank) {
  auto total = prism::ClusterResources();
  EXPECT_DOUBLE_EQ(total["CPU"], World()) << "Config::num_cpus = 1 was not applied";
}

TEST(Fib, Fib15) {
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(*prism::Get(prism::Task(Fib).Remote(15), 90000), 610);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ fib ] Fib(15) on %d rank(s): %.2f s\n", World(), s);
}

TEST(Fib, FromEveryRank) {
  for (int r = 0; r < World(); ++r) {
    auto ref = prism::Task(Fib).SetResource("rank:" + std::to_string(r), 0.01).Remote(10);
    EXPECT_EQ(*prism::Get(ref, 60000), 55) << "root on rank " << r;
  }
}

TEST(Fib, UsesEveryRank) {
  auto ranks = *prism::Get(prism::Task(FibRanks).Remote(10), 60000);
  EXPECT_EQ(static_cast<int>(ranks.size()), World());
}

int main(int argc, char** argv) {
  prism::Config config;
  config.num_cpus = 1;
  prism::Init(config, argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  int status = RUN_ALL_TESTS();
  prism::Shutdown();
  return status;
}
