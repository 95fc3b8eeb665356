// GCS tables on their own (KV, task table) and through the head: HeadCall answers, task
// states with timestamps, the bounded task table, actor and error tables.
#include <gtest/gtest.h>

#include <functional>

#include "head/kv_store.h"
#include "head/task_table.h"
#include "prism/errors.h"
#include "prism/kv.h"
#include "prism/serialization.h"
#include "head_fixture.h"

namespace prism::internal {
namespace {

// ---- KvStore ----------------------------------------------------------------------------

TEST(KvStore, PutGetOverwriteAndExists) {
  KvStore kv;
  EXPECT_FALSE(kv.Put("a", "1", true));
  EXPECT_TRUE(kv.Put("a", "2", false));  // kept
  EXPECT_EQ(kv.Get("a"), "1");
  EXPECT_TRUE(kv.Put("a", "3", true));
  EXPECT_EQ(kv.Get("a"), "3");
  EXPECT_TRUE(kv.Exists("a"));
  EXPECT_FALSE(kv.Exists("b"));
  EXPECT_EQ(kv.Get("b"), std::nullopt);
  std::string binary("x\0y", 3);
  kv.Put("bin", binary, true);
  EXPECT_EQ(kv.Get("bin")->size(), 3u);
}

TEST(KvStore, PrefixListAndDeleteCountBytes) {
  KvStore kv;
  for (const char* k : {"job/a", "job/b", "job/c", "jobx", "other"}) kv.Put(k, "v", true);
  EXPECT_EQ(kv.Keys("job/"), (std::vector<std::string>{"job/a", "job/b", "job/c"}));
  EXPECT_EQ(kv.Keys("").size(), 5u);
  EXPECT_EQ(kv.Delete("job/", true), 3);
  EXPECT_EQ(kv.Keys(""), (std::vector<std::string>{"jobx", "other"}));
  EXPECT_EQ(kv.Delete("missing", false), 0);
  EXPECT_EQ(kv.Delete("jobx", false), 1);
  EXPECT_EQ(kv.Bytes(), std::string("other").size() + 1);
  std::string high("\xff\xff", 2);
  kv.Put(high + "a", "v", true);
  EXPECT_EQ(kv.Delete(high, true), 1);  // a prefix of 0xff bytes still has an end
}

TEST(KvStore, BadInputIsAClearError) {
  KvStore kv;
  EXPECT_THROW(kv.Put("", "v", true), Error);
  EXPECT_THROW(kv.Delete("", false), Error);
  try {
    kv.Put("big", std::string(kv::kMaxValueBytes + 1, 'x'), true);
    FAIL() << "no error for an oversized value";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prism::Put"), std::string::npos) << e.what();
  }
}

TEST(KvStore, KeysAboveTheLimitAreAClearErrorInEveryCall) {
  KvStore kv;
  const std::string longest(kv::kMaxKeyBytes, 'k');
  EXPECT_FALSE(kv.Put(longest, "v", true));  // at the limit: fine
  EXPECT_EQ(kv.Get(longest), "v");
  const std::string too_long(kv::kMaxKeyBytes + 1, 'k');
  const std::string size = std::to_string(kv::kMaxKeyBytes + 1);
  const std::string limit = std::to_string(kv::kMaxKeyBytes);
  auto expect_refused = [&](const char* call, auto&& run) {
    try {
      run();
      ADD_FAILURE() << call << " took a key of " << size << " bytes";
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find(call), std::string::npos) << what;
      EXPECT_NE(what.find(size + " bytes"), std::string::npos) << what;
      EXPECT_NE(what.find(limit), std::string::npos) << what;
      EXPECT_LT(what.size(), 400u) << "the message quotes the whole key";
    }
  };
  expect_refused("kv::Put", [&] { kv.Put(too_long, "v", true); });
  expect_refused("kv::Get", [&] { kv.Get(too_long); });
  expect_refused("kv::Exists", [&] { kv.Exists(too_long); });
  expect_refused("kv::Delete", [&] { kv.Delete(too_long, false); });
  expect_refused("kv::Delete", [&] { kv.Delete(too_long, true); });
  expect_refused("kv::List", [&] { kv.Keys(too_long); });
  EXPECT_EQ(kv.Size(), 1u);
  EXPECT_EQ(kv.Bytes(), kv::kMaxKeyBytes + 1);
}

TEST(KvApi, OversizedKeysAreRefusedOnTheCallersRankBeforeTheyTravel) {
  // No runtime here: a call that got as far as the head would fail with "not initialized".
  // The reported case: a 100 MiB key was taken.
  const std::string huge(100 << 20, 'k');
  for (auto run : std::vector<std::function<void()>>{
           [&] { kv::Put(huge, "v"); }, [&] { kv::Get(huge); }, [&] { kv::Exists(huge); },
           [&] { kv::Delete(huge); }, [&] { kv::Delete(huge, true); }, [&] { kv::List(huge); }}) {
    try {
      run();
      ADD_FAILURE() << "a 100 MiB key was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("kMaxKeyBytes"), std::string::npos) << e.what();
    }
  }
}

// ---- TaskTable --------------------------------------------------------------------------

TaskRecord Ended(TaskTable& table, uint64_t id, const std::string& fn, bool ok, int64_t t0) {
  TaskRecord r;
  r.id = ObjectId(id);
  r.function = table.Intern(fn);
  r.phase = ok ? TaskPhase::kFinished : TaskPhase::kFailed;
  r.times[static_cast<size_t>(TaskPhase::kPendingArgs)] = t0;
  r.times[static_cast<size_t>(r.phase)] = t0 + 10;
  r.rank = static_cast<int>(id % 3);
  return r;
}

TEST(TaskTable, KeepsTheMostRecentRecordsButCountsEveryTask) {
  TaskTable table(100);
  for (uint64_t i = 1; i <= 100000; ++i) table.Ended(Ended(table, i, i % 10 ? "f" : "g", i % 7 != 0, i));
  EXPECT_EQ(table.NumRecords(), 100u);
  state::TaskFilter all;
  all.limit = 1000;
  auto listed = table.List(all, {});
  ASSERT_EQ(listed.size(), 100u);
  EXPECT_EQ(listed.back().task_id, ObjectId(100000).Hex());  // newest kept, oldest first
  EXPECT_EQ(listed.front().task_id, ObjectId(99901).Hex());
  auto summary = table.Summarize({});
  EXPECT_EQ(summary.total_tasks, 100000u);
  uint64_t failed = 0, finished = 0;
  for (const auto& [fn, e] : summary.summary) {
    auto f = e.state_counts.find("FAILED");
    auto d = e.state_counts.find("FINISHED");
    failed += f == e.state_counts.end() ? 0 : f->second;
    finished += d == e.state_counts.end() ? 0 : d->second;
  }
  EXPECT_EQ(failed, 100000u / 7);
  EXPECT_EQ(finished, 100000u - 100000u / 7);
}

TEST(TaskTable, FiltersLimitAndMergesLiveTasks) {
  TaskTable table(1000);
  for (uint64_t i = 1; i <= 20; ++i) table.Ended(Ended(table, i, "f", i % 2 == 0, static_cast<int64_t>(i)));
  TaskRecord live;
  live.id = ObjectId(99);
  live.function = table.Intern("h");
  live.phase = TaskPhase::kSubmitted;
  live.rank = 2;
  live.times[0] = 1000;
  state::TaskFilter failed;
  failed.state = "FAILED";
  EXPECT_EQ(table.List(failed, {live}).size(), 10u);
  failed.limit = 3;
  auto last3 = table.List(failed, {live});
  ASSERT_EQ(last3.size(), 3u);
  EXPECT_EQ(last3.back().task_id, ObjectId(19).Hex());
  state::TaskFilter by_fn;
  by_fn.func_name = "h";
  auto h = table.List(by_fn, {live});
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].state, "SUBMITTED_TO_WORKER");
  EXPECT_EQ(h[0].rank, 2);
  state::TaskFilter on_rank;
  on_rank.rank = 0;
  on_rank.limit = 100;
  for (const auto& t : table.List(on_rank, {live})) EXPECT_EQ(t.rank, 0);
  auto summary = table.Summarize({live});
  EXPECT_EQ(summary.summary.at("h").state_counts.at("SUBMITTED_TO_WORKER"), 1u);
  EXPECT_EQ(summary.total_tasks, 21u);
}

