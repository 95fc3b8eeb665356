// The Ray compatibility layer on a running cluster (issue 41, items 1, 4 and 5), written
// with ray:: names as a Ray program would: Init while running, requests no rank can hold
// (pending with a warning, as in Ray), a removed placement group's state, and ExitActor.
// Its main calls ray::Init with Ray's head_args and, like Ray's test mains, never calls
// Shutdown: the job's exit status is gtest's.
#include <prism/ray_compat.h>

#include <gtest/gtest.h>

namespace {

int RcReturn1() { return 1; }
RAY_REMOTE(RcReturn1);

class RcCounter {
 public:
  static RcCounter* FactoryCreate() { return new RcCounter(); }
  int Plus1() { return ++count_; }
  int Exit() {
    ray::ExitActor();
    return 1;
  }

 private:
  int count_ = 0;
};
RAY_REMOTE(RcCounter::FactoryCreate, &RcCounter::Plus1, &RcCounter::Exit);

int World() { return ray::GetRuntimeContext().GetWorldSize(); }

template <typename T>
bool Unready(const ray::ObjectRef<T>& ref, int timeout_ms) {
  return ray::Wait(std::vector<ray::ObjectRef<T>>{ref}, 1, timeout_ms).unready.size() == 1;
}

TEST(RayCompat, InitWhileRunningIsANoOpAndAnotherConfigurationSaysSo) {
  ray::Init();
  ray::RayConfig same;
  same.head_args = {"--num-cpus", "2"};
  ray::Init(same);
  EXPECT_TRUE(ray::IsInitialized());
  ray::RayConfig other;
  other.ray_namespace = "other";
  try {
    ray::Init(other);
    ADD_FAILURE() << "ray::Init with another namespace while running did not throw";
  } catch (const ray::internal::RayException& e) {
    EXPECT_NE(std::string(e.what()).find("ray_namespace"), std::string::npos) << e.what();
  }
  EXPECT_DOUBLE_EQ(prism::ClusterResources()["CPU"], 2.0 * World()) << "head_args --num-cpus 2 per rank";
}

TEST(RayCompat, ATaskOrActorNoRankCanHoldIsPendingWithAWarning) {
  testing::internal::CaptureStderr();
  auto task = ray::Task(RcReturn1).SetResource("CPU", 10000.0).Remote();
  auto actor = ray::Actor(RcCounter::FactoryCreate).SetResources({{"CPU", 10000.0}}).Remote();
  auto call = actor.Task(&RcCounter::Plus1).Remote();
  const std::string warnings = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(Unready(task, 300));
  EXPECT_TRUE(Unready(call, 300));
  EXPECT_NE(warnings.find("RcReturn1 asks for"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("10000"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("stays pending"), std::string::npos) << warnings;
  EXPECT_THROW(task.Get(100), ray::internal::RayTimeoutException);
  // The cluster goes on.
  EXPECT_EQ(*ray::Task(RcReturn1).SetResource("CPU", 1.0).Remote().Get(60000), 1);
}

TEST(RayCompat, APlacementGroupNoClusterCanHoldIsPendingUntilRemoved) {
  testing::internal::CaptureStderr();
  ray::PlacementGroupCreationOptions options{"too-big", {{{"CPU", 10000}}}, ray::PlacementStrategy::PACK};
  ray::PlacementGroup pg = ray::CreatePlacementGroup(options);
  const std::string warnings = testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("can never be placed"), std::string::npos) << warnings;
  EXPECT_FALSE(pg.Wait(1));
  EXPECT_EQ(pg.GetState(), ray::PlacementGroupState::PENDING);
  ray::RemovePlacementGroup(pg.GetID());
  EXPECT_EQ(ray::GetPlacementGroupById(pg.GetID()).GetState(), ray::PlacementGroupState::REMOVED);
  ray::RemovePlacementGroup(pg.GetID());  // again: a no-op
  EXPECT_TRUE(ray::GetPlacementGroup("too-big").GetID().empty());
}

TEST(RayCompat, ExitActorFailsItsCallsAndGivesItsResourcesBack) {
  const double total = prism::ClusterResources()["CPU"];
  auto actor = ray::Actor(RcCounter::FactoryCreate).SetResources({{"CPU", 1.0}}).Remote();
  EXPECT_EQ(*actor.Task(&RcCounter::Plus1).Remote().Get(60000), 1);
  EXPECT_THROW(actor.Task(&RcCounter::Exit).Remote().Get(60000), ray::internal::RayActorException);
  EXPECT_THROW(actor.Task(&RcCounter::Plus1).Remote().Get(60000), ray::internal::RayActorException);
  double available = 0;
  for (int i = 0; i < 200 && (available = prism::AvailableResources()["CPU"]) < total; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_DOUBLE_EQ(available, total) << "the actor's CPU came back";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ray::RayConfig config;
  config.head_args = {"--num-cpus", "2"};
  ray::Init(config, argc, argv);  // ranks 1..N-1 serve in here
  return RUN_ALL_TESTS();         // no Shutdown, as Ray's test mains: shut down at exit
}
