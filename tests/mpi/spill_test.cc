// The object store under a small cap (--prism-object-store-memory=64M per rank): objects
// spill to disk and come back intact, wherever they are read; a result that can never fit
// fails with ObjectStoreFullError; spill files go when their objects are freed.
#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.h"

using namespace prism_test;

namespace {

constexpr uint64_t kDoubles = (8u << 20) / sizeof(double);  // 8 MiB objects

std::vector<double> SpMake(uint64_t n, uint64_t seed) { return MakeDoubles(n, seed); }
uint64_t SpChecksum(std::vector<double> v) { return Checksum(v); }
/// Spill files of the rank this runs on.
size_t SpSpillFiles() {
  const char* tmp = std::getenv("TMPDIR");
  auto dir = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
             ("prism-" + prism::GetRuntimeContext().GetJobId()) / "spill" /
             ("rank-" + std::to_string(prism::GetRuntimeContext().GetRank()));
  if (!std::filesystem::exists(dir)) return 0;
  size_t n = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}
PRISM_REMOTE(SpMake, SpChecksum, SpSpillFiles);

size_t FilesOn(int rank) { return *On(rank, SpSpillFiles).SetResource("CPU", 0).Remote().Get(30000); }

TEST(Spill, PutsBeyondTheCapSpillAndComeBackIntact) {
  std::vector<prism::ObjectRef<std::vector<double>>> refs;
  std::vector<uint64_t> sums;
  for (uint64_t i = 0; i < 16; ++i) {  // 128 MiB into a 64 MiB store
    auto v = MakeDoubles(kDoubles, i);
    sums.push_back(Checksum(v));
    refs.push_back(prism::Put(v));
  }
  EXPECT_GE(FilesOn(0), 8u);
  for (uint64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(Checksum(*refs[i].Get(30000)), sums[i]) << "object " << i;
  }
  // Read on another rank too: its holder serves it from disk.
  const int other = World() > 1 ? 1 : 0;
  for (uint64_t i = 0; i < 16; i += 5) {
    EXPECT_EQ(*On(other, SpChecksum).Remote(refs[i]).Get(30000), sums[i]) << "object " << i;
  }
  refs.clear();  // freed: the files go
  EXPECT_TRUE(PollUntil([] { return FilesOn(0) == 0; })) << FilesOn(0) << " spill files left";
}

TEST(Spill, CapacityAndSpillingAreOnThePublicSurface) {
  // The test runs with --prism-object-store-memory=64M: Ray's cluster_resources() key.
  EXPECT_DOUBLE_EQ(prism::ClusterResources().at("object_store_memory"), 64.0 * (1 << 20) * World());
  EXPECT_DOUBLE_EQ(prism::AvailableResources().at("object_store_memory"), 64.0 * (1 << 20) * World());
  const auto before = prism::state::ListObjectStores();
  ASSERT_EQ(before.size(), static_cast<size_t>(World()));
  const int last = World() - 1;
  std::vector<prism::ObjectRef<std::vector<double>>> refs;
  for (uint64_t i = 0; i < 10; ++i) refs.push_back(On(last, SpMake).Remote(kDoubles, 400 + i));
  // 80 MiB made on one 64 MiB rank: at least 16 MiB of it was written to disk there.
  EXPECT_TRUE(PollUntil([&] {
    return prism::state::ListObjectStores()[last].spilled_bytes_total >=
           before[last].spilled_bytes_total + (16u << 20);
  }));
  const auto after = prism::state::ListObjectStores();
  for (int r = 0; r < World(); ++r) {
    EXPECT_EQ(after[r].rank, r);
    EXPECT_EQ(after[r].capacity_bytes, 64u << 20) << r;
    EXPECT_LE(after[r].used_bytes, after[r].capacity_bytes) << r;
  }
  EXPECT_GE(after[last].num_spilled_total, before[last].num_spilled_total + 2);
  EXPECT_GE(after[last].peak_used_bytes, 48u << 20);
  refs.clear();
}

TEST(Spill, TaskResultsSpillOnTheRankThatMadeThem) {
  const int last = World() - 1;
  std::vector<prism::ObjectRef<std::vector<double>>> refs;
  for (uint64_t i = 0; i < 12; ++i) refs.push_back(On(last, SpMake).Remote(kDoubles, 100 + i));
  // 96 MiB made on one 64 MiB rank: at least 4 of the 8 MiB results go to disk there. No
  // Wait here: it would pull every result to rank 0, and rank `last` brings spilled ones
  // back into memory to serve those pulls, so a count taken after it races with them.
  EXPECT_TRUE(PollUntil([&] { return FilesOn(last) >= 4u; })) << FilesOn(last) << " spill files";
  for (uint64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(*On(last, SpChecksum).Remote(refs[i]).Get(30000), Checksum(MakeDoubles(kDoubles, 100 + i)));
  }
  refs.clear();
  EXPECT_TRUE(PollUntil([&] { return FilesOn(last) == 0; })) << FilesOn(last) << " spill files left";
}

TEST(Spill, AnObjectReadInPlaceIsNotSpilledWhileItsViewLives) {
  // A view reads the store's buffer: the store must not spill (and so free) it under the
  // reader. With 7 of 8 MiB objects viewed in a 64 MiB store, the eighth Put has nothing
  // to spill and fails; once the views go, the same Put spills and succeeds.
  std::vector<prism::ObjectRef<std::vector<double>>> refs;
  std::vector<prism::ArrayView<double>> views;
  for (uint64_t i = 0; i < 7; ++i) {
    refs.push_back(prism::Put(MakeDoubles(kDoubles, 200 + i)));
    views.push_back(prism::GetView(refs.back()));
    ASSERT_TRUE(views.back().IsShared());
  }
  const auto extra = MakeDoubles(kDoubles, 300);
  const auto extra2 = MakeDoubles(kDoubles, 301);
  std::vector<prism::ObjectRef<std::vector<double>>> more;
  try {
    more.push_back(prism::Put(extra));
    more.push_back(prism::Put(extra2));
    FAIL() << "two more 8 MiB objects fit beside 56 MiB of viewed ones in a 64 MiB store";
  } catch (const prism::ObjectStoreFullError& e) {
    EXPECT_NE(std::string(e.what()).find("object_store_memory"), std::string::npos) << e.what();
  }
  for (uint64_t i = 0; i < 7; ++i) {  // the views' bytes are intact
    EXPECT_EQ(views[i][kDoubles - 1], MakeDoubles(kDoubles, 200 + i)[kDoubles - 1]) << i;
  }
  views.clear();
  more.clear();
  for (int i = 0; i < 3; ++i) more.push_back(prism::Put(extra));  // spills the unviewed ones
  EXPECT_GE(FilesOn(0), 1u);
  for (uint64_t i = 0; i < 7; ++i) {
    EXPECT_EQ(Checksum(*refs[i].Get(30000)), Checksum(MakeDoubles(kDoubles, 200 + i))) << i;
  }
}

TEST(Spill, AResultLargerThanTheWholeStoreFailsClearly) {
  auto too_big = prism::Task(SpMake).Remote((80u << 20) / sizeof(double), 1);
  try {
    too_big.Get(30000);
    FAIL() << "an 80 MiB result cannot fit a 64 MiB store";
  } catch (const prism::ObjectStoreFullError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("object_store_memory"), std::string::npos) << what;
    EXPECT_NE(what.find("SpMake"), std::string::npos) << what;
  }
  EXPECT_THROW(prism::Put(std::vector<double>((80u << 20) / sizeof(double), 1.0)),
               prism::ObjectStoreFullError);
  // The store still works afterwards.
  EXPECT_EQ(Checksum(*prism::Put(MakeDoubles(1000, 7)).Get()), Checksum(MakeDoubles(1000, 7)));
}

}  // namespace
