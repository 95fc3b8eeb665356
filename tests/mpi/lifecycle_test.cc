// Init and Shutdown as Ray has them, on 1 and 3 ranks and without a launcher: Init while
// running is a no-op (an error naming the fields when the configuration differs), Init
// after Shutdown starts a new session on every rank (the worker ranks wait for it inside
// their first Init and take the driver's configuration), and a main that never calls
// Shutdown is shut down at exit and ends the job with its own exit status.
//
// Its own main (not prism_mpi_test_main): the first Init is every rank's, the tests run on
// rank 0, and main returns without Shutdown. With --lifecycle-exit-status=N main returns N
// when every test passed: ctest expects the job's exit status to be exactly N.
#include <gtest/gtest.h>
#include <prism/api.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

int g_argc = 0;
char** g_argv = nullptr;

prism::Config BaseConfig() {
  prism::Config c;
  c.num_cpus = 2;
  c.ray_namespace = "lifecycle";
  return c;
}

int World() { return prism::GetRuntimeContext().GetWorldSize(); }

struct RankInfo {
  int rank = -1;
  std::string ray_namespace;
  std::string job_id;
  std::string env;
  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & rank & ray_namespace & job_id & env;
  }
};

RankInfo WhereAmI() {
  const char* env = std::getenv("PRISM_LIFECYCLE_TEST_VAR");
  return {prism::GetRuntimeContext().GetRank(), prism::GetNamespace(),
          prism::GetRuntimeContext().GetJobId(), env ? env : ""};
}
PRISM_REMOTE(WhereAmI);

class Tally {
 public:
  int Add(int x) { return total_ += x; }

 private:
  int total_ = 0;
};
Tally* MakeTally() { return new Tally(); }
PRISM_REMOTE(MakeTally, &Tally::Add);

/// WhereAmI on every rank of the session (one task pinned to each).
std::vector<RankInfo> EveryRank() {
  std::vector<prism::ObjectRef<RankInfo>> refs;
  for (int r = 0; r < World(); ++r) {
    refs.push_back(prism::Task(WhereAmI).SetResource("rank:" + std::to_string(r), 0.01).Remote());
  }
  std::vector<RankInfo> out;
  for (auto& ref : refs) out.push_back(*ref.Get(60000));
  return out;
}

/// Back to the session main started, whatever a test left.
void Restore() {
  if (prism::IsInitialized()) prism::Shutdown();
  prism::Init(BaseConfig(), g_argc, g_argv);
}

TEST(Lifecycle, InitWhileRunningIsANoOp) {
  ASSERT_TRUE(prism::IsInitialized());
  const std::string job = prism::GetRuntimeContext().GetJobId();
  prism::Init();                                 // joins whatever runs
  prism::Init(BaseConfig(), g_argc, g_argv);     // the running configuration
  EXPECT_TRUE(prism::IsInitialized());
  EXPECT_EQ(prism::GetRuntimeContext().GetJobId(), job);
  for (const RankInfo& info : EveryRank()) EXPECT_EQ(info.job_id, job) << "rank " << info.rank;
}

TEST(Lifecycle, InitWithAnotherConfigurationWhileRunningSaysWhatDiffers) {
  prism::Config other = BaseConfig();
  other.num_cpus = 7;
  other.ray_namespace = "elsewhere";
  try {
    prism::Init(other, g_argc, g_argv);
    ADD_FAILURE() << "Init with another configuration while running did not throw";
  } catch (const prism::RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("num_cpus"), std::string::npos) << what;
    EXPECT_NE(what.find("ray_namespace"), std::string::npos) << what;
    EXPECT_EQ(what.find("log_dir"), std::string::npos) << what;
    EXPECT_NE(what.find("Shutdown first"), std::string::npos) << what;
  }
  EXPECT_TRUE(prism::IsInitialized());  // the running session goes on
  EXPECT_EQ(EveryRank().size(), static_cast<size_t>(World()));
}

