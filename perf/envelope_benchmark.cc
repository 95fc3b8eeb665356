// prism_envelope_benchmark: the scalability envelope on the real runtime (issue 22 item 3;
// the README's "Scalability envelope" table sets each row beside Ray's published figure).
//
//   mpirun -n N ./prism_envelope_benchmark [--parts=LIST] [--queued=N] [--returns=N]
//                                          [--objects=N] [--object-bytes=B]
//                                          [--large-bytes=B]
//                                          [--broadcast-bytes=B] [--actors=N] [--quick]
//                                          [--json=PATH]
//
// Every figure is the user's call end to end, timed on rank 0 (the driver):
//   queued     every CPU held by a task waiting on a KV key, then --queued no-op tasks
//              submitted (all of them wait: at the head or in a rank's queue); rank 0's
//              resident memory and heap growth while they wait, per task (the driver's refs
//              and the head's entries together); then the key is set and every result
//              gotten: submit time, drain time, total (Ray's 1M-queued test: submit and get)
//   returns    one task on the last rank returning a std::vector of --returns values
//              (SetNumReturns), until the driver has every value (prism::Get of all refs)
//   get        --objects objects of --object-bytes Put by the driver, handed in one argument
//              to a task on the last rank that Gets them all: the task's Get alone, and
//              Remote to its result (Ray's 10k-args and 10k-get tests). Objects up to
//              --prism-max-inline-bytes (100 KiB) travel with the task; larger ones are
//              fetched from rank 0 by the Get
//   large      one Put of --large-bytes bytes, read in place (ArrayView) by a task on the last
//              rank: Put to the task's result, and the bytes per second of that
//   broadcast  one Put of --broadcast-bytes bytes, read in place by a task on every other
//              rank: Put until every rank has read it
//   actors     --actors actors created ({CPU: 0}, spread by the head), one call on each
//              gotten: creation and first call of all; then a second call on each (all alive
//              at once), and rank 0's memory per actor
#include <malloc.h>
#include <prism/api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// This process's resident set (VmRSS), bytes.
int64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      int64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

int64_t HeapInUse() {
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

}  // namespace

int NoOp() { return 1; }
/// Holds a CPU until `key` exists in the KV store (polled every 2 ms; gives up after 10 min).
int HoldUntil(std::string key) {
  const auto t0 = Clock::now();
  while (!prism::kv::Exists(key) && Since(t0) < 600) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return 1;
}
std::vector<int64_t> ManyReturns(int n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = i;
  return out;
}
/// Gets every ref handed in (each from the rank that Put it); returns their bytes and the
/// Get's seconds.
std::pair<int64_t, double> GetAll(std::vector<prism::ObjectRef<std::vector<uint8_t>>> refs) {
  const auto t0 = Clock::now();
  const auto values = prism::Get(refs);
  const double seconds = Since(t0);
  int64_t bytes = 0;
  for (const auto& v : values) bytes += static_cast<int64_t>(v->size());
  return {bytes, seconds};
}
/// Reads an object in place: its size and a byte from its end (so the bytes are there).
int64_t ReadInPlace(prism::ArrayView<uint8_t> bytes) {
  return static_cast<int64_t>(bytes.size()) + (bytes.size() > 0 ? bytes[bytes.size() - 1] : 0);
}

class Counter {
 public:
  static Counter* Create(int id) { return new Counter{id}; }
  int Add(int x) { return id_ += x; }
  int id_;
};

PRISM_REMOTE(NoOp, HoldUntil, ManyReturns, GetAll, ReadInPlace, Counter::Create, &Counter::Add);

