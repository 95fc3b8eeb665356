// Objects between ranks, through the data plane (UCX unless PRISM_DATA_PLANE=mpi): every
// size class with checksums, objects over 2 GiB, many small objects, one object wanted by
// every rank at once, and memory given back after the refs go.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstring>
#include <fstream>

#include "test_util.h"

using namespace prism_test;

namespace {

using Bytes = std::vector<uint8_t>;

uint64_t Fnv(const uint8_t* v, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i += (n > (64u << 20) ? 4093 : 1)) h = (h ^ v[i]) * 1099511628211ull;
  return h ^ n;
}
uint64_t Fnv(const Bytes& v) { return Fnv(v.data(), v.size()); }
Bytes TrMake(uint64_t n, uint8_t seed) {
  Bytes v(n);
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {  // a word at a time: position-dependent, so shifts show
    uint64_t word = (i * 0x9E3779B97F4A7C15ull) ^ seed;
    std::memcpy(v.data() + i, &word, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<uint8_t>(i ^ seed);
  return v;
}
uint64_t TrSum(Bytes v) { return Fnv(v); }
uint64_t TrSumOfMany(std::vector<Bytes> many) {
  uint64_t h = 0;
  for (const auto& v : many) h = h * 31 + Fnv(v);
  return h;
}
double TrRssMiB() { return RssMiB(); }
/// The checksum of the object read in place where the task runs (no copy of the bytes: a
/// copy of 2 GiB is seconds of page faults on this VM).
uint64_t TrViewChecksum(prism::ArrayView<uint8_t> view) { return Fnv(view.data(), view.size()); }
PRISM_REMOTE(TrMake, TrSum, TrSumOfMany, TrRssMiB, TrViewChecksum);

int Maker() { return World() > 1 ? 1 : 0; }
int Reader() { return World() > 2 ? 2 : 0; }

/// Makes n bytes on one rank, reads them on another (and on the driver, unless huge), and
/// compares checksums with the one computed where the object was made. Objects over
/// 256 MiB are read in place (a view of the store's copy): the transfer is the same.
void RoundTrip(uint64_t n, uint8_t seed) {
  auto ref = On(Maker(), TrMake).Remote(n, seed);
  const bool huge = n > (256u << 20);
  auto sum_on = [&](int rank) {
    return huge ? *On(rank, TrViewChecksum).Remote(ref).Get(120000)
                : *On(rank, TrSum).Remote(ref).Get(120000);
  };
  const uint64_t made = sum_on(Maker());  // no transfer
  if (n <= (1u << 20)) {
    EXPECT_EQ(made, Fnv(TrMake(n, seed))) << "the maker's own checksum";
  }
  EXPECT_EQ(sum_on(Reader()), made) << n << " bytes";
  if (n <= (256u << 20)) {
    EXPECT_EQ(Fnv(*ref.Get(120000)), made) << n << " bytes, read by the driver";
  }
}

TEST(Transfer, EverySizeClassArrivesIntact) {
  const uint64_t inline_max = 100 * 1024;
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, inline_max - 1, inline_max, inline_max + 1,
                     uint64_t{1} << 20, uint64_t{256} << 20}) {
    RoundTrip(n, static_cast<uint8_t>(n & 0xff));
  }
}

TEST(Transfer, ObjectsOverTwoGiB) {
  RoundTrip((uint64_t{2} << 30) + 4097, 9);
}

TEST(Transfer, ManySmallObjects) {
  std::vector<prism::ObjectRef<Bytes>> refs;
  for (int i = 0; i < 300; ++i) refs.push_back(On(Maker(), TrMake).Remote(150 * 1024, static_cast<uint8_t>(i)));
  uint64_t want = 0;
  for (int i = 0; i < 300; ++i) want = want * 31 + Fnv(TrMake(150 * 1024, static_cast<uint8_t>(i)));
  std::vector<Bytes> local;
  for (auto& v : prism::Get(refs, 120000)) local.push_back(*v);
  EXPECT_EQ(TrSumOfMany(local), want);
}

