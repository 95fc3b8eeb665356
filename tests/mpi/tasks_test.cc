// Tasks: results, void tasks, task graphs (chains, diamonds), Get of many, nested tasks,
// spreading over ranks and the runtime context seen by the driver and by tasks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "test_util.h"

using namespace prism_test;

namespace {

int TkSquare(int x) { return x * x; }
int TkAdd(int a, int b) { return a + b; }
int TkAddOne(int x) { return x + 1; }
std::string TkConcat(std::string a, std::string b) { return a + b; }
double TkScale(double x, double by) { return x * by; }
int TkRank() { return prism::GetRuntimeContext().GetRank(); }
int TkSleepThenRank(int ms) {
  SleepMs(ms);
  return prism::GetRuntimeContext().GetRank();
}
void TkTouch(std::string path) {
  std::ofstream(path) << prism::GetRuntimeContext().GetRank();
}
void TkVoidThrows(int x) {
  if (x > 0) throw std::invalid_argument("void task refuses " + std::to_string(x));
}
void TkVoidNop() {}

// Nested: a task that submits tasks and waits for them.
int TkSumOfSquares(int n) {
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 1; i <= n; ++i) refs.push_back(prism::Task(TkSquare).Remote(i));
  int sum = 0;
  for (auto& v : prism::Get(refs)) sum += *v;
  return sum;
}
// Two levels of nesting, the inner ones pinned round-robin over the ranks.
int TkNestedTwoLevels(int n) {
  int world = prism::GetRuntimeContext().GetWorldSize();
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < n; ++i) refs.push_back(On(i % world, TkSumOfSquares).Remote(i + 1));
  int sum = 0;
  for (auto& r : refs) sum += *r.Get();
  return sum;
}
// Nested task whose inner argument is a ref made inside the task.
int TkNestedChain(int depth) {
  auto ref = prism::Put(0);
  for (int i = 0; i < depth; ++i) ref = prism::Task(TkAddOne).Remote(ref);
  return *ref.Get();
}

// Waits for a slow subtask with timeouts (Get, then Wait) before finally getting it.
int TkNestedTimeouts(int ms) {
  auto slow = prism::Task(TkSleepThenRank).SetResource("CPU", 0.5).Remote(ms);
  int timeouts = 0;
  try {
    prism::Get(slow, 20);
  } catch (const prism::TimeoutError&) {
    ++timeouts;
  }
  auto waited = prism::Wait(std::vector<prism::ObjectRef<int>>{slow}, 1, 20);
  if (waited.ready.empty()) ++timeouts;
  prism::Get(slow, 30000);
  return timeouts;
}

struct ContextReport {
  int rank = -1;
  int world = -1;
  std::string job_id;
  std::string node_id;
  uint64_t task_id = 0;
  bool is_driver = true;
  std::string host;  // gethostname() where the task ran
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & rank & world & job_id & node_id & task_id & is_driver & host;
  }
};
ContextReport TkContext() {
  auto ctx = prism::GetRuntimeContext();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return {ctx.GetRank(),  ctx.GetWorldSize(),       ctx.GetJobId(), ctx.GetNodeId(),
          ctx.GetTaskId().Value(), ctx.IsDriver(), host};
}

PRISM_REMOTE(TkSquare, TkAdd, TkAddOne, TkConcat, TkScale, TkRank, TkSleepThenRank, TkTouch,
             TkVoidThrows, TkVoidNop, TkSumOfSquares, TkNestedTwoLevels, TkNestedChain,
             TkContext, TkNestedTimeouts);

}  // namespace

TEST(Tasks, ReturnValues) {
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 8 * World(); ++i) refs.push_back(prism::Task(TkSquare).Remote(i));
  for (int i = 0; i < static_cast<int>(refs.size()); ++i) EXPECT_EQ(*refs[i].Get(), i * i);
  EXPECT_EQ(*prism::Task(TkAdd).Remote(40, 2).Get(), 42);
  EXPECT_EQ(*prism::Task(TkConcat).Remote(std::string("pri"), std::string("sm")).Get(), "prism");
  EXPECT_DOUBLE_EQ(*prism::Task(TkScale).Remote(1.5, 4.0).Get(), 6.0);
  // Arguments convert to the parameter type (const char* -> std::string, int -> double).
  EXPECT_EQ(*prism::Task(TkConcat).Remote("a", "b").Get(), "ab");
  EXPECT_DOUBLE_EQ(*prism::Task(TkScale).Remote(3, 2).Get(), 6.0);
}

TEST(Tasks, OneBuilderServesManyCalls) {
  // As with Ray's f.options(...): set the options once, call Remote many times.
  auto square = prism::Task(TkSquare).SetName("square").SetResource("CPU", 1);
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 20; ++i) refs.push_back(square.Remote(i));
  auto values = prism::Get(refs);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(*values[i], i * i);
}