TEST(TaskTable, ZeroCapacityKeepsOnlyCounts) {
  TaskTable table(0);
  table.Ended(Ended(table, 1, "f", true, 1));
  EXPECT_EQ(table.NumRecords(), 0u);
  EXPECT_EQ(table.Summarize({}).summary.at("f").state_counts.at("FINISHED"), 1u);
}

// ---- Through the head -------------------------------------------------------------------

class HeadStateTest : public HeadFixture {
 protected:
  /// Sends a HeadCall (op and raw arguments) from `from`; returns the head's reply to it.
  template <typename A>
  HeadReply Send(int from, HeadOp op, const A& args) {
    sent_.clear();
    HeadCall call;
    call.request = ++request_;
    call.op = static_cast<uint16_t>(op);
    call.args = std::make_shared<const Buffer>(Serialize(args));
    head_.Handle(from, std::move(call));
    for (auto& s : sent_) {
      if (auto* r = std::get_if<HeadReply>(&s.msg)) {
        EXPECT_EQ(s.dest, from);
        EXPECT_EQ(r->request, request_);
        return std::move(*r);
      }
    }
    ADD_FAILURE() << "no HeadReply";
    return {};
  }
  /// A typed call (common/head_calls.h), as a node makes it.
  template <class C>
  HeadReply Call(int from, const typename C::Args& args) {
    return Send(from, C::kOp, args);
  }
  template <class C>
  typename C::Result CallOk(int from, const typename C::Args& args) {
    HeadReply r = Call<C>(from, args);
    EXPECT_TRUE(r.ok) << r.error;
    return DecodeResult<C>(r.result);
  }

