// prism_serve_benchmark: Prism Serve end to end (issue 18), in one run on the job's ranks:
//
//   http         a no-op deployment ("noop", 2 replicas, on the worker ranks) behind the
//                HTTP ingress on rank 0, loaded over 127.0.0.1 by `wrk -t1 -cC --latency`
//                at C = 1, 8, 64 connections for --duration s each: requests/s, p50/p99.
//                Beside each row, the same run's HTTP layer alone: an in-process
//                http::Server on rank 0 whose handler answers "ok" inline (what
//                prism_serve_http_benchmark measures), so the cost of routing + the replica
//                call is the difference. Targets: p50 <= 0.3 ms at 1 connection, >= 10,000
//                requests/s (at 64 connections).
//   handle       a deployment calling another (Caller -> Noop::Work, replicas on two worker
//                ranks, one call at a time through a DeploymentHandle): p50/p99 of each
//                call, next to a plain actor on the caller's rank calling a plain actor on
//                the callee's rank doing the same work (int x -> x + 1), and the same two
//                from the driver (rank 0).
//   autoscaling  a deployment whose handler sleeps --work-ms (5 ms), autoscaling 1..4
//                replicas (target_ongoing_requests 2), under a load step from wrk: 1
//                connection, then 32, then 1 (--step=A,B,C seconds, default 5,10,10).
//                Every 100 ms: the target and running replicas and the ongoing requests,
//                written to --csv (default perf/plots/serve_autoscaling.csv) and drawn to
//                the PNG beside it by perf/plot_serve_autoscaling.py, when python3 (PATH's or
//                /usr/bin's) can import matplotlib (Debian: python3-matplotlib).
//
//   mpirun -n 3 build/perf/prism_serve_benchmark --prism-num-cpus=2 [--quick] [--json=PATH]
//       [--duration=S] [--connections=1,8,64] [--calls=N] [--step=A,B,C] [--work-ms=MS]
//       [--csv=PATH] [--only=http,handle,autoscaling]
//
// Needs at least 2 ranks (replicas go to the worker ranks) and 2 CPUs per rank. Every wrk
// run must see only 2xx responses and no socket errors, else the program fails (exit 1).
// A watchdog ends the program (exit 1) if it runs far past its planned time.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"
#include "prism/api.h"
#include "prism/serve.h"
#include "http/server.h"
#include "wrk_runner.h"

#ifndef PRISM_BENCH_SOURCE_DIR
#define PRISM_BENCH_SOURCE_DIR "."
#endif

namespace serve = prism::serve;
using Clock = std::chrono::steady_clock;

namespace {

// ---- The deployments and the plain actors -------------------------------------------------

/// The no-op deployment: "ok" over HTTP; Work(x) = x + 1 through handles.
class Noop {
 public:
  serve::Response operator()(const serve::Request&) { return serve::Response::Text("ok"); }
  int Work(int x) { return x + 1; }
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

/// Times `n` calls of `call(i)`, one at a time, after `n / 10` warm-up calls: microseconds each.
template <typename F>
std::vector<double> TimeCalls(int n, F call) {
  for (int i = 0; i < n / 10; ++i) call(i);
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    call(i);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return us;
}

/// A deployment calling Noop through a handle, one call at a time.
class Caller {
 public:
  explicit Caller(serve::DeploymentHandle<Noop> target) : target_(std::move(target)) {}
  serve::Response operator()(const serve::Request&) { return serve::Response::Text("caller"); }
  std::vector<double> HandleLatencies(int n) {
    return TimeCalls(n, [this](int i) {
      if (target_.Method<&Noop::Work>(i).Result(30) != i + 1) throw prism::Error("Noop::Work answered wrong");
    });
  }
  int Rank() { return prism::GetRuntimeContext().GetRank(); }

 private:
  serve::DeploymentHandle<Noop> target_;
};

/// The plain-actor counterpart of Noop::Work.
class PlainTarget {
 public:
  static PlainTarget* Create() { return new PlainTarget(); }
  int Work(int x) { return x + 1; }
};

/// The plain-actor counterpart of Caller.
class PlainCaller {
 public:
  static PlainCaller* Create() { return new PlainCaller(); }
  std::vector<double> ActorLatencies(prism::ActorHandle<PlainTarget> target, int n) {
    return TimeCalls(n, [&](int i) {
      if (*target.Task(&PlainTarget::Work).Remote(i).Get(30000) != i + 1) {
        throw prism::Error("PlainTarget::Work answered wrong");
      }
    });
  }
};

/// The autoscaled deployment: each request sleeps `work_ms`, then answers "ok".
class Sleepy {
 public:
  explicit Sleepy(int work_ms) : work_ms_(work_ms) {}
  serve::Response operator()(const serve::Request&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(work_ms_));
    return serve::Response::Text("ok");
  }

