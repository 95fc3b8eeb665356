// prism::Timeline over real ranks: tasks whose children run on the next rank, an actor on
// the last rank; the file is parsed back and its slices checked for ranks and nesting.
#include <gtest/gtest.h>
#include <prism/api.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

int World() { return prism::GetRuntimeContext().GetWorldSize(); }
std::string On(int rank) { return "rank:" + std::to_string(rank % World()); }

int MtLeaf(int x) {
  std::this_thread::sleep_for(20ms);
  return x + 1;
}
int MtParent(int rank) {
  std::this_thread::sleep_for(20ms);
  int y = *prism::Task(MtLeaf).SetName("mt_child_of_" + std::to_string(rank))
               .SetResource(On(rank + 1), 0.01).Remote(rank).Get();
  std::this_thread::sleep_for(20ms);
  return y;
}
class MtCounter {
 public:
  static MtCounter* Create() { return new MtCounter; }
  int Add(int x) { return total += x; }
  int total = 0;
};
PRISM_REMOTE(MtLeaf, MtParent, MtCounter::Create, &MtCounter::Add);

bool Inside(const json& inner, const json& outer) {
  const double is = inner.at("ts"), ie = is + inner.at("dur").get<double>();
  const double os = outer.at("ts"), oe = os + outer.at("dur").get<double>();
  // Times are microseconds with nanosecond fractions: allow a nanosecond for rounding.
  return is >= os - 1e-3 && ie <= oe + 1e-3;
}

TEST(Timeline, EveryRanksTasksAndActorCallsWithChildrenInsideTheirParents) {
  const int n = World();
  std::vector<prism::ObjectRef<int>> refs;
  for (int r = 0; r < n; ++r) {
    refs.push_back(prism::Task(MtParent).SetName("mt_parent_" + std::to_string(r))
                       .SetResource(On(r), 0.01).Remote(r));
  }
  auto counter = prism::Actor(MtCounter::Create).SetResource(On(n - 1), 0.01).Remote();
  for (int i = 0; i < 4; ++i) refs.push_back(counter.Task(&MtCounter::Add).Remote(i));
  prism::Get(refs);

  const std::string path = "prism_timeline_mpi_" + std::to_string(n) + ".json";
  prism::Timeline(path);
  std::ifstream in(path);
  json trace = json::parse(in);
  std::remove(path.c_str());

  std::map<std::string, std::vector<json>> by_name;
  std::set<int> pids;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    by_name[e.at("name")].push_back(e);
    pids.insert(e.at("pid").get<int>());
  }
  std::set<int> all;
  for (int r = 0; r < n; ++r) all.insert(r);
  EXPECT_EQ(pids, all);
  for (int r = 0; r < n; ++r) {
    const auto& parent = by_name["mt_parent_" + std::to_string(r)];
    const auto& child = by_name["mt_child_of_" + std::to_string(r)];
    ASSERT_EQ(parent.size(), 1u);
    ASSERT_EQ(child.size(), 1u);
    EXPECT_EQ(parent[0]["pid"], r);
    EXPECT_EQ(child[0]["pid"], (r + 1) % n);
    EXPECT_TRUE(Inside(child[0], parent[0])) << child[0].dump() << " not inside " << parent[0].dump();
  }
  json life;
  for (auto& [name, events] : by_name) {
    if (name.rfind("actor MtCounter ", 0) == 0) life = events.at(0);
  }
  ASSERT_FALSE(life.is_null()) << "no actor lifetime slice";
  EXPECT_EQ(life["pid"], n - 1);
  ASSERT_EQ(by_name["MtCounter::Add"].size(), 4u);
  for (const auto& call : by_name["MtCounter::Add"]) {
    EXPECT_TRUE(Inside(call, life));
    EXPECT_EQ(call["pid"], n - 1);
  }
}

}  // namespace
