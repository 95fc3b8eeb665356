// The head's protocol driven by hand: a fake `send` records what it would put on the wire.
#include <chrono>
#include <thread>

#include "head_fixture.h"

namespace prism::internal {
namespace {

using HeadTest = HeadFixture;

TEST_F(HeadTest, DispatchesReadyTasksAndQueuesWhenFull) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2)});
  head_.Handle(0, SubmitTask{Spec(3)});
  auto dispatched = Take<DispatchTask>();
  ASSERT_EQ(dispatched.size(), 2u) << "two ranks with one CPU each";
  EXPECT_NE(dispatched[0].first, dispatched[1].first);
  Done(dispatched[0].first, dispatched[0].second.spec->id.Value());
  auto next = Take<DispatchTask>();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].second.spec->id, ObjectId(3));
}

TEST_F(HeadTest, CancelFailsAQueuedTaskAndFlagsARunningOne) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2)});
  head_.Handle(0, SubmitTask{Spec(3)});  // no room: queued at the head
  auto dispatched = Take<DispatchTask>();
  ASSERT_EQ(dispatched.size(), 2u);
  head_.Handle(0, Subscribe{{ObjectId(1), ObjectId(3)}});
  head_.Handle(0, CancelTask{ObjectId(3), true, 0});
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 1u) << "the queued task fails at once, with no rank involved";
  EXPECT_EQ(ready[0].second.id, ObjectId(3));
  EXPECT_EQ(ready[0].second.error.kind, ErrorKind::kTaskCancelled);
  // Running: its rank is told, and its result is the cancellation even if it succeeds;
  // the large result it kept is freed on its rank. Timeouts say so.
  const int rank = dispatched[0].second.spec->id == ObjectId(1) ? dispatched[0].first : dispatched[1].first;
  head_.Handle(0, CancelTask{ObjectId(1), true, 250});
  auto told = Take<CancelDispatched>();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].first, rank);
  EXPECT_NE(told[0].second.error.message.find("250 ms"), std::string::npos) << told[0].second.error.message;
  Done(rank, 1, true, /*size=*/1 << 20);
  bool freed = false;
  std::vector<ObjectReady> results;
  for (auto& s : sent_) {
    if (auto* f = std::get_if<FreeObjects>(&s.msg)) freed |= s.dest == rank && f->ids == std::vector<ObjectId>{ObjectId(1)};
    if (auto* r = std::get_if<ObjectReady>(&s.msg)) results.push_back(*r);
  }
  EXPECT_TRUE(freed);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].failed);
  EXPECT_EQ(results[0].error.kind, ErrorKind::kTaskCancelled);
  sent_.clear();
  head_.Handle(0, CancelTask{ObjectId(1), true, 0});  // finished: no effect
  EXPECT_TRUE(Take<CancelDispatched>().empty());
}

TEST_F(HeadTest, PlacementGroupWatchersArePushedTheChange) {
  head_.Handle(0, SubmitTask{Spec(1)});  // holds one of the two CPUs
  auto d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  auto id = head_.CreatePlacementGroup({"", {{{"CPU", 1}}, {{"CPU", 1}}}, PlacementStrategy::SPREAD});
  EXPECT_EQ(head_.PlacementGroupState(id), PlacementGroupStatus::kPending);
  HeadCall watch;
  watch.op = static_cast<uint16_t>(HeadOp::kWatchPlacementGroup);
  watch.args = std::make_shared<const Buffer>(Serialize(id));
  head_.Handle(1, std::move(watch));
  EXPECT_TRUE(Take<PlacementGroupChanged>().empty());
  Done(d[0].first, 1);  // the CPU comes back: the group is created and rank 1 told
  auto pushed = Take<PlacementGroupChanged>();
  ASSERT_EQ(pushed.size(), 1u);
  EXPECT_EQ(pushed[0].first, 1);
  EXPECT_EQ(pushed[0].second.group, id);
  EXPECT_EQ(pushed[0].second.status, static_cast<uint8_t>(PlacementGroupStatus::kCreated));
  head_.RemovePlacementGroup(id);
  EXPECT_TRUE(Take<PlacementGroupChanged>().empty()) << "watchers are told once";
}

