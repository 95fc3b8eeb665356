// The capped object store: LRU spilling to disk, transparent restore, pinned objects, the
// full-store error, and cleanup of spill files.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "object_store/memory_store.h"
#include "prism/errors.h"

namespace prism::internal {
namespace {

constexpr uint64_t kMiB = 1 << 20;

Payload Bytes(uint64_t size, uint8_t seed) {
  Buffer b(size);
  for (uint64_t i = 0; i < size; ++i) b.data()[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return std::make_shared<const Buffer>(std::move(b));
}

bool Same(const Payload& p, uint64_t size, uint8_t seed) {
  if (!p || p->size() != size) return false;
  for (uint64_t i = 0; i < size; i += 4099) {
    if (p->data()[i] != static_cast<char>((i * 131 + seed) & 0xff)) return false;
  }
  return p->data()[size - 1] == static_cast<char>(((size - 1) * 131 + seed) & 0xff);
}

class SpillDir {
 public:
  SpillDir() {
    std::string pattern = std::filesystem::temp_directory_path().string() + "/prism-store-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    root_ = mkdtemp(buf.data());
  }
  ~SpillDir() { std::filesystem::remove_all(root_); }
  std::string path() const { return root_ + "/spill/rank-0"; }
  size_t Files() const {
    if (!std::filesystem::exists(path())) return 0;
    size_t n = 0;
    for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(path())) ++n;
    return n;
  }

 private:
  std::string root_;
};

TEST(ObjectStore, SpillsLeastRecentlyUsedAndRestoresExactBytes) {
  SpillDir dir;
  MemoryStore store(10 * kMiB, dir.path());
  for (uint8_t i = 0; i < 8; ++i) store.Put(ObjectId(i + 1), Bytes(2 * kMiB, i));
  EXPECT_LE(store.Bytes(), 10 * kMiB);
  EXPECT_EQ(store.NumSpilled(), 3u);  // 16 MiB into 10: the three oldest went to disk
  EXPECT_EQ(dir.Files(), 3u);
  EXPECT_EQ(store.Size(), 8u);
  // Touch object 1 (spilled): it comes back; something else goes out to make room later.
  for (uint8_t i = 0; i < 8; ++i) {
    auto found = store.Find(ObjectId(i + 1));
    ASSERT_TRUE(found.has_value()) << int(i);
    EXPECT_TRUE(Same(found->value, 2 * kMiB, i)) << int(i);
  }
  const std::vector<ObjectId> asked{ObjectId(1), ObjectId(2), ObjectId(99)};
  auto many = store.FindMany(asked);
  EXPECT_TRUE(Same(many[0]->value, 2 * kMiB, 0));
  EXPECT_TRUE(Same(many[1]->value, 2 * kMiB, 1));
  EXPECT_FALSE(many[2].has_value());
  EXPECT_LE(store.Bytes(), 10 * kMiB);
}

TEST(ObjectStore, UsageCountsWhatIsHeldAndWhatWasSpilledAndRestored) {
  SpillDir dir;
  MemoryStore store(10 * kMiB, dir.path());
  MemoryStore::Usage u = store.GetUsage();
  EXPECT_EQ(u.capacity, 10 * kMiB);
  EXPECT_EQ(u.bytes, 0u);
  EXPECT_EQ(u.spilled_bytes_total, 0u);
  for (uint8_t i = 0; i < 4; ++i) store.Put(ObjectId(i + 1), Bytes(2 * kMiB, i));
  u = store.GetUsage();
  EXPECT_EQ(u.bytes, 8 * kMiB);
  EXPECT_EQ(u.peak_bytes, 8 * kMiB);
  EXPECT_EQ(u.num_objects, 4u);
  EXPECT_EQ(u.spilled_bytes_total, 0u);  // fits: nothing spilled
  for (uint8_t i = 4; i < 8; ++i) store.Put(ObjectId(i + 1), Bytes(2 * kMiB, i));
  u = store.GetUsage();
  EXPECT_EQ(u.num_spilled, 3u);
  EXPECT_EQ(u.spilled_bytes, 6 * kMiB);
  EXPECT_EQ(u.spilled_bytes_total, 6 * kMiB);
  EXPECT_EQ(u.num_spilled_total, 3u);
  EXPECT_LE(u.peak_bytes, 10 * kMiB);
  EXPECT_EQ(u.restored_bytes_total, 0u);
  // Reading a spilled object back counts as restored; freeing spilled objects lowers what
  // is on disk now but never the totals.
  ASSERT_TRUE(store.Find(ObjectId(1)).has_value());
  u = store.GetUsage();
  EXPECT_EQ(u.restored_bytes_total, 2 * kMiB);
  EXPECT_EQ(u.num_restored_total, 1u);
  store.Erase({ObjectId(1), ObjectId(2), ObjectId(3), ObjectId(4)});
  u = store.GetUsage();
  EXPECT_GE(u.spilled_bytes_total, 6 * kMiB);
  EXPECT_EQ(u.num_objects, 4u);
  EXPECT_EQ(u.bytes + u.spilled_bytes, 8 * kMiB);
}

TEST(ObjectStore, FreeingASpilledObjectDeletesItsFileAndTheDirGoesWithTheStore) {
  SpillDir dir;
  {
    MemoryStore store(4 * kMiB, dir.path());
    for (uint8_t i = 0; i < 4; ++i) store.Put(ObjectId(i + 1), Bytes(2 * kMiB, i));
    EXPECT_EQ(dir.Files(), 2u);
    store.Erase({ObjectId(1), ObjectId(2), ObjectId(3), ObjectId(4)});
    EXPECT_EQ(dir.Files(), 0u);
    EXPECT_EQ(store.Bytes(), 0u);
    EXPECT_EQ(store.SpilledBytes(), 0u);
    store.Put(ObjectId(5), Bytes(3 * kMiB, 5));
    store.Put(ObjectId(6), Bytes(3 * kMiB, 6));
    EXPECT_EQ(dir.Files(), 1u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path()));
}

/// The message of the ObjectLostError that reading `id` back throws, or "" if none.
std::string LostWhy(MemoryStore& store, ObjectId id) {
  try {
    store.Find(id);
  } catch (const ObjectLostError& e) {
    return e.what();
  }
  return "";
}

TEST(ObjectStore, ASpillFileAnotherStoreWroteIsAnErrorNeverItsBytes) {
  // Two jobs sharing a spill directory once read each other's objects back (same names,
  // same sizes) and exited 0.
  SpillDir dir;
  MemoryStore mine(4 * kMiB, dir.path()), theirs(4 * kMiB, dir.path());
  for (uint8_t i = 0; i < 4; ++i) mine.Put(ObjectId(i + 1), Bytes(2 * kMiB, i));
  for (uint8_t i = 0; i < 4; ++i) theirs.Put(ObjectId(i + 1), Bytes(2 * kMiB, 100 + i));
  ASSERT_EQ(mine.NumSpilled(), 2u);
  const std::string why = LostWhy(mine, ObjectId(1));
  EXPECT_NE(why.find("written by another process"), std::string::npos) << why;
  EXPECT_NE(why.find(ObjectId(1).Hex()), std::string::npos) << why;
  EXPECT_TRUE(Same(theirs.Find(ObjectId(1))->value, 2 * kMiB, 100)) << "theirs reads its own";
}

TEST(ObjectStore, ADamagedOrTruncatedSpillFileIsAnError) {
  SpillDir dir;
  MemoryStore store(4 * kMiB, dir.path());
  for (uint8_t i = 0; i < 4; ++i) store.Put(ObjectId(i + 1), Bytes(2 * kMiB, i));
  ASSERT_EQ(store.NumSpilled(), 2u);
  const std::string one = dir.path() + "/" + ObjectId(1).Hex();
  const std::string two = dir.path() + "/" + ObjectId(2).Hex();
  {
    std::fstream f(one, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kMiB);  // 64 KiB overwritten in the middle, size unchanged
    std::string junk(64 * 1024, 'x');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  std::string why = LostWhy(store, ObjectId(1));
  EXPECT_NE(why.find("checksum"), std::string::npos) << why;
  std::filesystem::resize_file(two, kMiB);
  why = LostWhy(store, ObjectId(2));
  EXPECT_NE(why.find("shorter"), std::string::npos) << why;
}

TEST(ObjectStore, ObjectsBeingReadAreNeverSpilledAndAFullStoreSaysWhy) {
  SpillDir dir;
  MemoryStore store(4 * kMiB, dir.path());
  store.Put(ObjectId(1), Bytes(2 * kMiB, 1));
  store.Put(ObjectId(2), Bytes(2 * kMiB, 2));
  auto reader1 = store.Find(ObjectId(1));  // pinned while held
  auto reader2 = store.Find(ObjectId(2));
  try {
    store.Put(ObjectId(3), Bytes(1 * kMiB, 3));
    FAIL() << "no error from a full store";
  } catch (const ObjectStoreFullError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("1.0 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("4.0 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("pinned"), std::string::npos) << what;
    EXPECT_NE(what.find("object_store_memory"), std::string::npos) << what;
  }
  EXPECT_FALSE(store.Find(ObjectId(3)).has_value());  // left as it was
  EXPECT_EQ(store.NumSpilled(), 0u);
  reader1.reset();  // no longer read: may go to disk now
  store.Put(ObjectId(3), Bytes(1 * kMiB, 3));
  EXPECT_EQ(store.NumSpilled(), 1u);
  EXPECT_TRUE(Same(store.Find(ObjectId(1))->value, 2 * kMiB, 1));
}

TEST(ObjectStore, TooLargeOrNoSpillDirIsAClearError) {
  MemoryStore no_spill(2 * kMiB, "");
  no_spill.Put(ObjectId(1), Bytes(2 * kMiB, 1));
  EXPECT_THROW(no_spill.Put(ObjectId(2), Bytes(kMiB, 2)), ObjectStoreFullError);
  SpillDir dir;
  MemoryStore small(kMiB, dir.path());
  try {
    small.Put(ObjectId(1), Bytes(2 * kMiB, 1));
    FAIL();
  } catch (const ObjectStoreFullError& e) {
    EXPECT_NE(std::string(e.what()).find("larger than this rank's whole object store"),
              std::string::npos);
  }
}

TEST(ObjectStore, SmallValuesAndRepeatedPutsAreCheap) {
  MemoryStore store;  // uncapped, as with no configuration
  for (uint64_t i = 1; i <= 10000; ++i) store.Put(ObjectId(i), Bytes(8, 1));
  store.Put(ObjectId(1), Bytes(8, 2));  // a second copy of an id is ignored
  EXPECT_EQ(store.Size(), 10000u);
  EXPECT_EQ(store.Bytes(), 80000u);
}

// A wait for most of many missing objects counts arrivals instead of registering on each
// id: it must wake for exactly its own objects, however many others arrive meanwhile.
TEST(ObjectStore, AWaitForManyObjectsWakesWhenItsOwnHaveArrived) {
  MemoryStore store;
  std::vector<ObjectId> ids;
  for (uint64_t i = 1; i <= 1000; ++i) ids.push_back(ObjectId(i));
  for (uint64_t i = 1; i <= 100; ++i) store.Put(ObjectId(i), Bytes(8, 1));  // some are here
  std::thread producer([&] {
    for (uint64_t i = 101; i <= 1000; ++i) {
      store.Put(ObjectId(100000 + i), Bytes(8, 2));  // not waited for
      if (i == 1000) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      store.Put(ObjectId(i), Bytes(8, 3));
    }
  });
  auto present = store.WaitFor(ids, ids.size(), std::chrono::steady_clock::now() + std::chrono::seconds(30));
  const bool last_was_late = !store.Contains(std::vector<ObjectId>{ObjectId(1000)})[0];
  producer.join();
  EXPECT_FALSE(last_was_late) << "woke before the last of its objects arrived";
  EXPECT_EQ(std::count(present.begin(), present.end(), true), 1000);
}

TEST(ObjectStore, AWaitForManyObjectsEndsAtItsDeadlineOrAbortWithWhatIsThere) {
  MemoryStore store;
  std::vector<ObjectId> ids;
  for (uint64_t i = 1; i <= 100; ++i) ids.push_back(ObjectId(i));
  for (uint64_t i = 1; i <= 40; ++i) store.Put(ObjectId(i), Bytes(8, 1));
  auto start = std::chrono::steady_clock::now();
  auto present = store.WaitFor(ids, 90, start + std::chrono::milliseconds(100));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_EQ(std::count(present.begin(), present.end(), true), 40);
  std::atomic<bool> abort{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (uint64_t i = 41; i <= 50; ++i) store.Put(ObjectId(i), Bytes(8, 1));
    abort = true;
    store.Interrupt(&abort);
  });
  present = store.WaitFor(ids, 100, std::nullopt, &abort);  // no deadline: the abort ends it
  canceller.join();
  EXPECT_EQ(std::count(present.begin(), present.end(), true), 50);
}

TEST(ObjectStore, ConcurrentWritersAndReadersUnderPressure) {
  SpillDir dir;
  MemoryStore store(8 * kMiB, dir.path());
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        uint64_t id = static_cast<uint64_t>(t * 100 + i + 1);
        store.Put(ObjectId(id), Bytes(kMiB, static_cast<uint8_t>(id)));
        auto back = store.Find(ObjectId(id));
        if (!back || !Same(back->value, kMiB, static_cast<uint8_t>(id))) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(store.Size(), 80u);
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 20; ++i) {
      uint64_t id = static_cast<uint64_t>(t * 100 + i + 1);
      EXPECT_TRUE(Same(store.Find(ObjectId(id))->value, kMiB, static_cast<uint8_t>(id)));
    }
  }
}

}  // namespace
}  // namespace prism::internal
