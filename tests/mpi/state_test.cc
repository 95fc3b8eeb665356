// The GCS seen from every rank: internal KV, the state API and placement groups managed
// from inside tasks on other ranks.
#include <gtest/gtest.h>

#include "test_util.h"

using prism_test::On;
using prism_test::World;

namespace {

bool KvPutFromTask(std::string key, std::string value) { return prism::kv::Put(key, value); }
std::string KvGetFromTask(std::string key) { return prism::kv::Get(key).value_or("<none>"); }
std::vector<std::string> KvListFromTask(std::string prefix) { return prism::kv::List(prefix); }
int Noop(int x) { return x; }
int Fail(int) { throw std::runtime_error("state test failure"); }
int SlowTask(int ms) {
  prism_test::SleepMs(ms);
  return ms;
}
size_t NodesSeenFromTask() { return prism::state::ListNodes().size(); }
std::string PlacementGroupFromTask(std::string name) {
  auto pg = prism::CreatePlacementGroup({name, {{{"CPU", 1}}}, prism::PlacementStrategy::PACK});
  if (!pg.Wait(10)) return "not ready";
  std::string id = pg.GetID();
  if (prism::GetPlacementGroup(name).GetID() != id) return "lookup failed";
  prism::RemovePlacementGroup(id);
  return id;
}
PRISM_REMOTE(KvPutFromTask, KvGetFromTask, KvListFromTask, Noop, Fail, SlowTask,
             NodesSeenFromTask, PlacementGroupFromTask);

class Tagged {
 public:
  static Tagged* FactoryCreate() { return new Tagged(); }
  int Ping() { return 1; }
};
PRISM_REMOTE(Tagged::FactoryCreate, &Tagged::Ping);

TEST(Kv, WritesOnOneRankAreSeenOnEvery) {
  const int last = World() - 1;
  EXPECT_FALSE(*On(last, KvPutFromTask).Remote(std::string("t/a"), std::string("from-last")).Get());
  EXPECT_EQ(prism::kv::Get("t/a"), "from-last");
  prism::kv::Put("t/b", std::string("bin\0ary", 7));
  for (int r = 0; r < World(); ++r) {
    EXPECT_EQ(*On(r, KvGetFromTask).Remote(std::string("t/b")).Get(), std::string("bin\0ary", 7));
    EXPECT_EQ(*On(r, KvListFromTask).Remote(std::string("t/")).Get(),
              (std::vector<std::string>{"t/a", "t/b"}));
  }
  EXPECT_TRUE(prism::kv::Put("t/a", "keep?", /*overwrite=*/false));
  EXPECT_EQ(prism::kv::Get("t/a"), "from-last");
  EXPECT_TRUE(prism::kv::Exists("t/b"));
  EXPECT_EQ(prism::kv::Delete("t/", /*by_prefix=*/true), 2);
  EXPECT_FALSE(prism::kv::Exists("t/b"));
  EXPECT_EQ(*On(last, KvGetFromTask).Remote(std::string("t/b")).Get(), "<none>");
  EXPECT_THROW(prism::kv::Put("", "x"), prism::Error);
}

TEST(State, NodesWorkersAndJob) {
  auto nodes = prism::state::ListNodes();
  ASSERT_EQ(static_cast<int>(nodes.size()), World());
  for (int r = 0; r < World(); ++r) {
    EXPECT_EQ(nodes[r].rank, r);
    EXPECT_EQ(nodes[r].state, "ALIVE");
    EXPECT_EQ(nodes[r].resources_total.at("CPU"), 2);
    EXPECT_FALSE(nodes[r].host.empty());
  }
  EXPECT_EQ(*On(World() - 1, NodesSeenFromTask).Remote().Get(), nodes.size());
  auto workers = prism::state::ListWorkers();
  ASSERT_EQ(static_cast<int>(workers.size()), World());
  EXPECT_EQ(workers[0].worker_type, "DRIVER");
  EXPECT_EQ(workers[0].pid, static_cast<int>(getpid()));
  for (const auto& w : workers) EXPECT_GT(w.pid, 0);
  auto jobs = prism::state::ListJobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job_id, prism::GetRuntimeContext().GetJobId());
  EXPECT_EQ(jobs[0].num_ranks, World());
  EXPECT_NE(jobs[0].entrypoint.find("prism_state_tests"), std::string::npos) << jobs[0].entrypoint;
}

