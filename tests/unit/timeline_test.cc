// prism::Timeline: the row layout on made-up tasks (pure), then a trace of a real run on
// an in-process cluster of 3 ranks, parsed back.
#include "runtime/timeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "prism/api.h"
#include "prism/platform/in_process.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

prism::state::TaskState Ended(const std::string& name, int rank, int64_t start_us, int64_t end_us,
                              const std::string& actor = "", const std::string& type = "NORMAL_TASK") {
  prism::state::TaskState t;
  t.task_id = name;
  t.name = t.func_name = name;
  t.type = type;
  t.state = "FINISHED";
  t.rank = rank;
  t.actor_id = actor;
  t.events = {{"PENDING_NODE_ASSIGNMENT", start_us * 1000 - 5000},
              {"RUNNING", start_us * 1000},
              {"FINISHED", end_us * 1000}};
  return t;
}

std::map<std::string, json> SlicesByName(const json& trace) {
  std::map<std::string, json> out;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") out[e.at("name").get<std::string>()] = e;
  }
  return out;
}

bool Inside(const json& inner, const json& outer) {
  const double is = inner.at("ts"), ie = is + inner.at("dur").get<double>();
  const double os = outer.at("ts"), oe = os + outer.at("dur").get<double>();
  // Times are microseconds with nanosecond fractions: allow a nanosecond for rounding.
  return is >= os - 1e-3 && ie <= oe + 1e-3;
}