TEST_F(HeadTest, DependentRunsAfterItsArgumentWithTheInlineValue) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2, {Ref(1)})});
  auto first = Take<DispatchTask>();
  ASSERT_EQ(first.size(), 1u) << "task 2 must wait for object 1";
  Done(first[0].first, 1);
  auto second = Take<DispatchTask>();
  ASSERT_EQ(second.size(), 1u);
  ASSERT_EQ(second[0].second.refs.size(), 1u);
  ASSERT_TRUE(second[0].second.refs[0].inline_value);
  EXPECT_EQ(second[0].second.refs[0].inline_value->size(), 4u);
}

TEST_F(HeadTest, LargeResultsStayOnTheirRankAndLocalityFollowsThem) {
  head_.Handle(0, SubmitTask{Spec(1)});
  auto d = Take<DispatchTask>();
  Done(/*from=*/1, 1, true, /*size=*/1 << 20);
  head_.Handle(0, SubmitTask{Spec(2, {Ref(1)})});
  auto d2 = Take<DispatchTask>();
  ASSERT_EQ(d2.size(), 1u);
  EXPECT_FALSE(d2[0].second.refs[0].inline_value);  // large: pulled, not sent along
  // The rank that runs it asks for the argument and is pointed at rank 1's copy.
  head_.Handle(d2[0].first, Subscribe{{ObjectId(1)}});
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].second.holders, std::vector<int>{1});
}

TEST_F(HeadTest, FailurePropagatesToDependentsWithTheCause) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2, {Ref(1)})});
  head_.Handle(0, Subscribe{{ObjectId(2)}});
  auto d = Take<DispatchTask>();
  Done(d[0].first, 1, /*ok=*/false);
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 2u) << "both failures are pushed to rank 0, which holds both refs";
  EXPECT_EQ(ready[1].second.id, ObjectId(2));
  EXPECT_TRUE(ready[1].second.failed);
  EXPECT_EQ(ready[1].second.error.message, "boom");
  EXPECT_EQ(head_.NumTasks(), 0u);
}

TEST_F(HeadTest, SmallResultsArePushedOnceToTheSubmitterWhileItHoldsARef) {
  TaskSpec s = Spec(1);
  s.submitter = 1;
  head_.Handle(1, SubmitTask{s});
  head_.Handle(1, Subscribe{{ObjectId(1)}});
  auto d = Take<DispatchTask>();
  Done(d[0].first, 1);
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 1u) << "subscribed and owner: one message, not two";
  EXPECT_EQ(ready[0].first, 1);
  // A submitter that dropped its ref gets nothing.
  head_.Handle(0, SubmitTask{Spec(2)});
  auto d2 = Take<DispatchTask>();
  head_.Handle(0, RefUpdate{{}, {ObjectId(2)}});
  Done(d2[0].first, 2);
  EXPECT_TRUE(Take<ObjectReady>().empty());
}