namespace {

std::string OnRank(int r) { return "rank:" + std::to_string(r); }

struct Figures {
  std::vector<prism_bench::Entry> entries;
  void Add(const std::string& name, const std::string& unit, double v, int64_t n,
           const std::string& label) {
    prism_bench::Entry e;
    e.name = name;
    e.family_index = static_cast<int64_t>(entries.size());
    e.unit = unit;
    e.iterations = n;
    e.per_round = {v};
    e.real_time = v;
    e.label = label;
    entries.push_back(std::move(e));
  }
};

void Queued(int64_t n, Figures& f) {
  const int cpus = static_cast<int>(prism::ClusterResources()["CPU"]);
  const std::string key = "envelope/release/" + std::to_string(n);
  std::vector<prism::ObjectRef<int>> holds;
  for (int i = 0; i < cpus; ++i) holds.push_back(prism::Task(HoldUntil).Remote(key));
  (void)prism::kv::Exists(key);  // after the holds: the head has them
  const int64_t rss0 = ResidentBytes(), heap0 = HeapInUse();
  std::vector<prism::ObjectRef<int>> refs;
  refs.reserve(static_cast<size_t>(n));
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) refs.push_back(prism::Task(NoOp).Remote());
  (void)prism::kv::Exists(key);  // the head has handled every submit before this answer
  const double submit_s = Since(t0);
  const int64_t rss = ResidentBytes() - rss0, heap = HeapInUse() - heap0;
  const auto t1 = Clock::now();
  prism::kv::Put(key, "go");
  int64_t sum = 0;
  for (auto& r : refs) sum += *r.Get(600000);
  for (auto& h : holds) h.Get(600000);
  const double drain_s = Since(t1);
  if (sum != n) throw std::runtime_error("queued: results summed to " + std::to_string(sum));
  const double per_rss = static_cast<double>(rss) / static_cast<double>(n);
  const double per_heap = static_cast<double>(heap) / static_cast<double>(n);
  std::printf(
      "  queued: %lld tasks behind %d held CPUs: submitted in %.2f s (%.0f/s), rank 0 grew "
      "%.0f MiB resident (%.0f B per task; heap %.0f B), drained and gotten in %.2f s; "
      "total %.2f s\n",
      static_cast<long long>(n), cpus, submit_s, static_cast<double>(n) / submit_s,
      static_cast<double>(rss) / (1 << 20), per_rss, per_heap, drain_s, submit_s + drain_s);
  const std::string s = "_" + std::to_string(n);
  f.Add("queued_submit_s" + s, "s", submit_s, n, "every task submitted while every CPU is held");
  f.Add("queued_rank0_bytes_per_task" + s, "bytes", per_rss, n,
        "rank 0's resident growth while they wait (driver refs and head)");
  f.Add("queued_rank0_heap_bytes_per_task" + s, "bytes", per_heap, n,
        "rank 0's heap growth (mallinfo2) while they wait");
  f.Add("queued_drain_s" + s, "s", drain_s, n, "from release until every result is gotten");
  f.Add("queued_total_s" + s, "s", submit_s + drain_s, n, "submit, run and get every task");
}

void Returns(int n, int last, Figures& f) {
  std::vector<double> seconds;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = Clock::now();
    auto refs = prism::Task(ManyReturns).SetNumReturns(n).SetResource(OnRank(last), 0.001).Remote(n);
    const auto values = prism::Get(refs, 600000);
    seconds.push_back(Since(t0));
    if (values.size() != static_cast<size_t>(n) || *values.back() != n - 1) {
      throw std::runtime_error("returns: wrong values");
    }
  }
  const double s = prism_bench::Median(seconds);
  std::printf("  returns: %d from one task on rank %d, all gotten: %.3f s (median of 3)\n", n,
              last, s);
  f.Add("returns_s_" + std::to_string(n), "s", s, n,
        "one task returning n objects (SetNumReturns), Remote until every value is gotten");
}

void GetMany(int n, uint64_t object_bytes, int last, Figures& f) {
  std::vector<prism::ObjectRef<std::vector<uint8_t>>> refs;
  refs.reserve(static_cast<size_t>(n));
  const auto tput = Clock::now();
  for (int i = 0; i < n; ++i) {
    refs.push_back(prism::Put(std::vector<uint8_t>(object_bytes, static_cast<uint8_t>(i))));
  }
  const double put_s = Since(tput);
  std::vector<double> total, inner;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = Clock::now();
    auto [sum, get_s] = *prism::Task(GetAll).SetResource(OnRank(last), 0.001).Remote(refs).Get(600000);
    total.push_back(Since(t0));
    inner.push_back(get_s);
    if (sum != static_cast<int64_t>(n * object_bytes)) throw std::runtime_error("get: wrong bytes");
  }
  std::printf(
      "  get: %d objects of %llu B Put on rank 0 (%.3f s), one Get of all in a task on rank %d: "
      "%.4f s; Remote to result %.4f s (medians of 3)\n",
      n, static_cast<unsigned long long>(object_bytes), put_s, last, prism_bench::Median(inner),
      prism_bench::Median(total));
  const std::string s = "_" + std::to_string(n) + "_of_" + std::to_string(object_bytes) + "B";
  f.Add("get_objects_s" + s, "s", prism_bench::Median(inner), n,
        "one Get of n objects, each Put on another rank");
  f.Add("get_objects_task_s" + s, "s", prism_bench::Median(total), n,
        "the task taking the n refs in one argument: Remote until its result");
}

