// The core demo: remote tasks, a task graph, objects, nested tasks and errors, on however
// many ranks the launcher gives (mpirun -n 3 ./core_demo, or just ./core_demo).
#include <prism/api.h>

#include "common/driver.h"

#include <iostream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

int Square(int x) { return x * x; }
int Add(int a, int b) { return a + b; }
std::string WhereAmI(int i) {
  auto ctx = prism::GetRuntimeContext();
  return "task " + std::to_string(i) + " ran on rank " + std::to_string(ctx.GetRank()) +
         " (" + ctx.GetNodeId() + ")";
}
long Sum(std::vector<long> v) { return std::accumulate(v.begin(), v.end(), 0L); }
int Fib(int n) {
  if (n < 2) return n;
  auto a = prism::Task(Fib).Remote(n - 1);
  auto b = prism::Task(Fib).Remote(n - 2);
  return *a.Get() + *b.Get();
}
int Fails(int x) {
  if (x > 0) throw std::out_of_range("x must not be positive, got " + std::to_string(x));
  return x;
}
PRISM_REMOTE(Square, Add, WhereAmI, Sum, Fib, Fails);

namespace {

// Runs on rank 0 between prism::Init and prism::Shutdown (common/driver.h).
int Run() {
  auto ctx = prism::GetRuntimeContext();
  // What the launcher gave us (SLURM_CPUS_PER_TASK, CUDA_VISIBLE_DEVICES, ..., or the host).
  auto resources = prism::ClusterResources();
  std::cout << "Prism core demo on " << ctx.GetWorldSize() << " rank(s), job " << ctx.GetJobId()
            << " (" << resources["CPU"] << " CPUs, " << resources["GPU"] << " GPUs)\n";

  // 1. Tasks, spread over the ranks.
  std::vector<prism::ObjectRef<std::string>> where;
  for (int i = 0; i < 2 * ctx.GetWorldSize(); ++i) {
    where.push_back(prism::Task(WhereAmI).SetResource("CPU", 1).Remote(i));
  }
  for (auto& s : prism::Get(where)) std::cout << "  " << *s << "\n";

  // 2. A task graph: refs as arguments.
  auto a = prism::Task(Square).Remote(3);
  auto b = prism::Task(Square).Remote(4);
  auto c = prism::Task(Add).Remote(a, b);
  std::cout << "  3^2 + 4^2 = " << *c.Get() << "\n";

  // 3. A large object Put once and used by tasks.
  std::vector<long> big(1 << 20);
  std::iota(big.begin(), big.end(), 0L);
  auto big_ref = prism::Put(big);
  std::cout << "  sum of 0..2^20-1 = " << *prism::Task(Sum).Remote(big_ref).Get() << "\n";

  // 4. Nested tasks: recursive Fibonacci.
  std::cout << "  fib(12) = " << *prism::Task(Fib).Remote(12).Get() << "\n";

  // 5. Errors come back with their type, message, task and rank.
  try {
    prism::Task(Fails).Remote(7).Get();
  } catch (const prism::TaskError& e) {
    std::cout << "  caught: " << e.what() << "\n";
  }

  // 6. Wait for the first of several.
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 4; ++i) refs.push_back(prism::Task(Square).Remote(i));
  auto first = prism::Wait(refs, 1, 5000);
  std::cout << "  Wait: " << first.ready.size() << " ready, " << first.unready.size()
            << " not yet\n";
  std::cout << "done\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The core demo: tasks, a task graph, objects, nested tasks and errors, on the "
               "ranks the launcher gives (mpirun -n 3 core_demo, or core_demo).",
               "core_demo"};
  return prism_apps::RunDriver(app, argc, argv, Run);
}
