#pragma once
// More than one result per task: SetNumReturns and streaming generators. The same cases run
// in the in-process cluster (tests/unit/generator_test.cc, 1 and 3 ranks) and under mpirun
// (tests/mpi/generator_test.cc). The producing tasks run on the last rank, so that at 3
// ranks values cross ranks; with one rank everything is local.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "prism/api.h"

namespace generator_cases {

using namespace std::chrono_literals;

inline int LastRank() { return prism::GetRuntimeContext().GetWorldSize() - 1; }
inline std::string OnLast() { return "rank:" + std::to_string(LastRank()); }
/// A key no other case (or earlier run in this process) uses.
inline std::string FreshKey(const std::string& what) {
  static std::atomic<int> n{0};
  return "generator-test/" + what + "/" + std::to_string(++n);
}

inline std::tuple<int, std::vector<char>, std::string> GenSplit(int n) {
  return {n, std::vector<char>(1536 * 1024, static_cast<char>(n)), "s" + std::to_string(n)};
}
inline std::pair<int, int> GenDivMod(int a, int b) {
  if (b == 0) throw std::invalid_argument("division by zero");
  return {a / b, a % b};
}
inline int GenAdd(int a, int b) { return a + b; }
/// n values i * 3; with `large` the last one is 1 MiB (stored, not inline).
inline std::vector<std::vector<int32_t>> GenMany(int n, bool large) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) out.push_back({i * 3});
  if (large && n > 0) out.back().assign(1 << 18, n);
  return out;
}
/// n values in order; every `large_every`-th one is 1 MiB, the rest one int.
inline void GenCount(prism::StreamWriter<std::vector<int32_t>>& out, int n, int large_every) {
  for (int i = 0; i < n; ++i) {
    const size_t len = large_every > 0 && i % large_every == 0 ? (1u << 18) : 1u;
    out.Yield(std::vector<int32_t>(len, i));
  }
}
inline void GenInts(prism::StreamWriter<int>& out, int n) {
  for (int i = 0; i < n; ++i) out.Yield(i);
}
inline void GenFailAfter(prism::StreamWriter<int>& out, int k) {
  for (int i = 0; i < k; ++i) out.Yield(i);
  throw std::runtime_error("generator broke after " + std::to_string(k));
}
/// Yields until the consumer goes away (then Yield unwinds it).
inline void GenEndless(prism::StreamWriter<std::vector<char>>& out, int value_bytes) {
  for (int i = 0;; ++i) out.Yield(std::vector<char>(static_cast<size_t>(value_bytes), static_cast<char>(i)));
}
/// Records in the KV how far ahead of the consumer it got: after each Yield, the values it
/// yielded minus those the consumer says it took (`key`/taken, written after each Next).
inline void GenWatched(prism::StreamWriter<int>& out, std::string key, int n) {
  int max_ahead = 0;
  for (int i = 0; i < n; ++i) {
    out.Yield(i);
    const int taken = std::stoi(prism::kv::Get(key + "/taken").value_or("0"));
    max_ahead = std::max(max_ahead, static_cast<int>(out.NumYielded()) - taken);
    prism::kv::Put(key + "/ahead", std::to_string(max_ahead));
  }
}
/// Fails its first attempt after 3 values; the retry yields all n.
inline void GenRetried(prism::StreamWriter<int>& out, std::string key, int n) {
  const bool first = !prism::kv::Exists(key);
  if (first) prism::kv::Put(key, "tried");
  for (int i = 0; i < n; ++i) {
    if (first && i == 3) throw std::runtime_error("first attempt fails at 3");
    out.Yield(i);
  }
}
/// A task that consumes a generator (and gives its CPU back while it waits).
inline int GenSumInTask(int n) {
  int sum = 0;
  for (const auto& ref : prism::Task(GenInts).SetGeneratorBackpressure(2).Remote(n)) sum += *ref.Get();
  return sum;
}

class GenActor {
 public:
  static GenActor* Create(int base) { return new GenActor{base}; }
  void Emit(prism::StreamWriter<int>& out, int n) {
    for (int i = 0; i < n; ++i) out.Yield(base + i);
    ++calls;
  }
  std::pair<int, int> State() { return {base, calls}; }
  std::vector<int> Range(int n) {
    std::vector<int> out;
    for (int i = 0; i < n; ++i) out.push_back(base + i);
    return out;
  }
  int base;
  int calls = 0;
};

