#pragma once
// Helpers shared by the multi-rank tests (tests/mpi). Everything here runs on the driver
// (rank 0) or inside tasks; no test code runs on other ranks outside tasks.
#include <gtest/gtest.h>
#include <prism/api.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../common/test_util.h"  // TempDir (a directory tasks on every rank see), ErrorOf

namespace prism_test {

inline int World() { return prism::GetRuntimeContext().GetWorldSize(); }
inline int MyRank() { return prism::GetRuntimeContext().GetRank(); }
inline std::string RankRes(int rank) { return "rank:" + std::to_string(rank); }

/// Task(f) pinned to `rank` (the rank:N resource every rank offers once).
template <typename F>
prism::TaskCaller<F> On(int rank, F f) {
  prism::TaskCaller<F> caller = prism::Task(f);
  caller.SetResource(RankRes(rank), 0.01);
  return caller;
}

/// A group's members, by world rank.
using Ranks = std::vector<int>;

/// Task(f) pinned to world rank `w` without a CPU: group members block in communication,
/// not compute, so a rank can hold several.
template <typename F>
prism::TaskCaller<F> Member(int w, F f) {
  auto caller = On(w, f);
  caller.SetResource("CPU", 0);
  return caller;
}

/// Runs f(ranks, args...) on every member of `ranks` at once; each returns "" or what failed.
template <typename F, typename... Args>
std::vector<prism::ObjectRef<std::string>> OnMembers(const Ranks& ranks, F f, Args... args) {
  std::vector<prism::ObjectRef<std::string>> refs;
  for (int w : ranks) refs.push_back(Member(w, f).Remote(ranks, args...));
  return refs;
}

/// Expects every member's answer to be "" (no failure), naming the member that failed.
inline void ExpectAllOk(const std::vector<prism::ObjectRef<std::string>>& refs, const Ranks& ranks,
                        const std::string& what) {
  for (size_t i = 0; i < refs.size(); ++i) {
    EXPECT_EQ(*refs[i].Get(120000), "") << what << ": member on world rank " << ranks[i];
  }
}

/// Expects f() to throw prism::Error whose message contains every one of `parts`.
inline void ExpectErrorMentioning(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; wanted one mentioning " << parts[0];
  } catch (const prism::Error& e) {
    for (const auto& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' missing from: " << e.what();
    }
  }
}

/// Resident set size of this process in MiB, after handing free heap memory back to the
/// system (so that freed-but-cached allocator memory does not count).
inline double RssMiB() {
  malloc_trim(0);
  std::ifstream in("/proc/self/statm");
  long size = 0, resident = 0;
  in >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

/// Polls `done` every 10 ms until it returns true or `seconds` pass; returns its last
/// answer. For effects that are asynchronous (frees, kills): a loaded host delays them,
/// and a fixed sleep would make the test flaky rather than wrong.
template <typename Done>
bool PollUntil(Done done, double seconds = 10) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!done()) {
    if (SecondsSince(t0) >= seconds) return false;
    SleepMs(10);
  }
  return true;
}

/// Deterministic 'large' payload: n doubles derived from seed.
inline std::vector<double> MakeDoubles(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<double>(x % 1000003) * 0.25 - 7.0;
  }
  return v;
}

/// FNV-1a over the bytes of the doubles, plus the length: exact, order-sensitive.
inline uint64_t Checksum(const std::vector<double>& v) {
  uint64_t h = 1469598103934665603ULL ^ v.size();
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(double); ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace prism_test
