// A small job for the dashboard's tests (tests/mpi/dashboard_test.py, dashboard_browser_test.py):
// run it with --prism-dashboard=loopback under mpirun; it runs tasks (20 Square, one Fail,
// one Hold per worker rank that runs until the end), a named actor on each worker rank, a
// placement group, two KV keys, a Tune experiment of 3 trials, a Serve deployment of 2
// replicas behind HTTP (its endpoint in <dir>/serve.url) and a Data pipeline (their panels
// in the dashboard's Libraries view), three calls to counter-1 that wait for the end (its
// pending calls), writes "ready" to <dir>/ready, then holds the job until
// <dir>/stop appears (at most 60 s) and shuts down (which writes the report). With
// DASHBOARD_APP_EXIT=75 it returns 75 from main instead, without Shutdown, as a preempted
// job does (kExitPreempted): the report is then written at exit. With DASHBOARD_APP_SIGNAL=
// guarded it holds a PreemptionGuard, as a training run does, and on SIGTERM returns 75
// without Shutdown; with DASHBOARD_APP_SIGNAL=unguarded it only waits (a SIGTERM then ends
// rank 0 at once). Either way it writes rank 0's pid to <dir>/pid first, for the signal.
//
//   prism_dashboard_app <dir> [--prism-...]
#include <prism/api.h>
#include <prism/data.h>
#include <prism/platform/preemption.h>
#include <prism/preemption.h>
#include <prism/serve.h>
#include <prism/tune.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <unistd.h>

namespace {

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

int Square(int x) { return x * x; }
int Fail(int) { throw std::runtime_error("dashboard test: this task fails on purpose"); }
/// Runs until <dir>/stop exists (so the ranks table shows running tasks).
int Hold(std::string dir) {
  std::printf("dashboard test: rank %d holds\n", prism::GetRuntimeContext().GetRank());
  std::fflush(stdout);
  for (int i = 0; i < 600 && !Exists(dir + "/stop"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return 0;
}

void Linear(prism::tune::Config config) {
  for (int step = 1; step <= 3; ++step) prism::tune::Report({{"score", 10.0 * config.Get<int>("a", 0) + step}});
}

prism::data::Row Same(const prism::data::Row& row) { return row; }

class Greeter {
 public:
  std::string Greet(std::string who) { return "hello " + who; }
  prism::serve::Response operator()(const prism::serve::Request& r) { return prism::serve::Response::Json({{"hello", r.path}}); }
};

class Counter {
 public:
  static Counter* Create() { return new Counter(); }
  int Add(int x) { return value_ += x; }
  /// Waits for <dir>/stop: the calls behind it stay pending.
  int Wait(std::string dir) { return Hold(dir); }

 private:
  int value_ = 0;
};
PRISM_REMOTE(Square, Fail, Hold, Linear, Same, Counter::Create, &Counter::Add, &Counter::Wait);

}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <dir> [--prism-...]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int world = prism::GetRuntimeContext().GetWorldSize();
  std::vector<prism::ObjectRef<int>> squares;
  for (int i = 0; i < 20; ++i) squares.push_back(prism::Task(Square).Remote(i));
  for (auto& s : squares) (void)s.Get(30000);
  try {
    (void)prism::Task(Fail).Remote(1).Get(30000);
  } catch (const prism::Error&) {
  }
  std::vector<prism::ActorHandle<Counter>> counters;
  for (int r = 1; r < world; ++r) {
    auto c = prism::Actor(Counter::Create)
                 .SetName("counter-" + std::to_string(r))
                 .SetResource("rank:" + std::to_string(r), 0.01)
                 .Remote();
    (void)c.Task(&Counter::Add).Remote(r).Get(30000);
    counters.push_back(c);
  }
  auto pg = prism::CreatePlacementGroup({"dashboard-pg", {{{"CPU", 1}}}, prism::PlacementStrategy::PACK});
  (void)pg.Wait(10);
  prism::kv::Put("dashboard/a", "1");
  prism::kv::Put("dashboard/b", "2");
  prism::tune::Tuner tuner(Linear, {{"a", prism::tune::GridSearch({1, 2, 3})}},
                           {.metric = "score", .mode = "max"}, {.name = "dashboard-tune", .verbose = 0});
  (void)tuner.Fit();
  if (prism::data::Range(1000, 4).Map(Same).Count() != 1000) return 3;
  prism::serve::Run(prism::serve::Deployment<Greeter>("dash-greeter").NumReplicas(2).RayActorOptions({{"CPU", 0}}).Bind(),
                    {.route_prefix = "/greet", .name = "dash", .endpoint_file = dir + "/serve.url"});
  (void)prism::serve::GetDeploymentHandle<Greeter>("dash-greeter").Method<&Greeter::Greet>(std::string("you")).Result(30);
  std::vector<prism::ObjectRef<int>> holds;
  for (int i = 0; i < 3 && world > 1; ++i) holds.push_back(counters[0].Task(&Counter::Wait).Remote(dir));
  for (int r = 1; r < world; ++r) {
    holds.push_back(prism::Task(Hold).SetResource("rank:" + std::to_string(r), 0.01).Remote(dir));
  }
  const char* signal_mode = std::getenv("DASHBOARD_APP_SIGNAL");
  std::optional<prism::platform::PreemptionGuard> guard;
  if (signal_mode != nullptr && std::string(signal_mode) == "guarded") guard.emplace("the dashboard app returns 75");
  std::ofstream(dir + "/pid") << ::getpid() << "\n";
  std::ofstream(dir + "/ready") << "ready\n";
  for (int i = 0; i < 600 && !Exists(dir + "/stop"); ++i) {
    if (guard && prism::PreemptionSignal() != 0) {
      std::ofstream(dir + "/stop") << "preempted\n";  // the held tasks end
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& h : holds) (void)h.Get(30000);
  prism::serve::Shutdown();
  if (guard) return prism::kExitPreempted;
  if (const char* code = std::getenv("DASHBOARD_APP_EXIT"); code != nullptr) return std::atoi(code);
  prism::Shutdown();
  return 0;
}
