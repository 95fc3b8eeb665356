// The head's managers one by one: ObjectManager, PlacementGroupManager and StateTables
// driven directly (each is pure logic), TaskManager and ActorManager through the Head that
// wires them together (they call each other), with a fake `send` recording every message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "head/communicator_tags.h"
#include "head/memory_return.h"
#include "head/object_manager.h"
#include "head/placement_group_manager.h"
#include "head/state_tables.h"
#include "head/task_manager.h"
#include "prism/errors.h"
#include "prism/serialization.h"
#include "head_fixture.h"
#include "cpus.h"

namespace prism::internal {
namespace {

std::vector<int> Ranks(const RankList& ranks) { return {ranks.begin(), ranks.end()}; }

Payload Bytes(const char* s) { return std::make_shared<const Buffer>(s, std::char_traits<char>::length(s)); }
/// Takes the messages of type T out of `sent`, in order; leaves the others.
template <typename T>
std::vector<std::pair<int, T>> TakeFrom(std::vector<Sent>& sent) {
  std::vector<std::pair<int, T>> out;
  for (auto it = sent.begin(); it != sent.end();) {
    if (auto* m = std::get_if<T>(&it->msg)) {
      out.push_back({it->dest, std::move(*m)});
      it = sent.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

// ---- ObjectManager ----------------------------------------------------------------------

class ObjectManagerTest : public ::testing::Test {
 protected:
  ObjectManagerTest() : objects_([this](int dest, Message&& m) { sent_.push_back({dest, std::move(m)}); }) {}

  template <typename T>
  std::vector<std::pair<int, T>> Take() {
    return TakeFrom<T>(sent_);
  }
  /// A small result (inline value "abcd").
  static TaskDone SmallResult(uint64_t id) {
    TaskDone d;
    d.id = ObjectId(id);
    d.size = 4;
    d.inline_value = Bytes("abcd");
    return d;
  }
  /// A large result: it stays on the rank that ran the task.
  static TaskDone LargeResult(uint64_t id) {
    TaskDone d;
    d.id = ObjectId(id);
    d.size = 64 << 20;
    return d;
  }
  void PutLarge(int from, uint64_t id, std::vector<ObjectId> contained = {}) {
    PutObject put;
    put.id = ObjectId(id);
    put.size = 64 << 20;
    put.contained = std::move(contained);
    objects_.OnPut(from, std::move(put));
  }
  /// Readers pulling from each copy right now.
  std::map<int, size_t> PullsPerSource(uint64_t id) {
    std::map<int, size_t> n;
    for (const auto& [reader, source] : objects_.Find(ObjectId(id))->More().pulls) ++n[source];
    return n;
  }
  void ExpectTreeBound(uint64_t id) {
    for (const auto& [source, n] : PullsPerSource(id)) {
      EXPECT_LE(n, ObjectManager::kMaxPullsPerCopy) << "copy on rank " << source << " serves too many";
    }
  }

  std::vector<Sent> sent_;
  ObjectManager objects_;
};

TEST_F(ObjectManagerTest, SubscriberToAPendingObjectIsToldWhenResolveMarksItReady) {
  objects_.CreateResult(ObjectId(1), /*submitter=*/0);
  objects_.OnSubscribe(2, Subscribe{{ObjectId(1)}});
  EXPECT_TRUE(sent_.empty()) << "nothing to say while the object is pending";
  ASSERT_NE(objects_.Find(ObjectId(1)), nullptr);
  EXPECT_EQ(objects_.Find(ObjectId(1))->state, ObjectEntry::State::kPending);
  objects_.Find(ObjectId(1))->More().dependents.push_back(TaskId(7));

  TaskDone done = SmallResult(1);
  auto dependents = objects_.Resolve(ObjectId(1), done, nullptr, /*from=*/1, /*submitter=*/0);
  EXPECT_EQ(dependents, std::vector<TaskId>{TaskId(7)});
  EXPECT_EQ(objects_.Find(ObjectId(1))->state, ObjectEntry::State::kReady);
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 2u) << "the subscriber, and the submitter holding a ref";
  EXPECT_EQ(ready[0].first, 2);
  EXPECT_EQ(ready[1].first, 0);
  for (const auto& [dest, r] : ready) {
    EXPECT_EQ(r.id, ObjectId(1));
    EXPECT_FALSE(r.failed);
    ASSERT_TRUE(r.inline_value) << "to rank " << dest;
    EXPECT_EQ(r.inline_value->size(), 4u);
    EXPECT_TRUE(r.holders.empty()) << "inline: nothing to pull";
  }
  const ObjectEntry* e = objects_.Find(ObjectId(1));
  EXPECT_TRUE(e->extra == nullptr || e->extra->subscribers.empty());
  EXPECT_TRUE(objects_.Find(ObjectId(1))->More().dependents.empty()) << "handed out once";
  EXPECT_TRUE(objects_.LocationOf(ObjectId(1)).inline_value);

  // A large result: the subscriber is pointed at the rank that ran the task.
  objects_.CreateResult(ObjectId(2), 0);
  objects_.OnSubscribe(3, Subscribe{{ObjectId(2)}});
  EXPECT_FALSE(objects_.LocationOf(ObjectId(2)).inline_value);
  TaskDone large = LargeResult(2);
  objects_.Resolve(ObjectId(2), large, nullptr, /*from=*/1, 0);
  ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 2u) << "the submitter gets a notice, the subscriber a copy to pull";
  EXPECT_EQ(ready[0].first, 0);
  EXPECT_TRUE(ready[0].second.notice) << "a large result is not pushed to its submitter";
  EXPECT_FALSE(ready[0].second.inline_value);
  EXPECT_TRUE(ready[0].second.holders.empty()) << "it subscribes if something reads it";
  EXPECT_EQ(ready[1].first, 3);
  EXPECT_FALSE(ready[1].second.notice);
  EXPECT_EQ(ready[1].second.holders, std::vector<int>{1});
  EXPECT_EQ(ready[1].second.size, uint64_t{64} << 20);
  EXPECT_EQ(Ranks(objects_.Find(ObjectId(2))->locations), std::vector<int>{1});
}

TEST_F(ObjectManagerTest, FailedResultReachesSubscribersAndTheSubmitterWithItsError) {
  objects_.CreateResult(ObjectId(1), 0);
  objects_.OnSubscribe(1, Subscribe{{ObjectId(1)}});
  TaskDone done;
  done.id = ObjectId(1);
  done.ok = false;
  auto failure = std::make_shared<ErrorInfo>(ErrorInfo::Exception("std::logic_error", "bad", "f", 1));
  objects_.Resolve(ObjectId(1), done, failure, 1, 0);
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 2u);
  for (const auto& [dest, r] : ready) {
    EXPECT_TRUE(r.failed) << "to rank " << dest;
    EXPECT_EQ(r.error.kind, ErrorKind::kTaskException);
    EXPECT_EQ(r.error.type, "std::logic_error");
    EXPECT_EQ(r.error.message, "bad");
  }
  EXPECT_EQ(objects_.Find(ObjectId(1))->state, ObjectEntry::State::kFailed);
  // A late subscriber hears the same failure at once.
  objects_.OnSubscribe(2, Subscribe{{ObjectId(1)}});
  ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, 2);
  EXPECT_TRUE(ready[0].second.failed);
  EXPECT_EQ(ready[0].second.error.message, "bad");
}

TEST_F(ObjectManagerTest, InlineResultIsPushedToTheSubmitterWhichIsThenFreedLikeACopy) {
  objects_.CreateResult(ObjectId(1), /*submitter=*/3);
  TaskDone done = SmallResult(1);
  objects_.Resolve(ObjectId(1), done, nullptr, /*from=*/1, /*submitter=*/3);
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, 3);
  ASSERT_TRUE(ready[0].second.inline_value);
  EXPECT_EQ(Ranks(objects_.Find(ObjectId(1))->locations), std::vector<int>{3})
      << "the submitter caches the value: it is a location";

  FreedList freed;
  objects_.ProducerDone(ObjectId(1), freed);
  EXPECT_TRUE(freed.empty()) << "rank 3 still holds a ref";
  objects_.OnRefUpdate(3, RefUpdate{{}, {ObjectId(1)}});
  EXPECT_EQ(objects_.Find(ObjectId(1)), nullptr);
  EXPECT_EQ(objects_.Size(), 0u);
  auto frees = Take<FreeObjects>();
  ASSERT_EQ(frees.size(), 1u) << "only rank 3 has a copy (the value travelled inline)";
  EXPECT_EQ(frees[0].first, 3);
  EXPECT_EQ(frees[0].second.ids, std::vector<ObjectId>{ObjectId(1)});

  // A submitter that dropped its ref before the result came is not sent the value.
  objects_.CreateResult(ObjectId(2), 3);
  objects_.OnRefUpdate(3, RefUpdate{{}, {ObjectId(2)}});
  ASSERT_NE(objects_.Find(ObjectId(2)), nullptr) << "its producer is still running";
  TaskDone done2 = SmallResult(2);
  objects_.Resolve(ObjectId(2), done2, nullptr, 1, 3);
  EXPECT_TRUE(Take<ObjectReady>().empty());
  EXPECT_TRUE(objects_.Find(ObjectId(2))->locations.empty());
  objects_.ProducerDone(ObjectId(2), freed);
  ASSERT_EQ(freed.size(), 1u);
  objects_.Free(freed);
  EXPECT_TRUE(Take<FreeObjects>().empty()) << "no rank had a copy";
  EXPECT_TRUE(freed.empty());
}

TEST_F(ObjectManagerTest, LargeObjectReadByFiveRanksIsServedAsATree) {
  PutLarge(0, 9);
  objects_.OnRefUpdate(0, RefUpdate{{ObjectId(9)}, {}});
  for (int r = 1; r <= 5; ++r) objects_.OnSubscribe(r, Subscribe{{ObjectId(9)}});
  ObjectEntry* e = objects_.Find(ObjectId(9));
  ASSERT_NE(e, nullptr);
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), ObjectManager::kMaxPullsPerCopy) << "one copy, kMaxPullsPerCopy readers";
  for (size_t i = 0; i < ready.size(); ++i) {
    EXPECT_EQ(ready[i].first, static_cast<int>(i) + 1);
    EXPECT_EQ(ready[i].second.holders, std::vector<int>{0});
  }
  EXPECT_EQ(e->More().pulls.size(), ObjectManager::kMaxPullsPerCopy);
  EXPECT_EQ(e->More().waiting_readers, (std::vector<int>{3, 4, 5}));
  ExpectTreeBound(9);

  // Subscribing again while pulling neither adds a pull nor sends anything.
  objects_.OnSubscribe(1, Subscribe{{ObjectId(9)}});
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(e->More().pulls.size(), ObjectManager::kMaxPullsPerCopy);

  // Rank 1 has a copy now: the waiting readers spread over both copies.
  objects_.OnPullDone(1, AddLocation{ObjectId(9), true});
  EXPECT_EQ(Ranks(e->locations), (std::vector<int>{0, 1}));
  ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 3u) << "2 copies x 2 slots, 1 of them still busy: 3 free";
  EXPECT_EQ(ready[0].first, 3);
  EXPECT_EQ(ready[0].second.holders, std::vector<int>{1}) << "the idle new copy serves first";
  std::map<int, int> source_of;
  for (const auto& [reader, r] : ready) {
    ASSERT_EQ(r.holders.size(), 1u) << "reader " << reader << " is given one source";
    EXPECT_NE(r.holders[0], reader);
    source_of[reader] = r.holders[0];
  }
  EXPECT_EQ(source_of.size(), 3u);
  EXPECT_TRUE(e->More().waiting_readers.empty());
  EXPECT_EQ(e->More().pulls.size(), 4u);
  ExpectTreeBound(9);

  // A failed pull frees its slot without adding a copy.
  objects_.OnPullDone(2, AddLocation{ObjectId(9), false});
  EXPECT_EQ(Ranks(e->locations), (std::vector<int>{0, 1}));
  EXPECT_EQ(e->More().pulls.size(), 3u);
  for (int r : {3, 4, 5}) objects_.OnPullDone(r, AddLocation{ObjectId(9), true});
  EXPECT_TRUE(e->More().pulls.empty());
  EXPECT_EQ(Ranks(e->locations), (std::vector<int>{0, 1, 3, 4, 5}));
  // A reader with a copy is answered at once, with every copy, and pulls nothing.
  objects_.OnSubscribe(4, Subscribe{{ObjectId(9)}});
  ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].second.holders, (std::vector<int>{0, 1, 3, 4, 5}));
  EXPECT_TRUE(e->More().pulls.empty());

  // Freeing it tells every copy to go.
  objects_.OnRefUpdate(0, RefUpdate{{}, {ObjectId(9)}});
  auto frees = Take<FreeObjects>();
  std::vector<int> freed_on;
  for (const auto& [dest, f] : frees) {
    EXPECT_EQ(f.ids, std::vector<ObjectId>{ObjectId(9)});
    freed_on.push_back(dest);
  }
  std::sort(freed_on.begin(), freed_on.end());
  EXPECT_EQ(freed_on, (std::vector<int>{0, 1, 3, 4, 5}));
}

