// Objects: Put/Get of many types, values crossing ranks, large (out-of-band) objects, refs
// nested inside values.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "test_util.h"

using namespace prism_test;

namespace {

struct Particle {
  std::string name;
  std::vector<double> position;
  std::map<std::string, int> tags;
  int id = 0;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & name & position & tags & id;
  }
  bool operator==(const Particle&) const = default;
};

Particle ObMoveParticle(Particle p, double dx) {
  for (auto& x : p.position) x += dx;
  p.tags["moved_on_rank"] = prism::GetRuntimeContext().GetRank();
  p.name += "'";
  return p;
}
std::map<std::string, int> ObInvert(std::map<int, std::string> m) {
  std::map<std::string, int> out;
  for (const auto& [k, v] : m) out[v] = k;
  return out;
}
std::string ObEchoString(std::string s) { return s; }
std::vector<double> ObEchoDoubles(std::vector<double> v) { return v; }
uint64_t ObChecksum(std::vector<double> v) { return Checksum(v); }
std::vector<double> ObMakeBig(uint64_t n, uint64_t seed) { return MakeDoubles(n, seed); }
std::vector<double> ObPlusOne(std::vector<double> v) {
  for (auto& x : v) x += 1.0;
  return v;
}
int ObRank() { return prism::GetRuntimeContext().GetRank(); }

// Nested refs.
std::vector<prism::ObjectRef<int>> ObMakeRefs(int n) {
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < n; ++i) refs.push_back(prism::Put(100 + i));
  return refs;
}
std::vector<prism::ObjectRef<std::vector<double>>> ObMakeBigRefs(int n) {
  std::vector<prism::ObjectRef<std::vector<double>>> refs;
  for (int i = 0; i < n; ++i) refs.push_back(prism::Put(MakeDoubles(1 << 18, 500 + i)));
  return refs;
}
int ObSumRefs(std::vector<prism::ObjectRef<int>> refs) {
  int sum = 0;
  for (auto& v : prism::Get(refs)) sum += *v;
  return sum;
}
std::vector<uint64_t> ObChecksumRefs(std::vector<prism::ObjectRef<std::vector<double>>> refs) {
  std::vector<uint64_t> out;
  for (auto& r : refs) out.push_back(Checksum(*r.Get()));
  return out;
}
int ObNop() { return 0; }
int ObSlowSquare(int x) {
  SleepMs(100);
  return x * x;
}
// Returns a bare ref to a value it Put (small or large) on its own rank.
prism::ObjectRef<std::vector<double>> ObPutAndReturnRef(uint64_t n, uint64_t seed) {
  return prism::Put(MakeDoubles(n, seed));
}
uint64_t ObChecksumViaRef(std::vector<prism::ObjectRef<std::vector<double>>> refs) {
  return Checksum(*refs.at(0).Get());
}

// Returns refs to subtasks that may still be running (it does not wait for them).
std::vector<prism::ObjectRef<int>> ObSpawnAndReturn(int n) {
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < n; ++i) refs.push_back(prism::Task(ObSlowSquare).Remote(i));
  return refs;
}
PRISM_REMOTE(ObSlowSquare, ObSpawnAndReturn);

PRISM_REMOTE(ObMoveParticle, ObInvert, ObEchoString, ObEchoDoubles, ObChecksum, ObMakeBig,
             ObPlusOne, ObRank, ObMakeRefs, ObMakeBigRefs, ObSumRefs, ObChecksumRefs, ObNop, ObPutAndReturnRef,
             ObChecksumViaRef);

constexpr size_t kBigDoubles = 1 << 20;  // 8 MiB, far above the 100 KiB inline threshold

// A round trip through every rank: afterwards, every message sent before it (ref drops
// included) has been handled by the head.
void Settle() {
  std::vector<prism::ObjectRef<int>> refs;
  for (int r = 0; r < World(); ++r) refs.push_back(On(r, ObNop).Remote());
  prism::Get(refs);
}

}  // namespace

