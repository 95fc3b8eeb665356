// ObjectPuller: results of tasks this rank submitted are told to it by the head, so a Get
// of one does not subscribe; anything else does, once per id.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "node_manager/object_puller.h"

namespace prism::internal {
namespace {

class ObjectPullerTest : public ::testing::Test {
 protected:
  std::vector<ObjectId> Subscribed() {
    std::vector<ObjectId> ids;
    for (auto& m : sent_) {
      if (auto* s = std::get_if<Subscribe>(&m)) ids.insert(ids.end(), s->ids.begin(), s->ids.end());
    }
    sent_.clear();
    return ids;
  }
  static Payload Value(const char* text) { return std::make_shared<const Buffer>(text, std::strlen(text)); }

  std::vector<Message> sent_;
  MemoryStore store_;
  ObjectPuller puller_{0, store_, nullptr, [this](Message&& m) { sent_.push_back(std::move(m)); }};
};

TEST_F(ObjectPullerTest, AnExpectedResultIsNotSubscribedToAndArrivesWhenPushed) {
  const ObjectId id = ObjectId::Make(0, 1);
  puller_.ExpectResults(id, 2);
  puller_.Request({&id, 1});
  EXPECT_TRUE(Subscribed().empty()) << "the head tells the submitter of its results";
  ObjectReady pushed;
  pushed.id = id;
  pushed.inline_value = Value("v");
  pushed.size = 1;
  puller_.OnObjectReady(std::move(pushed));
  EXPECT_TRUE(store_.Contains({&id, 1})[0]);
  // Return 1 of the same task is expected too; an id of another rank's is not.
  const ObjectId second = ReturnId(id, 1);
  const ObjectId other = ObjectId::Make(1, 1);
  puller_.Request({&second, 1});
  puller_.Request({&other, 1});
  puller_.Request({&other, 1});
  EXPECT_EQ(Subscribed(), std::vector<ObjectId>{other}) << "once per id";
}

TEST_F(ObjectPullerTest, ALargeResultsNoticeSubscribesOnlyIfSomethingWaits) {
  const ObjectId read = ObjectId::Make(0, 10);
  const ObjectId unread = ObjectId::Make(0, 20);
  puller_.ExpectResults(read, 1);
  puller_.ExpectResults(unread, 1);
  puller_.Request({&read, 1});
  ObjectReady notice;
  notice.id = read;
  notice.size = 1 << 20;
  notice.notice = true;
  puller_.OnObjectReady(ObjectReady(notice));
  EXPECT_EQ(Subscribed(), std::vector<ObjectId>{read}) << "a Get waits: subscribe for a copy";
  notice.id = unread;
  puller_.OnObjectReady(ObjectReady(notice));
  EXPECT_TRUE(Subscribed().empty()) << "nobody reads it: no transfer";
  EXPECT_FALSE(store_.Contains({&unread, 1})[0]);
  puller_.Request({&unread, 1});
  EXPECT_EQ(Subscribed(), std::vector<ObjectId>{unread}) << "a later Get asks as for any object";
}

TEST_F(ObjectPullerTest, AReleasedResultIsNoLongerExpected) {
  const ObjectId id = ObjectId::Make(0, 5);
  puller_.ExpectResults(id, 1);
  puller_.Released(id);  // the last ref went: the head will not tell this rank
  puller_.Request({&id, 1});
  EXPECT_EQ(Subscribed(), std::vector<ObjectId>{id});
}

/// A data plane whose fetches fail, as from a rank that died.
class FailingFetcher : public ObjectFetcher {
 public:
  void Fetch(int holder, ObjectId, std::function<void(Payload, const std::string&)> done) override {
    done(nullptr, "rank " + std::to_string(holder) + " is dead");
  }
};

TEST(ObjectPullerRecoveryTest, AFailedPullWaitsForTheHeadsWordInRecoveryModeAndFailsOtherwise) {
  FailingFetcher fetcher;
  const ObjectId id = ObjectId::Make(1, 5);
  for (bool recovery : {true, false}) {
    std::vector<Message> sent;
    MemoryStore store;
    ObjectPuller puller(0, store, &fetcher, [&](Message&& m) { sent.push_back(std::move(m)); }, recovery);
    puller.Request({&id, 1});
    ObjectReady pull;
    pull.id = id;
    pull.size = 1 << 20;
    pull.holders = {2};
    puller.OnObjectReady(std::move(pull));
    ASSERT_EQ(sent.size(), 2u);
    auto* report = std::get_if<AddLocation>(&sent[1]);
    ASSERT_NE(report, nullptr);
    EXPECT_FALSE(report->stored);
    if (recovery) {
      EXPECT_EQ(report->failed_from, 2) << "the head is told which source failed";
      EXPECT_FALSE(store.Contains({&id, 1})[0]) << "no error stored: readers wait for the head";
      sent.clear();
      puller.Request({&id, 1});
      EXPECT_TRUE(sent.empty()) << "still requested: not subscribed twice";
    } else {
      EXPECT_EQ(report->failed_from, -1);
      EXPECT_TRUE(store.Contains({&id, 1})[0]) << "the error is stored: readers fail now";
    }
  }
}

}  // namespace
}  // namespace prism::internal
