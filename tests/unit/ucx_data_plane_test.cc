// The UCX data plane between two workers in one process (UCX connects them as it would two
// ranks on one host): exact bytes for every size class, a clear error for an object the
// holder does not have, many fetches at once, and a clean stop with fetches in flight.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "object_store/buffer_pool.h"
#include "transport/ucx/ucx_data_plane.h"

namespace prism::internal {
namespace {

Payload Pattern(uint64_t size, uint8_t seed) {
  Buffer b(size);
  for (uint64_t i = 0; i < size; ++i) b.data()[i] = static_cast<char>((i * 7 + seed) & 0xff);
  return std::make_shared<const Buffer>(std::move(b));
}

class TwoPlanes : public ::testing::Test {
 protected:
  explicit TwoPlanes(bool same_host = true) {
    // Empty the buffer pool: blocks freed by earlier tests came from ordinary memory or
    // from an earlier plane's, and rank 1 must allocate from its own.
    SetBufferPoolLimit(0);
    SetBufferPoolLimit(size_t{1} << 30);
    for (int r = 0; r < 2; ++r) {
      planes_[r] = std::make_unique<UcxDataPlane>(r, 2, [this, r](ObjectId id) -> Payload {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = objects_[r].find(id.Value());
        if (it == objects_[r].end()) return nullptr;
        Payload value = it->second;
        if (drop_once_served_) objects_[r].erase(it);
        return value;
      });
    }
    std::vector<std::vector<char>> addresses{planes_[0]->Address(), planes_[1]->Address()};
    for (auto& p : planes_) p->Start(addresses, {same_host, same_host});
  }
  ~TwoPlanes() override { SetBufferPoolLimit(size_t{1} << 30); }
  void Hold(int rank, uint64_t id, Payload value) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[rank][id] = std::move(value);
  }
  /// Fetches `id` from rank 1 into rank 0 and waits (bounded) for the outcome.
  std::pair<Payload, std::string> Pull(uint64_t id) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::pair<Payload, std::string> out;
    planes_[0]->Fetch(1, ObjectId(id), [&](Payload value, const std::string& error) {
      std::lock_guard<std::mutex> lock(mu);
      out = {std::move(value), error};
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; })) << "no answer";
    return out;
  }

  void Drop(int rank, uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[rank].erase(id);
  }
  /// Waits (bounded) until rank 0 holds `n` of rank 1's memory keys.
  bool KeysHeldBecomes(uint64_t n) {
    for (int i = 0; i < 5000 && planes_[0]->RemoteKeysHeld() != n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return planes_[0]->RemoteKeysHeld() == n;
  }
  void ExpectPulled(uint64_t id, const Payload& want) {
    auto [got, error] = Pull(id);
    ASSERT_TRUE(got) << error;
    ASSERT_EQ(got->size(), want->size());
    EXPECT_EQ(std::memcmp(got->data(), want->data(), want->size()), 0);
  }

  std::mutex mu_;
  bool drop_once_served_ = false;  // the holder frees each object right after serving it
  std::map<uint64_t, Payload> objects_[2];
  std::unique_ptr<UcxDataPlane> planes_[2];
};

TEST_F(TwoPlanes, EverySizeArrivesExactly) {
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{8191}, uint64_t{8192}, uint64_t{102401},
                        uint64_t{1} << 20, uint64_t{64} << 20}) {
    Payload sent = Pattern(size, static_cast<uint8_t>(size));
    Hold(1, size + 1, sent);
    auto [got, error] = Pull(size + 1);
    ASSERT_TRUE(got) << size << ": " << error;
    ASSERT_EQ(got->size(), size);
    EXPECT_EQ(std::memcmp(got->data(), sent->data(), size), 0) << size;
  }
}

TEST_F(TwoPlanes, AnObjectTheHolderDoesNotHaveIsAClearError) {
  auto [got, error] = Pull(424242);
  EXPECT_FALSE(got);
  EXPECT_NE(error.find("has no copy"), std::string::npos) << error;
  EXPECT_NE(error.find(ObjectId(424242).Hex()), std::string::npos) << error;
}