void Large(uint64_t bytes, int last, Figures& f) {
  int64_t got = 0;
  double put_s = 0, total_s = 0;
  {
    std::vector<uint8_t> payload(bytes, 3);  // made first: not part of the move
    const auto t0 = Clock::now();
    auto ref = prism::Put(payload);
    put_s = Since(t0);
    payload = {};
    got = *prism::Task(ReadInPlace).SetResource(OnRank(last), 0.001).Remote(ref).Get(1800000);
    total_s = Since(t0);
  }
  if (got != static_cast<int64_t>(bytes) + 3) throw std::runtime_error("large: wrong bytes");
  std::printf("  large: %.2f GiB Put (%.2f s) and read in place on rank %d: %.2f s from Put to "
              "result (%.2f GB/s)\n",
              static_cast<double>(bytes) / (1 << 30), put_s, last, total_s,
              static_cast<double>(bytes) / total_s / 1e9);
  f.Add("large_object_s", "s", total_s, static_cast<int64_t>(bytes),
        "a vector of B bytes Put, and read in place by a task on another rank");
  f.Add("large_object_put_s", "s", put_s, static_cast<int64_t>(bytes), "its Put alone");
}

void Broadcast(uint64_t bytes, int world, Figures& f) {
  std::vector<uint8_t> payload(bytes, 5);
  std::vector<double> seconds;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = Clock::now();
    auto ref = prism::Put(payload);
    std::vector<prism::ObjectRef<int64_t>> reads;
    for (int r = 1; r < world; ++r) {
      reads.push_back(prism::Task(ReadInPlace).SetResource("CPU", 0).SetResource(OnRank(r), 0.001).Remote(ref));
    }
    for (auto& read : reads) {
      if (*read.Get(1800000) != static_cast<int64_t>(bytes) + 5) {
        throw std::runtime_error("broadcast: a rank read the wrong bytes");
      }
    }
    seconds.push_back(Since(t0));
  }
  const double s = prism_bench::Median(seconds);
  std::printf("  broadcast: %.2f GiB Put and read in place on each of %d other ranks: %.2f s "
              "(median of 3)\n",
              static_cast<double>(bytes) / (1 << 30), world - 1, s);
  f.Add("broadcast_s_" + std::to_string(world - 1) + "_ranks", "s", s,
        static_cast<int64_t>(bytes), "Put, then a task on every other rank reads it in place");
}