PRISM_REMOTE(GenSplit, GenDivMod, GenAdd, GenMany, GenCount, GenInts, GenFailAfter, GenEndless, GenWatched,
             GenRetried, GenSumInTask, GenActor::Create, &GenActor::Emit, &GenActor::State,
             &GenActor::Range);

inline void TupleReturnsAreObjectsOfTheirOwn() {
  auto [n, big, s] = prism::Task(GenSplit).SetNumReturns(3).SetResource(OnLast(), 0.01).Remote(7);
  static_assert(std::is_same_v<decltype(big), prism::ObjectRef<std::vector<char>>>);
  EXPECT_EQ(*s.Get(), "s7");
  EXPECT_EQ(*n.Get(), 7);
  {
    auto value = big.Get();
    ASSERT_EQ(value->size(), 1536u * 1024);
    EXPECT_EQ(value->at(1000), 7);
  }
  // Dropping one ref frees that object only.
  const prism::ObjectId big_id = big.ID();
  big = prism::ObjectRef<std::vector<char>>();
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    try {
      prism::ObjectRef<std::vector<char>>(big_id).Get(10000);
      std::this_thread::sleep_for(10ms);  // a cached copy until its free arrives
    } catch (const prism::ObjectLostError&) {
      gone = true;
    }
  }
  EXPECT_TRUE(gone) << "the dropped return was never freed";
  EXPECT_EQ(*n.Get(), 7);
  EXPECT_EQ(*s.Get(), "s7");

  // A pair gives a pair; each ref works as an argument of its own.
  auto [q, r] = prism::Task(GenDivMod).SetNumReturns(2).SetResource(OnLast(), 0.01).Remote(17, 5);
  static_assert(std::is_same_v<decltype(q), prism::ObjectRef<int>>);
  EXPECT_EQ(*prism::Task(GenAdd).Remote(q, r).Get(), 3 + 2);
  EXPECT_EQ(*r.Get(), 2);

  // Without SetNumReturns the tuple is one object.
  EXPECT_EQ(prism::Task(GenDivMod).Remote(17, 5).Get()->second, 2);
  EXPECT_THROW(prism::Task(GenDivMod).SetNumReturns(3), prism::Error);
}

inline void VectorReturnsAreObjectsOfTheirOwn() {
  // 10,000 returns from one task (Ray's published envelope), the last one large.
  const int n = 10000;
  std::vector<prism::ObjectRef<std::vector<int32_t>>> refs =
      prism::Task(GenMany).SetNumReturns(n).SetResource(OnLast(), 0.01).Remote(n, true);
  ASSERT_EQ(refs.size(), static_cast<size_t>(n));
  EXPECT_EQ(refs[0].ID(), refs[0].ID());
  EXPECT_NE(refs[0].ID(), refs[1].ID());
  const auto values = prism::Get(refs);
  ASSERT_EQ(values.size(), static_cast<size_t>(n));
  for (int i = 0; i < n - 1; ++i) ASSERT_EQ(*values[i], std::vector<int32_t>{i * 3}) << i;
  ASSERT_EQ(values.back()->size(), size_t{1} << 18);
  EXPECT_EQ(values.back()->at(7), n);
  // Dropping the refs frees the objects: a task of 10,000 more returns runs after.
  refs.clear();
  EXPECT_EQ(*prism::Task(GenMany).SetNumReturns(n).Remote(n, false).back().Get(),
            std::vector<int32_t>{(n - 1) * 3});

  // The task returning another count fails every ref and says what to do.
  auto wrong = prism::Task(GenMany).SetNumReturns(3).SetResource(OnLast(), 0.01).Remote(2, false);
  ASSERT_EQ(wrong.size(), 3u);
  for (auto& ref : wrong) {
    try {
      ref.Get();
      ADD_FAILURE() << "a task returning 2 of 3 values succeeded";
    } catch (const prism::TaskError& e) {
      EXPECT_NE(std::string(e.what()).find("returned 2 values but the call asked for 3"),
                std::string::npos)
          << e.what();
    }
  }
  // n is checked where it is written.
  EXPECT_THROW(prism::Task(GenMany).SetNumReturns(0), prism::Error);
  EXPECT_THROW(prism::Task(GenMany).SetNumReturns(-1), prism::Error);
  EXPECT_THROW(prism::Task(GenMany).SetNumReturns(100001).Remote(1, false), prism::Error);

  // Actor methods split a vector too.
  auto actor = prism::Actor(GenActor::Create).Remote(40);
  auto parts = actor.Task(&GenActor::Range).SetNumReturns(4).Remote(4);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(*parts[3].Get(), 43);
  EXPECT_EQ(*parts[0].Get(), 40);
}