  uint64_t request_ = 0;
};

TEST_F(HeadStateTest, KvCallsAnswerTheCallingRank) {
  EXPECT_FALSE((CallOk<KvPut>(1, {"k", "v", true})));
  EXPECT_EQ((CallOk<KvGet>(0, "k")), "v");
  EXPECT_TRUE((CallOk<KvExists>(1, "k")));
  EXPECT_EQ((CallOk<KvList>(1, "")).size(), 1u);
  EXPECT_EQ((CallOk<KvDelete>(1, {"k", false})), 1);
  HeadReply bad = Call<KvPut>(1, {"", "v", true});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("key is empty"), std::string::npos) << bad.error;
}

TEST_F(HeadStateTest, UnknownOrCorruptCallsGetAnErrorReplyNotSilence) {
  HeadCall call;
  call.request = 7;
  call.op = 999;
  head_.Handle(1, std::move(call));
  ASSERT_FALSE(sent_.empty());
  auto* r = std::get_if<HeadReply>(&sent_.back().msg);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->ok);
  HeadReply corrupt = Send(1, HeadOp::kListTasks, std::string("not a filter"));
  EXPECT_FALSE(corrupt.ok);
}

TEST_F(HeadStateTest, TasksMoveThroughStatesWithTimestamps) {
  TaskSpecArg arg;
  arg.is_ref = true;
  arg.ref = ObjectId(1);
  head_.Handle(0, SubmitTask{Spec(1)});        // runs on rank 0
  head_.Handle(0, SubmitTask{Spec(2, {arg})});  // waits for 1
  state::TaskFilter all;
  auto tasks = head_.ListTasks(all);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].state, "SUBMITTED_TO_WORKER");
  EXPECT_EQ(tasks[1].state, "PENDING_ARGS_AVAIL");
  Done(0, 1);
  Done(tasks[1].rank >= 0 ? tasks[1].rank : 0, 2, /*ok=*/false);
  tasks = head_.ListTasks(all);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].state, "FINISHED");
  EXPECT_EQ(tasks[1].state, "FAILED");
  EXPECT_EQ(tasks[1].error_type, "std::runtime_error");
  std::vector<std::string> seen;
  int64_t last = 0;
  for (const auto& e : tasks[0].events) {
    seen.push_back(e.state);
    EXPECT_GE(e.time_ns, last);
    last = e.time_ns;
  }
  EXPECT_EQ(seen.front(), "PENDING_ARGS_AVAIL");
  EXPECT_EQ(seen.back(), "FINISHED");
  EXPECT_NE(std::find(seen.begin(), seen.end(), "SUBMITTED_TO_WORKER"), seen.end());
  auto summary = head_.SummarizeTasks();
  EXPECT_EQ(summary.summary.at("f").state_counts.at("FINISHED"), 1u);
  EXPECT_EQ(summary.summary.at("f").state_counts.at("FAILED"), 1u);
  auto errors = head_.ListErrors(10);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].type, "TASK_FAILED");
  EXPECT_NE(errors[0].message.find("boom"), std::string::npos);
  auto workers = head_.ListWorkers();
  EXPECT_EQ(workers[0].num_tasks_finished + workers[1].num_tasks_finished, 2u);
}