TEST(State, TasksSummaryAndErrors) {
  auto before = prism::state::SummarizeTasks();
  uint64_t noop_before = 0;
  if (before.summary.count("Noop")) noop_before = before.summary.at("Noop").state_counts["FINISHED"];
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 50; ++i) refs.push_back(prism::Task(Noop).Remote(i));
  prism::Get(refs);
  auto failed = prism::Task(Fail).SetName("will_fail").Remote(1);
  EXPECT_THROW(failed.Get(), prism::TaskError);
  auto slow = prism::Task(SlowTask).Remote(1500);
  prism_test::SleepMs(200);

  auto summary = prism::state::SummarizeTasks();
  EXPECT_EQ(summary.summary.at("Noop").state_counts.at("FINISHED"), noop_before + 50);
  EXPECT_EQ(summary.summary.at("Noop").type, "NORMAL_TASK");
  EXPECT_GE(summary.summary.at("Fail").state_counts.at("FAILED"), 1u);
  EXPECT_EQ(summary.summary.at("SlowTask").state_counts.at("SUBMITTED_TO_WORKER"), 1u);

  prism::state::TaskFilter f;
  f.name = "will_fail";
  auto tasks = prism::state::ListTasks(f);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].state, "FAILED");
  EXPECT_EQ(tasks[0].func_name, "Fail");
  EXPECT_EQ(tasks[0].error_type, "std::runtime_error");
  EXPECT_NE(tasks[0].error_message.find("state test failure"), std::string::npos);
  EXPECT_GE(tasks[0].rank, 0);
  ASSERT_GE(tasks[0].events.size(), 3u);
  EXPECT_EQ(tasks[0].events.front().state, "PENDING_ARGS_AVAIL");
  EXPECT_EQ(tasks[0].events.back().state, "FAILED");
  EXPECT_GE(tasks[0].events.back().time_ns, tasks[0].events.front().time_ns);

  prism::state::TaskFilter running;
  running.func_name = "SlowTask";
  running.state = "SUBMITTED_TO_WORKER";
  EXPECT_EQ(prism::state::ListTasks(running).size(), 1u);
  EXPECT_EQ(*slow.Get(), 1500);

  prism::state::TaskFilter limited;
  limited.func_name = "Noop";
  limited.limit = 5;
  EXPECT_EQ(prism::state::ListTasks(limited).size(), 5u);

  auto errors = prism::state::ListErrors();
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.back().type, "TASK_FAILED");
  EXPECT_NE(errors.back().message.find("state test failure"), std::string::npos);
}

TEST(State, ActorsAndPlacementGroups) {
  auto actor = prism::Actor(Tagged::FactoryCreate).SetName("state-tagged").Remote();
  EXPECT_EQ(*actor.Task(&Tagged::Ping).Remote().Get(), 1);
  bool found = false;
  for (const auto& a : prism::state::ListActors()) {
    if (a.name != "state-tagged") continue;
    found = true;
    EXPECT_EQ(a.state, "ALIVE");
    EXPECT_GE(a.rank, 0);
  }
  EXPECT_TRUE(found);
  actor.Kill();
  EXPECT_TRUE(prism_test::PollUntil([] {  // Kill is asynchronous
    for (const auto& a : prism::state::ListActors()) {
      if (a.name == "state-tagged" && a.state == "DEAD" &&
          a.death_cause.find("Kill") != std::string::npos) {
        return true;
      }
    }
    return false;
  }));
  auto pg = prism::CreatePlacementGroup({"state-pg", {{{"CPU", 1}}, {{"CPU", 1}}},
                                         prism::PlacementStrategy::SPREAD});
  ASSERT_TRUE(pg.Wait(10));
  auto groups = prism::state::ListPlacementGroups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].name, "state-pg");
  EXPECT_EQ(groups[0].state, "CREATED");
  EXPECT_EQ(groups[0].bundle_ranks.size(), 2u);
  prism::RemovePlacementGroup(pg.GetID());
  EXPECT_TRUE(prism::state::ListPlacementGroups().empty());
}

TEST(State, PlacementGroupsAndResourcesFromAnotherRank) {
  std::string id = *On(World() - 1, PlacementGroupFromTask).Remote(std::string("from-task")).Get();
  EXPECT_EQ(id.rfind("pg-", 0), 0u) << id;
  EXPECT_TRUE(prism::GetPlacementGroup("from-task").Empty());  // removed by the task
  EXPECT_GT(prism::AvailableResources().at("CPU"), 0);
}

}  // namespace
