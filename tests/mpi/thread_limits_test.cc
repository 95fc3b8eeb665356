// What a rank's threads cost, over time (issue 14 items 4 and 5):
//  * Actor churn: every ended actor (killed, or its last handle dropped) gives back its
//    threads' stacks, so a rank's memory mappings (/proc/self/maps lines) stay flat. Before
//    the fix each ended actor left two mappings behind, and a rank hit vm.max_map_count
//    (65530) after ~32,500 actors. PRISM_TEST_CHURN_ACTORS sets how many (default 20,000:
//    that leak shows as 40,000 lines against a slack of 64, and any leak of one mapping in
//    300 actors still fails; 200,000 took 60 s of the suite).
//  * Recursion that never ends stops at kMaxTaskDepth with an error naming the depth, in
//    seconds, instead of growing threads on every rank; the ranks work afterwards.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "test_util.h"

namespace {

using prism_test::World;

class Churned {
 public:
  static Churned* Create(int v) { return new Churned{v}; }
  int Get() const { return v; }
  int v;
};

long MapsLines() {
  std::ifstream in("/proc/self/maps");
  long n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

long ThreadCount() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::atol(line.c_str() + 8);
  }
  return -1;
}

int Forever(int depth) { return *prism::Task(Forever).Remote(depth + 1).Get(60000); }
int Twice(int x) { return 2 * x; }

PRISM_REMOTE(Churned::Create, &Churned::Get, MapsLines, ThreadCount, Forever, Twice);

std::vector<long> MapsPerRank() {
  std::vector<long> out;
  for (int r = 0; r < World(); ++r) out.push_back(*prism_test::On(r, MapsLines).Remote().Get(30000));
  return out;
}

int ChurnCount() {
  const char* env = std::getenv("PRISM_TEST_CHURN_ACTORS");
  return env != nullptr ? std::atoi(env) : 20000;
}

// Creates `n` actors in batches, calls each once, then ends each batch: half by Kill, half
// by dropping the last handle.
void Churn(int n, int batch) {
  for (int done = 0; done < n; done += batch) {
    const int k = std::min(batch, n - done);
    std::vector<prism::ActorHandle<Churned>> actors;
    std::vector<prism::ObjectRef<int>> calls;
    actors.reserve(k);
    for (int i = 0; i < k; ++i) actors.push_back(prism::Actor(Churned::Create).Remote(done + i));
    for (auto& a : actors) calls.push_back(a.Task(&Churned::Get).Remote());
    for (int i = 0; i < k; ++i) ASSERT_EQ(*calls[i].Get(60000), done + i);
    for (int i = 0; i < k; i += 2) actors[i].Kill();
  }  // the others' last handles go here
}

TEST(ThreadLimits, ActorChurnKeepsMappingsFlat) {
  const int n = ChurnCount();
  Churn(1000, 500);  // warm-up: allocator arenas, the stack cache, the tables
  // Ended actors' threads are joined on the deferred-work thread: let it catch up.
  prism_test::SleepMs(500);
  const auto before = MapsPerRank();
  const auto t0 = std::chrono::steady_clock::now();
  Churn(n, 1000);
  const double seconds = prism_test::SecondsSince(t0);
  std::vector<long> after;
  // Reaping is asynchronous: wait until every rank is back within the bound.
  constexpr long kSlack = 64;
  prism_test::PollUntil(
      [&] {
        after = MapsPerRank();
        for (int r = 0; r < World(); ++r) {
          if (after[r] > before[r] + kSlack) return false;
        }
        return true;
      },
      20);
  std::printf("[ churn ] %d actors on %d rank(s) in %.1f s (%.0f/s)\n", n, World(), seconds,
              n / seconds);
  for (int r = 0; r < World(); ++r) {
    std::printf("[ churn ] rank %d: /proc/self/maps %ld lines before, %ld after\n", r, before[r],
                after[r]);
    EXPECT_LE(after[r], before[r] + kSlack) << "rank " << r << " kept mappings of ended actors";
  }
}

TEST(ThreadLimits, EndlessRecursionStopsAtTheDepthLimitWithinSeconds) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    prism::Task(Forever).Remote(1).Get(60000);
    FAIL() << "endless recursion returned";
  } catch (const prism::TaskError& e) {
    const std::string what = e.what();
    std::printf("[ depth ] %s\n", what.c_str());
    EXPECT_NE(what.find("nesting depth 1001"), std::string::npos) << what;
    EXPECT_NE(what.find("kMaxTaskDepth"), std::string::npos) << what;
  }
  const double seconds = prism_test::SecondsSince(t0);
  std::printf("[ depth ] endless recursion failed after %.1f s\n", seconds);
  EXPECT_LT(seconds, 30);
  // Every rank still runs tasks, and kept a bounded number of threads.
  for (int r = 0; r < World(); ++r) {
    EXPECT_EQ(*prism_test::On(r, Twice).Remote(r).Get(30000), 2 * r);
    const long threads = *prism_test::On(r, ThreadCount).Remote().Get(30000);
    std::printf("[ depth ] rank %d: %ld threads\n", r, threads);
    EXPECT_LT(threads, 2 * 1024 + 64);
  }
}

}  // namespace