TEST_F(HeadStateTest, TaskTableStaysBoundedAndCountsStayExact) {
  JobInfo job;
  job.task_table_size = 10;
  head_.SetJobInfo(job);
  for (uint64_t i = 1; i <= 1000; ++i) {
    head_.Handle(0, SubmitTask{Spec(i)});
    Done(0, i);
  }
  state::TaskFilter all;
  all.limit = 100000;
  EXPECT_EQ(head_.ListTasks(all).size(), 10u);
  EXPECT_EQ(head_.SummarizeTasks().total_tasks, 1000u);
  EXPECT_EQ(head_.NumTasks(), 0u);
}

TEST_F(HeadStateTest, NodesActorsAndGroupsAreListed) {
  auto nodes = head_.ListNodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_TRUE(nodes[0].is_head);
  EXPECT_EQ(nodes[1].resources_total.at("CPU"), 1);
  TaskSpec creation = Spec(50);
  creation.kind = TaskKind::kActorCreation;
  creation.Edit().class_name = "Counter";
  creation.Edit().actor_name = "counter";
  creation.Edit().max_restarts = 1;
  head_.Handle(0, SubmitTask{std::move(creation)});
  auto actors = head_.ListActors();
  ASSERT_EQ(actors.size(), 1u);
  EXPECT_EQ(actors[0].name, "counter");
  EXPECT_EQ(actors[0].class_name, "Counter");
  EXPECT_EQ(actors[0].state, "PENDING_CREATION");
  Done(actors[0].rank, 50);
  EXPECT_EQ(head_.ListActors()[0].state, "ALIVE");
  head_.Handle(0, KillActorRequest{ObjectId(50), /*no_restart=*/false});
  EXPECT_EQ(head_.ListActors()[0].state, "RESTARTING");
  Done(head_.ListActors()[0].rank, 50);
  EXPECT_EQ(head_.ListActors()[0].state, "ALIVE");
  EXPECT_EQ(head_.ListActors()[0].num_restarts, 1);
  head_.Handle(0, KillActorRequest{ObjectId(50), /*no_restart=*/true});
  actors = head_.ListActors();
  EXPECT_EQ(actors[0].state, "DEAD");
  EXPECT_NE(actors[0].death_cause.find("Kill"), std::string::npos);
  EXPECT_EQ(head_.ListErrors(10).back().type, "ACTOR_DIED");

  std::string pg = head_.CreatePlacementGroup({"g", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  auto groups = head_.ListPlacementGroups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].placement_group_id, pg);
  EXPECT_EQ(groups[0].strategy, "PACK");
  EXPECT_EQ(groups[0].state, "CREATED");
  ASSERT_EQ(groups[0].bundle_ranks.size(), 1u);
}

