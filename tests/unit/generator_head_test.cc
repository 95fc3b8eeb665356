// The head's side of SetNumReturns and streaming generators, driven by hand (fake send).
#include "head_fixture.h"

namespace prism::internal {
namespace {

using GeneratorHead = HeadFixture;

Payload Bytes(const char* s) { return std::make_shared<const Buffer>(s, std::strlen(s)); }

TEST_F(GeneratorHead, EachReturnIsAnObjectWithItsOwnLifetime) {
  TaskSpec s = Spec(10);
  s.num_returns = 3;
  head_.Handle(0, SubmitTask{s});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  const int rank = d[0].first;
  TaskDone done;
  done.id = ObjectId(10);
  done.inline_value = Bytes("zero");
  done.size = 4;
  ReturnValue large;
  large.size = 1 << 20;  // stays on the executing rank
  ReturnValue small;
  small.inline_value = Bytes("two");
  small.size = 3;
  done.more_returns = {large, small};
  head_.Handle(rank, std::move(done));
  auto pushed = Take<ObjectReady>();
  ASSERT_EQ(pushed.size(), 3u) << "the submitter, which holds them, hears of every return";
  EXPECT_EQ(pushed[0].second.id, ObjectId(10));
  EXPECT_TRUE(pushed[0].second.inline_value);
  EXPECT_EQ(pushed[1].second.id, ObjectId(11));
  EXPECT_TRUE(pushed[1].second.notice) << "the large one stays where it is: a notice";
  EXPECT_EQ(pushed[2].second.id, ObjectId(12));
  EXPECT_TRUE(pushed[2].second.inline_value);
  EXPECT_EQ(head_.NumObjects(), 3u);
  // Dropping return 1 frees it alone, on the rank that holds it.
  head_.Handle(0, RefUpdate{{}, {ObjectId(11)}});
  auto freed = Take<FreeObjects>();
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].first, rank);
  EXPECT_EQ(freed[0].second.ids, std::vector<ObjectId>{ObjectId(11)});
  EXPECT_EQ(head_.NumObjects(), 2u);
}

TEST_F(GeneratorHead, AFailureFailsEveryReturnAndRetriesKeepTheIds) {
  TaskSpec s = Spec(20);
  s.num_returns = 2;
  s.Edit().retry_exceptions = true;
  s.Edit().max_retries = 1;
  head_.Handle(0, SubmitTask{s});
  auto d = Take<DispatchTask>();
  Done(d[0].first, 20, /*ok=*/false);
  auto retry = Take<DispatchTask>();
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].second.spec->id, ObjectId(20)) << "same ids on the retry";
  EXPECT_EQ(retry[0].second.spec->attempt, 1);
  TaskDone done;
  done.id = ObjectId(20);
  done.attempt = 1;
  done.ok = false;
  done.error = ErrorInfo::Exception("std::runtime_error", "boom", "f", retry[0].first);
  head_.Handle(retry[0].first, std::move(done));
  auto failed = Take<ObjectReady>();
  ASSERT_EQ(failed.size(), 2u);
  for (const auto& [dest, r] : failed) {
    EXPECT_TRUE(r.failed);
    EXPECT_EQ(r.error.message, "boom");
  }
}

class StreamHead : public HeadFixture {
 protected:
  /// Submits generator task `id` from rank 0 and returns the rank it was sent to.
  int Start(uint64_t id, uint64_t backpressure, int max_retries = 0) {
    TaskSpec s = Spec(id);
    s.Edit().streaming = true;
    s.Edit().generator_backpressure = backpressure;
    s.Edit().max_retries = max_retries;
    s.Edit().retry_exceptions = max_retries > 0;
    head_.Handle(0, SubmitTask{s});
    auto d = Take<DispatchTask>();
    EXPECT_EQ(d.size(), 1u);
    return d.at(0).first;
  }
  void Yield(int from, uint64_t task, uint64_t index, uint64_t item, bool large = false, int attempt = 0) {
    GeneratorItem m;
    m.task = ObjectId(task);
    m.attempt = attempt;
    m.index = index;
    m.item = ObjectId(item);
    m.size = large ? (1 << 20) : 3;
    if (!large) m.inline_value = Bytes("val");
    head_.Handle(from, std::move(m));
  }
};

TEST_F(StreamHead, ValuesGoToTheConsumerInOrderThenTheEnd) {
  const int rank = Start(1, 0);
  Yield(rank, 1, 0, 100);
  Yield(rank, 1, 1, 101, /*large=*/true);
  Done(rank, 1);
  auto reports = Take<GeneratorReport>();
  ASSERT_EQ(reports.size(), 3u);
  for (const auto& [dest, r] : reports) EXPECT_EQ(dest, 0) << "to the submitter";
  EXPECT_EQ(reports[0].second.item, ObjectId(100));
  EXPECT_TRUE(reports[0].second.inline_value);
  EXPECT_EQ(reports[1].second.item, ObjectId(101));
  EXPECT_FALSE(reports[1].second.inline_value) << "large values stay with the producer";
  EXPECT_TRUE(reports[2].second.end);
  EXPECT_EQ(reports[2].second.index, 2u);
  EXPECT_FALSE(reports[2].second.failed);
  // Each value is an object the consumer holds: its release frees the producer's copy.
  head_.Handle(0, RefUpdate{{}, {ObjectId(101)}});
  auto freed = Take<FreeObjects>();
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].first, rank);
}