// A queued task's result has no entry on the head until it is looked up or the task ends
// (issue 22); it must still behave as the live object it is.
TEST_F(HeadTest, QueuedTasksResultsAreLiveObjectsBeforeTheyHaveEntries) {
  for (uint64_t id = 1; id <= 4; ++id) head_.Handle(0, SubmitTask{Spec(id)});
  auto first = Take<DispatchTask>();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(head_.NumObjects(), 4u) << "every result counts, made or not";
  head_.Handle(1, Subscribe{{ObjectId(3)}});      // another rank waits for a queued result
  EXPECT_TRUE(Take<ObjectReady>().empty()) << "pending, not lost";
  head_.Handle(0, RefUpdate{{}, {ObjectId(4)}});  // the submitter drops one it never read
  head_.Handle(0, SubmitTask{Spec(5, {Ref(3)})});  // a dependent of a queued result
  EXPECT_EQ(head_.NumObjects(), 5u) << "4 stays while its task is pending";
  Done(first[0].first, first[0].second.spec->id.Value());
  Done(first[1].first, first[1].second.spec->id.Value());
  auto second = Take<DispatchTask>();
  ASSERT_EQ(second.size(), 2u);
  for (auto& [rank, d] : second) Done(rank, d.spec->id.Value());
  std::vector<std::pair<int, ObjectId>> told;
  std::vector<ObjectId> dispatched;
  for (auto& m : sent_) {
    if (auto* r = std::get_if<ObjectReady>(&m.msg)) told.push_back({m.dest, r->id});
    if (auto* d = std::get_if<DispatchTask>(&m.msg)) dispatched.push_back(d->spec->id);
  }
  sent_.clear();
  const std::vector<std::pair<int, ObjectId>> want{{1, ObjectId(3)}, {0, ObjectId(3)}};
  EXPECT_EQ(told, want) << "3 reaches its subscriber, then its submitter; 4's submitter dropped it";
  ASSERT_EQ(dispatched, std::vector<ObjectId>{ObjectId(5)}) << "the dependent runs once 3 is ready";
  EXPECT_EQ(head_.NumObjects(), 4u) << "1, 2, 3 and 5 are held; 4 went with its task";
  Done(0, 5);
  head_.Handle(0, RefUpdate{{}, {ObjectId(1), ObjectId(2), ObjectId(3), ObjectId(5)}});
  EXPECT_EQ(head_.NumObjects(), 0u);
  EXPECT_EQ(head_.NumTasks(), 0u);
}

TEST_F(HeadTest, RetriesExceptionsOnlyWhenAsked) {
  TaskSpec s = Spec(1);
  s.Edit().retry_exceptions = true;
  s.Edit().max_retries = 1;
  head_.Handle(0, SubmitTask{s});
  auto d = Take<DispatchTask>();
  Done(d[0].first, 1, false);
  auto retry = Take<DispatchTask>();
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].second.spec->attempt, 1);
  TaskDone done;
  done.id = ObjectId(1);
  done.attempt = 1;
  done.ok = false;
  done.error = ErrorInfo::Exception("E", "again", "f", 0);
  head_.Handle(retry[0].first, std::move(done));
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "max_retries reached";
  EXPECT_EQ(head_.NumTasks(), 0u);
}

TEST_F(HeadTest, SubscribeToAFreedObjectAnswersLostNotSilence) {
  head_.Handle(1, Subscribe{{ObjectId(99)}});
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].second.failed);
  EXPECT_EQ(ready[0].second.error.type, "ObjectLost");
}

TEST_F(HeadTest, DroppingTheLastRefFreesEveryCopy) {
  PutObject put;
  put.id = ObjectId(5);
  put.size = 1 << 20;
  head_.Handle(1, std::move(put));
  head_.Handle(0, AddLocation{ObjectId(5)});
  head_.Handle(1, RefUpdate{{}, {ObjectId(5)}});
  auto frees = Take<FreeObjects>();
  ASSERT_EQ(frees.size(), 2u) << "rank 1 made it, rank 0 fetched a copy";
  EXPECT_EQ(head_.NumObjects(), 0u);
}

TEST_F(HeadTest, BlockedTaskGivesItsCpuBack) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2)});
  head_.Handle(0, SubmitTask{Spec(3)});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 2u);
  head_.Handle(d[0].first, TaskBlocked{d[0].second.spec->id, true});
  auto more = Take<DispatchTask>();
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].first, d[0].first);
}

}  // namespace
}  // namespace prism::internal