inline void AFailedTaskFailsEveryReturnWithTheSameError() {
  auto [q, r] = prism::Task(GenDivMod).SetNumReturns(2).SetResource(OnLast(), 0.01).Remote(1, 0);
  std::string first, second;
  try {
    q.Get();
  } catch (const prism::TaskError& e) {
    first = e.what();
  }
  try {
    r.Get();
  } catch (const prism::TaskError& e) {
    second = e.what();
  }
  EXPECT_NE(first.find("division by zero"), std::string::npos) << first;
  EXPECT_EQ(first, second);
  // A dependent of either fails with that cause too.
  EXPECT_THROW(prism::Task(GenAdd).Remote(q, 1).Get(), prism::TaskError);
}

inline void GeneratorValuesArriveInOrder() {
  auto gen = prism::Task(GenCount).SetResource(OnLast(), 0.01).Remote(1000, 250);
  static_assert(std::is_same_v<decltype(gen), prism::ObjectRefGenerator<std::vector<int32_t>>>);
  int i = 0;
  for (const prism::ObjectRef<std::vector<int32_t>>& ref : gen) {
    auto v = ref.Get();
    ASSERT_EQ(v->size(), i % 250 == 0 ? (1u << 18) : 1u) << "value " << i;
    ASSERT_EQ(v->front(), i);
    ASSERT_EQ(v->back(), i);
    ++i;
  }
  EXPECT_EQ(i, 1000);
  EXPECT_FALSE(gen.Next().has_value()) << "an ended generator stays ended";
  gen.TaskRef().Get();  // the task itself ended well
}

inline void BackpressureBoundsTheValuesNotTaken() {
  constexpr int kLimit = 4;
  const std::string key = FreshKey("watched");
  auto gen = prism::Task(GenWatched).SetGeneratorBackpressure(kLimit).SetResource(OnLast(), 0.01).Remote(key, 40);
  // Unbounded, it would yield all 40 meanwhile; bounded, it yields kLimit and waits.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(prism::kv::Get(key + "/ahead").value_or("none"), std::to_string(kLimit - 1))
      << "kLimit values reported, the last Yield waiting";
  int i = 0;
  while (auto ref = gen.Next(30000)) {
    EXPECT_EQ(*ref->Get(), i);
    ++i;
    prism::kv::Put(key + "/taken", std::to_string(i));
    std::this_thread::sleep_for(2ms);  // a slow consumer: the producer would run ahead
  }
  EXPECT_EQ(i, 40);
  EXPECT_LE(std::stoi(prism::kv::Get(key + "/ahead").value_or("999")), kLimit);
  EXPECT_THROW(prism::Task(GenInts).SetGeneratorBackpressure(0), prism::Error);
}

inline void AnErrorMidStreamComesAfterTheValuesBeforeIt() {
  auto gen = prism::Task(GenFailAfter).SetResource(OnLast(), 0.01).Remote(5);
  for (int i = 0; i < 5; ++i) {
    auto ref = gen.Next(30000);
    ASSERT_TRUE(ref.has_value()) << "value " << i;
    EXPECT_EQ(*ref->Get(), i);
  }
  try {
    gen.Next(30000);
    ADD_FAILURE() << "the generator's error must come after its 5 values";
  } catch (const prism::TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("generator broke after 5"), std::string::npos) << e.what();
    EXPECT_EQ(e.OriginalType(), "std::runtime_error");
  }
  EXPECT_FALSE(gen.Next(0).has_value()) << "thrown once, then the stream has ended";
  EXPECT_THROW(gen.TaskRef().Get(), prism::TaskError);

  // Through range-for: the values, then the error from the iterator.
  int seen = 0;
  EXPECT_THROW(
      {
        for (const auto& ref : prism::Task(GenFailAfter).SetResource(OnLast(), 0.01).Remote(3)) {
          EXPECT_EQ(*ref.Get(), seen);
          ++seen;
        }
      },
      prism::TaskError);
  EXPECT_EQ(seen, 3);
  // A generator that throws before its first value.
  auto none = prism::Task(GenFailAfter).Remote(0);
  EXPECT_THROW(none.Next(30000), prism::TaskError);
}