TEST_F(HeadStateTest, PlacementGroupCallsWorkFromAnyRank) {
  PlacementGroup asked("", {"remote", {{{"CPU", 1}}}, PlacementStrategy::SPREAD});
  auto id = CallOk<CreateGroup>(1, asked);
  EXPECT_EQ(CallOk<GroupStatus>(1, id), PlacementGroupStatus::kCreated);
  auto found = CallOk<GetGroups>(1, {"remote", ""});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].GetID(), id);
  HeadReply infeasible = Call<CreateGroup>(1, PlacementGroup("", {"", {{{"CPU", 5}}}, PlacementStrategy::PACK}));
  EXPECT_FALSE(infeasible.ok);
  EXPECT_EQ(infeasible.error_kind, ErrorKind::kResourceError);
  EXPECT_TRUE(CallOk<RemoveGroup>(1, id));
  EXPECT_EQ(CallOk<GroupStatus>(1, id), PlacementGroupStatus::kUnknown);
}

}  // namespace
}  // namespace prism::internal

namespace prism::internal {
namespace {

TEST_F(HeadStateTest, RemovingAGroupKillsItsActorsAndFreesEverything) {
  std::string pg = head_.CreatePlacementGroup({"", {{{"CPU", 1}}}, PlacementStrategy::PACK});
  TaskSpec creation = Spec(70);
  creation.kind = TaskKind::kActorCreation;
  creation.Edit().class_name = "InGroup";
  creation.Edit().placement_group = pg;
  creation.Edit().bundle_index = 0;
  head_.Handle(0, SubmitTask{std::move(creation)});
  auto placed = Take<DispatchTask>();
  ASSERT_EQ(placed.size(), 1u);
  Done(placed[0].first, 70);
  EXPECT_EQ(head_.ListActors()[0].state, "ALIVE");
  EXPECT_EQ(head_.Available().at("CPU"), 1);  // one CPU reserved by the group

  EXPECT_TRUE(head_.RemovePlacementGroup(pg));
  auto actors = head_.ListActors();
  EXPECT_EQ(actors[0].state, "DEAD");
  EXPECT_NE(actors[0].death_cause.find("placement group"), std::string::npos);
  auto kills = Take<KillActor>();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].first, placed[0].first);
  EXPECT_EQ(head_.Available().at("CPU"), 2);  // nothing held twice, nothing leaked
}

}  // namespace
}  // namespace prism::internal

namespace prism::internal {
namespace {

TEST(FanOut, ReadersSpreadOverCopiesAndWaitersGetTheNextFreeCopy) {
  std::vector<std::pair<int, Message>> sent;
  std::vector<ResourceSet> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(ResourceSet({{"CPU", 1}}));
  Head head(ranks, [&](int dest, Message&& m) { sent.emplace_back(dest, std::move(m)); });
  PutObject put;
  put.id = ObjectId(9);
  put.size = 64 << 20;  // large: stays on rank 0
  head.Handle(0, std::move(put));
  head.Handle(0, RefUpdate{{ObjectId(9)}, {}});
  auto source_of = [&](int reader) {
    for (auto it = sent.rbegin(); it != sent.rend(); ++it) {
      auto* r = std::get_if<ObjectReady>(&it->second);
      if (it->first == reader && r != nullptr && r->id == ObjectId(9)) {
        return r->holders.size() == 1 ? r->holders[0] : -2;
      }
    }
    return -1;  // not told yet
  };
  for (int r : {1, 2, 3}) head.Handle(r, Subscribe{{ObjectId(9)}});
  EXPECT_EQ(source_of(1), 0);
  EXPECT_EQ(source_of(2), 0);
  EXPECT_EQ(source_of(3), -1);  // rank 0 already serves two readers
  head.Handle(1, AddLocation{ObjectId(9), true});  // rank 1 has a copy now
  EXPECT_EQ(source_of(3), 1);   // the new copy serves the waiting reader
  head.Handle(2, AddLocation{ObjectId(9), false});  // a failed pull frees its slot too
  head.Handle(3, AddLocation{ObjectId(9), true});
  sent.clear();
  head.Handle(2, Subscribe{{ObjectId(9)}});  // tries again
  EXPECT_GE(source_of(2), 0);
  EXPECT_NE(source_of(2), 2);
}

}  // namespace
}  // namespace prism::internal