namespace prism::internal {
namespace {

TEST_F(HeadTest, ActorCallWithAPendingArgumentIsRoutedOnceToTheActor) {
  TaskSpec creation = Spec(1);
  creation.kind = TaskKind::kActorCreation;
  creation.Edit().demand = ResourceSet();
  head_.Handle(0, SubmitTask{creation});
  auto created = Take<DispatchTask>();
  ASSERT_EQ(created.size(), 1u);
  const int actor_rank = created[0].first;
  head_.Handle(0, SubmitTask{Spec(2)});  // the argument, still running
  Take<DispatchTask>();
  TaskSpec call = Spec(3, {Ref(2)});
  call.kind = TaskKind::kActorCall;
  call.actor = ObjectId(1);
  call.Edit().demand = ResourceSet();
  head_.Handle(0, SubmitTask{call});
  auto routed = Take<DispatchTask>();
  ASSERT_EQ(routed.size(), 1u) << "calls do not wait at the head";
  EXPECT_EQ(routed[0].first, actor_rank);
  Done(1, 2);  // the argument completes: the call must not be dispatched a second time
  for (auto& [dest, d] : Take<DispatchTask>()) {
    EXPECT_NE(d.spec->id, ObjectId(3)) << "dispatched again to rank " << dest;
  }
}

TEST_F(HeadTest, WarnsOfATaskWaitingOnResourcesOnlyActorsHold) {
  for (uint64_t id : {1, 2}) {  // an actor holding a CPU on each rank, for good
    TaskSpec creation = Spec(id);
    creation.kind = TaskKind::kActorCreation;
    creation.Edit().name = "Counter";
    creation.Edit().function = "Counter";
    head_.Handle(0, SubmitTask{creation});
  }
  for (auto& [rank, d] : Take<DispatchTask>()) Done(rank, d.spec->id.Value());
  head_.Handle(0, SubmitTask{Spec(3)});
  head_.Handle(0, SubmitTask{Spec(4)});
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "no CPU is free";
  constexpr int64_t kBound = 50'000'000;  // 50 ms
  EXPECT_TRUE(head_.WaitingWarnings(kBound).empty()) << "not before the bound";
  std::this_thread::sleep_for(std::chrono::nanoseconds(kBound));
  auto warnings = head_.WaitingWarnings(kBound);
  ASSERT_EQ(warnings.size(), 1u) << "one line per scheduling class";
  EXPECT_NE(warnings[0].find("task f (and 1 more like it) has waited"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("for {CPU: 1}"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("rank 0 has {CPU: 1}, held by actor Counter {CPU: 1}"), std::string::npos)
      << warnings[0];
  EXPECT_TRUE(head_.WaitingWarnings(kBound).empty()) << "again only once the wait has doubled";
  // Doubled: twice the wait at the first warning, which a loaded machine may have given
  // later than kBound (CI saw none 100 ms on): look for it for up to 2 s.
  size_t again = 0;
  for (int i = 0; i < 200 && again == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    again = head_.WaitingWarnings(kBound).size();
  }
  EXPECT_EQ(again, 1u) << "the wait doubled";
}

TEST_F(HeadTest, WarnsOfAShortTaskSentAheadToARankActorsHold) {
  head_.Handle(0, SubmitTask{Spec(1)});  // its 1 us run measures f as short: pipelined
  for (auto& [rank, d] : Take<DispatchTask>()) Done(rank, d.spec->id.Value());
  for (uint64_t id : {2, 3}) {
    TaskSpec creation = Spec(id);
    creation.kind = TaskKind::kActorCreation;
    creation.Edit().name = "Counter";
    creation.Edit().function = "Counter";
    head_.Handle(0, SubmitTask{creation});
  }
  for (auto& [rank, d] : Take<DispatchTask>()) Done(rank, d.spec->id.Value());
  head_.Handle(0, SubmitTask{Spec(4)});
  ASSERT_EQ(Take<DispatchTask>().size(), 1u) << "a short function is sent ahead to a full rank";
  auto warnings = head_.WaitingWarnings(1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("task f has waited"), std::string::npos) << warnings[0];
}

TEST_F(HeadTest, NoWarningWhileRunningTasksHoldWhatAWaitingTaskWants) {
  for (uint64_t id : {1, 2, 3}) head_.Handle(0, SubmitTask{Spec(id)});
  EXPECT_EQ(Take<DispatchTask>().size(), 2u);
  EXPECT_TRUE(head_.WaitingWarnings(1).empty()) << "it frees as they end";
}

}  // namespace
}  // namespace prism::internal