inline void DroppingTheGeneratorStopsTheProducerAndFreesItsValues() {
  // Each round leaves a producer blocked with values not taken. A producer that went on
  // would keep a CPU of the last rank forever (2 per rank: the third round would never
  // start, and Next would time out); values that were not freed fill the store.
  for (int round = 0; round < 12; ++round) {
    auto gen = prism::Task(GenEndless).SetGeneratorBackpressure(4).SetResource(OnLast(), 0.01).Remote(1 << 20);
    for (int i = 0; i < 2; ++i) {
      auto ref = gen.Next(30000);
      ASSERT_TRUE(ref.has_value());
      EXPECT_EQ(ref->Get()->size(), 1u << 20);
    }
    std::this_thread::sleep_for(50ms);  // the producer fills its window: 4 values not taken
  }
  // The default limit: the producer runs until it hears the consumer is gone.
  for (int round = 0; round < 4; ++round) {
    auto gen = prism::Task(GenEndless).SetResource(OnLast(), 0.01).Remote(512);
    ASSERT_TRUE(gen.Next(30000).has_value());
  }
  // No limit (a finite generator: an endless one would outrun any consumer): the rest of
  // its values, taken or in flight, go with the generator.
  {
    auto gen = prism::Task(GenInts).SetGeneratorBackpressure(-1).SetResource(OnLast(), 0.01).Remote(5000);
    ASSERT_TRUE(gen.Next(30000).has_value());
  }
  // Before it ever ran: moved from, then dropped.
  {
    auto gen = prism::Task(GenEndless).SetResource(OnLast(), 0.01).Remote(16);
    auto moved = std::move(gen);
    EXPECT_THROW(gen.Next(0), prism::Error);  // NOLINT(bugprone-use-after-move): the point
  }
  // The CPUs are free again: a task pinned there runs.
  EXPECT_EQ(*prism::Task(GenAdd).SetResource(OnLast(), 0.01).SetResource("CPU", 2).Remote(1, 2).Get(30000), 3);
}

inline void ATaskCanConsumeAGenerator() {
  EXPECT_EQ(*prism::Task(GenSumInTask).SetResource(OnLast(), 0.01).Remote(100).Get(60000), 4950);
}

inline void ActorMethodsCanStreamAndSplitTheirResults() {
  auto actor = prism::Actor(GenActor::Create).SetResource(OnLast(), 0.01).Remote(100);
  auto gen = actor.Task(&GenActor::Emit).Remote(5);
  int i = 0;
  for (const auto& ref : gen) EXPECT_EQ(*ref.Get(), 100 + i++);
  EXPECT_EQ(i, 5);
  auto [base, calls] = actor.Task(&GenActor::State).SetNumReturns(2).Remote();
  EXPECT_EQ(*base.Get(), 100);
  EXPECT_EQ(*calls.Get(), 1);
}

inline void ARetriedGeneratorSkipsTheValuesItReportedBefore() {
  auto gen = prism::Task(GenRetried).SetMaxRetries(1).SetRetryExceptions(true).SetResource(OnLast(), 0.01)
                 .Remote(FreshKey("retried"), 10);
  std::vector<int> got;
  for (const auto& ref : gen) got.push_back(*ref.Get());
  std::vector<int> want(10);
  for (int i = 0; i < 10; ++i) want[static_cast<size_t>(i)] = i;
  EXPECT_EQ(got, want) << "no value lost or repeated across the retry";
}

}  // namespace generator_cases