TEST_F(ObjectManagerTest, PullDoneForAnObjectFreedMeanwhileTellsThatRankToFreeItsCopy) {
  PutLarge(0, 9);
  objects_.OnSubscribe(1, Subscribe{{ObjectId(9)}});
  objects_.OnSubscribe(2, Subscribe{{ObjectId(9)}});
  ASSERT_EQ(Take<ObjectReady>().size(), 2u);
  objects_.OnRefUpdate(0, RefUpdate{{}, {ObjectId(9)}});  // the last ref goes mid-transfer
  auto frees = Take<FreeObjects>();
  ASSERT_EQ(frees.size(), 1u);
  EXPECT_EQ(frees[0].first, 0);
  EXPECT_EQ(objects_.Find(ObjectId(9)), nullptr);

  objects_.OnPullDone(1, AddLocation{ObjectId(9), true});
  frees = Take<FreeObjects>();
  ASSERT_EQ(frees.size(), 1u) << "nobody else will ever tell rank 1 to drop its new copy";
  EXPECT_EQ(frees[0].first, 1);
  EXPECT_EQ(frees[0].second.ids, std::vector<ObjectId>{ObjectId(9)});
  EXPECT_EQ(objects_.Find(ObjectId(9)), nullptr) << "not brought back";

  objects_.OnPullDone(2, AddLocation{ObjectId(9), false});
  EXPECT_TRUE(sent_.empty()) << "rank 2 stored nothing: nothing to free";
}

TEST_F(ObjectManagerTest, FreedHookRunsForEachFreedObjectBeforeFreeObjectsAreSent) {
  std::vector<std::pair<ObjectId, size_t>> hooked;  // (id, messages sent by then)
  objects_.SetFreedHook([&](ObjectId id) { hooked.emplace_back(id, sent_.size()); });
  PutLarge(1, 10);
  PutLarge(1, 11, {ObjectId(10)});  // 11's value holds a ref to 10
  EXPECT_EQ(objects_.Find(ObjectId(10))->More().container_refs, 1);
  objects_.OnRefUpdate(1, RefUpdate{{}, {ObjectId(10)}});
  EXPECT_TRUE(hooked.empty()) << "10 is alive inside 11";
  EXPECT_TRUE(sent_.empty());
  ASSERT_NE(objects_.Find(ObjectId(10)), nullptr);

  objects_.OnRefUpdate(1, RefUpdate{{}, {ObjectId(11)}});
  ASSERT_EQ(hooked.size(), 2u);
  EXPECT_EQ(hooked[0].first, ObjectId(11));
  EXPECT_EQ(hooked[1].first, ObjectId(10)) << "freeing a container frees what it contained";
  EXPECT_EQ(hooked[0].second, 0u) << "the hook runs before any FreeObjects";
  EXPECT_EQ(hooked[1].second, 0u);
  auto frees = Take<FreeObjects>();
  ASSERT_EQ(frees.size(), 1u) << "one message per rank";
  EXPECT_EQ(frees[0].first, 1);
  EXPECT_EQ(frees[0].second.ids, (std::vector<ObjectId>{ObjectId(11), ObjectId(10)}));
  EXPECT_EQ(objects_.Size(), 0u);

  // Free of nothing runs no hook and sends nothing.
  FreedList none;
  objects_.Free(none);
  EXPECT_EQ(hooked.size(), 2u);
  EXPECT_TRUE(sent_.empty());
}

TEST_F(ObjectManagerTest, TaskUsesKeepAnObjectAliveUntilTheLastOneGoes) {
  PutLarge(2, 5);
  objects_.AddTaskUse(ObjectId(5));
  objects_.AddTaskUse(ObjectId(5));
  objects_.OnRefUpdate(2, RefUpdate{{}, {ObjectId(5)}});
  ASSERT_NE(objects_.Find(ObjectId(5)), nullptr);
  FreedList freed;
  objects_.RemoveTaskUse(ObjectId(5), freed);
  EXPECT_TRUE(freed.empty());
  objects_.RemoveTaskUse(ObjectId(5), freed);
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].id, ObjectId(5));
  EXPECT_EQ(Ranks(freed[0].locations), std::vector<int>{2});
  objects_.Free(freed);
  auto frees = Take<FreeObjects>();
  ASSERT_EQ(frees.size(), 1u);
  EXPECT_EQ(frees[0].first, 2);
}

TEST_F(ObjectManagerTest, ALostRanksOnlyCopiesAreRebuiltFromTheirTaskOrFailNamingWhy) {
  // Object 1: a task's large result on rank 2 with its lineage (max_retries 3); object 2:
  // the same, its task out of retries; object 3: a Put there; object 4: a copy on rank 1 too.
  auto spec = [](uint64_t id, int max_retries, int attempt) {
    auto s = std::make_shared<TaskSpec>();
    s->id = TaskId(id);
    s->Edit().name = "Make";
    s->Edit().max_retries = max_retries;
    s->attempt = attempt;
    return s;
  };
  for (uint64_t id : {1, 2, 4}) {
    objects_.CreateResult(ObjectId(id), /*submitter=*/0);
    TaskDone done = LargeResult(id);
    objects_.Resolve(ObjectId(id), done, nullptr, /*from=*/2, /*submitter=*/0);
  }
  objects_.KeepLineage(ObjectId(1), spec(1, 3, 0));
  objects_.KeepLineage(ObjectId(2), spec(2, 1, 1));
  objects_.KeepLineage(ObjectId(4), spec(4, 3, 0));
  objects_.OnPullDone(1, AddLocation{ObjectId(4), true});
  PutLarge(2, 3);
  objects_.AddHolder(ObjectId(3), 0);
  // Rank 1 subscribes to object 1; its pull from rank 2 fails before rank 2 is declared lost.
  objects_.OnSubscribe(1, Subscribe{{ObjectId(1)}});
  sent_.clear();
  objects_.OnPullDone(1, AddLocation{ObjectId(1), false, /*failed_from=*/2});
  EXPECT_TRUE(sent_.empty()) << "parked until rank 2 is declared lost";

  auto rebuild = objects_.OnRankLost(2);
  ASSERT_EQ(rebuild.size(), 1u);
  EXPECT_EQ(rebuild[0]->id, TaskId(1));
  EXPECT_EQ(objects_.Find(ObjectId(1))->state, ObjectEntry::State::kPending) << "until its task runs again";
  EXPECT_EQ(objects_.Find(ObjectId(1))->More().subscribers, std::vector<int>{1}) << "the parked reader waits";
  EXPECT_EQ(objects_.Find(ObjectId(4))->state, ObjectEntry::State::kReady) << "its copy on rank 1 remains";
  EXPECT_EQ(Ranks(objects_.Find(ObjectId(4))->locations), std::vector<int>{1});
  for (uint64_t id : {2, 3}) {
    const ObjectEntry* e = objects_.Find(ObjectId(id));
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->state, ObjectEntry::State::kFailed);
    EXPECT_EQ(e->error()->kind, ErrorKind::kObjectLost);
    EXPECT_NE(e->error()->message.find("object " + ObjectId(id).Hex() + " was lost with rank 2"), std::string::npos)
        << e->error()->message;
  }
  EXPECT_NE(objects_.Find(ObjectId(2))->error()->message.find("max_retries (1)"), std::string::npos);
  EXPECT_NE(objects_.Find(ObjectId(3))->error()->message.find("a Put"), std::string::npos);

  // The rerun ends on rank 1: the waiting reader is told.
  TaskDone again = LargeResult(1);
  objects_.Resolve(ObjectId(1), again, nullptr, /*from=*/1, /*submitter=*/0);
  EXPECT_EQ(objects_.Find(ObjectId(1))->state, ObjectEntry::State::kReady);
  bool told = false;
  for (const auto& [dest, r] : Take<ObjectReady>()) told |= dest == 1 && r.id == ObjectId(1);
  EXPECT_TRUE(told);

  // A pull that fails from a rank never declared lost is answered as lost after the wait.
  objects_.SetParkNs(0);
  objects_.OnPullDone(0, AddLocation{ObjectId(4), false, /*failed_from=*/1});
  sent_.clear();
  EXPECT_EQ(objects_.ExpireParked(WallNowNs() + 1), 0u);
  auto lost = Take<ObjectReady>();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_TRUE(lost[0].second.failed);
  EXPECT_EQ(lost[0].second.error.kind, ErrorKind::kObjectLost);
}

TEST_F(ObjectManagerTest, SubscribingToAnUnknownObjectAnswersObjectLost) {
  objects_.OnSubscribe(4, Subscribe{{ObjectId(42)}});
  auto ready = Take<ObjectReady>();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, 4);
  EXPECT_EQ(ready[0].second.id, ObjectId(42));
  EXPECT_TRUE(ready[0].second.failed);
  EXPECT_EQ(ready[0].second.error.kind, ErrorKind::kObjectLost);
  EXPECT_EQ(ready[0].second.error.type, "ObjectLost");
  EXPECT_NE(ready[0].second.error.message.find(ObjectId(42).Hex()), std::string::npos)
      << ready[0].second.error.message;
  EXPECT_EQ(objects_.Size(), 0u) << "asking does not create it";
}

// ---- PlacementGroupManager --------------------------------------------------------------

class PlacementGroupManagerTest : public ::testing::Test {
 protected:
  PlacementGroupManagerTest() : scheduler_({Cpus(2), Cpus(2), Cpus(2)}), groups_(scheduler_, nodes_) {}

  static PlacementGroupCreationOptions Options(std::string name,
                                               std::vector<std::unordered_map<std::string, double>> bundles,
                                               PlacementStrategy strategy = PlacementStrategy::PACK) {
    return {std::move(name), std::move(bundles), strategy};
  }
  std::string Create(const PlacementGroupCreationOptions& options) {
    return groups_.Create(options, PlacementGroupManager::CheckBundles(options));
  }
  static TaskSpec InGroup(const std::string& pg, int bundle, double cpus, int submitter = 0) {
    TaskSpec s;
    s.id = ObjectId(1);
    s.Edit().function = s.Edit().name = "f";
    s.Edit().demand = Cpus(cpus);
    s.Edit().placement_group = pg;
    s.Edit().bundle_index = bundle;
    s.submitter = submitter;
    return s;
  }
  double FreeCpus(int rank) const { return FromUnits(scheduler_.Free(rank).Get("CPU")); }