TEST(Objects, PutGetScalarsAndStrings) {
  EXPECT_EQ(*prism::Get(prism::Put(42)), 42);
  EXPECT_EQ(*prism::Put(-7).Get(), -7);
  EXPECT_DOUBLE_EQ(*prism::Put(2.5).Get(), 2.5);
  EXPECT_EQ(*prism::Put(std::string("hello prism")).Get(), "hello prism");
  EXPECT_EQ(*prism::Put(std::string()).Get(), "");
  std::string binary("a\0b\0c", 5);
  EXPECT_EQ(*prism::Put(binary).Get(), binary);
  // Get twice, and copies of the ref.
  auto ref = prism::Put(std::string("twice"));
  auto copy = ref;
  EXPECT_EQ(*ref.Get(), "twice");
  EXPECT_EQ(*copy.Get(), "twice");
  EXPECT_EQ(ref, copy);
  EXPECT_NE(ref, prism::Put(std::string("twice")));
}

TEST(Objects, PutGetVectorsMapsStructs) {
  std::vector<double> v{1.5, -2.25, 3e100, 0.0};
  EXPECT_EQ(*prism::Put(v).Get(), v);
  EXPECT_TRUE(prism::Put(std::vector<double>{}).Get()->empty());

  std::map<std::string, int> m{{"one", 1}, {"two", 2}, {"three", 3}};
  EXPECT_EQ(*prism::Put(m).Get(), m);

  Particle p{"electron", {0.5, 1.5, -2.0}, {{"charge", -1}}, 7};
  EXPECT_EQ(*prism::Put(p).Get(), p);

  std::vector<std::string> words{"alpha", "", "gamma"};
  EXPECT_EQ(*prism::Put(words).Get(), words);
}

TEST(Objects, ValuesCrossRanks) {
  Particle p{"proton", {1.0, 2.0}, {{"charge", 1}}, 3};
  std::map<int, std::string> m{{1, "a"}, {2, "b"}};
  for (int r = 0; r < World(); ++r) {
    // By value and by reference.
    auto moved = *On(r, ObMoveParticle).Remote(p, 0.5).Get();
    EXPECT_EQ(moved.name, "proton'");
    EXPECT_EQ(moved.position, (std::vector<double>{1.5, 2.5}));
    EXPECT_EQ(moved.tags.at("moved_on_rank"), r);
    EXPECT_EQ(moved.tags.at("charge"), 1);
    EXPECT_EQ(moved.id, 3);
    auto moved_ref = *On(r, ObMoveParticle).Remote(prism::Put(p), 1.0).Get();
    EXPECT_EQ(moved_ref.position, (std::vector<double>{2.0, 3.0}));

    auto inverted = *On(r, ObInvert).Remote(prism::Put(m)).Get();
    EXPECT_EQ(inverted, (std::map<std::string, int>{{"a", 1}, {"b", 2}}));
  }
}

TEST(Objects, SizesAroundInlineThreshold) {
  // Values just below, at and above the 100 KiB inline limit take different paths.
  const size_t limit = 100 * 1024;
  for (size_t size : {limit - 64, limit - 8, limit, limit + 8, limit + 64, 3 * limit}) {
    std::string s(size, '\0');
    for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + (i * 7 + size) % 26);
    auto put = prism::Put(s);
    EXPECT_EQ(*put.Get(), s) << size;
    for (int r = 0; r < World(); ++r) {
      EXPECT_EQ(*On(r, ObEchoString).Remote(put).Get(), s) << "size " << size << " rank " << r;
      EXPECT_EQ(*On(r, ObEchoString).Remote(s).Get(), s) << "size " << size << " rank " << r;
    }
  }
}

TEST(Objects, LargePutUsedOnEveryRank) {
  auto big = MakeDoubles(kBigDoubles, 1);
  const uint64_t sum = Checksum(big);
  auto ref = prism::Put(big);
  std::vector<prism::ObjectRef<uint64_t>> sums;
  for (int r = 0; r < World(); ++r) sums.push_back(On(r, ObChecksum).Remote(ref));
  // Twice per rank: the second read may come from the rank's cached copy.
  for (int r = 0; r < World(); ++r) sums.push_back(On(r, ObChecksum).Remote(ref));
  for (size_t i = 0; i < sums.size(); ++i) EXPECT_EQ(*sums[i].Get(), sum) << "task " << i;
  EXPECT_EQ(Checksum(*ref.Get()), sum);
}

