// prism_tune_benchmark: prism::tune measured end to end from the user's Tuner::Fit, in three
// parts (perf/README.md, "Tune"):
//
//   overhead    Ray Tune's bookkeeping-overhead release test scaled to this machine: N trials
//               (default 2,000), each sleeps S seconds (0.2) and reports once, C at a time (16).
//               Reported: Fit's wall time, the theoretical minimum N * S / C and the overhead
//               (wall / minimum - 1; target <= 3 %), split into time spent inside the trials
//               beyond S (the sleep's own overshoot and Report) and time the trial slots sat
//               idle (the driver's bookkeeping between one trial's report and the next trial's
//               start, the first launch and the end of Fit).
//   throughput  T trials (16) each reporting R times (2,000) as fast as they can: the driver's
//               results/s = T * R / Fit's wall time (target >= 20,000/s), with the trials' own
//               reporting rate and the time from the last report to Fit's return (the driver's
//               backlog) beside it.
//   search      The Branin function (2 floats, minimum 0.397887), 1,000 trials, with Prism's
//               BasicVariantGenerator and TPESearch through Tuner::Fit (each trial a task that
//               computes Branin and reports once, C at a time) and the same searchers alone
//               (Setup, then Suggest + OnTrialResult + OnTrialComplete in a loop on this
//               thread: the searcher's own cost per suggestion), then Optuna's RandomSampler
//               and TPESampler on the same objective (perf/peers/optuna_bench.py, run by this
//               program with /usr/bin/python3; needs Debian's python3-optuna). Reported: ms
//               per trial and the best value found. Each Fit row checks in the experiment's
//               journal that the Tuner ran the searcher it was given (else the row fails).
//
//   mpirun -n 3 build/perf/prism_tune_benchmark --prism-num-cpus=6 [--quick] [--json=PATH]
//       [--parts=overhead,throughput,search] [--rounds=N] [--overhead-rounds=N]
//       [--trials=N] [--sleep-s=S] [--concurrency=C] [--throughput-trials=T] [--reports=R]
//       [--search-trials=N] [--optuna=SCRIPT|off] [--storage=DIR]
//
// The C trial slots are logical CPUs: --prism-num-cpus gives each rank that many (6 on each
// of 3 ranks: 18, of which TuneConfig::max_concurrent_trials uses C), so that 2 real cores
// host 16 trials that sleep. The benchmark stops with a message if the cluster has fewer
// than C CPUs. Trials write their files under --storage (default a fresh directory in the
// system's temp directory, removed at the end). Table on stdout, JSON in Google Benchmark's
// shape at --json (default perf/results/tune_benchmark.json). Exit status 0 when every part
// ran (a missed target is reported, not an error), 1 if one failed, 2 on bad flags.
#include <mpi.h>
#include <prism/api.h>
#include <prism/tune.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"

namespace tune = prism::tune;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

/// Seconds since the epoch on the system clock: the same clock on every rank of one host, so
/// a trial's report time can be set against the driver's Fit start and end.
double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

constexpr double kBraninMin = 0.397887;

double Branin(double x, double y) {
  const double pi = 3.14159265358979323846;
  const double b = 5.1 / (4 * pi * pi), c = 5 / pi, r = 6, s = 10, t = 1 / (8 * pi);
  const double u = y - b * x * x + c * x - r;
  return u * u + s * (1 - t) * std::cos(x) + s;
}

}  // namespace

// ---- Trainables (registered on every rank) ----------------------------------------------

/// Sleeps sleep_s seconds, then reports once (with its wall-clock time of reporting).
void SleepTrial(tune::Config config) {
  std::this_thread::sleep_for(std::chrono::duration<double>(config.Get<double>("sleep_s", 0)));
  tune::Report({{"score", config.Get<double>("score", 0)}, {"t_wall", WallNow()}});
}
PRISM_REMOTE(SleepTrial);

/// Reports `reports` times, as fast as it can.
void ReportLoop(tune::Config config) {
  const int64_t n = config.Get<int64_t>("reports", 1);
  for (int64_t i = 0; i < n; ++i) tune::Report({{"i", static_cast<double>(i)}, {"t_wall", WallNow()}});
}
PRISM_REMOTE(ReportLoop);

/// Computes Branin at the config's (x, y) and reports it once.
void BraninTrial(tune::Config config) {
  tune::Report({{"loss", Branin(config.Get<double>("x", 0), config.Get<double>("y", 0))}});
}
PRISM_REMOTE(BraninTrial);