  const std::vector<std::string> nodes_{"a", "a", "b"};
  Scheduler scheduler_;
  PlacementGroupManager groups_;
};

TEST_F(PlacementGroupManagerTest, CheckBundlesRejectsBadOptions) {
  auto expect_error = [](const PlacementGroupCreationOptions& o, const std::string& says) {
    try {
      PlacementGroupManager::CheckBundles(o);
      ADD_FAILURE() << "no error; expected one saying '" << says << "'";
    } catch (const ResourceError& e) {
      ADD_FAILURE() << "bad options are an Error, not a ResourceError: " << e.what();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_error(Options("", {}), "no bundles");
  expect_error(Options("", {{{"CPU", 1}}, {}}), "bundle 1 is empty");
  expect_error(Options("", {{{"CPU", 0}, {"GPU", 0}}}), "bundle 0 is empty");
  expect_error(Options("", {{{"CPU", 1}}, {{"CPU", -1}}}), "bundle 1 asks for CPU");
  expect_error(Options("", {{{"CPU", std::nan("")}}}), "amounts must be >= 0");

  auto ok = PlacementGroupManager::CheckBundles(Options("", {{{"CPU", 1}}, {{"CPU", 2}, {"GPU", 0}}}));
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[0], Cpus(1));
  EXPECT_EQ(ok[1], Cpus(2)) << "a zero amount reserves nothing";
}

TEST_F(PlacementGroupManagerTest, InfeasibleGroupThrowsResourceErrorNamingTheStrategy) {
  auto expect_infeasible = [&](const PlacementGroupCreationOptions& o, const std::string& strategy) {
    try {
      Create(o);
      ADD_FAILURE() << strategy << ": no error";
    } catch (const ResourceError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("strategy " + strategy), std::string::npos) << what;
      EXPECT_NE(what.find("can never be placed"), std::string::npos) << what;
    }
  };
  expect_infeasible(Options("big", {{{"CPU", 3}}}), "PACK");
  expect_infeasible(Options("", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, PlacementStrategy::STRICT_SPREAD),
                    "STRICT_SPREAD");  // two nodes only
  expect_infeasible(Options("", {{{"CPU", 2}}, {{"CPU", 2}}, {{"CPU", 2}}}, PlacementStrategy::STRICT_PACK),
                    "STRICT_PACK");  // node a has 4 CPUs
  expect_infeasible(Options("", {{{"GPU", 1}}}, PlacementStrategy::SPREAD), "SPREAD");
  EXPECT_TRUE(groups_.List().empty()) << "nothing recorded";
  EXPECT_TRUE(groups_.Find("big", "").empty());
  for (int r = 0; r < 3; ++r) EXPECT_EQ(FreeCpus(r), 2) << "nothing reserved on rank " << r;
}

TEST_F(PlacementGroupManagerTest, GroupThatDoesNotFitNowStaysPendingUntilPlacePending) {
  for (int r = 0; r < 3; ++r) scheduler_.Commit(r, Cpus(1.5));  // feasible, but no rank has 2 free
  std::string first = Create(Options("first", {{{"CPU", 2}}}));
  std::string second = Create(Options("second", {{{"CPU", 2}}}));
  EXPECT_NE(first, second);
  EXPECT_EQ(groups_.Status(first), PlacementGroupStatus::kPending);
  EXPECT_TRUE(groups_.BundleRanks(first).empty());
  auto listed = groups_.List();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].state, "PENDING");
  EXPECT_EQ(groups_.Reserve(InGroup(first, 0, 1)).result, PlacementGroupManager::Reservation::kWait)
      << "nothing to reserve in while pending";

  groups_.PlacePending();
  EXPECT_EQ(groups_.Status(first), PlacementGroupStatus::kPending) << "still no room";

  scheduler_.Release(1, Cpus(1.5));  // rank 1 is idle now: room for one group, the oldest
  groups_.PlacePending();
  EXPECT_EQ(groups_.Status(first), PlacementGroupStatus::kCreated);
  EXPECT_EQ(groups_.Status(second), PlacementGroupStatus::kPending);
  EXPECT_EQ(groups_.BundleRanks(first), std::vector<int>{1});
  EXPECT_EQ(FreeCpus(1), 0) << "the bundle is reserved on the scheduler";

  scheduler_.Release(2, Cpus(1.5));
  groups_.PlacePending();
  EXPECT_EQ(groups_.Status(second), PlacementGroupStatus::kCreated);
  EXPECT_EQ(groups_.BundleRanks(second), std::vector<int>{2});
  for (const auto& g : groups_.List()) EXPECT_EQ(g.state, "CREATED") << g.name;
}

TEST_F(PlacementGroupManagerTest, TakenNameIsRejectedUntilTheGroupIsRemoved) {
  std::string id = Create(Options("g", {{{"CPU", 1}}}));
  try {
    Create(Options("g", {{{"CPU", 1}}}));
    ADD_FAILURE() << "a second group named g";
  } catch (const ResourceError& e) {
    ADD_FAILURE() << "a taken name is not a ResourceError: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(id), std::string::npos) << e.what();
  }
  EXPECT_EQ(groups_.List().size(), 1u);
  EXPECT_EQ(FreeCpus(0) + FreeCpus(1) + FreeCpus(2), 5) << "the rejected group reserved nothing";
  // Unnamed groups never clash.
  std::string u1 = Create(Options("", {{{"CPU", 1}}}));
  std::string u2 = Create(Options("", {{{"CPU", 1}}}));
  EXPECT_NE(u1, u2);
  // Find by name or id.
  auto found = groups_.Find("g", "");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].GetID(), id);
  EXPECT_EQ(groups_.Find("", u2).size(), 1u);
  EXPECT_EQ(groups_.Find("", "").size(), 3u);
  EXPECT_TRUE(groups_.Find("g", u1).empty());

  groups_.Remove(id);
  EXPECT_FALSE(groups_.Exists(id));
  std::string again = Create(Options("g", {{{"CPU", 1}}}));
  EXPECT_NE(again, id);
  EXPECT_EQ(groups_.Status(again), PlacementGroupStatus::kCreated);
}

TEST_F(PlacementGroupManagerTest, ReservePicksABundleWithRoomPreferringTheSubmitter) {
  std::string id = Create(Options("", {{{"CPU", 2}}, {{"CPU", 2}}}, PlacementStrategy::STRICT_SPREAD));
  auto ranks = groups_.BundleRanks(id);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_NE(nodes_[ranks[0]], nodes_[ranks[1]]);
  using R = PlacementGroupManager::Reservation;

  R r = groups_.Reserve(InGroup(id, -1, 1, /*submitter=*/ranks[1]));
  ASSERT_EQ(r.result, R::kReserved);
  EXPECT_EQ(r.bundle, 1) << "the submitter's own bundle first";
  EXPECT_EQ(r.rank, ranks[1]);
  r = groups_.Reserve(InGroup(id, -1, 1, ranks[0]));
  ASSERT_EQ(r.result, R::kReserved);
  EXPECT_EQ(r.bundle, 0);
  EXPECT_EQ(r.rank, ranks[0]);
  r = groups_.Reserve(InGroup(id, 0, 1, ranks[1]));  // asks for bundle 0 by index
  ASSERT_EQ(r.result, R::kReserved);
  EXPECT_EQ(r.bundle, 0);
  EXPECT_EQ(groups_.Reserve(InGroup(id, 0, 1)).result, R::kWait) << "bundle 0 is full";
  r = groups_.Reserve(InGroup(id, -1, 1, ranks[0]));
  ASSERT_EQ(r.result, R::kReserved);
  EXPECT_EQ(r.bundle, 1) << "the only bundle with room, even if not the submitter's";
  EXPECT_EQ(groups_.Reserve(InGroup(id, -1, 1)).result, R::kWait) << "both full";
  EXPECT_EQ(groups_.Reserve(InGroup(id, -1, 0.5)).result, R::kWait);

  groups_.Remove(id);
  EXPECT_EQ(groups_.Reserve(InGroup(id, -1, 1)).result, R::kGone);
  EXPECT_EQ(groups_.Reserve(InGroup("pg-unknown", 0, 1)).result, R::kGone);
}

TEST_F(PlacementGroupManagerTest, ReleaseAndTakeOfAHoldingChangeWhatReserveCanTake) {
  std::string id = Create(Options("", {{{"CPU", 2}}}));
  const int rank = groups_.BundleRanks(id).at(0);
  using R = PlacementGroupManager::Reservation;
  ASSERT_EQ(groups_.Reserve(InGroup(id, 0, 2)).result, R::kReserved);
  EXPECT_EQ(groups_.Reserve(InGroup(id, 0, 1)).result, R::kWait);
  const ResourceSet committed = scheduler_.Committed(rank);

  const Holding in_bundle{rank, id, 0};
  groups_.Release(in_bundle, Cpus(1));  // e.g. the task blocked in Get
  EXPECT_EQ(scheduler_.Committed(rank), committed) << "a bundle's room is the group's, not the rank's";
  EXPECT_EQ(groups_.Reserve(InGroup(id, 0, 2)).result, R::kWait);
  ASSERT_EQ(groups_.Reserve(InGroup(id, 0, 1)).result, R::kReserved);
  EXPECT_EQ(groups_.Reserve(InGroup(id, 0, 1)).result, R::kWait);
  groups_.Release(in_bundle, Cpus(2));
  groups_.Take(in_bundle, Cpus(1));
  EXPECT_EQ(groups_.Reserve(InGroup(id, 0, 2)).result, R::kWait) << "Take took one back";
  ASSERT_EQ(groups_.Reserve(InGroup(id, 0, 1)).result, R::kReserved);

  // Bundle -1: held on the rank itself, through the scheduler.
  const int other = (rank + 1) % 3;
  const Holding on_rank{other, "", -1};
  groups_.Take(on_rank, Cpus(1.5));
  EXPECT_EQ(scheduler_.Committed(other), Cpus(1.5));
  groups_.Release(on_rank, Cpus(1));
  EXPECT_EQ(scheduler_.Committed(other), Cpus(0.5));
  groups_.Release(on_rank, Cpus(0.5));
  EXPECT_TRUE(scheduler_.Committed(other).Empty());

  // Holding nothing (rank -1), nothing, or in a removed group: no change anywhere.
  groups_.Take(Holding{}, Cpus(1));
  groups_.Take(on_rank, ResourceSet());
  groups_.Take(Holding{other, "pg-gone", 0}, Cpus(1));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(scheduler_.Committed(r), r == rank ? Cpus(2) : ResourceSet()) << "rank " << r;
  }
}

