// The platform door over real MPI ranks: channels (Publish/Deliver through the transport),
// bundle locations, and a WorkerGroup spread over the ranks.
#include <gtest/gtest.h>
#include <prism/api.h>
#include <prism/platform/platform.h>

#include <map>
#include <numeric>
#include <set>

namespace {

int PtPublish(std::string channel, int n) {
  for (int i = 0; i < n; ++i) prism::platform::Publish(channel, prism::platform::ToBytes(i));
  return prism::GetRuntimeContext().GetRank();
}
std::string PtLoop(std::string config) {
  const auto& me = prism::platform::CurrentWorker();
  for (int i = 0; i < std::stoi(config); ++i) me.Report(std::to_string(i));
  return std::to_string(prism::GetRuntimeContext().GetRank());
}
PRISM_REMOTE(PtPublish, PtLoop);

int World() { return prism::GetRuntimeContext().GetWorldSize(); }

TEST(Platform, ChannelMessagesCrossRanksInOrder) {
  prism::platform::Channel ch("mpi-reports");
  std::vector<prism::ObjectRef<int>> refs;
  for (int r = 0; r < World(); ++r) {
    refs.push_back(prism::Task(PtPublish).SetResource("rank:" + std::to_string(r), 0.01)
                       .Remote(std::string("mpi-reports"), 200));
  }
  std::map<int, std::vector<int>> got;
  for (int i = 0; i < 200 * World(); ++i) {
    auto m = ch.Next(30000);
    ASSERT_TRUE(m) << "message " << i;
    got[m->from_rank].push_back(prism::platform::FromBytes<int>(m->bytes));
  }
  std::vector<int> want(200);
  std::iota(want.begin(), want.end(), 0);
  for (int r = 0; r < World(); ++r) EXPECT_EQ(got[r], want) << "from rank " << r;
  prism::Get(refs, 30000);
}

TEST(Platform, WorkerGroupSpreadsOverRanksAndReports) {
  const int n = World();
  prism::platform::WorkerGroup group({.num_workers = n, .resources_per_worker = {{"CPU", 1}},
                                      .strategy = prism::PlacementStrategy::STRICT_SPREAD});
  auto where = group.workers();
  std::set<int> ranks;
  for (const auto& w : where) ranks.insert(w.rank);
  EXPECT_EQ(static_cast<int>(ranks.size()), n);
  group.Start(prism::platform::RegisteredName(PtLoop), "3");
  std::map<int, int> reports;
  std::map<int, std::string> ran_on;
  while (group.Running()) {
    auto e = group.Next(30000);
    ASSERT_TRUE(e);
    ASSERT_NE(e->kind, prism::platform::WorkerEvent::kFailed) << e->bytes;
    if (e->kind == prism::platform::WorkerEvent::kReport) ++reports[e->worker];
    if (e->kind == prism::platform::WorkerEvent::kFinished) ran_on[e->worker] = e->bytes;
  }
  for (const auto& w : where) {
    EXPECT_EQ(reports[w.index], 3);
    EXPECT_EQ(ran_on[w.index], std::to_string(w.rank));
  }
}

}  // namespace