 private:
  int work_ms_;
};

// ---- Options -----------------------------------------------------------------------------

struct Options {
  bool quick = false;
  std::string json = "perf/results/serve_benchmark.json";
  double duration_s = 5;
  std::vector<int> connections = {1, 8, 64};
  int calls = 5000;
  std::vector<double> step = {5, 10, 10};
  int step_connections = 32;
  int work_ms = 5;
  std::string csv = "perf/plots/serve_autoscaling.csv";
  std::string only = "http,handle,autoscaling";
  bool Wants(const std::string& part) const { return ("," + only + ",").find("," + part + ",") != std::string::npos; }
};

/// The items of a comma-separated list.
std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

/// Parses our flags (bench_cli.h). Exits on --help and on a bad flag.
Options ParseOptions(int argc, char** argv) {
  Options o;
  prism_bench::Cli cli("prism_serve_benchmark",
                       "prism::serve: HTTP, handle calls and autoscaling:\n"
                       "  mpirun -n 3 prism_serve_benchmark --prism-num-cpus=2 [flags]");
  cli.AddQuick("1 s per wrk run, 500 calls, a 2,4,5 s load step (a smoke run)")
      .AddJson("perf/results/serve_benchmark.json");
  std::vector<std::string> only = {"http", "handle", "autoscaling"};
  cli.app.add_option("--duration", o.duration_s, "seconds per wrk run in the http part (default 5)")
      ->check(CLI::Range(0.5, 600.0));
  cli.app.add_option("--connections", o.connections, "wrk's connection counts in the http part (default 1,8,64)")
      ->delimiter(',')
      ->check(CLI::Range(1, 10000));
  cli.app.add_option("--calls", o.calls, "measured calls per handle / actor row (default 5000)")
      ->check(CLI::Range(10, 1 << 30));
  cli.app.add_option("--step", o.step,
                     "seconds of the load step: 1 connection, 32, then 1 (three values; default 5,10,10)")
      ->delimiter(',')
      ->check(CLI::Range(0.5, 600.0));
  cli.app.add_option("--work-ms", o.work_ms, "the autoscaled handler's sleep (default 5)")
      ->check(CLI::Range(0, 1000));
  cli.app.add_option("--csv", o.csv,
                     "the replicas-over-time CSV (default perf/plots/serve_autoscaling.csv; the plot "
                     "goes beside it as .png)");
  cli.app.add_option("--only", only, "the parts to run (default http,handle,autoscaling)")
      ->delimiter(',')
      ->check(CLI::IsMember({"http", "handle", "autoscaling"}));
  cli.Parse(argc, argv, [&] {
    o.duration_s = 1;
    o.calls = 500;
    o.step = {2, 4, 5};
    cli.json = "perf/results/serve_benchmark_quick.json";
    o.csv = "perf/results/serve_autoscaling_quick.csv";
  });
  if (o.step.size() != 3) {
    std::fprintf(stderr, "prism_serve_benchmark: --step needs three values (A,B,C)\n");
    std::exit(prism::cli::kExitBadFlags);
  }
  o.quick = cli.quick;
  o.json = cli.json;
  o.only = Join(only);
  return o;
}

prism_bench::Json Num(double v) { return prism_bench::JsonNumber(v); }

// ---- The parts ---------------------------------------------------------------------------

/// The http part: wrk against the HTTP layer alone and against the no-op deployment, at
/// each connection count. Appends its entries; returns false when a wrk run failed.
bool RunHttp(const Options& opt, const std::string& wrk_version, std::vector<prism_bench::Entry>& entries) {
  serve::Run(serve::Deployment<Noop>("noop").NumReplicas(2).Bind(), {.route_prefix = "/noop", .name = "noop"});
  const std::string serve_url = serve::Status().endpoint + "/noop";
  // The same run's HTTP layer alone: an in-process server on rank 0, handler inline.
  namespace http = prism::http;
  http::Server alone({}, [](http::Request, http::Respond respond) {
    http::Response r;
    r.body = "ok";
    r.content_type = "text/plain";
    respond(std::move(r));
  });
  const std::string alone_url = alone.endpoint() + "/";
  std::printf("\n== http: no-op deployment (2 replicas on the worker ranks) at %s, wrk -t1, %.3g s a run\n",
              serve_url.c_str(), opt.duration_s);
  std::printf("  %-16s %-34s %-34s %s\n", "connections", "end to end: requests/s, p50, p99",
              "HTTP layer alone: requests/s, p50, p99", "rank 0 CPU us/request (e2e)");
  bool ok = true;
  for (int c : opt.connections) {
    const prism_bench::WrkResult a = prism_bench::RunWrk(alone_url, c, 1, opt.duration_s);
    const prism_bench::WrkResult e = prism_bench::RunWrk(serve_url, c, 1, opt.duration_s);
    for (const auto* r : {&a, &e}) {
      if (!r->ok) {
        std::fprintf(stderr, "prism_serve_benchmark: wrk at %d connections FAILED (%s): %s\n", c,
                     r == &a ? "HTTP layer alone" : "end to end", r->error.c_str());
        ok = false;
      }
    }
    if (!a.ok || !e.ok) continue;
    char left[64], right[64];
    std::snprintf(left, sizeof left, "%.0f/s, %.0f us, %.0f us", e.requests_per_s, e.p50_us, e.p99_us);
    std::snprintf(right, sizeof right, "%.0f/s, %.0f us, %.0f us", a.requests_per_s, a.p50_us, a.p99_us);
    std::printf("  %-16d %-34s %-34s %.1f\n", c, left, right, e.server_cpu_us);
    std::fflush(stdout);

    prism_bench::Entry x;
    x.name = "serve_e2e_wrk_c" + std::to_string(c);
    x.family_index = static_cast<int64_t>(entries.size());
    x.iterations = e.requests;
    x.real_time = e.p50_us;
    x.cpu_time = e.p50_us;
    x.items_per_second = e.requests_per_s;
    x.before_unit = {{"connections", Num(c)},
                     {"p50_us", Num(e.p50_us)},
                     {"p99_us", Num(e.p99_us)},
                     {"rank0_cpu_us_per_request", Num(e.server_cpu_us)},
                     {"http_alone_requests_per_s", Num(a.requests_per_s)},
                     {"http_alone_p50_us", Num(a.p50_us)},
                     {"routing_and_replica_p50_us", Num(e.p50_us - a.p50_us)}};
    x.unit = "requests/s";
    x.per_round = {e.requests_per_s};
    if (c == 1) {
      x.target = prism_bench::Target{"p50 <= 300 us at 1 connection (issue 18)", 300, e.p50_us / 300,
                                     e.p50_us <= 300, !opt.quick};
    } else if (c == 64) {
      x.target = prism_bench::Target{">= 10,000 requests/s (issue 18)", 10000, e.requests_per_s / 10000,
                                     e.requests_per_s >= 10000, !opt.quick};
    }
    x.label = "wrk -t1 -c" + std::to_string(c) + ", no-op deployment, 2 replicas on worker ranks; " + wrk_version;
    entries.push_back(std::move(x));

    prism_bench::Entry y;
    y.name = "serve_http_alone_wrk_c" + std::to_string(c);
    y.family_index = static_cast<int64_t>(entries.size());
    y.iterations = a.requests;
    y.real_time = a.p50_us;
    y.cpu_time = a.p50_us;
    y.items_per_second = a.requests_per_s;
    y.before_unit = {{"connections", Num(c)}, {"p50_us", Num(a.p50_us)}, {"p99_us", Num(a.p99_us)}};
    y.unit = "requests/s";
    y.per_round = {a.requests_per_s};
    y.extra = true;
    y.label = "the same run's HTTP layer alone (handler inline on rank 0)";
    entries.push_back(std::move(y));
  }
  alone.Stop();
  serve::Shutdown();
  return ok;
}

/// The handle part: Caller -> Noop through a handle against PlainCaller -> PlainTarget, on
/// the same two worker ranks, and both from the driver.
void RunHandle(const Options& opt, std::vector<prism_bench::Entry>& entries) {
  serve::Run(serve::Deployment<Caller>("caller").Bind(serve::Deployment<Noop>("target").Bind()),
             {.name = "handles", .http = false});
  int caller_rank = -1, target_rank = -1;
  for (const auto& d : serve::Status().deployments) {
    if (d.name == "caller" && !d.replicas.empty()) caller_rank = d.replicas[0].rank;
    if (d.name == "target" && !d.replicas.empty()) target_rank = d.replicas[0].rank;
  }
  auto on = [](int rank) { return prism::NodeAffinitySchedulingStrategy{rank, false}; };
  auto plain_target = prism::Actor(PlainTarget::Create).SetResources({{"CPU", 0}}).SetSchedulingStrategy(on(target_rank)).Remote();
  auto plain_caller = prism::Actor(PlainCaller::Create).SetResources({{"CPU", 0}}).SetSchedulingStrategy(on(caller_rank)).Remote();
  auto caller = serve::GetDeploymentHandle<Caller>("caller");
  auto target = serve::GetDeploymentHandle<Noop>("target");

  const double timeout = 120 + opt.calls * 0.01;
  std::vector<double> replica_handle = caller.Method<&Caller::HandleLatencies>(opt.calls).Result(timeout);
  std::vector<double> replica_actor =
      *plain_caller.Task(&PlainCaller::ActorLatencies).Remote(plain_target, opt.calls).Get(static_cast<int>(timeout * 1000));
  std::vector<double> driver_handle = TimeCalls(opt.calls, [&](int i) {
    if (target.Method<&Noop::Work>(i).Result(30) != i + 1) throw prism::Error("Noop::Work answered wrong");
  });
  std::vector<double> driver_actor = TimeCalls(opt.calls, [&](int i) {
    if (*plain_target.Task(&PlainTarget::Work).Remote(i).Get(30000) != i + 1) throw prism::Error("wrong");
  });
  serve::Shutdown();

  std::printf("\n== handle: one call at a time, Work(x) = x + 1; caller on rank %d, callee on rank %d; %d calls\n",
              caller_rank, target_rank, opt.calls);
  std::printf("  %-52s %-12s %s\n", "", "p50 (us)", "p99 (us)");
  struct Row {
    const char* name;
    const char* what;
    const std::vector<double>* us;
    bool extra;
  } rows[] = {
      {"serve_handle_call_replica", "deployment -> deployment (DeploymentHandle)", &replica_handle, false},
      {"serve_actor_call_replica", "plain actor -> plain actor, same ranks", &replica_actor, true},
      {"serve_handle_call_driver", "driver -> deployment (DeploymentHandle)", &driver_handle, false},
      {"serve_actor_call_driver", "driver -> plain actor, same rank", &driver_actor, true},
  };
  for (const Row& r : rows) {
    const double p50 = Percentile(*r.us, 0.5), p99 = Percentile(*r.us, 0.99);
    std::printf("  %-52s %-12.1f %.1f\n", r.what, p50, p99);
    prism_bench::Entry e;
    e.name = r.name;
    e.family_index = static_cast<int64_t>(entries.size());
    e.iterations = opt.calls;
    e.real_time = p50;
    e.cpu_time = p50;
    e.items_per_second = p50 > 0 ? 1e6 / p50 : 0;
    e.before_unit = {{"p50_us", Num(p50)}, {"p99_us", Num(p99)}};
    e.unit = "us";
    e.per_round = {p50};
    if (r.extra) e.extra = true;
    e.label = r.what;
    entries.push_back(std::move(e));
  }
  const double ratio = Percentile(replica_handle, 0.5) / std::max(1e-9, Percentile(replica_actor, 0.5));
  std::printf("  handle / actor p50, replica to replica: %.2fx\n", ratio);
  entries[entries.size() - 4].after_rounds = {{"ratio_to_actor_call", Num(ratio)}};
}

/// One sample of the autoscaled deployment.
struct Sample {
  double t = 0;
  int connections = 0;
  int target = 0;
  int running = 0;
  int ongoing = 0;
};

/// The autoscaling part: a load step from wrk, the replicas sampled every 100 ms.
bool RunAutoscaling(const Options& opt, std::vector<prism_bench::Entry>& entries) {
  serve::AutoscalingConfig a;
  a.min_replicas = 1;
  a.max_replicas = 4;
  a.target_ongoing_requests = 2;
  a.upscale_delay_s = 1;
  a.downscale_delay_s = 3;
  a.look_back_period_s = 1;
  a.metrics_interval_s = 0.1;
  serve::Run(serve::Deployment<Sleepy>("sleepy").MaxOngoingRequests(5).Autoscaling(a).Bind(opt.work_ms),
             {.route_prefix = "/sleepy", .name = "autoscaling"});
  const std::string url = serve::Status().endpoint + "/sleepy";

  std::atomic<int> connections{0};
  std::atomic<bool> done{false};
  std::vector<Sample> samples;
  const auto t0 = Clock::now();
  std::thread sampler([&] {
    while (!done.load()) {
      Sample s;
      s.t = std::chrono::duration<double>(Clock::now() - t0).count();
      s.connections = connections.load();
      for (const auto& d : serve::Status().deployments) {
        if (d.name != "sleepy") continue;
        s.target = d.target_replicas;
        s.ongoing = d.queued_requests;
        for (const auto& r : d.replicas) {
          s.running += r.state == serve::ReplicaState::kRunning;
          s.ongoing += r.ongoing_requests;
        }
      }
      samples.push_back(s);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const int step_c[3] = {1, opt.step_connections, 1};
  bool ok = true;
  double step_at = 0, down_at = 0;
  for (int i = 0; i < 3; ++i) {
    connections = step_c[i];
    if (i == 1) step_at = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i == 2) down_at = std::chrono::duration<double>(Clock::now() - t0).count();
    const prism_bench::WrkResult r = prism_bench::RunWrk(url, step_c[i], 1, opt.step[static_cast<size_t>(i)]);
    if (!r.ok) {
      std::fprintf(stderr, "prism_serve_benchmark: autoscaling load (%d connections) FAILED: %s\n", step_c[i],
                   r.error.c_str());
      ok = false;
    }
  }
  done = true;
  sampler.join();
  serve::Shutdown();

  // When the running replicas first reached the maximum after the step, and first came back
  // to the minimum after it.
  double up_s = -1, down_s = -1;
  int peak = 0;
  for (const Sample& s : samples) {
    peak = std::max(peak, s.running);
    if (up_s < 0 && s.t >= step_at && s.running >= a.max_replicas) up_s = s.t - step_at;
    if (down_s < 0 && s.t >= down_at && s.running <= a.min_replicas && s.target <= a.min_replicas) {
      down_s = s.t - down_at;
    }
  }
  std::filesystem::path csv(opt.csv);
  if (csv.has_parent_path()) std::filesystem::create_directories(csv.parent_path());
  {
    std::ofstream out(csv);
    out << "t_s,connections,target_replicas,running_replicas,ongoing_requests\n";
    for (const Sample& s : samples) {
      out << s.t << "," << s.connections << "," << s.target << "," << s.running << "," << s.ongoing << "\n";
    }
    if (!out) throw prism::Error("cannot write " + opt.csv);
  }
  std::printf("\n== autoscaling: %d..%d replicas, target_ongoing_requests %.3g, upscale_delay_s %.3g, "
              "downscale_delay_s %.3g, look_back_period_s %.3g; handler sleeps %d ms\n",
              a.min_replicas, a.max_replicas, a.target_ongoing_requests, a.upscale_delay_s, a.downscale_delay_s,
              a.look_back_period_s, opt.work_ms);
  std::printf("  load: 1 connection %.3g s, %d connections %.3g s, 1 connection %.3g s\n", opt.step[0],
              opt.step_connections, opt.step[1], opt.step[2]);
  std::printf("  peak running replicas %d; at %d replicas %.2f s after the step up; back at %d %.2f s after the "
              "step down (-1: never)\n",
              peak, a.max_replicas, up_s, a.min_replicas, down_s);
  std::printf("  CSV: %s\n", std::filesystem::absolute(csv).c_str());

  // The first python3 that has matplotlib: PATH's, else Debian's (a pyenv on PATH may lack it).
  std::string python;
  for (const char* p : {"python3", "/usr/bin/python3"}) {
    int rc = 0;
    prism_bench::RunCapture(std::string(p) + " -c 'import matplotlib' >/dev/null", &rc);
    if (rc == 0) {
      python = p;
      break;
    }
  }
  if (!python.empty()) {
    std::filesystem::path png = csv;
    png.replace_extension(".png");
    const std::string cmd = python + " " + PRISM_BENCH_SOURCE_DIR + "/perf/plot_serve_autoscaling.py " +
                            csv.string() + " " + png.string();
    int rc = 0;
    const std::string out = prism_bench::RunCapture(cmd, &rc);
    if (rc == 0) {
      std::printf("  plot: %s\n", std::filesystem::absolute(png).c_str());
    } else {
      std::fprintf(stderr, "prism_serve_benchmark: the plot failed (%s): %s\n", cmd.c_str(), out.c_str());
    }
  } else {
    std::printf("  (no plot: no python3 can import matplotlib; Debian: apt-get install python3-matplotlib)\n");
  }

  prism_bench::Entry e;
  e.name = "serve_autoscaling_upscale";
  e.family_index = static_cast<int64_t>(entries.size());
  e.iterations = 1;
  e.real_time = up_s * 1e6;
  e.cpu_time = e.real_time;
  e.unit = "s";
  e.per_round = {up_s};
  e.after_rounds = {{"peak_replicas", Num(peak)},
                    {"max_replicas", Num(a.max_replicas)},
                    {"upscale_delay_s", Num(a.upscale_delay_s)},
                    {"downscale_s", Num(down_s)},
                    {"downscale_delay_s", Num(a.downscale_delay_s)}};
  e.label = "seconds from the load step (1 -> 32 connections) to 4 running replicas";
  entries.push_back(std::move(e));
  if (peak < a.max_replicas || down_s < 0) {
    std::fprintf(stderr,
                 "prism_serve_benchmark: autoscaling did not follow the step (peak %d of %d replicas; back to %d: "
                 "%s)\n",
                 peak, a.max_replicas, a.min_replicas, down_s < 0 ? "never" : "yes");
    ok = false;
  }
  return ok;
}

}  // namespace

PRISM_REMOTE(PlainTarget::Create, &PlainTarget::Work, PlainCaller::Create, &PlainCaller::ActorLatencies);

int main(int argc, char** argv) {
  const Options opt = ParseOptions(argc, argv);
  prism::Init(argc, argv);  // ranks 1.. serve tasks inside Init and exit there
  const int world = prism::GetRuntimeContext().GetWorldSize();
  if (world < 2) {
    std::fprintf(stderr, "prism_serve_benchmark: needs at least 2 ranks (replicas go to the worker ranks): "
                         "mpirun -n 3 ... --prism-num-cpus=2\n");
    prism::Shutdown();
    return 2;
  }
  double load_start[3];
  prism_bench::LoadAverage(load_start);
  const double planned_s = (opt.Wants("http") ? opt.connections.size() * 2 * (opt.duration_s + 3) : 0) +
                           (opt.Wants("autoscaling") ? opt.step[0] + opt.step[1] + opt.step[2] + 20 : 0) +
                           (opt.Wants("handle") ? opt.calls * 4 * 0.002 : 0) + 120;
  std::thread([planned_s] {
    std::this_thread::sleep_for(std::chrono::duration<double>(planned_s));
    std::fprintf(stderr, "prism_serve_benchmark: still running after %.0f s; giving up\n", planned_s);
    std::_Exit(1);
  }).detach();

  const std::string wrk_version = prism_bench::WrkVersion();
  std::printf("Prism Serve end to end: %d ranks; %s; load avg %.2f\n", world,
              wrk_version.empty() ? "wrk not installed" : wrk_version.c_str(), load_start[0]);
  int status = 0;
  std::vector<prism_bench::Entry> entries;
  try {
    if (wrk_version.empty() && (opt.Wants("http") || opt.Wants("autoscaling"))) {
      std::printf("  note: wrk is not on PATH, so the http and autoscaling parts are skipped "
                  "(Debian: apt-get install wrk)\n");
    }
    if (!wrk_version.empty() && opt.Wants("http") && !RunHttp(opt, wrk_version, entries)) status = 1;
    if (opt.Wants("handle")) RunHandle(opt, entries);
    if (!wrk_version.empty() && opt.Wants("autoscaling") && !RunAutoscaling(opt, entries)) status = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_serve_benchmark: %s\n", e.what());
    status = 1;
  }
  if (!entries.empty()) {
    try {
      prism_bench::Context c;
      c.executable = "prism_serve_benchmark";
      c.mhz_per_cpu = static_cast<int>(prism_bench::CpuMhz());
      c.mpi_ranks = world;
      c.load_avg_at_start = std::vector<double>(load_start, load_start + 3);
      c.quick = opt.quick;
      c.rounds = 1;
      c.fields = {{"wrk_duration_s", Num(opt.duration_s)},
                  {"calls", Num(opt.calls)},
                  {"work_ms", Num(opt.work_ms)},
                  {"wrk", prism_bench::JsonString(wrk_version.empty() ? "not installed" : wrk_version)}};
      c.statistic = "one run (wrk's percentiles; the calls' own percentiles)";
      prism_bench::WriteReport(opt.json, c, entries);
      std::printf("\nJSON: %s\n", std::filesystem::absolute(opt.json).c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism_serve_benchmark: %s\n", e.what());
      status = 1;
    }
  }
  prism::Shutdown();
  return status;
}