TEST_F(StreamHead, TheProducerHearsTheConsumersCountWhenItMayBeWaiting) {
  const int rank = Start(2, /*backpressure=*/2);
  Yield(rank, 2, 0, 200);
  head_.Handle(0, GeneratorConsumed{ObjectId(2), 1, false});
  EXPECT_TRUE(Take<GeneratorAck>().empty()) << "1 value out, limit 2: it is not waiting";
  Yield(rank, 2, 1, 201);
  auto acks = Take<GeneratorAck>();
  ASSERT_EQ(acks.size(), 1u) << "it reached its limit: tell it what was taken since";
  EXPECT_EQ(acks[0].first, rank);
  EXPECT_EQ(acks[0].second.consumed, 1u);
  head_.Handle(0, GeneratorConsumed{ObjectId(2), 2, false});
  EXPECT_TRUE(Take<GeneratorAck>().empty()) << "2 out, it heard of 1 taken: not waiting";
  Yield(rank, 2, 2, 202);
  acks = Take<GeneratorAck>();
  ASSERT_EQ(acks.size(), 1u) << "at its limit again";
  EXPECT_EQ(acks[0].second.consumed, 2u);
  EXPECT_FALSE(acks[0].second.stop);
}

TEST_F(StreamHead, ADroppedGeneratorStopsItsProducerAndDropsLaterValues) {
  const int rank = Start(3, 0);
  Yield(rank, 3, 0, 300);
  head_.Handle(0, GeneratorConsumed{ObjectId(3), 0, /*dropped=*/true});
  auto acks = Take<GeneratorAck>();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_TRUE(acks[0].second.stop);
  EXPECT_EQ(acks[0].first, rank);
  Yield(rank, 3, 1, 301, /*large=*/true);
  bool reported = false, freed_301 = false, stopped = false;
  for (auto& s : sent_) {
    reported |= std::holds_alternative<GeneratorReport>(s.msg);
    if (auto* f = std::get_if<FreeObjects>(&s.msg)) {
      freed_301 |= s.dest == rank && f->ids == std::vector<ObjectId>{ObjectId(301)};
    }
    if (auto* a = std::get_if<GeneratorAck>(&s.msg)) stopped |= a->stop && s.dest == rank;
  }
  EXPECT_FALSE(reported) << "nobody takes values any more";
  EXPECT_TRUE(freed_301) << "a value after the drop is freed where it was stored";
  EXPECT_TRUE(stopped) << "and the producer is told (again) to stop";
  sent_.clear();
  Done(rank, 3);
  EXPECT_TRUE(Take<GeneratorReport>().empty()) << "nobody to tell the end";
}

TEST_F(StreamHead, ARetryReplaysOnlyTheValuesNotReportedBefore) {
  const int rank = Start(4, /*backpressure=*/2, /*max_retries=*/1);
  Yield(rank, 4, 0, 400);
  Yield(rank, 4, 1, 401);
  head_.Handle(0, GeneratorConsumed{ObjectId(4), 2, false});
  Done(rank, 4, /*ok=*/false);  // attempt 0 fails after 2 values
  auto retry = Take<DispatchTask>();
  ASSERT_EQ(retry.size(), 1u);
  const int again = retry[0].first;
  sent_.clear();
  Yield(again, 4, 0, 410, false, 1);
  Yield(again, 4, 1, 411, false, 1);
  auto acks = Take<GeneratorAck>();
  ASSERT_EQ(acks.size(), 1u) << "the new attempt heard nothing yet: it learns 2 were taken";
  EXPECT_EQ(acks[0].second.consumed, 2u);
  Yield(again, 4, 2, 412, false, 1);
  TaskDone done;
  done.id = ObjectId(4);
  done.attempt = 1;
  done.inline_value = Bytes("");
  head_.Handle(again, std::move(done));
  auto reports = Take<GeneratorReport>();
  ASSERT_EQ(reports.size(), 2u) << "value 2, then the end";
  EXPECT_EQ(reports[0].second.item, ObjectId(412));
  EXPECT_EQ(reports[0].second.index, 2u);
  EXPECT_TRUE(reports[1].second.end);
  EXPECT_EQ(reports[1].second.index, 3u);
  EXPECT_FALSE(reports[1].second.failed);
}

TEST_F(StreamHead, ARetryThatYieldsFewerValuesFailsTheStream) {
  const int rank = Start(5, 0, /*max_retries=*/1);
  Yield(rank, 5, 0, 500);
  Yield(rank, 5, 1, 501);
  Done(rank, 5, /*ok=*/false);
  auto retry = Take<DispatchTask>();
  ASSERT_EQ(retry.size(), 1u);
  Yield(retry[0].first, 5, 0, 510, false, 1);
  TaskDone done;
  done.id = ObjectId(5);
  done.attempt = 1;
  done.inline_value = Bytes("");
  head_.Handle(retry[0].first, std::move(done));
  auto reports = Take<GeneratorReport>();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].second.end);
  EXPECT_TRUE(reports[0].second.failed);
  EXPECT_NE(reports[0].second.error.message.find("fewer"), std::string::npos);
}

}  // namespace
}  // namespace prism::internal
