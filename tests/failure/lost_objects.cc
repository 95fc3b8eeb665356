// Objects lost with a worker rank under `mpirun --enable-recovery` (issue 44): values whose
// only copy was there are rebuilt by running their tasks again (lineage), or fail with
// ObjectLostError naming the object and why not.
//
//   prism_lost_objects_test
//
// On the last rank (soft affinity and no CPU, so they all run there, and a rerun may go
// elsewhere) the driver makes, and waits
// for without reading (their only copies stay there):
//   * kBig values of 512 KiB (Fill, max_retries 3), and a chain on them (Plus: its argument
//     is one of them, so rebuilding it needs its argument rebuilt first);
//   * a value Put on that rank by a task (no task can make it again);
//   * a value of a task with max_retries 0 (it may not run again).
// A task there then kills its own process with SIGKILL, and the driver reads everything as
// soon as the process is gone (the first pulls fail, before the head knows). Then:
//   * every Fill and Plus value is correct (rebuilt on a live rank), and a new task taking
//     a rebuilt value as its argument computes on it;
//   * the Put value and the no-retry value raise ObjectLostError naming the object;
// it prints "lost_objects ok: ..." with the time from the kill to the last rebuilt value.
#include <prism/api.h>
#include <prism/state.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kLength = 64 * 1024;  // 512 KiB of int64: far above the inline limit
constexpr int kBig = 12;

using Values = std::vector<int64_t>;

Values Fill(int64_t seed) {
  Values v(kLength);
  for (size_t k = 0; k < kLength; ++k) v[k] = seed * 1000003 + static_cast<int64_t>(k);
  return v;
}
Values Plus(Values v, int64_t add) {
  for (auto& x : v) x += add;
  return v;
}
int64_t Sum(Values v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}
prism::ObjectRef<Values> PutHere(int64_t seed) { return prism::Put(Fill(seed)); }
int KillSelf(int delay_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  ::kill(::getpid(), SIGKILL);
  return 0;
}

PRISM_REMOTE(Fill, Plus, Sum, PutHere, KillSelf);

int64_t Expected(int64_t seed, int64_t add) {
  int64_t s = 0;
  for (size_t k = 0; k < kLength; ++k) s += seed * 1000003 + static_cast<int64_t>(k) + add;
  return s;
}
bool Correct(const Values& v, int64_t seed, int64_t add) {
  if (v.size() != kLength) return false;
  for (size_t k = 0; k < kLength; ++k) {
    if (v[k] != seed * 1000003 + static_cast<int64_t>(k) + add) return false;
  }
  return true;
}

/// False once the process has ended (gone, or a zombie its parent has not reaped).
bool Running(int pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char state = '?';
  const int n = std::fscanf(f, "%*d (%*[^)]) %c", &state);
  std::fclose(f);
  return n == 1 && state != 'Z' && state != 'X';
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "lost_objects FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  prism::Shutdown();
  return 1;
}