TEST(Tasks, ResultsFromEveryRank) {
  for (int r = 0; r < World(); ++r) {
    EXPECT_EQ(*On(r, TkSquare).Remote(r + 3).Get(), (r + 3) * (r + 3)) << "rank " << r;
    EXPECT_EQ(*On(r, TkRank).Remote().Get(), r);
  }
}

TEST(Tasks, SpreadsOverAllRanks) {
  // 2*world CPU-bound-looking tasks that each hold a whole CPU for a while: with 2 CPUs per
  // rank (--prism-num-cpus=2) the only way to start them all at once is to use every rank.
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 2 * World(); ++i) refs.push_back(prism::Task(TkSleepThenRank).Remote(300));
  std::set<int> ranks;
  for (auto& r : prism::Get(refs)) ranks.insert(*r);
  EXPECT_EQ(static_cast<int>(ranks.size()), World());
}

TEST(Tasks, VoidTasks) {
  TempDir dir;
  std::vector<prism::ObjectRef<void>> refs;
  for (int r = 0; r < World(); ++r) {
    refs.push_back(On(r, TkTouch).Remote(dir / ("mark" + std::to_string(r))));
  }
  prism::Get(refs);
  for (int r = 0; r < World(); ++r) {
    std::ifstream in(dir / ("mark" + std::to_string(r)));
    ASSERT_TRUE(in.good()) << "void task on rank " << r << " did not run";
    int written = -1;
    in >> written;
    EXPECT_EQ(written, r);
  }
  // Get on a single void ref, free-function and member form.
  auto nop = prism::Task(TkVoidNop).Remote();
  EXPECT_NO_THROW(prism::Get(nop));
  EXPECT_NO_THROW(nop.Get());
  // A void task's exception comes back through its (void) ref.
  auto bad = On(World() - 1, TkVoidThrows).Remote(3);
  try {
    bad.Get();
    FAIL() << "expected TaskError";
  } catch (const prism::TaskError& e) {
    EXPECT_EQ(e.OriginalType(), "std::invalid_argument");
    EXPECT_EQ(e.OriginalMessage(), "void task refuses 3");
  }
}

TEST(Tasks, GraphChainAcrossRanks) {
  // Keep only the last ref: intermediate results must stay alive while tasks need them.
  prism::ObjectRef<int> ref = prism::Put(0);
  for (int i = 0; i < 30; ++i) ref = On(i % World(), TkAddOne).Remote(ref);
  EXPECT_EQ(*ref.Get(), 30);
}

TEST(Tasks, GraphDiamond) {
  const int w = World();
  auto top = On(0, TkSquare).Remote(3);               // 9
  auto left = On(1 % w, TkAddOne).Remote(top);        // 10
  auto right = On(2 % w, TkSquare).Remote(top);       // 81
  auto bottom = On((w - 1), TkAdd).Remote(left, right);  // 91
  EXPECT_EQ(*bottom.Get(), 91);
  // The same ref twice as arguments of one task.
  EXPECT_EQ(*prism::Task(TkAdd).Remote(right, right).Get(), 162);
  // Mixed ref and value arguments, and a temporary Put dropped right after submission.
  EXPECT_EQ(*prism::Task(TkAdd).Remote(prism::Put(100), 5).Get(), 105);
  EXPECT_EQ(*prism::Task(TkAdd).Remote(5, left).Get(), 15);
}

TEST(Tasks, WideGraph) {
  // A two-level reduction tree over 64 leaves.
  std::vector<prism::ObjectRef<int>> level;
  for (int i = 0; i < 64; ++i) level.push_back(prism::Task(TkSquare).Remote(i));
  while (level.size() > 1) {
    std::vector<prism::ObjectRef<int>> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      next.push_back(prism::Task(TkAdd).Remote(level[i], level[i + 1]));
    }
    level = std::move(next);
  }
  int expected = 0;
  for (int i = 0; i < 64; ++i) expected += i * i;
  EXPECT_EQ(*level[0].Get(), expected);
}

TEST(Tasks, GetMany) {
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 50; ++i) {
    refs.push_back(i % 2 ? prism::Task(TkSquare).Remote(i) : prism::Put(i * i));
  }
  auto values = prism::Get(refs);
  ASSERT_EQ(values.size(), refs.size());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(*values[i], i * i);
  // With a timeout long enough.
  auto again = prism::Get(refs, 10000);
  ASSERT_EQ(again.size(), refs.size());
  EXPECT_EQ(*again[49], 49 * 49);
  // Empty vector.
  EXPECT_TRUE(prism::Get(std::vector<prism::ObjectRef<int>>{}).empty());
  // Repeated refs in one Get are fine (unlike Wait).
  auto twice = prism::Get(std::vector<prism::ObjectRef<int>>{refs[3], refs[3]});
  EXPECT_EQ(*twice[0], 9);
  EXPECT_EQ(*twice[1], 9);
  // A nil ref is an error, not a hang.
  EXPECT_THROW(prism::Get(std::vector<prism::ObjectRef<int>>{prism::ObjectRef<int>()}),
               prism::Error);
  EXPECT_THROW(prism::ObjectRef<int>().Get(), prism::Error);
}