namespace {

constexpr double kOverheadTargetPct = 3.0;        // Ray's bookkeeping-overhead test
constexpr double kThroughputTarget = 20000;       // results/s

struct Options {
  bool quick = false;
  std::string json = "perf/results/tune_benchmark.json";
  bool overhead = true, throughput = true, search = true;
  int rounds = 3;           // throughput and search
  int overhead_rounds = 1;  // 25 s each at full size
  int64_t trials = 2000;
  double sleep_s = 0.2;
  int concurrency = 16;
  int throughput_trials = 16;
  int64_t reports = 2000;
  int64_t search_trials = 1000;
  std::string optuna;  // "" = perf/peers/optuna_bench.py of this source tree
  bool optuna_off = false;
  std::string storage;
};

/// Parses our flags (bench_cli.h). Exits on --help and on a bad flag.
Options ParseOptions(int argc, char** argv) {
  Options o;
  prism_bench::Cli cli("prism_tune_benchmark",
                       "prism::tune: bookkeeping overhead, report throughput, search against Optuna:\n"
                       "  mpirun -n 3 prism_tune_benchmark --prism-num-cpus=6 [flags]");
  cli.AddQuick("200 x 0.05 s trials, 4 x 200 reports, 100 search trials, 1 round")
      .AddJson("perf/results/tune_benchmark.json");
  std::vector<std::string> parts;
  std::string optuna;
  cli.app.add_option("--parts", parts, "which parts to run: overhead,throughput,search (default all three)")
      ->delimiter(',')
      ->check(CLI::IsMember({"overhead", "throughput", "search"}));
  cli.app.add_option("--rounds", o.rounds, "rounds of throughput and search (default 3)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--overhead-rounds", o.overhead_rounds, "rounds of overhead (default 1: 25 s each)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--trials", o.trials, "overhead: N trials (default 2000)")->check(CLI::PositiveNumber);
  cli.app.add_option("--sleep-s", o.sleep_s, "overhead: each sleeping S s (default 0.2)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--concurrency", o.concurrency,
                     "C trials at once (default 16); the cluster needs C CPUs (--prism-num-cpus per rank)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--throughput-trials", o.throughput_trials, "throughput: T trials (default 16)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--reports", o.reports, "throughput: of R reports each (default 2000)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--search-trials", o.search_trials, "search: trials per study (default 1000)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--optuna", optuna,
                     "the Optuna peer (default perf/peers/optuna_bench.py of this source tree, run "
                     "with /usr/bin/python3); off to skip it");
  cli.app.add_option("--storage", o.storage,
                     "where trials write their files (default a temp directory, removed at the end)");
  cli.Parse(argc, argv, [&] {
    cli.json = "perf/results/tune_benchmark_quick.json";
    o.rounds = 1;
    o.trials = 200;
    o.sleep_s = 0.05;
    o.throughput_trials = 4;
    o.reports = 200;
    o.search_trials = 100;
  });
  o.quick = cli.quick;
  o.json = cli.json;
  if (cli.Given("--parts")) {
    auto has = [&](const char* p) { return std::find(parts.begin(), parts.end(), p) != parts.end(); };
    o.overhead = has("overhead");
    o.throughput = has("throughput");
    o.search = has("search");
  }
  if (cli.Given("--optuna")) {
    o.optuna_off = optuna == "off";
    if (!o.optuna_off) o.optuna = optuna;
  }
  if (o.optuna.empty()) o.optuna = PRISM_BENCH_SOURCE_DIR "/perf/peers/optuna_bench.py";
  return o;
}

using prism_bench::Max;
using prism_bench::Median;
using prism_bench::Min;

std::string Cell(const std::vector<double>& v, const char* fmt = "%.3g") {
  if (v.empty()) return "-";
  char a[32], b[32], c[32], out[112];
  std::snprintf(a, sizeof a, fmt, Median(v));
  std::snprintf(b, sizeof b, fmt, Min(v));
  std::snprintf(c, sizeof c, fmt, Max(v));
  std::snprintf(out, sizeof out, "%s [%s, %s]", a, b, c);
  return out;
}

/// A run's own experiment name under the storage directory.
tune::RunConfig RunIn(const std::string& storage, const std::string& name) {
  tune::RunConfig run;
  run.name = name;
  run.storage_path = storage;
  run.verbose = 0;
  return run;
}

double MetricOf(const tune::Metrics& m, const std::string& key, const std::string& trial) {
  auto it = m.find(key);
  if (it == m.end()) throw std::runtime_error("trial " + trial + " has no \"" + key + "\" in its result");
  return it->second;
}

/// Throws unless every trial of `grid` terminated with `reports` reports: a benchmark of a
/// Tuner that lost or failed trials measures nothing.
void CheckAllRan(const tune::ResultGrid& grid, int64_t trials, int64_t reports, const char* part) {
  if (static_cast<int64_t>(grid.size()) != trials) {
    throw std::runtime_error(std::string(part) + ": Fit returned " + std::to_string(grid.size()) +
                             " trials, not " + std::to_string(trials));
  }
  for (const tune::Result& r : grid) {
    if (r.status != tune::TrialStatus::kTerminated || !r.error.empty() ||
        static_cast<int64_t>(r.metrics_history.size()) != reports) {
      throw std::runtime_error(std::string(part) + ": trial " + r.trial_id + " ended " +
                               tune::StatusName(r.status) + " with " +
                               std::to_string(r.metrics_history.size()) + " reports (expected " +
                               std::to_string(reports) + ")" + (r.error.empty() ? "" : ": " + r.error));
    }
  }
}

// ---- overhead ---------------------------------------------------------------------------

struct OverheadRound {
  double wall_s = 0, ideal_s = 0, overhead_pct = 0;
  double in_trial_pct = 0;  // of the ideal: trials' time beyond S (sleep overshoot, Report)
  double idle_pct = 0;      // of the ideal: slots idle (driver bookkeeping, launch, ramp)
  double startup_s = 0;     // Fit's start to the first trial's start
  double tail_s = 0;        // the last report to Fit's return
  double idle_ms_per_trial = 0;
  double trial_s = 0;       // mean time inside a trial
};

OverheadRound RunOverhead(const Options& o, const std::string& storage, int round) {
  tune::TuneConfig tc;
  tc.num_samples = static_cast<int>(o.trials);
  tc.max_concurrent_trials = o.concurrency;
  tc.seed = static_cast<uint64_t>(round + 1);
  tune::Tuner tuner(SleepTrial, {{"sleep_s", o.sleep_s}, {"score", tune::Uniform(0, 1)}}, tc,
                    RunIn(storage, "overhead_" + std::to_string(round)));
  const double w0 = WallNow();
  const auto t0 = Clock::now();
  tune::ResultGrid grid = tuner.Fit();
  OverheadRound r;
  r.wall_s = Seconds(Clock::now() - t0);
  const double w1 = WallNow();
  CheckAllRan(grid, o.trials, 1, "overhead");
  const double n = static_cast<double>(o.trials), c = o.concurrency;
  r.ideal_s = n * o.sleep_s / c;
  r.overhead_pct = (r.wall_s / r.ideal_s - 1) * 100;
  double busy = 0, first_start = 1e300, last_report = 0;
  for (const tune::Result& t : grid) {
    const double at = MetricOf(t.metrics, "t_wall", t.trial_id);
    const double in_trial = MetricOf(t.metrics, "time_total_s", t.trial_id);
    busy += in_trial;
    first_start = std::min(first_start, at - in_trial);
    last_report = std::max(last_report, at);
  }
  r.trial_s = busy / n;
  r.startup_s = first_start - w0;
  r.tail_s = w1 - last_report;
  // C * wall = busy + idle, and wall - ideal = (busy - N * S) / C + idle / C.
  const double idle = c * r.wall_s - busy;
  r.in_trial_pct = (busy - n * o.sleep_s) / c / r.ideal_s * 100;
  r.idle_pct = idle / c / r.ideal_s * 100;
  r.idle_ms_per_trial = idle / n * 1e3;
  return r;
}

// ---- throughput -------------------------------------------------------------------------

struct ThroughputRound {
  double wall_s = 0, results_per_s = 0;
  double producer_per_s = 0;  // reports / (last report - first report), trial-side clock
  double startup_s = 0;       // Fit's start to the first report
  double tail_s = 0;          // the last report to Fit's return
};

ThroughputRound RunThroughput(const Options& o, const std::string& storage, int round) {
  tune::TuneConfig tc;
  tc.num_samples = o.throughput_trials;
  tc.max_concurrent_trials = o.throughput_trials;
  tc.seed = static_cast<uint64_t>(round + 1);
  tune::Tuner tuner(ReportLoop, {{"reports", o.reports}}, tc,
                    RunIn(storage, "throughput_" + std::to_string(round)));
  const double w0 = WallNow();
  const auto t0 = Clock::now();
  tune::ResultGrid grid = tuner.Fit();
  ThroughputRound r;
  r.wall_s = Seconds(Clock::now() - t0);
  const double w1 = WallNow();
  CheckAllRan(grid, o.throughput_trials, o.reports, "throughput");
  const double total = static_cast<double>(o.throughput_trials) * static_cast<double>(o.reports);
  r.results_per_s = total / r.wall_s;
  double first = 1e300, last = 0;
  for (const tune::Result& t : grid) {
    for (const tune::Metrics& m : t.metrics_history) {
      const double at = MetricOf(m, "t_wall", t.trial_id);
      first = std::min(first, at);
      last = std::max(last, at);
    }
  }
  r.producer_per_s = last > first ? total / (last - first) : 0;
  r.startup_s = first - w0;
  r.tail_s = w1 - last;
  return r;
}

// ---- search -----------------------------------------------------------------------------

tune::ParamSpace BraninSpace() { return {{"x", tune::Uniform(-5, 10)}, {"y", tune::Uniform(0, 15)}}; }

std::shared_ptr<tune::Searcher> MakeSearcher(const std::string& kind) {
  if (kind == "random") return std::make_shared<tune::BasicVariantGenerator>();
  return std::make_shared<tune::TPESearch>();
}

const char* SearcherName(const std::string& kind) {
  return kind == "random" ? "BasicVariantGenerator" : "TPESearch";
}

struct SearchRound {
  double ms_per_trial = 0;
  double best = 0;
  double save_state_ms = 0;  // searcher-only: SaveState per trial, as the Tuner calls it
};

/// The searcher the experiment in `path` ran, as its journal's header names it ("" if the
/// header cannot be read).
std::string JournalSearcher(const std::string& path) {
  std::ifstream in(path + "/experiment_state.jsonl");
  std::string header;
  std::getline(in, header);
  const std::string key = "\"searcher\":";
  auto at = header.find(key);
  if (at == std::string::npos) return "";
  auto open = header.find('"', at + key.size());
  auto close = open == std::string::npos ? open : header.find('"', open + 1);
  return close == std::string::npos ? "" : header.substr(open + 1, close - open - 1);
}

/// Tuner::Fit of `trials` Branin trials with the searcher `kind`; throws if the Tuner ran
/// another searcher.
SearchRound RunSearchFit(const Options& o, const std::string& storage, const std::string& kind,
                         int round) {
  tune::TuneConfig tc;
  tc.metric = "loss";
  tc.mode = "min";
  tc.num_samples = static_cast<int>(o.search_trials);
  tc.max_concurrent_trials = o.concurrency;
  tc.seed = static_cast<uint64_t>(round + 1);
  tc.search_alg = MakeSearcher(kind);
  tune::Tuner tuner(BraninTrial, BraninSpace(), tc,
                    RunIn(storage, "search_" + kind + "_" + std::to_string(round)));
  const auto t0 = Clock::now();
  tune::ResultGrid grid = tuner.Fit();
  SearchRound r;
  r.ms_per_trial = Seconds(Clock::now() - t0) / static_cast<double>(o.search_trials) * 1e3;
  CheckAllRan(grid, o.search_trials, 1, "search");
  const std::string ran = JournalSearcher(tuner.ExperimentPath());
  if (ran != SearcherName(kind)) {
    throw std::runtime_error(std::string("search: TuneConfig::search_alg was a ") + SearcherName(kind) +
                             " but the experiment's journal (" + tuner.ExperimentPath() +
                             "/experiment_state.jsonl) says the Tuner ran \"" + ran +
                             "\": the figure would be another searcher's, so it is not reported");
  }
  r.best = grid.GetBestResult("loss", "min").metrics.at("loss");
  return r;
}

/// The searcher alone: Setup, then per trial Suggest, Branin, OnTrialResult and
/// OnTrialComplete, on this thread. SaveState (which the Tuner calls once per new trial for
/// its journal) is timed apart.
SearchRound RunSearcherOnly(const Options& o, const std::string& kind, int round) {
  auto searcher = MakeSearcher(kind);
  searcher->Setup(BraninSpace(), "loss", "min", static_cast<int>(o.search_trials),
                  static_cast<uint64_t>(round + 1));
  SearchRound r;
  r.best = 1e300;
  Clock::duration work{}, save{};
  char id[32];
  for (int64_t i = 0; i < o.search_trials; ++i) {
    std::snprintf(id, sizeof id, "searcher_%05lld", static_cast<long long>(i));
    const auto a = Clock::now();
    tune::Suggestion s = searcher->Suggest(id);
    if (s.kind != tune::Suggestion::kConfig) {
      throw std::runtime_error(std::string(SearcherName(kind)) + " gave no config at suggestion " +
                               std::to_string(i) + " of " + std::to_string(o.search_trials));
    }
    const double loss = Branin(s.config.Get<double>("x", 0), s.config.Get<double>("y", 0));
    const tune::Metrics m{{"loss", loss}, {"training_iteration", 1}};
    searcher->OnTrialResult(id, m);
    searcher->OnTrialComplete(id, s.config, &m, false);
    const auto b = Clock::now();
    (void)searcher->SaveState();
    save += Clock::now() - b;
    work += b - a;
    r.best = std::min(r.best, loss);
  }
  const double n = static_cast<double>(o.search_trials);
  r.ms_per_trial = Seconds(work) / n * 1e3;
  r.save_state_ms = Seconds(save) / n * 1e3;
  return r;
}

/// Optuna's rounds for each sampler ("random", "tpe"): ms per trial and best value; empty,
/// with the reason on stderr, if the peer cannot run here.
std::map<std::string, std::vector<SearchRound>> RunOptuna(const Options& o) {
  char tmpl[] = "/tmp/prism-tune-optuna-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) return {};
  close(fd);
  const std::string out = tmpl;
  const std::string cmd = "/usr/bin/python3 '" + o.optuna + "' --trials=" +
                          std::to_string(o.search_trials) + " --rounds=" + std::to_string(o.rounds) +
                          " --values-out='" + out + "' > /dev/null";
  const int rc = std::system(cmd.c_str());
  std::map<std::string, std::vector<SearchRound>> got;
  std::ifstream in(out);
  std::string kind;
  int round = 0;
  double wall = 0, best = 0;
  while (rc == 0 && (in >> kind >> round >> wall >> best)) {
    got[kind].push_back({wall / static_cast<double>(o.search_trials) * 1e3, best, 0});
  }
  if (rc != 0 || got.empty()) {
    std::fprintf(stderr,
                 "prism_tune_benchmark: the Optuna peer did not run (%s exited %d; it needs "
                 "/usr/bin/python3 with python3-optuna: apt-get install python3-optuna)\n",
                 o.optuna.c_str(), rc);
    got.clear();
  }
  std::remove(out.c_str());
  return got;
}

// ---- report -----------------------------------------------------------------------------

template <typename R>
std::vector<double> FieldOf(const std::vector<R>& v, double R::*f) {
  std::vector<double> out;
  for (const auto& r : v) out.push_back(r.*f);
  return out;
}

prism_bench::Json Num(double v) { return prism_bench::JsonNumber(v); }

prism_bench::Json NumList(const std::vector<double>& v) { return v; }

}  // namespace