TEST(Objects, LargePutDroppedRightAfterSubmit) {
  // The only ref is a temporary: the pending tasks alone must keep the object alive.
  auto big = MakeDoubles(kBigDoubles, 2);
  const uint64_t sum = Checksum(big);
  std::vector<prism::ObjectRef<uint64_t>> sums;
  for (int r = 0; r < World(); ++r) sums.push_back(On(r, ObChecksum).Remote(prism::Put(big)));
  for (auto& s : sums) EXPECT_EQ(*s.Get(), sum);
}

TEST(Objects, LargeTaskResultsConsumedByOtherTasks) {
  const int w = World();
  const int producer_rank = w - 1;
  auto made = On(producer_rank, ObMakeBig).Remote(uint64_t{kBigDoubles}, uint64_t{3});
  const uint64_t sum = Checksum(MakeDoubles(kBigDoubles, 3));
  std::vector<prism::ObjectRef<uint64_t>> sums;
  for (int r = 0; r < w; ++r) sums.push_back(On(r, ObChecksum).Remote(made));
  for (int r = 0; r < w; ++r) EXPECT_EQ(*sums[r].Get(), sum) << "consumer on rank " << r;
  // The driver pulls it too.
  auto local = made.Get();
  ASSERT_EQ(local->size(), kBigDoubles);
  EXPECT_EQ(Checksum(*local), sum);

  // A chain of large results hopping over the ranks; only the last ref is kept.
  prism::ObjectRef<std::vector<double>> ref = made;
  made = {};
  for (int i = 0; i < 4; ++i) ref = On((i + 1) % w, ObPlusOne).Remote(ref);
  auto expected = MakeDoubles(kBigDoubles, 3);
  for (auto& x : expected) x += 4.0;
  EXPECT_EQ(*On(0, ObChecksum).Remote(ref).Get(), Checksum(expected));
  EXPECT_EQ(Checksum(*ref.Get()), Checksum(expected));
}

TEST(Objects, LargeResultAlsoReturnedByValue) {
  for (int r = 0; r < World(); ++r) {
    auto v = On(r, ObEchoDoubles).Remote(MakeDoubles(kBigDoubles / 4, 10 + r)).Get();
    EXPECT_EQ(Checksum(*v), Checksum(MakeDoubles(kBigDoubles / 4, 10 + r))) << "rank " << r;
  }
}

TEST(NestedRefs, PutContainerOfRefsOutlivesOriginals) {
  prism::ObjectRef<std::vector<prism::ObjectRef<int>>> container;
  {
    auto a = prism::Put(41);
    auto b = On(World() - 1, ObRank).Remote();
    std::vector<prism::ObjectRef<int>> refs{a, b};
    container = prism::Put(refs);
  }  // a, b and the vector are gone: only the container keeps the inner objects
  Settle();
  auto inner = *container.Get();
  ASSERT_EQ(inner.size(), 2u);
  EXPECT_EQ(*inner[0].Get(), 41);
  EXPECT_EQ(*inner[1].Get(), World() - 1);
  // Hand the inner refs to a task on another rank after dropping the container too.
  container = {};
  Settle();
  EXPECT_EQ(*On(World() - 1, ObSumRefs).Remote(inner).Get(), 41 + World() - 1);
}

TEST(NestedRefs, TaskReturnsRefs) {
  const int w = World();
  std::vector<prism::ObjectRef<int>> inner;
  {
    auto outer = On(w - 1, ObMakeRefs).Remote(5);
    inner = *outer.Get();
  }  // the task's return value (which held the refs) is dropped
  Settle();
  ASSERT_EQ(inner.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*inner[i].Get(), 100 + i);
  // Passed to tasks on every rank as a value holding refs.
  for (int r = 0; r < w; ++r) {
    EXPECT_EQ(*On(r, ObSumRefs).Remote(inner).Get(), 510) << "rank " << r;
  }
  // Passed inside a Put, the direct copies dropped.
  auto boxed = prism::Put(inner);
  inner.clear();
  Settle();
  EXPECT_EQ(*On(0, ObSumRefs).Remote(boxed).Get(), 510);
  EXPECT_EQ(*On(w - 1, ObSumRefs).Remote(boxed).Get(), 510);
}