TEST(Tasks, Nested) {
  EXPECT_EQ(*prism::Task(TkSumOfSquares).Remote(10).Get(), 385);
  for (int r = 0; r < World(); ++r) {
    EXPECT_EQ(*On(r, TkSumOfSquares).Remote(5).Get(), 55) << "outer task on rank " << r;
  }
  // sum_{i=1..6} sum_{j=1..i} j^2
  int expected = 0;
  for (int i = 1; i <= 6; ++i) expected += i * (i + 1) * (2 * i + 1) / 6;
  EXPECT_EQ(*prism::Task(TkNestedTwoLevels).Remote(6).Get(), expected);
  EXPECT_EQ(*On(World() - 1, TkNestedChain).Remote(12).Get(), 12);
}

TEST(Tasks, ManyNestedAtOnce) {
  // More blocked outer tasks than CPUs: blocked tasks must give their CPU back.
  std::vector<prism::ObjectRef<int>> outer;
  for (int i = 0; i < 4 * World() + 4; ++i) outer.push_back(prism::Task(TkSumOfSquares).Remote(4));
  for (auto& v : prism::Get(outer, 60000)) EXPECT_EQ(*v, 30);
}

TEST(Tasks, TimeoutsInsideTasks) {
  std::vector<prism::ObjectRef<int>> refs;
  for (int r = 0; r < World(); ++r) refs.push_back(On(r, TkNestedTimeouts).Remote(400));
  for (auto& v : prism::Get(refs, 30000)) EXPECT_EQ(*v, 2);
}

TEST(Context, OnDriver) {
  auto ctx = prism::GetRuntimeContext();
  EXPECT_EQ(ctx.GetRank(), 0);
  EXPECT_GE(ctx.GetWorldSize(), 1);
  EXPECT_FALSE(ctx.GetJobId().empty());
  EXPECT_FALSE(ctx.GetNodeId().empty());
  EXPECT_TRUE(ctx.GetTaskId().IsNil());
  EXPECT_TRUE(ctx.IsDriver());
  EXPECT_TRUE(prism::IsInitialized());
  // The world size is the launcher's.
  if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_EQ(ctx.GetWorldSize(), std::atoi(n));
  } else {
    EXPECT_EQ(ctx.GetWorldSize(), 1);
  }
}

TEST(Context, InsideTasks) {
  auto driver = prism::GetRuntimeContext();
  for (int r = 0; r < World(); ++r) {
    auto ref = On(r, TkContext).Remote();
    auto c = *ref.Get();
    EXPECT_EQ(c.rank, r);
    EXPECT_EQ(c.world, driver.GetWorldSize());
    EXPECT_EQ(c.job_id, driver.GetJobId()) << "every rank agrees on the job id";
    EXPECT_EQ(c.node_id, c.host) << "a rank's node id is its host's name";
    EXPECT_NE(c.task_id, 0u) << "task id is nil inside a task on rank " << r;
    EXPECT_EQ(c.task_id, ref.ID().Value()) << "a task's id is the id of its return object";
    EXPECT_FALSE(c.is_driver) << "a task on rank " << r << " claims to be the driver";
  }
  // After tasks ran on this thread's rank, the driver is still the driver.
  EXPECT_TRUE(prism::GetRuntimeContext().GetTaskId().IsNil());
  EXPECT_TRUE(prism::GetRuntimeContext().IsDriver());
}

TEST(Lifecycle, InitWhileRunningIsANoOp) {
  prism::Init();  // Ray's rule (tests/mpi/lifecycle_test.cc has the rest)
  EXPECT_TRUE(prism::IsInitialized());
  EXPECT_EQ(*prism::Task(TkSquare).Remote(2).Get(), 4);  // still working
}

TEST(Tasks, ConcurrentDriverThreads) {
  // Submit, Put and Get from several driver threads at once.
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &bad] {
      for (int round = 0; round < 5; ++round) {
        std::vector<prism::ObjectRef<int>> refs;
        for (int i = 0; i < 100; ++i) {
          auto base = prism::Put(t * 1000 + i);
          refs.push_back(prism::Task(TkAddOne).Remote(base));
        }
        auto values = prism::Get(refs, 60000);
        for (int i = 0; i < 100; ++i) bad[t] += *values[i] != t * 1000 + i + 1;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}