TEST_F(PlacementGroupManagerTest, RemoveGivesTheWholeReservationBackToTheScheduler) {
  std::string id = Create(Options("", {{{"CPU", 1}}, {{"CPU", 2}}, {{"CPU", 0.5}}}, PlacementStrategy::SPREAD));
  auto ranks = groups_.BundleRanks(id);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(FreeCpus(0) + FreeCpus(1) + FreeCpus(2), 6 - 3.5);
  // Tasks inside the group take room in its bundles, not on the scheduler.
  using R = PlacementGroupManager::Reservation;
  ASSERT_EQ(groups_.Reserve(InGroup(id, 1, 2)).result, R::kReserved);
  ASSERT_EQ(groups_.Reserve(InGroup(id, 2, 0.5)).result, R::kReserved);
  EXPECT_EQ(FreeCpus(0) + FreeCpus(1) + FreeCpus(2), 6 - 3.5);

  scheduler_.Commit(0, Cpus(0.25));  // a plain task elsewhere stays committed
  groups_.Remove(id);
  EXPECT_EQ(groups_.Status(id), PlacementGroupStatus::kUnknown);
  EXPECT_TRUE(groups_.BundleRanks(id).empty());
  EXPECT_FALSE(groups_.Exists(id));
  EXPECT_EQ(scheduler_.Committed(0), Cpus(0.25));
  EXPECT_TRUE(scheduler_.Committed(1).Empty());
  EXPECT_TRUE(scheduler_.Committed(2).Empty());
  EXPECT_EQ(FreeCpus(0) + FreeCpus(1) + FreeCpus(2), 6 - 0.25);
  groups_.Remove(id);  // twice: no-op
  EXPECT_EQ(scheduler_.Committed(0), Cpus(0.25));

  // A pending group holds nothing: removing it gives nothing back, and it is never placed.
  for (int r = 0; r < 3; ++r) scheduler_.Commit(r, Cpus(1.75));
  std::string pending = Create(Options("", {{{"CPU", 1}}}));
  ASSERT_EQ(groups_.Status(pending), PlacementGroupStatus::kPending);
  groups_.Remove(pending);
  EXPECT_EQ(scheduler_.Committed(1), Cpus(1.75));
  for (int r = 0; r < 3; ++r) scheduler_.Release(r, Cpus(1.75));
  groups_.PlacePending();
  EXPECT_EQ(groups_.Status(pending), PlacementGroupStatus::kUnknown);
  EXPECT_EQ(FreeCpus(0) + FreeCpus(1) + FreeCpus(2), 6 - 0.25);
}

TEST_F(PlacementGroupManagerTest, CheckTaskExplainsWhyATaskCannotRunInItsGroup) {
  std::string id = Create(Options("", {{{"CPU", 1}}, {{"CPU", 2}}}, PlacementStrategy::SPREAD));
  EXPECT_EQ(groups_.CheckTask(InGroup(id, 0, 1)), "");
  EXPECT_EQ(groups_.CheckTask(InGroup(id, -1, 2)), "") << "bundle 1 holds 2";
  EXPECT_NE(groups_.CheckTask(InGroup(id, 0, 2)).find("more than its placement group bundle holds"),
            std::string::npos);
  EXPECT_NE(groups_.CheckTask(InGroup(id, -1, 3)).find("more than"), std::string::npos);
  EXPECT_NE(groups_.CheckTask(InGroup(id, 2, 1)).find("out of range"), std::string::npos);
  EXPECT_NE(groups_.CheckTask(InGroup(id, -2, 1)).find("out of range"), std::string::npos);
  EXPECT_NE(groups_.CheckTask(InGroup("pg-nope", 0, 1)).find("does not exist"), std::string::npos);
}

// Issue 44: a lost rank's bundles are placed again where they fit; the group is
// RESCHEDULING until then, its other bundles serve on.
TEST_F(PlacementGroupManagerTest, ABundleOnALostRankIsRescheduledWhereItFitsBesideTheOthers) {
  std::vector<std::pair<int, PlacementGroupChanged>> pushed;
  groups_.SetSend([&](int dest, Message&& m) { pushed.push_back({dest, std::get<PlacementGroupChanged>(m)}); });
  std::string id = Create(Options("", {{{"CPU", 1}}, {{"CPU", 1}}}, PlacementStrategy::SPREAD));
  ASSERT_EQ(groups_.BundleRanks(id), (std::vector<int>{0, 2}));
  auto lost_task = groups_.Reserve(InGroup(id, 1, 1));
  ASSERT_EQ(lost_task.rank, 2);
  scheduler_.Commit(0, Cpus(1));  // other work fills ranks 0 and 1
  scheduler_.Commit(1, Cpus(2));

  scheduler_.RemoveRank(2);
  EXPECT_TRUE(groups_.OnRankLost(2).empty()) << "rank 1 could hold it once free";
  EXPECT_EQ(groups_.Status(id), PlacementGroupStatus::kPending) << "Wait waits for it to be whole again";
  EXPECT_TRUE(groups_.BundleRanks(id).empty());
  auto listed = groups_.List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].state, "RESCHEDULING");
  EXPECT_EQ(listed[0].bundle_ranks, (std::vector<int>{0, -1}));
  EXPECT_EQ(groups_.Reserve(InGroup(id, 1, 1)).result, PlacementGroupManager::Reservation::kWait);
  auto other = groups_.Reserve(InGroup(id, 0, 0.5));
  EXPECT_EQ(other.result, PlacementGroupManager::Reservation::kReserved) << "the bundle that stays serves on";
  EXPECT_EQ(other.rank, 0);
  auto any = groups_.Reserve(InGroup(id, -1, 0.5));
  EXPECT_EQ(any.rank, 0) << "any bundle: the one placed";
  EXPECT_EQ(groups_.Watch(id, 1), PlacementGroupStatus::kPending);
  groups_.Release({2, id, 1}, Cpus(1));  // the lost task's hold: void

  scheduler_.Release(1, Cpus(2));
  groups_.PlacePending();
  EXPECT_EQ(groups_.Status(id), PlacementGroupStatus::kCreated);
  EXPECT_EQ(groups_.BundleRanks(id), (std::vector<int>{0, 1})) << "node b is lost: SPREAD shares node a";
  EXPECT_EQ(groups_.List().at(0).state, "CREATED");
  EXPECT_EQ(FreeCpus(1), 1);
  ASSERT_EQ(pushed.size(), 1u);
  EXPECT_EQ(pushed[0].first, 1);
  EXPECT_EQ(pushed[0].second.status, static_cast<uint8_t>(PlacementGroupStatus::kCreated));
  auto again = groups_.Reserve(InGroup(id, 1, 1));
  EXPECT_EQ(again.result, PlacementGroupManager::Reservation::kReserved);
  EXPECT_EQ(again.rank, 1);
  groups_.Release({2, id, 1}, Cpus(1));  // still void: the bundle is on rank 1 now
  EXPECT_EQ(groups_.Reserve(InGroup(id, 1, 1)).result, PlacementGroupManager::Reservation::kWait)
      << "bundle 1 is full";
  groups_.Remove(id);
  EXPECT_EQ(FreeCpus(0) + FreeCpus(1), 4 - 1) << "both bundles given back; rank 0 keeps the other work";
}

TEST_F(PlacementGroupManagerTest, AGroupThatCanNeverBeWholeAgainStaysReschedulingSayingWhy) {
  // nodes: a (ranks 0, 1), b (rank 2)
  std::string spread = Create(Options("", {{{"CPU", 1}}, {{"CPU", 1}}}, PlacementStrategy::STRICT_SPREAD));
  ASSERT_EQ(groups_.BundleRanks(spread), (std::vector<int>{0, 2}));
  scheduler_.RemoveRank(2);
  auto warnings = groups_.OnRankLost(2);
  ASSERT_EQ(warnings.size(), 1u);
  for (const char* part : {"stays RESCHEDULING", "STRICT_SPREAD", "bundle 1 {CPU: 1}", "on a", "there is none",
                           "wait for ever"}) {
    EXPECT_NE(warnings[0].find(part), std::string::npos) << "lacks "" << part << "": " << warnings[0];
  }
  EXPECT_EQ(groups_.List().at(0).state, "RESCHEDULING");
  EXPECT_EQ(FreeCpus(1), 2) << "rank 1 is on node a, with bundle 0";

  groups_.Remove(spread);
  std::string pack = Create(Options("", {{{"CPU", 2}}, {{"CPU", 2}}}, PlacementStrategy::STRICT_PACK));
  ASSERT_EQ(groups_.BundleRanks(pack), (std::vector<int>{0, 1}));
  scheduler_.RemoveRank(1);
  warnings = groups_.OnRankLost(1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("STRICT_PACK keeps every bundle on one host"), std::string::npos) << warnings[0];
  EXPECT_EQ(groups_.Status(pack), PlacementGroupStatus::kPending);
  groups_.Remove(pack);
  EXPECT_EQ(FreeCpus(0), 2) << "only the bundle that stayed is given back";
}

// ---- StateTables ------------------------------------------------------------------------

class StateTablesTest : public ::testing::Test {
 protected:
  StateTablesTest() : tables_(3, nodes_) {}

  TaskRecord Record(uint64_t id, int rank, bool ok) {
    TaskRecord r;
    r.id = ObjectId(id);
    r.function = tables_.tasks().Intern("f");
    r.phase = ok ? TaskPhase::kFinished : TaskPhase::kFailed;
    r.rank = rank;
    if (!ok) r.error = std::make_shared<ErrorInfo>(ErrorInfo::Exception("std::runtime_error", "boom", "f", rank));
    return r;
  }

  const std::vector<std::string> nodes_{"a", "a", "b"};
  StateTables tables_;
};

TEST_F(StateTablesTest, RecordErrorKeepsTheMostRecentKMaxErrors) {
  const size_t total = StateTables::kMaxErrors + 5;
  for (size_t i = 0; i < total; ++i) {
    tables_.RecordError("ACTOR_DIED", "e" + std::to_string(i), ObjectId(i + 1), static_cast<int>(i % 3));
  }
  auto all = tables_.ListErrors(std::numeric_limits<size_t>::max());
  ASSERT_EQ(all.size(), StateTables::kMaxErrors);
  EXPECT_EQ(all.front().message, "e5") << "the oldest five were dropped";
  EXPECT_EQ(all.back().message, "e" + std::to_string(total - 1));
  EXPECT_EQ(all.back().id, ObjectId(total).Hex());
  EXPECT_EQ(all.back().type, "ACTOR_DIED");
  EXPECT_EQ(all.back().rank, static_cast<int>((total - 1) % 3));
  for (const auto& e : all) EXPECT_GT(e.time_ns, 0);
}

TEST_F(StateTablesTest, ListErrorsReturnsTheMostRecentOldestFirst) {
  EXPECT_TRUE(tables_.ListErrors(10).empty());
  for (int i = 0; i < 6; ++i) tables_.RecordError("TASK_FAILED", "e" + std::to_string(i), ObjectId(i + 1), 0);
  auto last3 = tables_.ListErrors(3);
  ASSERT_EQ(last3.size(), 3u);
  EXPECT_EQ(last3[0].message, "e3");
  EXPECT_EQ(last3[1].message, "e4");
  EXPECT_EQ(last3[2].message, "e5");
  EXPECT_EQ(tables_.ListErrors(100).size(), 6u);
  EXPECT_TRUE(tables_.ListErrors(0).empty());
}

TEST_F(StateTablesTest, TaskEndedCountsPerRankAndRecordsFailures) {
  tables_.TaskEnded(Record(1, 0, true), 0);
  tables_.TaskEnded(Record(2, 2, true), 2);
  tables_.TaskEnded(Record(3, 2, true), 2);
  tables_.TaskEnded(Record(4, 1, false), 1);
  tables_.TaskEnded(Record(5, -1, false), -1);  // failed at the head, never ran: no rank counts it
  auto workers = tables_.ListWorkers({2, 0, 1});
  ASSERT_EQ(workers.size(), 3u);
  EXPECT_EQ(workers[0].num_tasks_finished, 1u);
  EXPECT_EQ(workers[1].num_tasks_finished, 1u);
  EXPECT_EQ(workers[2].num_tasks_finished, 2u);
  EXPECT_EQ(workers[0].num_actors, 2);
  EXPECT_EQ(workers[2].num_actors, 1);
  EXPECT_EQ(workers[0].worker_type, "DRIVER");
  EXPECT_EQ(workers[1].worker_type, "WORKER");
  EXPECT_EQ(workers[2].node_id, "b");

  auto errors = tables_.ListErrors(10);
  ASSERT_EQ(errors.size(), 2u) << "one per failed task, none for successes";
  EXPECT_EQ(errors[0].type, "TASK_FAILED");
  EXPECT_EQ(errors[0].id, ObjectId(4).Hex());
  EXPECT_EQ(errors[0].rank, 1);
  EXPECT_EQ(errors[0].message, "std::runtime_error: boom (in task f on rank 1)");
  EXPECT_EQ(errors[1].id, ObjectId(5).Hex());

  auto summary = tables_.tasks().Summarize({});
  EXPECT_EQ(summary.total_tasks, 5u);
  EXPECT_EQ(summary.summary.at("f").state_counts.at("FAILED"), 2u);
  EXPECT_EQ(summary.summary.at("f").state_counts.at("FINISHED"), 3u);
}