/// Reads the object in place (prism::GetView) where the task runs: its checksum, and
/// whether the view aliases the store's copy (1) or had to copy (0), in the top bit.
uint64_t TrViewSum(std::vector<prism::ObjectRef<Bytes>> ref) {
  prism::ArrayView<uint8_t> view = prism::GetView(ref.at(0), 120000);
  Bytes copy(view.begin(), view.end());
  return (Fnv(copy) >> 1) | (view.IsShared() ? 1ull << 63 : 0);
}
uint64_t TrViewArgSum(prism::ArrayView<uint8_t> view) {
  return (Fnv(Bytes(view.begin(), view.end())) >> 1) | (view.IsShared() ? 1ull << 63 : 0);
}
PRISM_REMOTE(TrViewSum, TrViewArgSum);

TEST(Transfer, ViewsReadFetchedObjectsInPlaceOnEveryRank) {
  // Inline (small), eager and rendezvous sizes; made on rank 1, read everywhere.
  for (uint64_t n : {uint64_t{100}, uint64_t{64} << 10, uint64_t{3} << 20, uint64_t{48} << 20}) {
    auto ref = On(Maker(), TrMake).Remote(n, 9);
    const uint64_t want = (Fnv(TrMake(n, 9)) >> 1) | (1ull << 63);
    for (int r = 0; r < World(); ++r) {
      EXPECT_EQ(*On(r, TrViewSum).Remote(std::vector{ref}).Get(120000), want) << n << " bytes, rank " << r;
      EXPECT_EQ(*On(r, TrViewArgSum).Remote(ref).Get(120000), want) << n << " bytes, rank " << r;
    }
    prism::ArrayView<uint8_t> here = prism::GetView(ref, 120000);
    EXPECT_TRUE(here.IsShared());
    EXPECT_EQ(Fnv(Bytes(here.begin(), here.end())), Fnv(TrMake(n, 9))) << n;
  }
}

TEST(Transfer, EveryRankReadsOneObjectAtOnce) {
  auto ref = On(Maker(), TrMake).Remote(64u << 20, 77);
  const uint64_t want = Fnv(TrMake(64u << 20, 77));
  std::vector<prism::ObjectRef<uint64_t>> sums;
  for (int round = 0; round < 2; ++round) {
    for (int r = 0; r < World(); ++r) sums.push_back(On(r, TrSum).Remote(ref));
  }
  for (auto& s : prism::Get(sums, 120000)) EXPECT_EQ(*s, want);
}

TEST(Transfer, MemoryComesBackAfterTheRefsGo) {
  auto rss = [] {
    std::vector<prism::ObjectRef<double>> refs;
    for (int r = 0; r < World(); ++r) refs.push_back(On(r, TrRssMiB).SetResource("CPU", 0).Remote());
    std::vector<double> out;
    for (auto& v : prism::Get(refs, 30000)) out.push_back(*v);
    return out;
  };
  RoundTrip(32u << 20, 1);  // warm up pools
  auto before = rss();
  for (int i = 0; i < 10; ++i) RoundTrip(32u << 20, static_cast<uint8_t>(i));
  // The buffer pool may keep a few freed blocks for reuse; ten 32 MiB objects that were
  // never freed would be 320 MiB.
  constexpr double kMaxGrowthMiB = 160.0;
  std::vector<double> after;  // frees are asynchronous: give them time
  PollUntil([&] {
    after = rss();
    for (int r = 0; r < World(); ++r) {
      if (after[r] - before[r] >= kMaxGrowthMiB) return false;
    }
    return true;
  }, 5);
  for (int r = 0; r < World(); ++r) {
    std::printf("[ transfer ] rank %d RSS %.1f MiB -> %.1f MiB\n", r, before[r], after[r]);
    EXPECT_LT(after[r] - before[r], kMaxGrowthMiB) << "rank " << r;
  }
}

}  // namespace