TEST_F(TwoPlanes, ManyFetchesAtOnce) {
  const int n = 200;
  for (int i = 0; i < n; ++i) Hold(1, 1000 + i, Pattern(200 * 1024 + i, static_cast<uint8_t>(i)));
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, bad = 0;
  for (int i = 0; i < n; ++i) {
    planes_[0]->Fetch(1, ObjectId(1000 + i), [&, i](Payload v, const std::string&) {
      std::lock_guard<std::mutex> lock(mu);
      Payload want = Pattern(200 * 1024 + i, static_cast<uint8_t>(i));
      if (!v || v->size() != want->size() || std::memcmp(v->data(), want->data(), v->size()) != 0) ++bad;
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == n; }));
  EXPECT_EQ(bad, 0);
}

TEST_F(TwoPlanes, BadHolderAndStopFailFetchesInsteadOfHanging) {
  bool called = false;
  planes_[0]->Fetch(7, ObjectId(1), [&](Payload v, const std::string& error) {
    called = !v && !error.empty();
  });
  EXPECT_TRUE(called);
  Hold(1, 5, Pattern(1 << 20, 5));
  std::atomic<int> answered{0};
  for (int i = 0; i < 20; ++i) {
    planes_[0]->Fetch(1, ObjectId(5), [&](Payload, const std::string&) { ++answered; });
  }
  planes_[0]->Stop();  // every fetch gets an answer: its value, or "shutting down"
  EXPECT_EQ(answered.load(), 20);
}

// Blocks of 1 MiB and up come from UCX memory once a plane has started, so a same-host
// reader copies them straight out of the holder's memory (RMA get).
TEST_F(TwoPlanes, SameHostReadersCopyLargeObjectsStraightFromTheHolder) {
  const uint64_t sizes[] = {uint64_t{1} << 20, (uint64_t{1} << 20) + 1, uint64_t{64} << 20};
  for (uint64_t size : sizes) {
    Payload sent = Pattern(size, static_cast<uint8_t>(size + 3));
    Hold(1, size, sent);
    ExpectPulled(size, sent);
  }
  EXPECT_EQ(planes_[0]->RemoteReads(), 3u);
  EXPECT_EQ(planes_[0]->RemoteKeysHeld(), 3u) << "one key per region, cached";
}

// A block freed and handed out again keeps its region (and the reader's cached key); the
// reader must see the new bytes, not a stale copy.
TEST_F(TwoPlanes, AReusedBlockIsReadAfresh) {
  Payload first = Pattern(8 << 20, 1);
  Hold(1, 1, first);
  ExpectPulled(1, first);
  Drop(1, 1);
  first.reset();  // back to the pool
  Payload second = Pattern(8 << 20, 2);
  Hold(1, 2, second);
  ExpectPulled(2, second);
  EXPECT_EQ(planes_[0]->RemoteReads(), 2u);
}

// The holder frees the object as soon as it has answered. The reader's copy must still be
// exact (the holder pins it until the reader says it is done), and once the region is gone
// the reader drops its key, so no memory of the holder stays mapped.
TEST_F(TwoPlanes, AnObjectFreedRightAfterServingIsStillReadExactlyThenForgotten) {
  SetBufferPoolLimit(0);  // freed blocks go back to UCX at once (the fixture restores it)
  drop_once_served_ = true;
  Payload sent = Pattern(16 << 20, 9);
  const std::vector<char> want(sent->data(), sent->data() + sent->size());
  Hold(1, 9, std::move(sent));
  auto [got, error] = Pull(9);
  ASSERT_TRUE(got) << error;
  ASSERT_EQ(got->size(), want.size());
  EXPECT_EQ(std::memcmp(got->data(), want.data(), want.size()), 0);
  EXPECT_EQ(planes_[0]->RemoteReads(), 1u);
  EXPECT_TRUE(KeysHeldBecomes(0)) << planes_[0]->RemoteKeysHeld() << " keys still held";
}

// Across hosts RMA would crawl over TCP: the bytes come in the reply instead.
class TwoPlanesOnTwoHosts : public TwoPlanes {
 protected:
  TwoPlanesOnTwoHosts() : TwoPlanes(false) {}
};

TEST_F(TwoPlanesOnTwoHosts, LargeObjectsComeInTheReply) {
  for (uint64_t size : {uint64_t{1} << 20, uint64_t{32} << 20}) {
    Payload sent = Pattern(size, 4);
    Hold(1, size, sent);
    ExpectPulled(size, sent);
  }
  EXPECT_EQ(planes_[0]->RemoteReads(), 0u);
  EXPECT_EQ(planes_[0]->RemoteKeysHeld(), 0u);
}

}  // namespace
}  // namespace prism::internal