template <typename T>
std::string ExpectLost(prism::ObjectRef<T>& ref, const std::string& why) {
  try {
    ref.Get(30000);
    return "the " + why + " value was read after its rank was lost";
  } catch (const prism::ObjectLostError& e) {
    const std::string text = e.what();
    if (text.find(ref.ID().Hex()) == std::string::npos) return "the error does not name the object: " + text;
    std::printf("as expected, the %s value: %s\n", why.c_str(), text.c_str());
    return "";
  } catch (const std::exception& e) {
    return "the " + why + " value raised another error: " + std::string(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  const int world = prism::GetRuntimeContext().GetWorldSize();
  const int victim = world - 1;
  if (world < 3) return Fail("needs 3 ranks or more");
  // Its pid is read in /proc: one host.
  const prism::NodeAffinitySchedulingStrategy there{victim, /*soft=*/true};

  std::vector<prism::ObjectRef<Values>> big, plus;
  for (int i = 0; i < kBig; ++i) {
    big.push_back(prism::Task(Fill).SetSchedulingStrategy(there).SetResource("CPU", 0).SetMaxRetries(3).Remote(int64_t{i}));
  }
  for (int i = 0; i < kBig; i += 3) {
    plus.push_back(prism::Task(Plus).SetSchedulingStrategy(there).SetResource("CPU", 0).SetMaxRetries(3).Remote(big[i], int64_t{7}));
  }
  auto holder = prism::Task(PutHere).SetSchedulingStrategy(there).SetResource("CPU", 0).Remote(int64_t{99});
  auto no_retry = prism::Task(Fill).SetSchedulingStrategy(there).SetResource("CPU", 0).SetMaxRetries(0).Remote(int64_t{98});
  // Ready, and not read here (Wait would fetch them): a task there sums each, so their only
  // copies stay on the victim.
  std::vector<prism::ObjectRef<Values>> all = big;
  all.insert(all.end(), plus.begin(), plus.end());
  all.push_back(no_retry);
  std::vector<prism::ObjectRef<int64_t>> sums;
  for (auto& ref : all) sums.push_back(prism::Task(Sum).SetSchedulingStrategy(there).SetResource("CPU", 0).Remote(ref));
  for (auto& s : sums) s.Get(60000);
  prism::ObjectRef<Values> put = *holder.Get(30000);

  auto kill = prism::Task(KillSelf).SetResource("rank:" + std::to_string(victim), 0.01).SetResource("CPU", 0)
                  .SetMaxRetries(0).Remote(0);
  // Read as soon as the process is gone: the head notices within 100 ms, so the first pulls
  // are from the dead process, before the head knows.
  int pid = 0;
  for (const auto& w : prism::state::ListWorkers()) {
    if (w.rank == victim) pid = w.pid;
  }
  if (pid <= 0) return Fail("no pid for rank " + std::to_string(victim));
  while (Running(pid)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto killed_at = std::chrono::steady_clock::now();
  for (int i = 0; i < kBig; ++i) {
    try {
      if (!Correct(*big[i].Get(60000), i, 0)) return Fail("value " + std::to_string(i) + " is wrong");
    } catch (const std::exception& e) {
      return Fail("value " + std::to_string(i) + ": " + e.what());
    }
  }
  for (size_t j = 0; j < plus.size(); ++j) {
    const int i = static_cast<int>(j) * 3;
    try {
      if (!Correct(*plus[j].Get(60000), i, 7)) return Fail("chained value " + std::to_string(i) + " is wrong");
    } catch (const std::exception& e) {
      return Fail("chained value " + std::to_string(i) + ": " + e.what());
    }
  }
  const auto rebuilt_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at).count();
  bool dead = false;
  for (int i = 0; i < 2000 && !dead; ++i) {
    for (const auto& n : prism::state::ListNodes()) dead |= n.rank == victim && n.state == "DEAD";
    if (!dead) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!dead) return Fail("rank " + std::to_string(victim) + " is not DEAD 10 s after the values were read");
  try {
    kill.Get(10000);
    return Fail("the task that killed its rank returned");
  } catch (const prism::TaskError&) {
  }
  // A rebuilt value as a new task's argument.
  if (*prism::Task(Sum).Remote(big[kBig - 1]).Get(30000) != Expected(kBig - 1, 0)) {
    return Fail("a task on a rebuilt value computed a wrong sum");
  }
  std::string bad = ExpectLost(put, "Put");
  if (bad.empty()) bad = ExpectLost(no_retry, "max_retries=0");
  if (!bad.empty()) return Fail(bad);

  std::printf("lost_objects ok: %d values and %zu chained values rebuilt at %d ranks, the last read %lld ms "
              "after the kill\n",
              kBig, plus.size(), world, static_cast<long long>(rebuilt_ms));
  std::fflush(stdout);
  prism::Shutdown();
  return 0;
}