TEST_F(StateTablesTest, JobInfoNodesAndKv) {
  JobInfo job;
  job.job_id = "job-1";
  job.hosts = {"h0", "h1", "h2"};
  job.pids = {100, 101, 102};
  job.task_table_size = 2;
  tables_.SetJobInfo(job);
  auto jobs = tables_.ListJobs(3);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job_id, "job-1");
  EXPECT_EQ(jobs[0].num_ranks, 3);
  EXPECT_EQ(jobs[0].driver_pid, 100);
  EXPECT_EQ(jobs[0].driver_host, "h0");
  EXPECT_EQ(tables_.ListWorkers({0, 0, 0})[2].pid, 102);

  for (uint64_t i = 1; i <= 5; ++i) tables_.TaskEnded(Record(i, 0, true), 0);
  state::TaskFilter all;
  all.limit = 100;
  EXPECT_EQ(tables_.tasks().List(all, {}).size(), 2u) << "the table was resized by SetJobInfo";

  Scheduler scheduler({Cpus(2), Cpus(2), Cpus(1)});
  scheduler.Commit(1, Cpus(0.5));
  auto nodes = tables_.ListNodes(scheduler);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_TRUE(nodes[0].is_head);
  EXPECT_FALSE(nodes[1].is_head);
  EXPECT_EQ(nodes[1].host, "h1");
  EXPECT_EQ(nodes[2].node_id, "b");
  EXPECT_EQ(nodes[1].resources_available.at("CPU"), 1.5);
  EXPECT_EQ(nodes[2].resources_total.at("CPU"), 1);

  EXPECT_FALSE(tables_.kv().Put("k", "v", true));
  EXPECT_EQ(tables_.kv().Get("k"), "v");
}

// QueueOf finds a queued task's class by SameClass and makes its queue by ClassKey: the two
// must agree, field by field, or tasks of one class would wait in two queues (or of two
// classes in one).
TEST(TaskClassTest, SameClassAgreesWithClassKeyOnEveryField) {
  std::vector<TaskOptions> all;
  for (const char* function : {"f", "g"}) {
    for (const ResourceSet& demand : {Cpus(1), Cpus(2), ResourceSet({{"CPU", 1}, {"GPU", 1}})}) {
      for (const char* group : {"", "pg1"}) {
        for (int bundle : {-1, 0, 1}) {
          for (int kind = 0; kind < 3; ++kind) {
            for (int rank : {-1, 2}) {
              for (bool soft : {false, true}) {
                TaskOptions o;
                o.function = function;
                o.name = all.size() % 2 ? "display" : function;  // not part of the class
                o.max_retries = static_cast<int>(all.size() % 3);  // nor this
                o.demand = demand;
                o.placement_group = group;
                o.bundle_index = bundle;
                o.strategy.kind = static_cast<SchedulingStrategy::Kind>(kind);
                o.strategy.rank = rank;
                o.strategy.soft = soft;
                all.push_back(o);
              }
            }
          }
        }
      }
    }
  }
  std::set<std::string> classes;
  for (const auto& a : all) {
    classes.insert(ClassKey(a));
    for (const auto& b : all) {
      ASSERT_EQ(SameClass(a, b), ClassKey(a) == ClassKey(b)) << ClassKey(a) << " vs " << ClassKey(b);
    }
  }
  // 2 functions x 3 demands x 4 groupings (none, or pg1 with bundle -1, 0, 1) x 9 placements
  // (default, or SPREAD or affinity with rank -1 or 2, hard or soft): the display name,
  // the retries, a bundle without a group and a default strategy's rank do not count.
  EXPECT_EQ(all.size(), 432u);
  EXPECT_EQ(classes.size(), 216u);
}

// ---- TaskManager and ActorManager, through the head -------------------------------------

class HeadManagersTest : public HeadFixture {
 protected:
  /// Unlike HeadFixture::Take, leaves the messages of other types for later checks.
  template <typename T>
  std::vector<std::pair<int, T>> Take() {
    return TakeFrom<T>(sent_);
  }
  void DoneAttempt(int from, uint64_t id, int attempt, bool ok) {
    TaskDone d;
    d.id = ObjectId(id);
    d.attempt = attempt;
    d.ok = ok;
    d.size = 4;
    d.exec_ns = 1000;
    if (ok) d.inline_value = Bytes("abcd");
    if (!ok) d.error = ErrorInfo::Exception("std::runtime_error", "try " + std::to_string(attempt), "f", from);
    head_.Handle(from, std::move(d));
  }
  TaskSpec Creation(uint64_t id, std::string name = "", double cpus = 1) {
    TaskSpec s = Spec(id);
    s.kind = TaskKind::kActorCreation;
    s.Edit().class_name = "Counter";
    s.Edit().actor_name = std::move(name);
    s.Edit().demand = Cpus(cpus);
    return s;
  }
  TaskSpec Call(uint64_t id, uint64_t actor, std::vector<TaskSpecArg> args = {}) {
    TaskSpec s = Spec(id, std::move(args));
    s.kind = TaskKind::kActorCall;
    s.actor = ObjectId(actor);
    s.Edit().demand = ResourceSet();
    return s;
  }
  /// The ObjectReady for `id` among those sent (taking them all).
  std::vector<std::pair<int, ObjectReady>> ReadyFor(uint64_t id) {
    std::vector<std::pair<int, ObjectReady>> out;
    for (auto& [dest, r] : Take<ObjectReady>()) {
      if (r.id == ObjectId(id)) out.push_back({dest, std::move(r)});
    }
    return out;
  }
  static std::vector<uint64_t> Ids(const std::vector<std::pair<int, DispatchTask>>& d) {
    std::vector<uint64_t> out;
    for (const auto& [dest, t] : d) out.push_back(t.spec->id.Value());
    return out;
  }
  /// LookupActor as a node calls it: (actor id value, class name), id 0 if none.
  std::pair<uint64_t, std::string> Lookup(const std::string& name, const std::string& ns = "") {
    HeadCall call;
    call.request = ++request_;
    call.op = static_cast<uint16_t>(LookupActor::kOp);
    call.args = std::make_shared<const Buffer>(EncodeArgs<LookupActor>({ns, name}));
    head_.Handle(1, std::move(call));
    auto replies = TakeFrom<HeadReply>(sent_);
    if (replies.size() != 1u || replies[0].first != 1 || replies[0].second.request != request_) {
      ADD_FAILURE() << "expected one HeadReply to rank 1";
      return {};
    }
    EXPECT_TRUE(replies[0].second.ok) << replies[0].second.error;
    return DecodeResult<LookupActor>(replies[0].second.result);
  }
  const state::ActorState* Actor(uint64_t id) {
    actors_ = head_.ListActors();
    for (const auto& a : actors_) {
      if (a.actor_id == ObjectId(id).Hex()) return &a;
    }
    return nullptr;
  }

  uint64_t request_ = 0;
  std::vector<state::ActorState> actors_;
};

TEST_F(HeadManagersTest, TaskManagerRunsATaskOnlyAfterBothArgumentsComplete) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2)});
  head_.Handle(0, SubmitTask{Spec(3, {Ref(1), Ref(2)})});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), (std::vector<uint64_t>{1, 2}));
  const int rank_of_1 = d[0].first;
  const int rank_of_2 = d[1].first;

  Done(rank_of_1, 1);
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "argument 2 is still pending (and a CPU is free)";
  state::TaskFilter all;
  auto tasks = head_.ListTasks(all);
  auto t3 = std::find_if(tasks.begin(), tasks.end(), [](const auto& t) { return t.task_id == ObjectId(3).Hex(); });
  ASSERT_NE(t3, tasks.end());
  EXPECT_EQ(t3->state, "PENDING_ARGS_AVAIL");

  Done(rank_of_2, 2);
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{3});
  ASSERT_EQ(d[0].second.refs.size(), 2u);
  EXPECT_EQ(d[0].second.refs[0].id, ObjectId(1));
  EXPECT_EQ(d[0].second.refs[1].id, ObjectId(2));
  EXPECT_TRUE(d[0].second.refs[0].inline_value);
  EXPECT_TRUE(d[0].second.refs[1].inline_value);
  Done(d[0].first, 3);
  EXPECT_EQ(head_.NumTasks(), 0u);
}

TEST_F(HeadManagersTest, TaskManagerRunsATaskWithTheSamePendingArgumentTwiceOnceItCompletes) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2, {Ref(1), Ref(1)})});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{1});
  Done(d[0].first, 1);
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{2}) << "one completion resolves both uses, dispatched once";
  EXPECT_EQ(d[0].second.refs.size(), 2u);
  Done(d[0].first, 2);
  EXPECT_TRUE(Take<DispatchTask>().empty());
  EXPECT_EQ(head_.NumTasks(), 0u);
}

TEST_F(HeadManagersTest, TaskManagerFailsDependentsWithTheArgumentsError) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2, {Ref(1)})});
  head_.Handle(0, SubmitTask{Spec(3, {Ref(2)})});
  head_.Handle(1, Subscribe{{ObjectId(3)}});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{1});
  Done(d[0].first, 1, /*ok=*/false);
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "the dependents never run";
  EXPECT_EQ(head_.NumTasks(), 0u);
  auto ready = ReadyFor(3);
  ASSERT_GE(ready.size(), 1u);
  bool to_subscriber = false;
  for (const auto& [dest, r] : ready) {
    to_subscriber |= dest == 1;
    EXPECT_TRUE(r.failed);
    EXPECT_EQ(r.error.kind, ErrorKind::kTaskException);
    EXPECT_EQ(r.error.type, "std::runtime_error");
    EXPECT_EQ(r.error.message, "boom") << "the cause, not a generic error";
  }
  EXPECT_TRUE(to_subscriber);
  // A task submitted later on the failed object fails at once, with the same error.
  head_.Handle(0, SubmitTask{Spec(4, {Ref(1)})});
  EXPECT_TRUE(Take<DispatchTask>().empty());
  ready = ReadyFor(4);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, 0);
  EXPECT_TRUE(ready[0].second.failed);
  EXPECT_EQ(ready[0].second.error.message, "boom");
  auto tasks = head_.ListTasks(state::TaskFilter{});
  for (const auto& t : tasks) EXPECT_EQ(t.state, "FAILED") << t.task_id;
}