TEST(NestedRefs, TaskReturnsRefsToLargeObjects) {
  const int w = World();
  auto outer = On(w - 1, ObMakeBigRefs).Remote(3);
  // Consumed by a task before the driver ever looked at it.
  auto sums = On(0, ObChecksumRefs).Remote(outer);
  std::vector<uint64_t> expected;
  for (int i = 0; i < 3; ++i) expected.push_back(Checksum(MakeDoubles(1 << 18, 500 + i)));
  EXPECT_EQ(*sums.Get(), expected);
  auto inner = *outer.Get();
  outer = {};
  Settle();
  ASSERT_EQ(inner.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Checksum(*inner[i].Get()), expected[i]);
  EXPECT_EQ(*On(1 % w, ObChecksumRefs).Remote(inner).Get(), expected);
}

TEST(NestedRefs, TaskReturnsBareRef) {
  const int w = World();
  for (uint64_t n : {uint64_t{16}, uint64_t{kBigDoubles}}) {
    prism::ObjectRef<std::vector<double>> inner;
    {
      auto outer = On(w - 1, ObPutAndReturnRef).Remote(n, uint64_t{9});
      inner = *outer.Get();
    }
    Settle();
    const uint64_t expected = Checksum(MakeDoubles(n, 9));
    EXPECT_EQ(Checksum(*inner.Get()), expected) << n;
    EXPECT_EQ(*On(0, ObChecksumViaRef).Remote(std::vector{inner}).Get(), expected) << n;
    EXPECT_EQ(*On(1 % w, ObChecksum).Remote(inner).Get(), expected) << n;
  }
}

TEST(Objects, TypeMismatchThrowsSerializationError) {
  // A ref re-typed by hand: reading the bytes as another type fails cleanly.
  auto small = prism::Put(5);
  prism::ObjectRef<std::string> as_string(small.ID());
  EXPECT_THROW(as_string.Get(), prism::SerializationError);
  auto words = prism::Put(std::vector<std::string>{"a", "b"});
  prism::ObjectRef<std::map<std::string, int>> as_map(words.ID());
  EXPECT_THROW(as_map.Get(), prism::SerializationError);
  // The original refs still read fine.
  EXPECT_EQ(*small.Get(), 5);
  EXPECT_EQ(words.Get()->size(), 2u);
}

TEST(NestedRefs, TaskReturnsRefsToPendingSubtasks) {
  std::vector<prism::ObjectRef<int>> inner;
  {
    auto outer = On(World() - 1, ObSpawnAndReturn).Remote(6);
    inner = *outer.Get();  // the subtasks are most likely still running
  }
  Settle();
  ASSERT_EQ(inner.size(), 6u);
  auto values = prism::Get(inner, 30000);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(*values[i], i * i);
  EXPECT_EQ(*On(0, ObSumRefs).Remote(inner).Get(), 0 + 1 + 4 + 9 + 16 + 25);
}

TEST(NestedRefs, TwoLevelsOfContainers) {
  prism::ObjectRef<std::vector<prism::ObjectRef<std::vector<prism::ObjectRef<int>>>>> top;
  {
    auto leaf_a = prism::Put(1);
    auto leaf_b = On(World() - 1, ObRank).Remote();
    auto mid = prism::Put(std::vector<prism::ObjectRef<int>>{leaf_a, leaf_b});
    top = prism::Put(std::vector<prism::ObjectRef<std::vector<prism::ObjectRef<int>>>>{mid});
  }
  Settle();
  auto mids = *top.Get();
  top = {};
  Settle();
  ASSERT_EQ(mids.size(), 1u);
  auto leaves = *mids[0].Get();
  mids.clear();
  Settle();
  ASSERT_EQ(leaves.size(), 2u);
  EXPECT_EQ(*leaves[0].Get(), 1);
  EXPECT_EQ(*leaves[1].Get(), World() - 1);
}