TEST(Timeline, NestedTasksShareARowAndOverlappingOnesGetTheirOwn) {
  std::vector<prism::state::TaskState> tasks = {
      Ended("parent", 1, 100, 500), Ended("child", 1, 200, 300),  // inside parent
      Ended("other", 1, 250, 600),                                // overlaps both: a new row
      Ended("later", 1, 700, 800),                                // after all: row 1 again
      Ended("elsewhere", 2, 100, 200)};
  prism::state::TaskState running = Ended("running", 1, 100, 200);
  running.events.pop_back();  // no end yet: left out
  tasks.push_back(running);
  json trace = prism::internal::TimelineTrace(tasks, {}, {{.rank = 1, .host = "h1"}}, 0);
  auto s = SlicesByName(trace);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s["parent"]["tid"], s["child"]["tid"]);
  EXPECT_NE(s["other"]["tid"], s["parent"]["tid"]);
  EXPECT_EQ(s["later"]["tid"], s["parent"]["tid"]);
  EXPECT_EQ(s["elsewhere"]["pid"], 2);
  EXPECT_EQ(s["parent"]["pid"], 1);
  EXPECT_DOUBLE_EQ(s["parent"]["ts"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(s["parent"]["dur"].get<double>(), 400.0);
  EXPECT_DOUBLE_EQ(s["parent"]["args"]["queued_us"].get<double>(), 5.0);
  bool named = false;
  for (const auto& e : trace["traceEvents"]) {
    named |= e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "rank 1 (h1)";
  }
  EXPECT_TRUE(named);
}

TEST(Timeline, AnActorsCallsNestInsideItsLifetimeOnItsOwnRows) {
  const std::string id = "00000000000000aa";
  std::vector<prism::state::TaskState> tasks = {
      Ended("Make", 2, 100, 150, id, "ACTOR_CREATION_TASK"), Ended("Add", 2, 200, 300, id, "ACTOR_TASK"),
      Ended("Add2", 2, 250, 400, id, "ACTOR_TASK"),  // concurrent call: a second row
      Ended("task", 2, 120, 130)};
  prism::state::ActorState actor;
  actor.actor_id = id;
  actor.class_name = "Counter";
  actor.state = "ALIVE";
  json trace = prism::internal::TimelineTrace(tasks, {actor}, {}, 0);
  auto s = SlicesByName(trace);
  ASSERT_TRUE(s.count("actor Counter 00000000000000aa"));
  const json& life = s["actor Counter 00000000000000aa"];
  EXPECT_DOUBLE_EQ(life["ts"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(life["dur"].get<double>(), 300.0);
  EXPECT_GE(life["tid"].get<int>(), prism::internal::kTimelineActorTid);
  for (const char* call : {"Make", "Add", "Add2"}) {
    EXPECT_TRUE(Inside(s[call], life)) << call;
    EXPECT_EQ(s[call]["pid"], 2);
  }
  EXPECT_EQ(s["Make"]["tid"], life["tid"]);
  EXPECT_EQ(s["Add"]["tid"], life["tid"]);
  EXPECT_NE(s["Add2"]["tid"], life["tid"]);
  EXPECT_LT(s["task"]["tid"].get<int>(), prism::internal::kTimelineActorTid);
}

// ---- A real run ---------------------------------------------------------------------------

int TlineLeaf(int x) {
  std::this_thread::sleep_for(20ms);
  return x + 1;
}
int TlineParent(int x) {
  std::this_thread::sleep_for(20ms);
  int y = *prism::Task(TlineLeaf).SetName("tl_child").Remote(x).Get();
  std::this_thread::sleep_for(20ms);
  return y;
}
class TlineCounter {
 public:
  static TlineCounter* Create() { return new TlineCounter; }
  int Add(int x) { return total += x; }
  int total = 0;
};
PRISM_REMOTE(TlineLeaf, TlineParent, TlineCounter::Create, &TlineCounter::Add);

TEST(Timeline, ATraceOfThreeRanksParsesWithEveryTaskAndChildrenInsideParents) {
  prism::platform::InProcessCluster cluster({.num_ranks = 3, .num_cpus = 2});
  std::vector<prism::ObjectRef<int>> refs;
  for (int r = 0; r < 3; ++r) {
    refs.push_back(prism::Task(TlineParent).SetName("tl_parent_" + std::to_string(r))
                       .SetResource("rank:" + std::to_string(r), 0.01).Remote(r));
  }
  auto counter = prism::Actor(TlineCounter::Create).SetResource("rank:2", 0.01).Remote();
  for (int i = 0; i < 3; ++i) refs.push_back(counter.Task(&TlineCounter::Add).Remote(i));
  prism::Get(refs);

  const std::string path = ::testing::TempDir() + "/prism_timeline_test.json";
  std::string text = prism::Timeline(path);
  std::ifstream in(path);
  json trace = json::parse(in);  // throws if the file is not JSON
  EXPECT_EQ(trace, json::parse(text));
  std::remove(path.c_str());

  std::map<std::string, std::vector<json>> by_name;
  std::set<int> pids;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    by_name[e.at("name")].push_back(e);
    pids.insert(e.at("pid").get<int>());
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    EXPECT_GE(e.at("ts").get<double>(), 0.0);
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1, 2}));
  for (int r = 0; r < 3; ++r) {
    auto& parent = by_name["tl_parent_" + std::to_string(r)];
    ASSERT_EQ(parent.size(), 1u);
    EXPECT_EQ(parent[0]["pid"], r);
    EXPECT_GE(parent[0]["dur"].get<double>(), 40000.0);  // two 20 ms sleeps
  }
  ASSERT_EQ(by_name["tl_child"].size(), 3u);
  // Each child ran while one parent waited for it: inside that parent's span.
  for (const auto& child : by_name["tl_child"]) {
    int inside = 0;
    for (int r = 0; r < 3; ++r) inside += Inside(child, by_name["tl_parent_" + std::to_string(r)][0]);
    EXPECT_GE(inside, 1) << child.dump();
  }
  // The actor: its creation and 3 calls on rank 2, inside one lifetime slice.
  json life;
  for (auto& [name, events] : by_name) {
    if (name.rfind("actor TlineCounter", 0) == 0) life = events.at(0);
  }
  ASSERT_FALSE(life.is_null()) << "no actor lifetime slice";
  EXPECT_EQ(life["pid"], 2);
  ASSERT_EQ(by_name["TlineCounter::Add"].size(), 3u) << "actor calls are named after the method";
  for (const auto& call : by_name["TlineCounter::Add"]) {
    EXPECT_TRUE(Inside(call, life));
    EXPECT_EQ(call["tid"], life["tid"]);
  }
}

TEST(Timeline, AnUnwritablePathIsAClearError) {
  prism::platform::InProcessCluster cluster({.num_ranks = 1});
  try {
    prism::Timeline("/nonexistent-dir/timeline.json");
    ADD_FAILURE() << "no error";
  } catch (const prism::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/timeline.json"), std::string::npos);
  }
}

}  // namespace