TEST_F(HeadManagersTest, TaskManagerRetriesExceptionsOnlyWithRetryExceptions) {
  head_.Handle(0, SubmitTask{Spec(1)});  // max_retries 3, but exceptions are not retried
  auto d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  DoneAttempt(d[0].first, 1, 0, false);
  EXPECT_TRUE(Take<DispatchTask>().empty());
  auto ready = ReadyFor(1);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].second.failed);
  EXPECT_EQ(ready[0].second.error.message, "try 0");

  TaskSpec s = Spec(2);
  s.Edit().retry_exceptions = true;
  s.Edit().max_retries = 2;
  head_.Handle(0, SubmitTask{s});
  d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].second.spec->attempt, 0);
  DoneAttempt(d[0].first, 2, 0, false);
  d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].second.spec->id, ObjectId(2));
  EXPECT_EQ(d[0].second.spec->attempt, 1);
  EXPECT_TRUE(ReadyFor(2).empty()) << "a retried failure is not reported";
  DoneAttempt(d[0].first, 2, 0, false);  // a stale report of attempt 0: ignored
  EXPECT_TRUE(Take<DispatchTask>().empty());
  EXPECT_EQ(head_.NumTasks(), 1u);
  DoneAttempt(d[0].first, 2, 1, false);
  d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].second.spec->attempt, 2);
  DoneAttempt(d[0].first, 2, 2, true);
  EXPECT_TRUE(Take<DispatchTask>().empty());
  ready = ReadyFor(2);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_FALSE(ready[0].second.failed);
  EXPECT_EQ(head_.NumTasks(), 0u);
  EXPECT_EQ(head_.Available().at("CPU"), 2) << "each attempt gave its CPU back";
}

TEST_F(HeadManagersTest, ActorCallsBeforeThePlacementWaitAndFollowTheCreationInOrder) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2)});  // both CPUs busy
  auto busy = Take<DispatchTask>();
  ASSERT_EQ(busy.size(), 2u);
  head_.Handle(0, SubmitTask{Creation(10)});
  head_.Handle(0, SubmitTask{Call(11, 10)});
  head_.Handle(1, SubmitTask{Call(12, 10)});
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "no room for the actor: its calls wait at the head";
  ASSERT_NE(Actor(10), nullptr);
  EXPECT_EQ(Actor(10)->state, "PENDING_CREATION");

  Done(busy[1].first, 2);
  auto d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), (std::vector<uint64_t>{10, 11, 12})) << "the creation, then its calls in order";
  for (const auto& [dest, t] : d) EXPECT_EQ(dest, busy[1].first) << "task " << t.spec->id.Value();
  EXPECT_EQ(Actor(10)->rank, busy[1].first);

  // Once placed, calls go straight to the actor's rank.
  head_.Handle(0, SubmitTask{Call(13, 10)});
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{13});
  EXPECT_EQ(d[0].first, busy[1].first);
}

TEST_F(HeadManagersTest, KillingAnActorSendsKillActorAndFailsLaterCalls) {
  head_.Handle(0, SubmitTask{Creation(10)});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  const int rank = d[0].first;
  Done(rank, 10);
  EXPECT_EQ(Actor(10)->state, "ALIVE");
  EXPECT_EQ(head_.Available().at("CPU"), 1) << "the live actor holds its CPU";
  sent_.clear();

  head_.Handle(0, KillActorRequest{ObjectId(10), /*no_restart=*/true});
  auto kills = Take<KillActor>();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].first, rank);
  EXPECT_EQ(kills[0].second.actor, ObjectId(10));
  EXPECT_FALSE(kills[0].second.restart);
  EXPECT_EQ(Actor(10)->state, "DEAD");
  EXPECT_EQ(head_.Available().at("CPU"), 2) << "what it held is given back";
  EXPECT_EQ(head_.ListErrors(10).back().type, "ACTOR_DIED");

  head_.Handle(0, SubmitTask{Call(11, 10)});
  EXPECT_TRUE(Take<DispatchTask>().empty());
  auto ready = ReadyFor(11);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, 0);
  EXPECT_TRUE(ready[0].second.failed);
  EXPECT_EQ(ready[0].second.error.kind, ErrorKind::kActorError);
  EXPECT_NE(ready[0].second.error.message.find("Kill"), std::string::npos) << ready[0].second.error.message;
  EXPECT_EQ(head_.NumTasks(), 0u);
  // A second kill of a dead actor sends nothing.
  head_.Handle(0, KillActorRequest{ObjectId(10), true});
  EXPECT_TRUE(Take<KillActor>().empty());
}

TEST_F(HeadManagersTest, KillingAnActorBeforeItIsPlacedFailsItsCreationAndWaitingCalls) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2)});
  auto busy = Take<DispatchTask>();
  head_.Handle(0, SubmitTask{Creation(10)});
  head_.Handle(0, SubmitTask{Call(11, 10)});
  head_.Handle(0, KillActorRequest{ObjectId(10), true});
  EXPECT_TRUE(Take<KillActor>().empty()) << "no rank to tell";
  auto ready = Take<ObjectReady>();
  std::vector<uint64_t> failed;
  for (const auto& [dest, r] : ready) {
    EXPECT_TRUE(r.failed);
    EXPECT_EQ(r.error.kind, ErrorKind::kActorError);
    failed.push_back(r.id.Value());
  }
  std::sort(failed.begin(), failed.end());
  EXPECT_EQ(failed, (std::vector<uint64_t>{10, 11}));
  Done(busy[0].first, 1);
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "the dead actor's creation is never placed";
  EXPECT_EQ(head_.NumTasks(), 1u) << "task 2 only";
}

TEST_F(HeadManagersTest, ActorWithATakenNameFailsAndTheFirstStaysFindable) {
  head_.Handle(0, SubmitTask{Creation(10, "svc")});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  const int rank = d[0].first;
  Done(rank, 10);
  EXPECT_EQ(Lookup("svc"), (std::pair<uint64_t, std::string>{10, "Counter"}));

  TaskSpec dup = Creation(20, "svc");
  dup.submitter = 1;
  head_.Handle(1, SubmitTask{dup});
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "the duplicate is never placed";
  auto ready = ReadyFor(20);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, 1);
  EXPECT_TRUE(ready[0].second.failed);
  EXPECT_EQ(ready[0].second.error.kind, ErrorKind::kActorError);
  EXPECT_NE(ready[0].second.error.message.find("already exists"), std::string::npos);
  EXPECT_TRUE(Take<KillActor>().empty()) << "the first actor is not touched";

  EXPECT_EQ(Lookup("svc"), (std::pair<uint64_t, std::string>{10, "Counter"})) << "still named";
  EXPECT_EQ(Actor(10)->state, "ALIVE");
  EXPECT_EQ(Actor(20)->state, "DEAD");
  EXPECT_EQ(head_.Available().at("CPU"), 1) << "the duplicate holds nothing";
  head_.Handle(0, SubmitTask{Call(11, 10)});
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{11});
  EXPECT_EQ(d[0].first, rank);

  // When the first dies its name is free again.
  head_.Handle(0, KillActorRequest{ObjectId(10), true});
  EXPECT_EQ(Lookup("svc").first, 0u);
  head_.Handle(0, SubmitTask{Creation(30, "svc")});
  EXPECT_EQ(Ids(Take<DispatchTask>()), std::vector<uint64_t>{30});
  EXPECT_EQ(Lookup("svc").first, 30u);
}

TEST_F(HeadManagersTest, NamespacesIsolateNamedActors) {
  TaskSpec colors = Creation(10, "orange", 0.5);
  colors.Edit().actor_namespace = "colors";
  TaskSpec fruits = Creation(20, "orange", 0.5);
  fruits.Edit().actor_namespace = "fruits";
  head_.Handle(0, SubmitTask{colors});
  head_.Handle(0, SubmitTask{fruits});
  EXPECT_EQ(Ids(Take<DispatchTask>()), (std::vector<uint64_t>{10, 20})) << "one name, two namespaces";
  EXPECT_EQ(Lookup("orange", "colors").first, 10u);
  EXPECT_EQ(Lookup("orange", "fruits").first, 20u);
  EXPECT_EQ(Lookup("orange", "").first, 0u) << "not in the default namespace";
  EXPECT_EQ(Lookup("orange", "veg").first, 0u);

  TaskSpec dup = Creation(30, "orange", 0.5);
  dup.Edit().actor_namespace = "fruits";
  head_.Handle(0, SubmitTask{dup});
  auto ready = ReadyFor(30);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].second.failed) << "same name, same namespace";
  EXPECT_NE(ready[0].second.error.message.find("namespace \"fruits\""), std::string::npos)
      << ready[0].second.error.message;
  EXPECT_EQ(Lookup("orange", "fruits").first, 20u);

  // Killing one frees its name in its namespace only.
  head_.Handle(0, KillActorRequest{ObjectId(20), true});
  EXPECT_EQ(Lookup("orange", "fruits").first, 0u);
  EXPECT_EQ(Lookup("orange", "colors").first, 10u);
}

TEST_F(HeadManagersTest, CallsFailedByARestartAreSentAgainUpToMaxTaskRetries) {
  TaskSpec creation = Creation(10);
  creation.Edit().max_restarts = 2;
  creation.Edit().max_task_retries = 1;
  head_.Handle(0, SubmitTask{creation});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  const int rank = d[0].first;
  Done(rank, 10);
  head_.Handle(0, SubmitTask{Call(11, 10)});
  ASSERT_EQ(Ids(Take<DispatchTask>()), std::vector<uint64_t>{11});

  // A method that throws (no restart) is not retried.
  head_.Handle(0, SubmitTask{Call(12, 10)});
  Take<DispatchTask>();
  TaskDone thrown;
  thrown.id = ObjectId(12);
  thrown.ok = false;
  thrown.error = ErrorInfo::Of(ErrorKind::kActorError, "user threw ActorError", "f", rank);
  head_.Handle(rank, std::move(thrown));
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "the actor never restarted: nothing to retry";

  head_.Handle(0, KillActorRequest{ObjectId(10), /*no_restart=*/false});
  ASSERT_EQ(Take<KillActor>().size(), 1u);
  ASSERT_EQ(Ids(Take<DispatchTask>()), std::vector<uint64_t>{10}) << "the creation again";
  // The node fails the queued call with the restart's cause: the head sends it again.
  auto fail_call = [&](int attempt) {
    TaskDone done;
    done.id = ObjectId(11);
    done.attempt = attempt;
    done.ok = false;
    done.error = ErrorInfo::Of(ErrorKind::kActorError, "the actor was killed and is restarting", "f", rank);
    head_.Handle(rank, std::move(done));
  };
  fail_call(0);
  auto again = Take<DispatchTask>();
  ASSERT_EQ(Ids(again), std::vector<uint64_t>{11});
  EXPECT_EQ(again[0].first, rank) << "to the restarted actor's rank";
  EXPECT_EQ(again[0].second.spec->attempt, 1);
  EXPECT_TRUE(ReadyFor(11).empty()) << "not failed";

  // A second restart fails it again: the one retry is spent, so now it fails.
  head_.Handle(0, KillActorRequest{ObjectId(10), false});
  ASSERT_EQ(Ids(Take<DispatchTask>()), std::vector<uint64_t>{10});
  fail_call(1);
  EXPECT_TRUE(Take<DispatchTask>().empty());
  auto ready = ReadyFor(11);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].second.error.kind, ErrorKind::kActorError);
}

TEST_F(HeadManagersTest, WithoutMaxTaskRetriesACallFailedByARestartFails) {
  TaskSpec creation = Creation(10);
  creation.Edit().max_restarts = 1;
  head_.Handle(0, SubmitTask{creation});
  const int rank = Take<DispatchTask>().at(0).first;
  Done(rank, 10);
  head_.Handle(0, SubmitTask{Call(11, 10)});
  Take<DispatchTask>();
  head_.Handle(0, KillActorRequest{ObjectId(10), false});
  ASSERT_EQ(Ids(Take<DispatchTask>()), std::vector<uint64_t>{10}) << "the creation again";
  TaskDone done;
  done.id = ObjectId(11);
  done.ok = false;
  done.error = ErrorInfo::Of(ErrorKind::kActorError, "the actor was killed and is restarting", "f", rank);
  head_.Handle(rank, std::move(done));
  EXPECT_TRUE(Take<DispatchTask>().empty());
  auto ready = ReadyFor(11);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].second.failed);
}

