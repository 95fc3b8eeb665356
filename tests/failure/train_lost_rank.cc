// A training worker's rank lost mid-run under `mpirun --enable-recovery` (issue 44):
// TorchTrainer::Fit restarts the group from the latest checkpoint on the ranks left.
// tests/failure/CMakeLists.txt runs it through expect_failure.sh and checks its output.
//
//   prism_train_lost_rank_test continue   (4 ranks)
//   prism_train_lost_rank_test give-up    (3 ranks)
//
// The loop is plain: each step all-reduces a tensor over Train's MPI collective (every
// worker's step must match) and world rank 0 reports a checkpoint holding the step. On the
// first attempt the worker on the group's highest MPI rank kills its own process with
// SIGKILL at step kKillAt. Then:
//   * continue: 4 workers, ScalingConfig::min_workers 2, max_failures 1. The group restarts
//     with 3 workers on the ranks left, resumed from the latest checkpoint (its first step
//     is the checkpoint's + 1, never 0), and finishes; the history has every step once
//     the failure is reported; prints the time from the kill to the first step after the
//     restart, and "train_lost_rank ok: ...".
//   * give-up: 3 workers, min_workers 3: the ranks left cannot hold the group, so Fit
//     throws TrainingFailedError within a bound, naming the lost rank and what to do.
#include <prism/api.h>
#include <prism/state.h>
#include <prism/train.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace train = prism::train;

namespace {

constexpr int kSteps = 16;
constexpr int kKillAt = 6;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void StepLoop(train::Config config) {
  const auto& ctx = train::GetContext();
  auto& coll = ctx.GetCollective();
  const std::string dir = config.Get<std::string>("dir", "");
  int start = 0;
  if (auto ckpt = train::GetCheckpoint()) {
    std::ifstream in(ckpt->path() + "/step.txt");
    in >> start;
    ++start;
  }
  // The victim: the worker on the group's highest MPI rank (never rank 0, the head's).
  auto ranks = coll.AllGather(torch::tensor({prism::GetRuntimeContext().GetRank()}, torch::kInt64));
  int64_t highest = 0;
  for (const auto& r : ranks) highest = std::max(highest, r.item<int64_t>());
  const bool victim = prism::GetRuntimeContext().GetRank() == highest;
  const bool first_attempt = !std::filesystem::exists(dir + "/killed");
  for (int step = start; step < kSteps; ++step) {
    if (victim && first_attempt && step == kKillAt) {
      std::ofstream(dir + "/killed") << NowMs();
      ::kill(::getpid(), SIGKILL);
    }
    if (ctx.GetWorldRank() == 0 && !first_attempt && step == start) {
      std::ofstream(dir + "/first_step_after") << NowMs();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto t = torch::tensor({static_cast<double>(step)}, torch::kFloat64);
    coll.AllReduce(t, train::ReduceOp::kSum);
    if (t.item<double>() != static_cast<double>(step) * ctx.GetWorldSize()) {
      throw std::runtime_error("the workers are out of step at step " + std::to_string(step));
    }
    std::optional<train::Checkpoint> ckpt;
    if (ctx.GetWorldRank() == 0) {
      std::string d = train::MakeTempCheckpointDir();
      std::ofstream(d + "/step.txt") << step;
      ckpt = train::Checkpoint::FromDirectory(d);
    }
    train::Report({{"step", step}, {"workers", ctx.GetWorldSize()}}, ckpt);
  }
}

PRISM_REMOTE(StepLoop);

int Fail(const std::string& what) {
  std::fprintf(stderr, "train_lost_rank FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  prism::Shutdown();
  return 1;
}

int64_t ReadMs(const std::string& file) {
  int64_t v = -1;
  std::ifstream(file) >> v;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "continue";
  const int world = prism::GetRuntimeContext().GetWorldSize();
  const std::string dir = "/tmp/prism-train-lost-rank-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  train::TorchTrainerOptions o;
  o.train_loop_config.Set("dir", dir);
  o.scaling_config.num_workers = world;
  o.scaling_config.min_workers = mode == "continue" ? 2 : world;
  o.run_config.name = "lost_rank_" + mode;
  o.run_config.storage_path = dir + "/runs";
  o.run_config.failure_config.max_failures = 1;
  o.run_config.verbose = true;
  const auto start = std::chrono::steady_clock::now();
  try {
    train::Result r = train::TorchTrainer(StepLoop, o).Fit();
    if (mode != "continue") return Fail("Fit returned although only " + std::to_string(world - 1) + " ranks are left");
    std::vector<double> steps;
    for (const auto& m : r.metrics_history) steps.push_back(m.at("step"));
    std::string shown;
    for (double s : steps) shown += std::to_string(static_cast<int>(s)) + " ";
    std::fprintf(stderr, "steps reported: %s\n", shown.c_str());
    if (r.metrics.at("step") != kSteps - 1) return Fail("the last report is not step " + std::to_string(kSteps - 1));
    if (r.metrics.at("workers") != world - 1) return Fail("the last attempt did not run on the ranks left");
    // Resumed: after the kill the steps continue from the checkpoint, never from 0 again.
    auto again = std::find(steps.begin() + 1, steps.end(), 0.0);
    if (again != steps.end()) return Fail("the restarted group began again at step 0");
    if (r.failures.size() != 1) return Fail("Result::failures has " + std::to_string(r.failures.size()) + " entries, not 1");
    for (const auto& t : prism::state::ListTasks()) {
      if (t.name.find("_worker_") == std::string::npos) continue;
      std::fprintf(stderr, "task %s: %s on rank %d, attempt %d %s\n", t.name.c_str(), t.state.c_str(), t.rank,
                   t.attempt, t.error_message.c_str());
    }
    const int64_t killed = ReadMs(dir + "/killed"), resumed = ReadMs(dir + "/first_step_after");
    if (killed < 0 || resumed < 0) return Fail("no kill or no step after the restart was recorded");
    std::printf("train_lost_rank ok: %zu reports, last step %d on %d workers after a rank was lost; "
                "kill to first step after the restart: %lld ms; failure reported: %s\n",
                steps.size(), kSteps - 1, world - 1, static_cast<long long>(resumed - killed),
                r.failures.front().c_str());
  } catch (const train::TrainingFailedError& e) {
    const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (mode == "continue") return Fail(std::string("Fit failed: ") + e.what());
    std::printf("train_lost_rank gave up after %.1f s: %s\n", secs, e.what());
  }
  std::fflush(stdout);
  std::filesystem::remove_all(dir);
  prism::Shutdown();
  return 0;
}
