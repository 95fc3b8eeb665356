// The rank's reference counter: which RefUpdates reach the head, and in what order, with
// releases sent at once (in-process clusters) and batched (MPI jobs). Fake head: a vector.
#include "node_manager/reference_counter.h"

#include <gtest/gtest.h>

#include <variant>
#include <vector>

namespace prism::internal {
namespace {

class ReferenceCounterTest : public ::testing::Test {
 protected:
  ReferenceCounter refs_{[this](Message&& m) { sent_.push_back(std::move(m)); }};
  std::vector<Message> sent_;

  /// The RefUpdates sent so far, as (adds, removes), and forgets them.
  std::vector<std::pair<std::vector<ObjectId>, std::vector<ObjectId>>> Updates() {
    std::vector<std::pair<std::vector<ObjectId>, std::vector<ObjectId>>> out;
    for (auto& m : sent_) {
      if (auto* u = std::get_if<RefUpdate>(&m)) out.emplace_back(u->add, u->remove);
    }
    sent_.clear();
    return out;
  }
};

TEST_F(ReferenceCounterTest, WithoutBatchingEachLastRefGoesAtOnce) {
  refs_.Add(ObjectId(1));
  refs_.Add(ObjectId(1));
  refs_.Add(ObjectId(2));
  EXPECT_EQ(Updates().size(), 2u) << "one add per first ref";
  refs_.Remove(ObjectId(1), false);
  EXPECT_TRUE(Updates().empty()) << "a ref is left";
  refs_.Remove(ObjectId(1), false);
  refs_.Remove(ObjectId(2), false);
  auto u = Updates();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].second, std::vector<ObjectId>{ObjectId(1)});
  EXPECT_EQ(u[1].second, std::vector<ObjectId>{ObjectId(2)});
}

TEST_F(ReferenceCounterTest, BatchedReleasesGoTogetherAndInOrder) {
  refs_.SetBatchReleases(true);
  for (uint64_t i = 1; i <= 10; ++i) refs_.Add(ObjectId(i));
  Updates();
  for (uint64_t i = 1; i <= 10; ++i) refs_.Remove(ObjectId(i), false);
  EXPECT_TRUE(Updates().empty()) << "held back until something sends them";
  refs_.SendReleases();
  auto u = Updates();
  ASSERT_EQ(u.size(), 1u);
  ASSERT_EQ(u[0].second.size(), 10u);
  EXPECT_EQ(u[0].second.front(), ObjectId(1));
  EXPECT_EQ(u[0].second.back(), ObjectId(10));
  refs_.SendReleases();
  EXPECT_TRUE(Updates().empty()) << "nothing is sent twice";
}

TEST_F(ReferenceCounterTest, AFullBatchGoesByItself) {
  refs_.SetBatchReleases(true);
  const uint64_t n = ReferenceCounter::kReleaseBatch + 3;
  for (uint64_t i = 1; i <= n; ++i) refs_.Add(ObjectId(i));
  Updates();
  for (uint64_t i = 1; i <= n; ++i) refs_.Remove(ObjectId(i), false);
  auto u = Updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].second.size(), ReferenceCounter::kReleaseBatch);
  refs_.SendReleases();
  EXPECT_EQ(Updates()[0].second.size(), 3u);
}

TEST_F(ReferenceCounterTest, AReleaseReachesTheHeadBeforeTheSameObjectsNewRef) {
  // Dropped, then held again (an ObjectRef rebuilt from its id): the head must see the
  // release first, or it would count the rank as a holder and then drop it.
  refs_.SetBatchReleases(true);
  refs_.Add(ObjectId(5));
  Updates();
  refs_.Remove(ObjectId(5), false);
  refs_.Add(ObjectId(5));
  auto u = Updates();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].second, std::vector<ObjectId>{ObjectId(5)});
  EXPECT_EQ(u[1].first, std::vector<ObjectId>{ObjectId(5)});
}

TEST_F(ReferenceCounterTest, ANewObjectsAnnouncementFollowsEarlierReleases) {
  refs_.SetBatchReleases(true);
  refs_.Add(ObjectId(7));
  Updates();
  refs_.Remove(ObjectId(7), false);
  PutObject put;
  put.id = ObjectId(8);
  refs_.Adopt(ObjectId(8), std::move(put));
  ASSERT_EQ(sent_.size(), 2u);
  ASSERT_TRUE(std::holds_alternative<RefUpdate>(sent_[0]));
  EXPECT_TRUE(std::holds_alternative<PutObject>(sent_[1]));
}

TEST_F(ReferenceCounterTest, DeferredReleasesGoWhenTheTaskFlushes) {
  refs_.SetBatchReleases(true);
  refs_.Add(ObjectId(9));
  Updates();
  refs_.Remove(ObjectId(9), true);
  EXPECT_EQ(refs_.Size(), 1u) << "deferred: still counted";
  refs_.FlushDeferred();
  auto u = Updates();
  ASSERT_EQ(u.size(), 1u) << "FlushDeferred sends the batch too";
  EXPECT_EQ(u[0].second, std::vector<ObjectId>{ObjectId(9)});
  EXPECT_EQ(refs_.Size(), 0u);
}

}  // namespace
}  // namespace prism::internal