// A call that ended the actor's process (Python's os._exit) restarts the actor while its
// max_restarts allow, as Ray restarts an actor whose worker died; then it dies.
TEST_F(HeadManagersTest, ACrashedActorRestartsWhileItsMaxRestartsAllowThenDies) {
  TaskSpec creation = Creation(10);
  creation.Edit().max_restarts = 1;
  creation.Edit().max_task_retries = -1;
  head_.Handle(0, SubmitTask{creation});
  const int rank = Take<DispatchTask>().at(0).first;
  Done(rank, 10);
  head_.Handle(0, SubmitTask{Call(11, 10)});
  Take<DispatchTask>();
  sent_.clear();

  // The node reports the crash first, then fails the call that crashed.
  head_.Handle(rank, ActorDied{ObjectId(10), "the actor's f called os._exit(0)", /*crashed=*/true});
  auto kills = Take<KillActor>();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_TRUE(kills[0].second.restart);
  EXPECT_NE(kills[0].second.cause.find("os._exit"), std::string::npos) << kills[0].second.cause;
  ASSERT_EQ(Ids(Take<DispatchTask>()), std::vector<uint64_t>{10}) << "the creation again";
  EXPECT_EQ(Actor(10)->state, "RESTARTING");
  TaskDone crashed;
  crashed.id = ObjectId(11);
  crashed.ok = false;
  crashed.error = ErrorInfo::Of(ErrorKind::kActorError, "the actor's f called os._exit(0)", "f", rank);
  head_.Handle(rank, std::move(crashed));
  ASSERT_EQ(Ids(Take<DispatchTask>()), std::vector<uint64_t>{11}) << "max_task_retries -1: sent again";
  Done(rank, 10);  // the restart's creation
  EXPECT_EQ(Actor(10)->state, "ALIVE");

  // No restart left: the next crash ends it.
  head_.Handle(rank, ActorDied{ObjectId(10), "the actor's f called os._exit(0)", /*crashed=*/true});
  kills = Take<KillActor>();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_FALSE(kills[0].second.restart);
  EXPECT_TRUE(Take<DispatchTask>().empty());
  EXPECT_EQ(Actor(10)->state, "DEAD");
  EXPECT_EQ(head_.Available().at("CPU"), 2) << "what it held is given back";
}

// A lost rank (recovery mode): its actor restarts on a live rank while max_restarts
// allows, keeps its name, and the call that was in flight follows it (max_task_retries).
TEST_F(HeadManagersTest, AnActorOnALostRankRestartsOnALiveRankAndItsCallsFollow) {
  TaskSpec creation = Creation(10, "survivor");
  creation.Edit().max_restarts = 1;
  creation.Edit().max_task_retries = -1;
  creation.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 1, /*soft=*/true};
  head_.Handle(0, SubmitTask{creation});
  ASSERT_EQ(Take<DispatchTask>().at(0).first, 1);
  Done(1, 10);
  head_.Handle(0, SubmitTask{Call(11, 10)});
  ASSERT_EQ(Take<DispatchTask>().at(0).first, 1);
  sent_.clear();

  head_.OnRankLost(1, "its process ended");
  auto d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), (std::vector<uint64_t>{10, 11})) << "the creation, then the call that was in flight";
  EXPECT_EQ(d[0].first, 0);
  EXPECT_EQ(d[1].first, 0);
  EXPECT_EQ(d[1].second.spec->attempt, 1);
  EXPECT_TRUE(ReadyFor(11).empty()) << "not failed";
  EXPECT_EQ(Actor(10)->state, "RESTARTING");
  EXPECT_EQ(Actor(10)->num_restarts, 1);
  EXPECT_EQ(Lookup("survivor").first, 10u) << "a named actor keeps its name";
  Done(0, 10);  // the restart's creation
  EXPECT_EQ(Actor(10)->state, "ALIVE");
  EXPECT_EQ(Actor(10)->rank, 0);
  head_.Handle(0, SubmitTask{Call(12, 10)});
  ASSERT_EQ(Take<DispatchTask>().at(0).first, 0) << "later calls go to its new rank";
}

TEST_F(HeadManagersTest, ALostRanksActorsWithoutRestartsOrPinnedThereDieAndStrandedTasksFail) {
  TaskSpec plain = Creation(10, "", 0);
  plain.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 1, false};
  TaskSpec pinned = Creation(20, "", 0);
  pinned.Edit().max_restarts = 3;
  pinned.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 1, false};
  TaskSpec throws = Creation(30, "", 0);
  throws.Edit().max_restarts = 1;
  throws.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 1, true};
  for (const TaskSpec& c : {plain, pinned, throws}) head_.Handle(0, SubmitTask{c});
  for (uint64_t id : {10, 20, 30}) Done(1, id);
  sent_.clear();
  // Two tasks that need rank 1's own resource (the second may be pipelined behind the
  // first): retried after the loss, no live rank can run them.
  TaskSpec busy = Spec(40);
  busy.Edit().demand = ResourceSet({{"CPU", 1}, {"rank:1", 1}});
  TaskSpec stranded = Spec(41);
  stranded.Edit().demand = ResourceSet({{"CPU", 1}, {"rank:1", 1}});
  head_.Handle(0, SubmitTask{busy});
  head_.Handle(0, SubmitTask{stranded});
  for (const auto& [dest, t] : Take<DispatchTask>()) EXPECT_EQ(dest, 1);

  head_.OnRankLost(1, "its process ended");
  EXPECT_EQ(Actor(10)->state, "DEAD");
  EXPECT_NE(Actor(10)->death_cause.find("rank 1 was lost"), std::string::npos) << Actor(10)->death_cause;
  EXPECT_EQ(Actor(20)->state, "DEAD") << "pinned to the lost rank: it cannot restart";
  EXPECT_NE(Actor(20)->death_cause.find("pinned to rank 1"), std::string::npos) << Actor(20)->death_cause;
  ASSERT_EQ(Actor(30)->state, "RESTARTING");
  std::map<uint64_t, ObjectReady> failed;
  for (auto& [dest, r] : Take<ObjectReady>()) failed.emplace(r.id.Value(), std::move(r));
  for (uint64_t id : {40, 41}) {
    ASSERT_TRUE(failed.count(id)) << id;
    EXPECT_TRUE(failed.at(id).failed) << id;
    EXPECT_NE(failed.at(id).error.message.find("rank:1"), std::string::npos) << failed.at(id).error.message;
  }
  // The restart's constructor throws this time: the actor dies, saying so.
  auto d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{30});
  Done(0, 30, /*ok=*/false);
  EXPECT_EQ(Actor(30)->state, "DEAD");
  EXPECT_NE(Actor(30)->death_cause.find("threw when it restarted on rank 0"), std::string::npos)
      << Actor(30)->death_cause;
  EXPECT_EQ(head_.Available().at("CPU"), 1) << "rank 0's CPU is free again; rank 1 is gone";

  // Submitted after the loss, pinned to the lost rank: a task, and an actor, fail at once
  // (the submitting node's check knew every rank's capacity, the lost one's included).
  sent_.clear();
  TaskSpec late = Spec(50);
  late.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 1, false};
  head_.Handle(0, SubmitTask{late});
  TaskSpec late_actor = Creation(60, "", 0);
  late_actor.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 1, false};
  head_.Handle(0, SubmitTask{late_actor});
  EXPECT_TRUE(Take<DispatchTask>().empty());
  failed.clear();
  for (auto& [dest, r] : Take<ObjectReady>()) failed.emplace(r.id.Value(), std::move(r));
  ASSERT_TRUE(failed.count(50));
  EXPECT_EQ(failed.at(50).error.kind, ErrorKind::kResourceError);
  EXPECT_NE(failed.at(50).error.message.find("pinned to rank 1"), std::string::npos) << failed.at(50).error.message;
  EXPECT_EQ(Actor(60)->state, "DEAD");
}

TEST_F(HeadManagersTest, APlacementGroupBundleOnALostRankIsRescheduledAndItsTasksRunThere) {
  std::string pg = head_.CreatePlacementGroup({"", {{{"CPU", 0.5}}, {{"CPU", 0.5}}}, PlacementStrategy::SPREAD});
  ASSERT_EQ(head_.BundleRanks(pg), (std::vector<int>{0, 1}));
  auto in_bundle = [&](uint64_t id, int bundle, double cpus) {
    TaskSpec s = Spec(id);
    s.Edit().demand = Cpus(cpus);
    s.Edit().placement_group = pg;
    s.Edit().bundle_index = bundle;
    return s;
  };
  head_.Handle(0, SubmitTask{in_bundle(80, 0, 0.25)});
  head_.Handle(0, SubmitTask{in_bundle(81, 1, 0.5)});
  TaskSpec other = Spec(82);  // fills rank 0 for now
  other.Edit().demand = Cpus(0.5);
  other.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 0, false};
  head_.Handle(0, SubmitTask{other});
  head_.Handle(0, SubmitTask{in_bundle(83, 1, 0.5)});  // waits: bundle 1 is full
  auto d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), (std::vector<uint64_t>{80, 81, 82}));
  EXPECT_EQ(d[0].first, 0);
  EXPECT_EQ(d[1].first, 1);
  EXPECT_EQ(d[2].first, 0);
  sent_.clear();

  head_.OnRankLost(1, "its process ended");
  auto listed = head_.ListPlacementGroups();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].state, "RESCHEDULING");
  EXPECT_EQ(listed[0].bundle_ranks, (std::vector<int>{0, -1}));
  EXPECT_EQ(head_.PlacementGroupState(pg), PlacementGroupStatus::kPending);
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "81's retry and 83 wait for bundle 1; nothing goes to rank 1";
  for (uint64_t id : {80, 81, 83}) EXPECT_TRUE(ReadyFor(id).empty()) << id << " did not fail";
  head_.Handle(0, SubmitTask{in_bundle(84, 0, 0.25)});
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{84}) << "bundle 0 serves on";
  EXPECT_EQ(d[0].first, 0);

  Done(0, 82);  // room on rank 0: bundle 1 is placed there, its first waiting task runs
  EXPECT_EQ(head_.ListPlacementGroups().at(0).state, "CREATED");
  EXPECT_EQ(head_.PlacementGroupState(pg), PlacementGroupStatus::kCreated);
  EXPECT_EQ(head_.BundleRanks(pg), (std::vector<int>{0, 0}));
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{83});
  EXPECT_EQ(d[0].first, 0);
  Done(0, 83);
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{81});
  EXPECT_EQ(d[0].first, 0);
  EXPECT_EQ(d[0].second.spec->attempt, 1) << "the retry of the attempt lost with rank 1";
  DoneAttempt(0, 81, 1, true);
  for (uint64_t id : {80, 84}) {
    Done(0, id);
    auto ready = ReadyFor(id);
    ASSERT_FALSE(ready.empty()) << id;
    EXPECT_FALSE(ready[0].second.failed) << id;
  }
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "80 and 84 ran once, untouched";
  EXPECT_EQ(head_.NumTasks(), 0u);
  ASSERT_TRUE(head_.RemovePlacementGroup(pg));
  EXPECT_EQ(head_.Available().at("CPU"), 1) << "rank 0 whole again; rank 1 is gone";
}

