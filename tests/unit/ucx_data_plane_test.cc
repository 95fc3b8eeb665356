// The UCX data plane between two workers in one process (UCX connects them as it would two
// ranks on one host): exact bytes for every size class, a clear error for an object the
// holder does not have, many fetches at once, and a clean stop with fetches in flight.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>

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
  TwoPlanes() {
    for (int r = 0; r < 2; ++r) {
      planes_[r] = std::make_unique<UcxDataPlane>(r, 2, [this, r](ObjectId id) -> Payload {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = objects_[r].find(id.Value());
        return it == objects_[r].end() ? nullptr : it->second;
      });
    }
    std::vector<std::vector<char>> addresses{planes_[0]->Address(), planes_[1]->Address()};
    for (auto& p : planes_) p->Start(addresses);
  }
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

  std::mutex mu_;
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

}  // namespace
}  // namespace prism::internal