TEST(Lifecycle, InitAfterShutdownStartsANewSessionOnEveryRankWithTheDriversConfiguration) {
  std::string previous_job = prism::GetRuntimeContext().GetJobId();
  const int world = World();
  for (int cycle = 1; cycle <= 3; ++cycle) {
    prism::Shutdown();
    ASSERT_FALSE(prism::IsInitialized());
    prism::Shutdown();  // twice: a no-op
    prism::Config config = BaseConfig();
    config.num_cpus = cycle;
    config.ray_namespace = "cycle-" + std::to_string(cycle);
    config.env_vars["PRISM_LIFECYCLE_TEST_VAR"] = "v" + std::to_string(cycle);
    prism::Init(config);
    ASSERT_TRUE(prism::IsInitialized());
    const std::string job = prism::GetRuntimeContext().GetJobId();
    EXPECT_NE(job, previous_job) << "cycle " << cycle;
    previous_job = job;
    EXPECT_EQ(World(), world);
    EXPECT_DOUBLE_EQ(prism::ClusterResources()["CPU"], static_cast<double>(world * cycle));
    std::vector<RankInfo> infos = EveryRank();
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(infos[r].rank, r);
      EXPECT_EQ(infos[r].ray_namespace, config.ray_namespace) << "rank " << r;
      EXPECT_EQ(infos[r].job_id, job) << "rank " << r;
      EXPECT_EQ(infos[r].env, "v" + std::to_string(cycle)) << "rank " << r;
    }
    auto tally = prism::Actor(MakeTally).Remote();
    tally.Task(&Tally::Add).Remote(cycle);
    EXPECT_EQ(*tally.Task(&Tally::Add).Remote(1).Get(60000), cycle + 1);
  }
  Restore();
}

TEST(Lifecycle, ARefAfterShutdownIsAClearError) {
  {
    auto ref = prism::Put(41);
    prism::Shutdown();
    EXPECT_THROW(ref.Get(), prism::RuntimeError);
  }  // released with no session: a no-op
  Restore();
  EXPECT_EQ(*prism::Put(42).Get(), 42);
}

// A program that keeps refs past Shutdown (a test fixture's, a Python object collected
// later) drops them in the next session: that must free nothing of it. Ids repeated from one
// session to the next, so the old refs released the new session's objects of the same ids.
TEST(Lifecycle, RefsOfAnEarlierSessionDroppedInALaterOneFreeNothingOfIt) {
  std::vector<prism::ObjectRef<int>> old_refs;
  for (int i = 0; i < 4; ++i) old_refs.push_back(prism::Put(i));
  auto old_tally = std::make_unique<prism::ActorHandle<Tally>>(prism::Actor(MakeTally).Remote());
  EXPECT_EQ(*old_tally->Task(&Tally::Add).Remote(1).Get(60000), 1);
  Restore();
  std::vector<prism::ObjectRef<int>> refs;
  for (int i = 0; i < 4; ++i) refs.push_back(prism::Put(10 + i));
  auto tally = prism::Actor(MakeTally).Remote();
  EXPECT_EQ(*tally.Task(&Tally::Add).Remote(5).Get(60000), 5);
  for (size_t i = 0; i < refs.size(); ++i) EXPECT_NE(refs[i].ID(), old_refs[i].ID());
  old_refs.clear();  // released in this session
  old_tally.reset();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(*refs[i].Get(10000), 10 + i);
  EXPECT_EQ(*tally.Task(&Tally::Add).Remote(1).Get(10000), 6);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int exit_status = 0;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const char* flag = "--lifecycle-exit-status=";
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
      exit_status = std::atoi(argv[i] + std::strlen(flag));
    } else {
      args.push_back(argv[i]);
    }
  }
  g_argc = static_cast<int>(args.size());
  g_argv = args.data();
  prism::Init(BaseConfig(), g_argc, g_argv);  // ranks 1..N-1 serve every session in here
  const int failed = RUN_ALL_TESTS();
  // No Shutdown: Prism shuts down at exit and the job ends with main's status.
  return failed != 0 ? 1 : exit_status;
}