TEST_F(HeadManagersTest, HardNodeAffinityWaitsForItsRankAndSoftFallsBack) {
  TaskSpec busy = Spec(1);
  busy.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 1, false};
  head_.Handle(0, SubmitTask{busy});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].first, 1);
  TaskSpec hard = Spec(2);
  hard.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 1, false};
  TaskSpec soft = Spec(3);
  soft.Edit().strategy = {SchedulingStrategy::Kind::kNodeAffinity, 1, true};
  head_.Handle(0, SubmitTask{hard});
  head_.Handle(0, SubmitTask{soft});
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{3}) << "hard waits for rank 1; soft runs elsewhere";
  EXPECT_EQ(d[0].first, 0);
  Done(1, 1);
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{2});
  EXPECT_EQ(d[0].first, 1) << "once rank 1 is free";
}

TEST_F(HeadManagersTest, RemovingAPlacementGroupFailsItsQueuedTasksAndKillsItsActors) {
  std::string pg = head_.CreatePlacementGroup({"", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  const int bundle_rank = head_.BundleRanks(pg).at(0);
  TaskSpec creation = Creation(70, "", 0.5);
  creation.Edit().placement_group = pg;
  creation.Edit().bundle_index = 0;
  head_.Handle(0, SubmitTask{creation});
  auto d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{70});
  EXPECT_EQ(d[0].first, bundle_rank);
  Done(bundle_rank, 70);
  ASSERT_EQ(Actor(70)->state, "ALIVE");

  TaskSpec running = Spec(71);
  running.Edit().demand = Cpus(0.5);
  running.Edit().placement_group = pg;
  head_.Handle(0, SubmitTask{running});
  TaskSpec queued = Spec(72);
  queued.Edit().placement_group = pg;  // needs 1 CPU: the bundle has none left
  head_.Handle(0, SubmitTask{queued});
  d = Take<DispatchTask>();
  ASSERT_EQ(Ids(d), std::vector<uint64_t>{71});
  EXPECT_EQ(d[0].first, bundle_rank);
  EXPECT_EQ(head_.Available().at("CPU"), 1);

  ASSERT_TRUE(head_.RemovePlacementGroup(pg));
  auto kills = Take<KillActor>();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].first, bundle_rank);
  EXPECT_EQ(kills[0].second.actor, ObjectId(70));
  EXPECT_EQ(Actor(70)->state, "DEAD");
  EXPECT_NE(Actor(70)->death_cause.find("placement group"), std::string::npos);
  auto ready = ReadyFor(72);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, 0);
  EXPECT_TRUE(ready[0].second.failed);
  EXPECT_EQ(ready[0].second.error.kind, ErrorKind::kPlacementGroupRemoved);
  EXPECT_TRUE(Take<DispatchTask>().empty());
  EXPECT_EQ(head_.NumTasks(), 1u) << "the running task 71 finishes normally";
  EXPECT_EQ(head_.Available().at("CPU"), 1.5) << "71 still holds its half CPU, now on its rank";
  Done(bundle_rank, 71);
  EXPECT_EQ(head_.Available().at("CPU"), 2);
  EXPECT_FALSE(ReadyFor(71).at(0).second.failed);

  // Calls to the group's dead actor fail; new tasks in the removed group fail at once.
  head_.Handle(0, SubmitTask{Call(73, 70)});
  ready = ReadyFor(73);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].second.error.kind, ErrorKind::kActorError);
  TaskSpec late = Spec(74);
  late.Edit().placement_group = pg;
  head_.Handle(0, SubmitTask{late});
  ready = ReadyFor(74);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].second.failed);
  EXPECT_TRUE(Take<DispatchTask>().empty());
  EXPECT_EQ(head_.NumTasks(), 0u);
  EXPECT_TRUE(head_.RemovePlacementGroup(pg)) << "removing a removed group again is a no-op (Ray's)";
  EXPECT_EQ(head_.PlacementGroups("", pg).size(), 1u) << "found by id, as removed";
  EXPECT_TRUE(head_.PlacementGroups("", "").empty()) << "not among the live ones";
  EXPECT_FALSE(head_.RemovePlacementGroup("pg-unknown"));
}

TEST_F(HeadManagersTest, RemovingAPendingGroupFailsItsUnplacedActorAndItsWaitingCalls) {
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2)});
  auto busy = Take<DispatchTask>();
  ASSERT_EQ(busy.size(), 2u);
  std::string pg = head_.CreatePlacementGroup({"", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  ASSERT_EQ(head_.PlacementGroupState(pg), PlacementGroupStatus::kPending);
  TaskSpec creation = Creation(80, "", 0.5);
  creation.Edit().placement_group = pg;
  head_.Handle(0, SubmitTask{creation});
  head_.Handle(0, SubmitTask{Call(81, 80)});
  EXPECT_TRUE(Take<DispatchTask>().empty());
  EXPECT_EQ(Actor(80)->state, "PENDING_CREATION");

  ASSERT_TRUE(head_.RemovePlacementGroup(pg));
  EXPECT_TRUE(Take<KillActor>().empty()) << "it never had a rank";
  EXPECT_EQ(Actor(80)->state, "DEAD");
  std::map<uint64_t, ObjectReady> failed;
  for (auto& [dest, r] : Take<ObjectReady>()) failed[r.id.Value()] = std::move(r);
  ASSERT_EQ(failed.count(80), 1u) << "the creation fails";
  ASSERT_EQ(failed.count(81), 1u) << "the waiting call fails";
  EXPECT_TRUE(failed[80].failed);
  EXPECT_TRUE(failed[81].failed);
  EXPECT_EQ(failed[81].error.kind, ErrorKind::kActorError);
  EXPECT_NE(failed[81].error.message.find("placement group"), std::string::npos) << failed[81].error.message;
  EXPECT_EQ(head_.NumTasks(), 2u) << "only the two busy tasks are left";

  Done(busy[0].first, 1);
  Done(busy[1].first, 2);
  EXPECT_TRUE(Take<DispatchTask>().empty()) << "nothing of the group is placed later";
  EXPECT_EQ(head_.Available().at("CPU"), 2);
  EXPECT_EQ(head_.NumTasks(), 0u);
}

TEST_F(HeadManagersTest, RemovingAPendingGroupFailsItsQueuedActorCreationWithActorError) {
  // The actor dies with its group: its queued creation fails as an actor (ActorError),
  // not as a task of a removed group, whatever queue it waited in.
  head_.Handle(0, SubmitTask{Spec(1)});
  head_.Handle(0, SubmitTask{Spec(2)});
  Take<DispatchTask>();
  std::string pg = head_.CreatePlacementGroup({"", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  TaskSpec creation = Creation(80, "", 0.5);
  creation.Edit().placement_group = pg;
  head_.Handle(0, SubmitTask{creation});
  ASSERT_TRUE(head_.RemovePlacementGroup(pg));
  auto ready = ReadyFor(80);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].second.failed);
  // Head::RemovePlacementGroup means to fail an unplaced creation of the group's actors
  // with kActorError ("its placement group ... was removed"), as their calls fail.
  EXPECT_EQ(ready[0].second.error.kind, ErrorKind::kActorError) << ready[0].second.error.message;
}


// ---- CommunicatorTags ----------------------------------------------------------------------

TEST(CommunicatorTagsTest, EveryMemberOfAKeyGetsTheSameTagAndTheEntryEndsWithTheLast) {
  prism::internal::CommunicatorTags tags;
  const int a = tags.Tag("run-1", 3);
  const int b = tags.Tag("run-2", 2);
  EXPECT_NE(a, b) << "groups being created at once get different tags";
  EXPECT_EQ(tags.Tag("run-1", 3), a);
  EXPECT_EQ(tags.Tag("run-2", 2), b);
  EXPECT_EQ(tags.pending(), 1u) << "run-2 has had both its members";
  EXPECT_EQ(tags.Tag("run-1", 3), a);
  EXPECT_EQ(tags.pending(), 0u);
  // A key made again later is a new group.
  EXPECT_GE(tags.Tag("run-1", 1), 0);
  EXPECT_EQ(tags.pending(), 0u);
}

TEST(CommunicatorTagsTest, TagsWrapWithinMpisGuaranteedRangeSkippingThoseInUse) {
  prism::internal::CommunicatorTags tags;
  const int held = tags.Tag("held", 2);  // one member asked; the other has not yet
  for (int i = 0; i < 3 * prism::internal::CommunicatorTags::kMaxTag; ++i) {
    const int t = tags.Tag("k" + std::to_string(i), 1);
    ASSERT_GE(t, 0);
    ASSERT_LE(t, prism::internal::CommunicatorTags::kMaxTag);
    ASSERT_NE(t, held) << "a tag still being used is not handed out again";
  }
  EXPECT_EQ(tags.Tag("held", 2), held);
}

TEST(CommunicatorTagsTest, BadRequestsAreErrors) {
  prism::internal::CommunicatorTags tags;
  EXPECT_THROW(tags.Tag("", 2), prism::Error);
  EXPECT_THROW(tags.Tag("g", 0), prism::Error);
  tags.Tag("g", 3);
  try {
    tags.Tag("g", 2);
    ADD_FAILURE() << "no error";
  } catch (const prism::Error& e) {
    EXPECT_NE(std::string(e.what()).find("same ranks"), std::string::npos) << e.what();
  }
}

// ---- Memory given back after a burst (head/memory_return.h) ------------------------------

TEST(MemoryReturnTest, ShrinkIfSparseGivesBucketsBackOnlyToALargeDrainedMap) {
  std::unordered_map<uint64_t, int> map;
  for (uint64_t i = 0; i < 100000; ++i) map[i] = 1;
  const size_t full = map.bucket_count();
  ASSERT_GE(full, 100000u);
  for (uint64_t i = 0; i < 100000; ++i) {
    map.erase(i);
    ShrinkIfSparse(map);
  }
  EXPECT_LE(map.bucket_count(), kMinShrinkBuckets);
  // A small map is never rehashed, however empty.
  std::unordered_map<uint64_t, int> small;
  for (uint64_t i = 0; i < 1000; ++i) small[i] = 1;
  const size_t small_buckets = small.bucket_count();
  small.clear();
  ShrinkIfSparse(small);
  EXPECT_EQ(small.bucket_count(), small_buckets);
}

TEST(MemoryReturnTest, DrainWatchFiresOnceAtTheDrainOfABurstAndOnceAtItsTail) {
  DrainWatch watch;
  int fired = 0;
  for (size_t live = 0; live <= 200000; live += 100) fired += watch.Drained(live);
  EXPECT_EQ(fired, 0);  // growing
  size_t first = 0;
  for (size_t live = 200000; live + 1 > 0 && fired == 0; live -= 100) {
    if (watch.Drained(live)) {
      ++fired;
      first = live;
    }
  }
  EXPECT_EQ(first, 200000u / 64 / 100 * 100);  // the first count at or under 1/64 of the peak
  for (size_t live = first; live + 1 > 0; live -= 1) {
    fired += watch.Drained(live);
    if (live == 0) break;
  }
  EXPECT_EQ(fired, 2);  // and once for the tail, then never again
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(watch.Drained(0));
}

TEST(MemoryReturnTest, DrainWatchIgnoresBurstsSmallerThanKBurst) {
  DrainWatch watch;
  int fired = 0;
  for (int round = 0; round < 3; ++round) {
    for (size_t live = 0; live < DrainWatch::kBurst; live += 64) fired += watch.Drained(live);
    for (size_t live = DrainWatch::kBurst - 64; live > 0; live -= 64) fired += watch.Drained(live);
    fired += watch.Drained(0);
  }
  EXPECT_EQ(fired, 0);
}

}  // namespace
}  // namespace prism::internal