void Actors(int n, Figures& f) {
  const int64_t rss0 = ResidentBytes();
  const auto t0 = Clock::now();
  std::vector<prism::ActorHandle<Counter>> actors;
  actors.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    actors.push_back(prism::Actor(Counter::Create).SetResource("CPU", 0).Remote(i));
  }
  std::vector<prism::ObjectRef<int>> calls;
  calls.reserve(static_cast<size_t>(n));
  for (auto& a : actors) calls.push_back(a.Task(&Counter::Add).Remote(1));
  for (int i = 0; i < n; ++i) {
    if (*calls[static_cast<size_t>(i)].Get(600000) != i + 1) throw std::runtime_error("actors: wrong value");
  }
  const double create_s = Since(t0);
  const int64_t rss = ResidentBytes() - rss0;
  calls.clear();
  const auto t1 = Clock::now();
  for (auto& a : actors) calls.push_back(a.Task(&Counter::Add).Remote(1));
  for (int i = 0; i < n; ++i) {
    if (*calls[static_cast<size_t>(i)].Get(600000) != i + 2) throw std::runtime_error("actors: wrong value");
  }
  const double call_s = Since(t1);
  std::printf(
      "  actors: %d created and each called once in %.2f s (%.0f actors/s); all %d alive, one "
      "more call on each: %.2f s; rank 0 grew %.0f B per actor\n",
      n, create_s, n / create_s, n, call_s, static_cast<double>(rss) / n);
  const std::string s = "_" + std::to_string(n);
  f.Add("actors_create_s" + s, "s", create_s, n, "n actors created and each called once");
  f.Add("actors_per_s" + s, "actors/s", n / create_s, n, "creation rate, first call included");
  f.Add("actors_call_all_s" + s, "s", call_s, n, "one call on each of the n live actors");
  f.Add("actors_rank0_bytes_per_actor" + s, "bytes", static_cast<double>(rss) / n, n,
        "rank 0's resident growth per actor (driver handles, head table, its share of hosts)");
  const auto t2 = Clock::now();
  actors.clear();
  std::printf("  actors: handles dropped in %.2f s\n", Since(t2));
}

}  // namespace

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_envelope_benchmark",
                       "The runtime's envelope: how many tasks, returns, objects and actors at once, "
                       "how large an object:\n  mpirun -n N prism_envelope_benchmark [flags]");
  cli.AddQuick("20000 queued, 1000 returns and objects, 64 MiB large, 16 MiB broadcast, 200 "
               "actors: a smoke run")
      .AddJson();
  std::string parts = "queued,returns,get,large,broadcast,actors";
  int64_t queued = 0;
  int returns = 0, objects = 0, actors = 0;
  uint64_t object_bytes = 8, large = 0, bcast = 0;
  cli.app.add_option("--parts", parts, "of queued,returns,get,large,broadcast,actors (default all)");
  cli.app.add_option("--queued", queued, "tasks queued at once (default 1000000)")->check(CLI::PositiveNumber);
  cli.app.add_option("--returns", returns, "returns of one task (default 10000)")->check(CLI::PositiveNumber);
  cli.app.add_option("--objects", objects, "objects in one Get (default 10000)")->check(CLI::PositiveNumber);
  cli.app.add_option("--object-bytes", object_bytes, "each of them (default 8)")->check(CLI::PositiveNumber);
  cli.app.add_option("--large-bytes", large, "the large object (default 2147483648)")->check(CLI::PositiveNumber);
  cli.app.add_option("--broadcast-bytes", bcast, "the object every rank reads (default 1073741824)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--actors", actors, "actors alive at once (default 10000)")->check(CLI::PositiveNumber);
  cli.Parse(argc, argv);
  cli.QuickDefault("--queued", queued, 20000, 1000000);
  cli.QuickDefault("--returns", returns, 1000, 10000);
  cli.QuickDefault("--objects", objects, 1000, 10000);
  cli.QuickDefault("--large-bytes", large, uint64_t{67108864}, uint64_t{2147483648});
  cli.QuickDefault("--broadcast-bytes", bcast, uint64_t{16777216}, uint64_t{1073741824});
  cli.QuickDefault("--actors", actors, 200, 10000);
  const bool quick = cli.quick;
  const std::string& json = cli.json;
  parts = "," + parts + ",";
  auto wants = [&](const char* p) { return parts.find("," + std::string(p) + ",") != std::string::npos; };
  double load_start[3];
  prism_bench::LoadAverage(load_start);
  prism::Init(argc, argv);  // ranks 1..N-1 serve here until Shutdown
  const int world = prism::GetRuntimeContext().GetWorldSize();
  const int last = world - 1;
  std::printf("Prism's envelope on %d ranks (%u cores here)\n", world,
              std::thread::hardware_concurrency());
  Figures f;
  int status = 0;
  try {
    if (wants("returns")) Returns(returns, last, f);
    if (wants("get")) GetMany(objects, object_bytes, last, f);
    if (wants("large")) Large(large, last, f);
    if (wants("broadcast")) Broadcast(bcast, world, f);
    if (wants("actors")) Actors(actors, f);
    if (wants("queued")) Queued(queued, f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_envelope_benchmark: %s\n", e.what());
    status = 1;
  }
  if (!json.empty() && status == 0) {
    prism_bench::Context c = prism_bench::MpiRunContext(argv[0], load_start, world, quick, 1);
    c.statistic = "one run; returns, get and broadcast the median of 3";
    try {
      prism_bench::WriteReport(json, c, f.entries);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism_envelope_benchmark: %s\n", e.what());
      status = 1;
    }
  }
  prism::Shutdown();
  return status;
}
