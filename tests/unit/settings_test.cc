// Unit tests for launcher detection and settings resolution, driven by a fake environment
// and fake host facts: no MPI, no Slurm, no real getenv.

#include "runtime/settings.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "prism/errors.h"
#include "runtime/launch.h"

namespace prism::internal {
namespace {

using Vars = std::map<std::string, std::string>;

EnvFn FakeEnv(Vars vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

HostFacts FakeHost(unsigned cores = 8, uint64_t memory = 10ULL << 30) {
  return HostFacts{cores, memory, "node1"};
}

Settings Resolve(const Vars& vars, const std::vector<std::string>& args = {},
                 const Config& code = {}, const HostFacts& host = FakeHost()) {
  EnvFn env = FakeEnv(vars);
  return ResolveSettings(code, args, env, DetectLaunch(env), host, "fallback");
}

// Runs `f`, expects a prism::RuntimeError whose message contains every one of `parts`.
void ExpectError(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning " << parts.front();
  } catch (const RuntimeError& e) {
    for (const auto& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << part << "\"";
    }
  }
}

constexpr uint64_t kOneMiB = 1ULL << 20;

// --- Launch detection -------------------------------------------------------------------

TEST(LaunchTest, NoLauncher) {
  EnvFn env = FakeEnv({});
  LaunchInfo info = DetectLaunch(env);
  EXPECT_EQ(info.launcher, Launcher::kNone);
  EXPECT_EQ(info.launcher_name(), "none");
  EXPECT_EQ(info.world_size_hint, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 1);
  EXPECT_EQ(info.job_id, "");
  EXPECT_FALSE(info.slurm_job);
  EXPECT_FALSE(info.gpus_on_node);
  EXPECT_FALSE(LaunchedByMpiLauncher(env));
  EXPECT_EQ(LaunchMisuseHint(env), "");
}

TEST(LaunchTest, Mpirun) {
  EnvFn env = FakeEnv({{"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                       {"PMIX_RANK", "3"}});
  LaunchInfo info = DetectLaunch(env);
  EXPECT_EQ(info.launcher, Launcher::kMpirun);
  EXPECT_EQ(info.launcher_name(), "mpirun");
  EXPECT_EQ(info.world_size_hint, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 2);
  EXPECT_FALSE(info.slurm_job);
  EXPECT_TRUE(LaunchedByMpiLauncher(env));
}

TEST(LaunchTest, MpirunInsideSallocStaysMpirun) {
  EnvFn env = FakeEnv({{"OMPI_COMM_WORLD_SIZE", "3"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                       {"SLURM_JOB_ID", "77"},
                       {"SLURM_NTASKS_PER_NODE", "8"}});
  LaunchInfo info = DetectLaunch(env);
  EXPECT_EQ(info.launcher, Launcher::kMpirun);
  EXPECT_TRUE(info.slurm_job);
  EXPECT_EQ(info.job_id, "77");
  EXPECT_EQ(info.local_size, 3);  // Open MPI's count wins over the allocation's.
}

TEST(LaunchTest, SrunWithPmix) {
  EnvFn env = FakeEnv({{"SLURM_JOB_ID", "1234"},
                       {"SLURM_STEP_ID", "0"},
                       {"SLURM_PROCID", "2"},
                       {"SLURM_NTASKS", "3"},
                       {"SLURM_LOCALID", "0"},
                       {"SLURM_NODEID", "1"},
                       {"SLURM_TASKS_PER_NODE", "2,1"},
                       {"SLURM_CPUS_PER_TASK", "4"},
                       {"SLURM_GPUS_ON_NODE", "2"},
                       {"PMIX_RANK", "2"}});
  LaunchInfo info = DetectLaunch(env);
  EXPECT_EQ(info.launcher, Launcher::kSrun);
  EXPECT_EQ(info.launcher_name(), "srun");
  EXPECT_EQ(info.world_size_hint, 3);
  EXPECT_EQ(info.local_size, 1);  // Node 1's entry of "2,1".
  EXPECT_EQ(info.slurm_node_id, 1);
  EXPECT_EQ(info.slurm_cpus_per_task, 4.0);
  EXPECT_EQ(info.gpus_on_node, 2.0);
  EXPECT_TRUE(info.slurm_job);
  EXPECT_EQ(info.job_id, "1234");
  EXPECT_EQ(info.step_id, "0");
  EXPECT_TRUE(LaunchedByMpiLauncher(env));
  EXPECT_EQ(LaunchMisuseHint(env), "");
  EXPECT_EQ(NodeIdentity(info, "cn07"), "node-1");  // Slurm's node numbering wins
}

TEST(LaunchTest, NodeIdentityIsTheHostNameOutsideSrun) {
  EXPECT_EQ(NodeIdentity(DetectLaunch(FakeEnv({})), "laptop"), "laptop");
  // mpirun inside an allocation inherits the batch shell's SLURM_NODEID on every rank.
  LaunchInfo info = DetectLaunch(FakeEnv({{"OMPI_COMM_WORLD_SIZE", "4"}, {"SLURM_NODEID", "0"},
                                          {"SLURM_JOB_ID", "7"}}));
  EXPECT_EQ(NodeIdentity(info, "cn07"), "cn07");
  EXPECT_EQ(info.step_id, "");
}

TEST(LaunchTest, SingleRankHintWhenTheJobAskedForMore) {
  // The batch script ran ./app directly in a job of 3 tasks.
  Vars batch = {{"SLURM_JOB_ID", "9"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "3"}};
  EXPECT_EQ(SingleRankHint(FakeEnv(batch), 1),
            "prism: warning: this Slurm job asked for 3 tasks (SLURM_NTASKS=3) but Prism started "
            "as 1 rank, so the other 2 sit idle: start the program with `srun --mpi=pmix ./app` "
            "in the job script");
  EXPECT_EQ(SingleRankHint(FakeEnv(batch), 3), "");  // started on all of them
  batch["SLURM_NTASKS"] = "1";
  EXPECT_EQ(SingleRankHint(FakeEnv(batch), 1), "");  // a one-task job
  EXPECT_EQ(SingleRankHint(FakeEnv({{"SLURM_JOB_ID", "9"}, {"SLURM_STEP_ID", "1"},
                                    {"SLURM_NTASKS", "3"}}),
                           1),
            "");  // an srun step: LaunchMisuseHint's case
  EXPECT_EQ(SingleRankHint(FakeEnv({}), 1), "");
}

TEST(LaunchTest, TasksPerNodeRepeatSyntax) {
  LaunchInfo info =
      DetectLaunch(FakeEnv({{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "2"}}));
  EXPECT_EQ(info.local_size, 2);
  info = DetectLaunch(FakeEnv({{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"}}));
  EXPECT_EQ(info.local_size, 1);
  info = DetectLaunch(FakeEnv({{"SLURM_TASKS_PER_NODE", "5(x2)"}}));
  EXPECT_EQ(info.local_size, 5);
  info = DetectLaunch(FakeEnv({{"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_TASKS_PER_NODE", "2"}}));
  EXPECT_EQ(info.local_size, 4);
}

TEST(LaunchTest, CudaVisibleDevices) {
  EXPECT_EQ(DetectLaunch(FakeEnv({{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}})).gpus_on_node, 0.0);
  EXPECT_EQ(DetectLaunch(FakeEnv({{"CUDA_VISIBLE_DEVICES", ""}})).gpus_on_node, 0.0);
  EXPECT_EQ(DetectLaunch(FakeEnv({{"CUDA_VISIBLE_DEVICES", "0,1"}})).gpus_on_node, 2.0);
  EXPECT_EQ(DetectLaunch(FakeEnv({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_GPUS_ON_NODE", "4"}}))
                .gpus_on_node,
            4.0);
}

TEST(LaunchTest, ArrayJobId) {
  LaunchInfo info = DetectLaunch(FakeEnv(
      {{"SLURM_JOB_ID", "1005"}, {"SLURM_ARRAY_JOB_ID", "1000"}, {"SLURM_ARRAY_TASK_ID", "5"}}));
  EXPECT_EQ(info.job_id, "1000_5");
  EXPECT_TRUE(info.slurm_job);
}

TEST(LaunchTest, MisuseHintForSrunWithoutPmix) {
  Vars vars = {
      {"SLURM_JOB_ID", "9"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "3"}};
  EnvFn env = FakeEnv(vars);
  EXPECT_EQ(LaunchMisuseHint(env),
            "prism: started by srun without PMIx (SLURM_NTASKS=3 but no PMIX_RANK): "
            "Debian's Open MPI needs `srun --mpi=pmix`");
  EXPECT_EQ(DetectLaunch(env).launcher, Launcher::kNone);
  // One task, or a batch script running ./app directly (no step), is not a misuse.
  vars["SLURM_NTASKS"] = "1";
  EXPECT_EQ(LaunchMisuseHint(FakeEnv(vars)), "");
  vars["SLURM_NTASKS"] = "3";
  vars.erase("SLURM_STEP_ID");
  EXPECT_EQ(LaunchMisuseHint(FakeEnv(vars)), "");
}

// --- Defaults ---------------------------------------------------------------------------

TEST(SettingsTest, DefaultsFromHardware) {
  Settings s = Resolve({{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}, {}, {},
                       FakeHost(8, 30 * kOneMiB));
  EXPECT_EQ(s.num_cpus, 2.0);  // floor(8 / 3)
  EXPECT_EQ(s.num_gpus, 0.0);
  EXPECT_EQ(s.object_store_memory, 3 * kOneMiB);  // 30% of 30 MiB over 3 ranks
  EXPECT_TRUE(s.custom_resources.empty());
  EXPECT_EQ(s.ranks_per_node, 0);
  EXPECT_EQ(s.max_inline_bytes, 100u * 1024);
  EXPECT_EQ(s.rank_timeout_s, 60.0);
  EXPECT_EQ(s.log_level, LogLevel::kWarn);
  EXPECT_EQ(s.job_id, "fallback");
  EXPECT_EQ(s.session_dir, "/tmp/prism-fallback");
  EXPECT_EQ(s.log_dir, "/tmp/prism-fallback/logs");
}

TEST(SettingsTest, AtLeastOneCpu) {
  Settings s = Resolve({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}, {}, {},
                       FakeHost(2));
  EXPECT_EQ(s.num_cpus, 1.0);
}

// A rank the launcher bound to cores (issue 46): its default CPUs come from its affinity
// mask, not the node's core count.
TEST(SettingsTest, DefaultCpusFollowTheAffinityMask) {
  HostFacts host = FakeHost(64);
  host.allowed_cores = 1;  // mpirun --bind-to core, taskset -c 0
  EXPECT_EQ(DefaultNumCpus(host, 1), 1u);
  EXPECT_EQ(DefaultNumCpus(host, 4), 1u);
  host.allowed_cores = 16;  // 4 ranks of 16 cores each (--map-by ppr:4:node:pe=16)
  EXPECT_EQ(DefaultNumCpus(host, 4), 16u);
  host.allowed_cores = 32;  // bound to a socket that 32 ranks share: their share
  EXPECT_EQ(DefaultNumCpus(host, 32), 2u);
  host.allowed_cores = 64;  // unbound: the host's cores shared among its ranks
  EXPECT_EQ(DefaultNumCpus(host, 1), 64u);
  EXPECT_EQ(DefaultNumCpus(host, 3), 21u);
  host.allowed_cores = 0;  // mask unknown: as unbound
  EXPECT_EQ(DefaultNumCpus(host, 2), 32u);
  EXPECT_EQ(DefaultNumCpus(FakeHost(2), 4), 1u);  // at least 1

  host.allowed_cores = 1;
  EXPECT_EQ(Resolve({}, {}, {}, host).num_cpus, 1.0);
  Settings s = Resolve({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}, {}, {}, host);
  EXPECT_EQ(s.num_cpus, 1.0);
  EXPECT_EQ(Resolve({{"PRISM_NUM_CPUS", "3"}}, {}, {}, host).num_cpus, 3.0);  // a given value wins
}

// --- Settings compared between ranks (issue 46) ----------------------------------------

std::vector<GivenSetting> Given(const Vars& vars, const std::vector<std::string>& args = {},
                                const Config& code = {}) {
  EnvFn env = FakeEnv(vars);
  std::vector<std::string> prism_env;
  for (const auto& [k, v] : vars) prism_env.push_back(k + "=" + v);
  Settings s = ResolveSettings(code, args, env, DetectLaunch(env), FakeHost(), "fallback");
  return GivenSettings(s, code, args, env, prism_env);
}

TEST(SettingsAgreementTest, ListsWhatWasGivenAndWhatMustAgree) {
  auto given = Given({{"PRISM_NUM_CPUS", "3"}, {"PRISM_STORAGE_PATH", "/shared/runs"},
                      {"PRISM_TRAIN_WORLD_RANK", "2"}},
                     {"--prism-log-level=info"});
  std::map<std::string, GivenSetting> by_name;
  for (const auto& g : given) by_name[g.name] = g;
  EXPECT_EQ(by_name["num_cpus"].value, "3");
  EXPECT_EQ(by_name["num_cpus"].source, "PRISM_NUM_CPUS=3");
  EXPECT_EQ(by_name["log_level"].source, "--prism-log-level=info");
  EXPECT_EQ(by_name["data_plane"].value, "ucx");  // must agree: listed at its default
  EXPECT_EQ(by_name["data_plane"].source, "");
  EXPECT_EQ(by_name["PRISM_STORAGE_PATH"].value, "/shared/runs");
  EXPECT_EQ(by_name.count("PRISM_TRAIN_WORLD_RANK"), 0u) << "a training worker's own variable";
  EXPECT_EQ(by_name.count("object_store_memory"), 0u) << "defaults may differ between hosts";
  EXPECT_EQ(by_name.count("PRISM_NUM_CPUS"), 0u) << "a setting's variable is compared as the setting";
}

TEST(SettingsAgreementTest, WarnsOfAVariableThatReachedOnlySomeRanks) {
  // mpirun -n 1 -x PRISM_NUM_CPUS=3 app : -n 2 app, on two hosts.
  const auto forwarded = Given({{"PRISM_NUM_CPUS", "3"}});
  const auto plain = Given({});
  SettingsAgreement a = CompareSettings({forwarded, plain, plain}, {"h1", "h2", "h2"});
  EXPECT_TRUE(a.error.empty()) << a.error;
  ASSERT_EQ(a.warnings.size(), 1u);
  const std::string& w = a.warnings[0];
  for (const char* part : {"the setting num_cpus differs between ranks: 3 (PRISM_NUM_CPUS=3) on rank 0 (host h1)",
                           "not set (the default) on ranks 1-2 (host h2)", "may differ on purpose",
                           "mpirun passes only the variables named with -x", "mpirun -x PRISM_NUM_CPUS=<value>",
                           "srun exports"}) {
    EXPECT_NE(w.find(part), std::string::npos) << "lacks \"" << part << "\": " << w;
  }
  // Equal everywhere, from different sources: nothing to say.
  EXPECT_TRUE(CompareSettings({Given({{"PRISM_NUM_CPUS", "3"}}), Given({}, {"--prism-num-cpus=3"})}, {"a", "b"})
                  .warnings.empty());
  EXPECT_TRUE(CompareSettings({plain, plain}, {"a", "b"}).warnings.empty());
}

TEST(SettingsAgreementTest, OtherPrismVariablesAreComparedToo) {
  SettingsAgreement a = CompareSettings(
      {Given({{"PRISM_STORAGE_PATH", "/a"}}), Given({{"PRISM_STORAGE_PATH", "/b"}}), Given({})},
      {"h1", "h2", "h3"});
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_NE(a.warnings[0].find("the variable PRISM_STORAGE_PATH differs between ranks: \"/a\" on rank 0 (host h1); "
                               "\"/b\" on rank 1 (host h2); unset on rank 2 (host h3)"),
            std::string::npos)
      << a.warnings[0];
}

TEST(SettingsAgreementTest, FailsWhenOneThatMustAgreeDiffers) {
  SettingsAgreement a = CompareSettings({Given({}), Given({{"PRISM_DATA_PLANE", "mpi"}})}, {"h1", "h2"});
  EXPECT_NE(a.error.find("prism: the setting data_plane must be the same on every rank, and it differs: "
                         "ucx (the default) on rank 0 (host h1); mpi (PRISM_DATA_PLANE=mpi) on rank 1 (host h2)"),
            std::string::npos)
      << a.error;
  EXPECT_NE(a.error.find("mpirun -x PRISM_DATA_PLANE=<value>"), std::string::npos) << a.error;
  EXPECT_TRUE(CompareSettings({Given({{"PRISM_DATA_PLANE", "mpi"}}), Given({}, {"--prism-data-plane=mpi"})},
                              {"h1", "h2"})
                  .error.empty());
}

TEST(SettingsTest, DefaultsFromSlurm) {
  Settings s = Resolve({{"SLURM_JOB_ID", "42"},
                        {"SLURM_STEP_ID", "0"},
                        {"SLURM_PROCID", "0"},
                        {"PMIX_RANK", "0"},
                        {"SLURM_NTASKS", "2"},
                        {"SLURM_NTASKS_PER_NODE", "2"},
                        {"SLURM_CPUS_PER_TASK", "3"},
                        {"SLURM_GPUS_ON_NODE", "5"},
                        {"TMPDIR", "/scratch/tmp/"}});
  EXPECT_EQ(s.num_cpus, 3.0);
  EXPECT_EQ(s.num_gpus, 2.0);  // floor(5 / 2)
  EXPECT_EQ(s.job_id, "42");
  // Per step and per launch: two srun steps, or two mpiruns, of one job running at once
  // never share a directory.
  EXPECT_EQ(s.launch_id, "fallback");
  EXPECT_EQ(s.session_dir, "/scratch/tmp/prism-42.0-fallback");
  EXPECT_EQ(s.log_dir, "/scratch/tmp/prism-42.0-fallback/logs");
}

TEST(SettingsTest, GpusFromCudaVisibleDevices) {
  EXPECT_EQ(Resolve({{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}}).num_gpus, 0.0);
  EXPECT_EQ(Resolve({{"CUDA_VISIBLE_DEVICES", "0,1"}}).num_gpus, 2.0);
}

TEST(SettingsTest, ArrayJobSessionDir) {
  Settings s = Resolve({{"SLURM_JOB_ID", "1005"},
                        {"SLURM_ARRAY_JOB_ID", "1000"},
                        {"SLURM_ARRAY_TASK_ID", "5"},
                        {"TMPDIR", "/local"}});
  EXPECT_EQ(s.job_id, "1000_5");
  EXPECT_EQ(s.session_dir, "/local/prism-1000_5-fallback");
}

// --- Precedence: default < Config < environment < flag ---------------------------------

TEST(SettingsTest, PrecedenceNumCpus) {
  Config code;
  code.num_cpus = 3;
  EXPECT_EQ(Resolve({}, {}, code).num_cpus, 3.0);
  EXPECT_EQ(Resolve({{"PRISM_NUM_CPUS", "5"}}, {}, code).num_cpus, 5.0);
  EXPECT_EQ(Resolve({{"PRISM_NUM_CPUS", "5"}}, {"--prism-num-cpus=7"}, code).num_cpus, 7.0);
  EXPECT_EQ(Resolve({{"PRISM_NUM_CPUS", "5"}}, {"--prism-num-cpus", "1.5"}, code).num_cpus, 1.5);
  EXPECT_EQ(Resolve({{"PRISM_NUM_CPUS", ""}}, {}, code).num_cpus, 3.0);  // empty = unset
}

TEST(SettingsTest, PrecedenceObjectStoreMemory) {
  Config code;
  code.object_store_memory = 64 * kOneMiB;
  EXPECT_EQ(Resolve({}, {}, code).object_store_memory, 64 * kOneMiB);
  EXPECT_EQ(Resolve({{"PRISM_OBJECT_STORE_MEMORY", "2G"}}, {}, code).object_store_memory,
            2ULL << 30);
  EXPECT_EQ(Resolve({{"PRISM_OBJECT_STORE_MEMORY", "2G"}},
                    {"app-arg", "--prism-object-store-memory=512M", "--other"}, code)
                .object_store_memory,
            512 * kOneMiB);
}

// --- Which GPUs a rank's num_gpus stand for ---------------------------------------------

TEST(SettingsTest, GpuIdsAreTheVisibleDevicesWithTheirCudaIndices) {
  Settings s = Resolve({{"CUDA_VISIBLE_DEVICES", "2,5"}});
  EXPECT_EQ(s.num_gpus, 2.0);
  EXPECT_EQ(s.gpus.ids, (std::vector<std::string>{"2", "5"}));
  EXPECT_EQ(s.gpus.ordinals, (std::vector<int>{0, 1}));  // CUDA renumbers what it sees
  // UUIDs are ids like any other.
  s = Resolve({{"CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb"}, {"PRISM_NUM_GPUS", "1"}});
  EXPECT_EQ(s.gpus.ids, (std::vector<std::string>{"GPU-aa"}));
  EXPECT_EQ(s.gpus.ordinals, (std::vector<int>{0}));
}

TEST(SettingsTest, RanksOfAHostSeeingOneListEachTakeTheirOwnShare) {
  Vars mpirun{{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}};
  Settings s = Resolve(mpirun);
  EXPECT_EQ(s.num_gpus, 2.0);
  EXPECT_EQ(s.gpus.ids, (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(s.gpus.ordinals, (std::vector<int>{2, 3}));
  mpirun["OMPI_COMM_WORLD_LOCAL_RANK"] = "0";
  EXPECT_EQ(Resolve(mpirun).gpus.ids, (std::vector<std::string>{"0", "1"}));
}

TEST(SettingsTest, SlurmBindingOneGpuPerTaskGivesEveryRankCudaZero) {
  // srun --gpus-per-task=1: each task sees only its own device, as cuda:0.
  Settings s = Resolve({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "3"},
                        {"PMIX_RANK", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_NTASKS_PER_NODE", "4"},
                        {"SLURM_LOCALID", "3"}, {"SLURM_GPUS_ON_NODE", "4"},
                        {"CUDA_VISIBLE_DEVICES", "3"}});
  EXPECT_EQ(s.num_gpus, 1.0);
  EXPECT_EQ(s.gpus.ids, (std::vector<std::string>{"3"}));
  EXPECT_EQ(s.gpus.ordinals, (std::vector<int>{0}));
}

TEST(SettingsTest, SlurmGpuListWithoutCudaVisibleDevicesKeepsTheIndices) {
  Settings s = Resolve({{"SLURM_STEP_GPUS", "4,6"}, {"PRISM_NUM_GPUS", "2"}});
  EXPECT_EQ(s.gpus.ids, (std::vector<std::string>{"4", "6"}));
  EXPECT_EQ(s.gpus.ordinals, (std::vector<int>{4, 6}));
  EXPECT_EQ(Resolve({{"SLURM_JOB_GPUS", "0-2"}, {"PRISM_NUM_GPUS", "3"}}).gpus.ids,
            (std::vector<std::string>{"0", "1", "2"}));
}

TEST(SettingsTest, DeclaredGpusNothingListsAreNumberedFromZero) {
  Settings s = Resolve({{"PRISM_NUM_GPUS", "2"}});
  EXPECT_EQ(s.gpus.ids, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(s.gpus.ordinals, (std::vector<int>{0, 1}));
  EXPECT_EQ(Resolve({{"PRISM_NUM_GPUS", "0.5"}}).gpus.ids, (std::vector<std::string>{"0"}));
  EXPECT_TRUE(Resolve({}).gpus.ids.empty());
}

TEST(SettingsTest, DeclaringMoreGpusThanVisibleIsAnError) {
  ExpectError([] { Resolve({{"CUDA_VISIBLE_DEVICES", "2,5"}, {"PRISM_NUM_GPUS", "3"}}); },
              {"num_gpus=3", "sees 2 GPUs", "CUDA_VISIBLE_DEVICES=\"2,5\"", "at most 2"});
  ExpectError([] { Resolve({{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}, {"PRISM_NUM_GPUS", "1"}}); },
              {"num_gpus=1", "sees 0 GPUs"});
  ExpectError([] { Resolve({{"PRISM_NUM_GPUS", "1.5"}}); }, {"num_gpus=1.5", "whole GPUs"});
}

TEST(SettingsTest, LogToDriverIsOnUnlessTurnedOff) {
  EXPECT_TRUE(Resolve({}).log_to_driver);
  EXPECT_FALSE(Resolve({{"PRISM_LOG_TO_DRIVER", "0"}}).log_to_driver);
  EXPECT_FALSE(Resolve({}, {"--prism-log-to-driver=false"}).log_to_driver);
  Config off;
  off.log_to_driver = false;
  EXPECT_FALSE(Resolve({}, {}, off).log_to_driver);
  EXPECT_TRUE(Resolve({{"PRISM_LOG_TO_DRIVER", "ON"}}, {}, off).log_to_driver);  // env beats code
  ExpectError([] { Resolve({{"PRISM_LOG_TO_DRIVER", "maybe"}}); },
              {"PRISM_LOG_TO_DRIVER=\"maybe\"", "on or off"});
}

TEST(SettingsTest, OtherFieldsFromFlagsAndEnv) {
  Settings s =
      Resolve({{"PRISM_LOG_LEVEL", "debug"}, {"PRISM_RANK_TIMEOUT", "5"}},
              {"--prism-ranks-per-node", "2", "--prism-max-inline-bytes=1K",
               "--prism-log-dir=/var/log/prism/", "--prism-num-gpus=1", "--prism-log-level=ERROR"});
  EXPECT_EQ(s.log_level, LogLevel::kError);
  EXPECT_EQ(s.rank_timeout_s, 5.0);
  EXPECT_EQ(s.ranks_per_node, 2);
  EXPECT_EQ(s.max_inline_bytes, 1024u);
  EXPECT_EQ(s.log_dir, "/var/log/prism");
  EXPECT_EQ(s.num_gpus, 1.0);
  EXPECT_EQ(s.task_table_size, 10000u);
  EXPECT_EQ(Resolve({{"PRISM_TASK_TABLE_SIZE", "0"}}).task_table_size, 0u);
  EXPECT_EQ(Resolve({}, {"--prism-task-table-size=250000"}).task_table_size, 250000u);
  EXPECT_EQ(s.max_lost_ranks, -1) << "no limit by default";
  EXPECT_EQ(Resolve({{"PRISM_MAX_LOST_RANKS", "0"}}).max_lost_ranks, 0);
  EXPECT_EQ(Resolve({}, {"--prism-max-lost-ranks=2"}).max_lost_ranks, 2);
}

TEST(SettingsTest, CustomResources) {
  Config code;
  code.resources = {{"ssd", 1}};
  EXPECT_EQ(Resolve({}, {}, code).custom_resources, (std::map<std::string, double>{{"ssd", 1}}));
  Settings s = Resolve({{"PRISM_RESOURCES", "fpga:0.5, nic:2"}}, {}, code);
  EXPECT_EQ(s.custom_resources, (std::map<std::string, double>{{"fpga", 0.5}, {"nic", 2}}));
  s = Resolve({{"PRISM_RESOURCES", "fpga:0.5"}}, {"--prism-resources=tpu:4"}, code);
  EXPECT_EQ(s.custom_resources, (std::map<std::string, double>{{"tpu", 4}}));
  EXPECT_TRUE(ParseResourceList("X", "").empty());
}

// --- Parsing and validation errors ------------------------------------------------------

TEST(ParseBytesTest, GoodValues) {
  EXPECT_EQ(ParseBytes("X", "4"), 4u);
  EXPECT_EQ(ParseBytes("X", "1.5"), 1u);
  EXPECT_EQ(ParseBytes("X", "1073741824"), 1073741824u);
  EXPECT_EQ(ParseBytes("X", "100K"), 102400u);
  EXPECT_EQ(ParseBytes("X", "512M"), 512 * kOneMiB);
  EXPECT_EQ(ParseBytes("X", "2G"), 2ULL << 30);
  EXPECT_EQ(ParseBytes("X", "1T"), 1ULL << 40);
  EXPECT_EQ(ParseBytes("X", "1.5G"), 3ULL << 29);
  EXPECT_EQ(ParseBytes("X", "2g"), 2ULL << 30);
  EXPECT_EQ(ParseBytes("X", "2GB"), 2ULL << 30);
  EXPECT_EQ(ParseBytes("X", "2GiB"), 2ULL << 30);
  EXPECT_EQ(ParseBytes("X", "18446744073709551615"), UINT64_MAX);
}

TEST(ParseBytesTest, BadValues) {
  for (const char* bad : {"", "abc", "12Q", "G", "1.5.3", "5 M"}) {
    ExpectError([&] { ParseBytes("PRISM_OBJECT_STORE_MEMORY", bad); },
                {"PRISM_OBJECT_STORE_MEMORY=\"" + std::string(bad) + "\"", "is not a size",
                 "PRISM_OBJECT_STORE_MEMORY=2G"});
  }
  ExpectError([] { ParseBytes("X", "-1"); }, {"X=-1", ">= 0"});
  ExpectError([] { ParseBytes("X", "-1.5G"); }, {"X=-1.5G", ">= 0"});
  ExpectError([] { ParseBytes("X", "20000000T"); }, {"X=20000000T", "too large"});
  ExpectError([] { ParseBytes("X", "18446744073709551616"); }, {"18446744073709551616"});
}

TEST(SettingsTest, BadNumberFromEnv) {
  ExpectError(
      [] {
        Resolve({{"PRISM_NUM_CPUS", "abc"}});
      },
      {"prism: PRISM_NUM_CPUS=\"abc\" is not a number (expected e.g. PRISM_NUM_CPUS=4)"});
}

TEST(SettingsTest, OutOfRangeValues) {
  ExpectError([] { Resolve({}, {"--prism-num-cpus=-1"}); },
              {"prism: --prism-num-cpus=-1: must be >= 0"});
  ExpectError([] { Resolve({{"PRISM_NUM_GPUS", "-2"}}); }, {"PRISM_NUM_GPUS=-2", ">= 0"});
  ExpectError(
      [] {
        Resolve({{"PRISM_OBJECT_STORE_MEMORY", "512K"}});
      },
      {"PRISM_OBJECT_STORE_MEMORY=512K", "at least 1M"});
  ExpectError([] { Resolve({}, {"--prism-ranks-per-node=-3"}); },
              {"--prism-ranks-per-node=-3", ">= 0"});
  ExpectError([] { Resolve({}, {"--prism-ranks-per-node=1.5"}); },
              {"--prism-ranks-per-node=\"1.5\"", "whole number"});
  ExpectError([] { Resolve({{"PRISM_RANK_TIMEOUT", "0"}}); }, {"PRISM_RANK_TIMEOUT=0", "> 0"});
  ExpectError(
      [] {
        Resolve({{"PRISM_LOG_LEVEL", "loud"}});
      },
      {"PRISM_LOG_LEVEL=\"loud\"", "error, warn, info or debug"});
  ExpectError([] { Resolve({}, {"--prism-log-dir="}); }, {"--prism-log-dir", "empty"});
  ExpectError([] { Resolve({{"PRISM_TASK_TABLE_SIZE", "-5"}}); },
              {"PRISM_TASK_TABLE_SIZE=\"-5\"", "whole number >= 0"});
  ExpectError([] { Resolve({{"PRISM_MAX_LOST_RANKS", "-2"}}); }, {"PRISM_MAX_LOST_RANKS=-2", "-1 for no limit"});
  // Amounts whose fixed-point units would overflow (issue 14, item 6).
  ExpectError([] { Resolve({}, {"--prism-num-cpus=1e18"}); }, {"--prism-num-cpus=1e18", "at most 1e14"});
  ExpectError([] { Resolve({{"PRISM_RESOURCES", "ssd:1e15"}}); }, {"ssd", "at most"});
}

TEST(SettingsTest, BadValuesInConfigAreRejected) {
  Config code;
  code.num_cpus = -1;
  ExpectError([&] { Resolve({}, {}, code); }, {"Config::num_cpus=-1", ">= 0"});
  // Even when a higher source overrides it.
  ExpectError([&] { Resolve({{"PRISM_NUM_CPUS", "2"}}, {}, code); }, {"Config::num_cpus=-1"});
  code = {};
  code.object_store_memory = 1000;
  ExpectError([&] { Resolve({}, {}, code); }, {"Config::object_store_memory=1000"});
  code = {};
  code.rank_timeout_s = -5;
  ExpectError([&] { Resolve({}, {}, code); }, {"Config::rank_timeout_s=-5", "> 0"});
  code = {};
  code.ranks_per_node = -1;
  ExpectError([&] { Resolve({}, {}, code); }, {"Config::ranks_per_node=-1"});
  code = {};
  code.log_level = "verbose";
  ExpectError([&] { Resolve({}, {}, code); }, {"Config::log_level=\"verbose\""});
  code = {};
  code.resources = {{"CPU", 2}};
  ExpectError([&] { Resolve({}, {}, code); }, {"Config::resources", "\"CPU\"", "num_cpus"});
  code.resources = {{"a:b", 1}};
  ExpectError([&] { Resolve({}, {}, code); }, {"\"a:b\"", "':'"});
  code.resources = {{"ssd", -1}};
  ExpectError([&] { Resolve({}, {}, code); }, {"\"ssd\"", "-1", ">= 0"});
  code.resources = {{"", 1}};
  ExpectError([&] { Resolve({}, {}, code); }, {"Config::resources", "empty"});
}

TEST(ParseResourceListTest, BadLists) {
  ExpectError([] { ParseResourceList("PRISM_RESOURCES", "ssd"); },
              {"PRISM_RESOURCES=\"ssd\"", "\"ssd\" has no amount"});
  ExpectError([] { ParseResourceList("PRISM_RESOURCES", ":1"); },
              {"PRISM_RESOURCES=\":1\"", "empty"});
  ExpectError([] { ParseResourceList("PRISM_RESOURCES", "ssd:x"); }, {"\"x\"", "not a number"});
  ExpectError([] { ParseResourceList("PRISM_RESOURCES", "ssd:-1"); }, {"-1", ">= 0"});
  ExpectError([] { ParseResourceList("PRISM_RESOURCES", "ssd:1,ssd:2"); }, {"\"ssd\"", "twice"});
  ExpectError([] { ParseResourceList("--prism-resources", "GPU:1"); },
              {"--prism-resources=\"GPU:1\"", "num_gpus"});
  ExpectError([] { ParseResourceList("--prism-resources", "memory:100"); },
              {"\"memory\"", "object_store_memory"});
}

TEST(ParseLogLevelTest, Levels) {
  EXPECT_EQ(ParseLogLevel("X", "error"), LogLevel::kError);
  EXPECT_EQ(ParseLogLevel("X", "Warn"), LogLevel::kWarn);
  EXPECT_EQ(ParseLogLevel("X", "warning"), LogLevel::kWarn);
  EXPECT_EQ(ParseLogLevel("X", "INFO"), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel("X", "debug"), LogLevel::kDebug);
  ExpectError([] { ParseLogLevel("X", "trace"); }, {"X=\"trace\""});
}

TEST(SettingsTest, UnknownPrismFlag) {
  ExpectError([] { Resolve({}, {"--prism-num-cpu=4"}); },
              {"unknown flag --prism-num-cpu", "--prism-num-cpus", "--prism-log-level"});
}

TEST(SettingsTest, FlagWithoutValue) {
  ExpectError([] { Resolve({}, {"--prism-num-cpus"}); },
              {"--prism-num-cpus needs a value", "--prism-num-cpus=4"});
}

TEST(SettingsTest, UserArgumentsAreIgnored) {
  Settings s = Resolve({}, {"--epochs=3", "-n", "4", "input.txt", "--prism"});
  EXPECT_EQ(s.num_cpus, 8.0);
}

}  // namespace
}  // namespace prism::internal

namespace prism::internal {
namespace {

TEST(SettingsTest, NetworkIsAnyShmOrAnInterfaceOfThisHost) {
  EXPECT_EQ(Resolve({}).network, "any");
  EXPECT_EQ(Resolve({{"PRISM_NETWORK", "shm"}}).network, "shm");
  EXPECT_EQ(Resolve({}, {"--prism-network=lo"}).network, "lo");
  Config code;
  code.network = "lo";
  EXPECT_EQ(Resolve({}, {}, code).network, "lo");
  ExpectError([] { Resolve({}, {"--prism-network=nosuchif0"}); },
              {"--prism-network=\"nosuchif0\"", "not a network interface", "lo", "shm"});
  // Read before MPI starts: the highest source wins, unvalidated (ResolveSettings checks).
  EXPECT_EQ(NetworkSetting(code, {"--prism-network=eth9"}, FakeEnv({{"PRISM_NETWORK", "shm"}})), "eth9");
  EXPECT_EQ(NetworkSetting(Config{}, {}, FakeEnv({})), "any");
}

TEST(SettingsTest, RayNamespaceComesFromCodeAndMayNotBeEmpty) {
  EXPECT_EQ(Resolve({}).ray_namespace, "") << "unset: the job's anonymous namespace";
  Config code;
  code.ray_namespace = "colors";
  EXPECT_EQ(Resolve({}, {}, code).ray_namespace, "colors");
  code.ray_namespace = "";
  ExpectError([&] { Resolve({}, {}, code); }, {"Config::ray_namespace is empty"});
}

TEST(SettingsTest, EnvVarsAreSetAndBadNamesRefusedBeforeAnyIsSet) {
  unsetenv("PRISM_TEST_ENV_A");
  ExpectError([] { ApplyEnvVars({{"PRISM_TEST_ENV_A", "1"}, {"BAD=NAME", "x"}}); }, {"BAD=NAME", "'='"});
  EXPECT_EQ(getenv("PRISM_TEST_ENV_A"), nullptr) << "nothing set when one is bad";
  ExpectError([] { ApplyEnvVars({{"", "x"}}); }, {"non-empty"});
  ApplyEnvVars({{"PRISM_TEST_ENV_A", "1"}});
  ASSERT_NE(getenv("PRISM_TEST_ENV_A"), nullptr);
  EXPECT_STREQ(getenv("PRISM_TEST_ENV_A"), "1");
  unsetenv("PRISM_TEST_ENV_A");
}

}  // namespace
}  // namespace prism::internal