int main(int argc, char** argv) {
  Options opt = ParseOptions(argc, argv);
  prism::Init(argc, argv);  // ranks 1..N-1 serve tasks here until Shutdown
  const int world = prism::GetRuntimeContext().GetWorldSize();
  double load_start[3];
  prism_bench::LoadAverage(load_start);
  int status = 0;
  const std::string storage =
      opt.storage.empty()
          ? (fs::temp_directory_path() / ("prism-tune-benchmark-" + std::to_string(getpid()))).string()
          : opt.storage;
  std::vector<prism_bench::Entry> entries;
  auto add = [&entries](prism_bench::Entry e) {
    e.family_index = static_cast<int64_t>(entries.size());
    entries.push_back(std::move(e));
  };
  try {
    const double cpus = prism::ClusterResources()["CPU"];
    const int need = std::max(opt.concurrency, opt.throughput ? opt.throughput_trials : 0);
    if (cpus + 1e-9 < need) {
      throw prism::Error("the cluster has " + std::to_string(static_cast<int>(cpus)) +
                         " CPUs but the benchmark runs " + std::to_string(need) +
                         " trials at once; give each rank more logical CPUs, e.g. --prism-num-cpus=" +
                         std::to_string((need + world - 1) / world) + " on " + std::to_string(world) +
                         " ranks");
    }
    fs::create_directories(storage);
    std::printf("Prism tune benchmark: %d ranks, %.0f logical CPUs, %s mode; storage %s; load avg %.2f\n",
                world, cpus, opt.quick ? "quick" : "full", storage.c_str(), load_start[0]);
    std::fflush(stdout);

    if (opt.overhead) {
      std::vector<OverheadRound> rounds;
      for (int i = 0; i < opt.overhead_rounds; ++i) rounds.push_back(RunOverhead(opt, storage, i));
      const auto wall = FieldOf(rounds, &OverheadRound::wall_s);
      const auto pct = FieldOf(rounds, &OverheadRound::overhead_pct);
      const double ideal = rounds[0].ideal_s, med_pct = Median(pct);
      std::printf("\n[overhead] %lld trials x %.3g s, %d at a time: theoretical minimum %.3f s\n",
                  static_cast<long long>(opt.trials), opt.sleep_s, opt.concurrency, ideal);
      std::printf("  Fit wall time            %s s\n", Cell(wall, "%.3f").c_str());
      std::printf("  overhead                 %s %%  (target <= %.0f %%: %s)\n", Cell(pct, "%.2f").c_str(),
                  kOverheadTargetPct,
                  opt.quick ? "quick mode, no verdict" : (med_pct <= kOverheadTargetPct ? "MET" : "NOT MET"));
      std::printf("    inside trials beyond S %s %% of the minimum (mean trial %.4f s)\n",
                  Cell(FieldOf(rounds, &OverheadRound::in_trial_pct), "%.2f").c_str(),
                  Median(FieldOf(rounds, &OverheadRound::trial_s)));
      std::printf("    slots idle             %s %% of the minimum (%.2f ms per trial; first trial "
                  "started after %.3f s, Fit returned %.3f s after the last report)\n",
                  Cell(FieldOf(rounds, &OverheadRound::idle_pct), "%.2f").c_str(),
                  Median(FieldOf(rounds, &OverheadRound::idle_ms_per_trial)),
                  Median(FieldOf(rounds, &OverheadRound::startup_s)),
                  Median(FieldOf(rounds, &OverheadRound::tail_s)));
      std::fflush(stdout);
      prism_bench::Entry e;
      e.name = "tune_bookkeeping_overhead";
      e.iterations = opt.trials * static_cast<int64_t>(rounds.size());
      e.real_time = e.cpu_time = Median(wall);
      e.time_unit = "s";
      e.items_per_second = static_cast<double>(opt.trials) / Median(wall);
      e.before_unit = {{"trials", Num(static_cast<double>(opt.trials))},
                       {"sleep_s", Num(opt.sleep_s)},
                       {"concurrency", Num(opt.concurrency)},
                       {"theoretical_min_s", Num(ideal)},
                       {"wall_s_per_round", NumList(wall)}};
      e.unit = "%";
      e.per_round = pct;
      e.after_rounds = {{"in_trial_pct_per_round", NumList(FieldOf(rounds, &OverheadRound::in_trial_pct))},
                        {"idle_pct_per_round", NumList(FieldOf(rounds, &OverheadRound::idle_pct))},
                        {"idle_ms_per_trial_per_round", NumList(FieldOf(rounds, &OverheadRound::idle_ms_per_trial))},
                        {"startup_s_per_round", NumList(FieldOf(rounds, &OverheadRound::startup_s))},
                        {"tail_s_per_round", NumList(FieldOf(rounds, &OverheadRound::tail_s))}};
      e.target = prism_bench::Target{"Fit wall time / (N * S / C) - 1 <= 3 %", kOverheadTargetPct,
                                     med_pct / kOverheadTargetPct, med_pct <= kOverheadTargetPct,
                                     !opt.quick};
      e.label = "Tuner::Fit of " + std::to_string(opt.trials) + " trials sleeping " + prism_bench::FormatNumber(opt.sleep_s) +
                " s and reporting once, " + std::to_string(opt.concurrency) +
                " at a time; overhead over N*S/C = " + prism_bench::FormatNumber(ideal) + " s";
      add(e);
      prism_bench::Entry w;
      w.name = "tune_bookkeeping_wall";
      w.iterations = e.iterations;
      w.real_time = w.cpu_time = Median(wall);
      w.time_unit = "s";
      w.items_per_second = e.items_per_second;
      w.unit = "s";
      w.per_round = wall;
      w.extra = true;
      w.label = "the same Fit's wall time; theoretical minimum " + prism_bench::FormatNumber(ideal) + " s";
      add(w);
    }

    if (opt.throughput) {
      std::vector<ThroughputRound> rounds;
      for (int i = 0; i < opt.rounds; ++i) rounds.push_back(RunThroughput(opt, storage, i));
      const auto rate = FieldOf(rounds, &ThroughputRound::results_per_s);
      const double med = Median(rate);
      std::printf("\n[throughput] %d trials x %lld reports, as fast as they can\n", opt.throughput_trials,
                  static_cast<long long>(opt.reports));
      std::printf("  driver results/s         %s  (target >= %.0f: %s)\n", Cell(rate, "%.0f").c_str(),
                  kThroughputTarget,
                  opt.quick ? "quick mode, no verdict" : (med >= kThroughputTarget ? "MET" : "NOT MET"));
      std::printf("  Fit wall time            %s s\n",
                  Cell(FieldOf(rounds, &ThroughputRound::wall_s), "%.3f").c_str());
      std::printf("  trials' own report rate  %s /s (first to last report, all trials)\n",
                  Cell(FieldOf(rounds, &ThroughputRound::producer_per_s), "%.0f").c_str());
      std::printf("  Fit start -> first report %s s; last report -> Fit return %s s\n",
                  Cell(FieldOf(rounds, &ThroughputRound::startup_s), "%.3f").c_str(),
                  Cell(FieldOf(rounds, &ThroughputRound::tail_s), "%.3f").c_str());
      std::fflush(stdout);
      prism_bench::Entry e;
      e.name = "tune_result_throughput";
      e.iterations = static_cast<int64_t>(opt.throughput_trials) * opt.reports * static_cast<int64_t>(rounds.size());
      e.real_time = e.cpu_time = med > 0 ? 1e6 / med : 0;
      e.time_unit = "us";
      e.items_per_second = med;
      e.before_unit = {{"trials", Num(opt.throughput_trials)},
                       {"reports_per_trial", Num(static_cast<double>(opt.reports))}};
      e.unit = "results/s";
      e.per_round = rate;
      e.after_rounds = {{"wall_s_per_round", NumList(FieldOf(rounds, &ThroughputRound::wall_s))},
                        {"producer_results_per_s_per_round", NumList(FieldOf(rounds, &ThroughputRound::producer_per_s))},
                        {"startup_s_per_round", NumList(FieldOf(rounds, &ThroughputRound::startup_s))},
                        {"tail_s_per_round", NumList(FieldOf(rounds, &ThroughputRound::tail_s))}};
      e.target = prism_bench::Target{"results/s >= 20000", kThroughputTarget, med / kThroughputTarget,
                                     med >= kThroughputTarget, !opt.quick};
      e.label = "Tuner::Fit of " + std::to_string(opt.throughput_trials) + " trials reporting " +
                std::to_string(opt.reports) + " times each; total reports / Fit wall time";
      add(e);
    }

    if (opt.search) {
      std::printf("\n[search] Branin (minimum %.6f), %lld trials per study, %d round(s) "
                  "(seed = round + 1); Prism's trials %d at a time\n",
                  kBraninMin, static_cast<long long>(opt.search_trials), opt.rounds, opt.concurrency);
      std::printf("  %-50s %-28s %s\n", "", "ms per trial", "best value");
      std::fflush(stdout);
      struct Row {
        std::string name, what, note;
        std::vector<SearchRound> rounds;
        bool peer = false;
      };
      std::vector<Row> rows;
      std::string fit_failed;
      for (const std::string kind : {"random", "tpe"}) {
        Row fit{"tune_search_fit/" + kind,
                std::string("Prism Tuner::Fit, ") + SearcherName(kind),
                std::string("Tuner::Fit with ") + SearcherName(kind) + ", " + std::to_string(opt.concurrency) +
                    " trials at a time, each a task computing Branin and reporting once; wall / trials",
                {}};
        Row alone{"tune_searcher_only/" + kind,
                  std::string("Prism ") + SearcherName(kind) + " alone (searcher only)",
                  std::string(SearcherName(kind)) +
                      " alone on the driver's thread: Suggest + OnTrialResult + OnTrialComplete per "
                      "suggestion (no tasks, no files); ms per suggestion",
                  {}};
        for (int i = 0; i < opt.rounds; ++i) {
          if (fit_failed.empty()) {
            try {
              fit.rounds.push_back(RunSearchFit(opt, storage, kind, i));
            } catch (const std::exception& e) {  // the other rows still run and report
              fit_failed = e.what();
              std::fprintf(stderr, "prism_tune_benchmark: %s FAILED: %s\n", fit.what.c_str(), e.what());
              status = 1;
            }
          }
          alone.rounds.push_back(RunSearcherOnly(opt, kind, i));
        }
        if (fit_failed.empty()) rows.push_back(fit);
        fit_failed.clear();
        rows.push_back(alone);
      }
      if (!opt.optuna_off) {
        auto optuna = RunOptuna(opt);
        for (const std::string kind : {"random", "tpe"}) {
          if (optuna[kind].empty()) continue;
          rows.push_back({"tune_search_optuna/" + kind,
                          std::string("Optuna ") + (kind == "random" ? "RandomSampler" : "TPESampler"),
                          std::string("Optuna ") + (kind == "random" ? "RandomSampler" : "TPESampler") +
                              ", study.optimize in one process, one trial at a time "
                              "(perf/peers/optuna_bench.py); wall / trials",
                          optuna[kind], true});
        }
      }
      for (const Row& row : rows) {
        const auto ms = FieldOf(row.rounds, &SearchRound::ms_per_trial);
        const auto best = FieldOf(row.rounds, &SearchRound::best);
        std::string extra;
        if (row.name.rfind("tune_searcher_only/", 0) == 0) {
          char buf[96];
          std::snprintf(buf, sizeof buf, "  (+ SaveState %.4f ms, once per trial in Fit)",
                        Median(FieldOf(row.rounds, &SearchRound::save_state_ms)));
          extra = buf;
        }
        std::printf("  %-50s %-28s %s%s\n", row.what.c_str(), Cell(ms, "%.4g").c_str(),
                    Cell(best, "%.4f").c_str(), extra.c_str());
        prism_bench::Entry e;
        e.name = row.name;
        e.iterations = opt.search_trials * static_cast<int64_t>(row.rounds.size());
        e.real_time = e.cpu_time = Median(ms);
        e.time_unit = "ms";
        e.items_per_second = Median(ms) > 0 ? 1e3 / Median(ms) : 0;
        e.before_unit = {{"trials", Num(static_cast<double>(opt.search_trials))}};
        e.unit = "ms";
        e.per_round = ms;
        e.after_rounds = {{"best_value", Num(Median(best))}, {"best_value_per_round", NumList(best)}};
        if (row.name.rfind("tune_searcher_only/", 0) == 0) {
          e.after_rounds.push_back(
              {"save_state_ms_per_round", NumList(FieldOf(row.rounds, &SearchRound::save_state_ms))});
        }
        if (row.peer) e.extra = true;
        char best_text[64];
        std::snprintf(best_text, sizeof best_text, "; best value %.4f (optimum %.6f)", Median(best), kBraninMin);
        e.label = row.note + best_text;
        add(e);
      }
      std::printf("  (published for Optuna at 1,000 trials: random 0.21 ms/trial, TPE 24.7 ms/trial)\n");
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_tune_benchmark: %s\n", e.what());
    status = 1;
  }
  std::error_code ec;
  if (opt.storage.empty()) fs::remove_all(storage, ec);

  if (!entries.empty()) {
    try {
      prism_bench::Context c;
      c.executable = argv[0];
      c.mhz_per_cpu = static_cast<int>(prism_bench::CpuMhz());
      c.load_avg_at_start = std::vector<double>(load_start, load_start + 3);
      c.mpi_ranks = world;
      c.mpi_library_version = prism_bench::MpiLibraryVersion();
      c.quick = opt.quick;
      c.rounds = opt.rounds;
      c.fields = {{"overhead_rounds", Num(opt.overhead_rounds)},
                  {"logical_cpus", Num(prism::ClusterResources()["CPU"])},
                  {"concurrency", Num(opt.concurrency)},
                  {"storage", prism_bench::JsonString(storage)}};
      c.statistic = "median across rounds (min/max across rounds alongside)";
      prism_bench::WriteReport(opt.json, c, entries);
      std::printf("\nJSON: %s\n", fs::absolute(opt.json).c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism_tune_benchmark: %s\n", e.what());
      status = 1;
    }
  }
  std::fflush(stdout);
  prism::Shutdown();
  return status;
}
