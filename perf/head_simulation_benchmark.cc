// prism_head_simulation_benchmark: what the head (rank 0) costs as ranks grow, measured on
// the real head driven by N simulated ranks in one process (perf/head_simulation.h).
//
//   prism_head_simulation_benchmark [--ranks=100,1000,10000,100000] [--tasks=N] [--rounds=R]
//   [--parts=LIST]
//                                   [--quick] [--json=PATH]
//
// For each rank count N (1 CPU per rank, a node per rank):
//   throughput       the driver submits --tasks no-op tasks (1,000 between rounds of the
//                    simulation); simulated ranks run them instantly. Tasks completed per
//                    second of rank 0's CPU time (decode, head, encode; head_simulation.h
//                    says what is left out), and per second of wall time for the whole
//                    simulation (simulated ranks included).
//   (Every time below is this thread's CPU time, so that what the machine's other
//   processes take is not counted; the wall-time throughput is reported beside it.)
//   decision         one Scheduler::Place + Commit + Release on the real scheduler with N
//                    ranks, every rank but a moving one half loaded (a decision that finds
//                    room), and one Place on a full cluster (a decision that finds none:
//                    what each queued task costs every time a task completes).
//   memory           head heap (malloc's bytes in use, mallinfo2) per rank: a Head over N
//                    ranks with its job info; and per queued task: --tasks tasks submitted
//                    while the simulated ranks hold what they were given.
//   placement group  creating one group of 4 {CPU: 1} bundles (PACK, then SPREAD) on the
//                    idle cluster, and one with a bundle on every rank (SPREAD, one per
//                    rank: a WorkerGroup over the whole job).
//   actors           rank 0's CPU time per actor creation ({CPU: 1}), N/2 actors (at most 2,000)
//   alive            --actors-alive actors of {CPU: 0} created and all kept alive: rank 0's
//                    CPU time per creation and heap per live actor (the simulation's own
//                    bookkeeping of the handles included)
//                    created one after another.
//   heartbeats       an idle period with PRISM_RANK_TIMEOUT = 3 s (heartbeats every 0.5 s):
//                    messages and bytes per second each way, and rank 0's CPU time per second;
//                    scaled to the default 30 s in the report.
//   Init exchange    the bytes each rank contributes to Init's two all-gathers (its
//                    resources and node id, as runtime.cc writes them; its UCX worker
//                    address, made here by a real UcxDataPlane), and what every rank
//                    receives: N times that.
// --json writes every figure in bench_report.h's shape.
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_report.h"
#include "head_simulation.h"
#include "scheduler/scheduler.h"
#include "transport/ucx/ucx_data_plane.h"

namespace {

using prism::internal::ResourceSet;
using prism::internal::Scheduler;
using prism::sim::HeadSimulation;
using prism::sim::SimulationOptions;
using Clock = std::chrono::steady_clock;

int64_t HeapInUse() {
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

/// This thread's CPU time, seconds: what the machine's other processes take is not in it.
double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Throughput {
  double head_tasks_per_s = 0;  // per second of rank 0's CPU time
  double wall_tasks_per_s = 0;  // per second of the whole simulation
  double head_ns_per_task = 0;
  double to_head_bytes_per_task = 0, from_head_bytes_per_task = 0;
  double to_head_msgs_per_task = 0, from_head_msgs_per_task = 0;
  double to_head_batches_per_task = 0, from_head_batches_per_task = 0;
};

Throughput RunThroughput(int ranks, int64_t tasks) {
  SimulationOptions o;
  o.num_ranks = ranks;
  o.reported_exec_ns = 1000;  // a no-op task's run time: the scheduler pipelines them
  HeadSimulation sim(o);
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < tasks; i += 1000) {
    sim.SubmitMany(static_cast<int>(std::min<int64_t>(1000, tasks - i)), "NoOp");
    sim.Round();
  }
  if (!sim.RunUntilDone(600)) {
    throw std::runtime_error("throughput at " + std::to_string(ranks) + " ranks: only " +
                             std::to_string(sim.completed()) + " of " + std::to_string(tasks) +
                             " tasks completed in 600 s");
  }
  if (sim.failed() != 0)
    throw std::runtime_error("throughput: " + std::to_string(sim.failed()) + " tasks failed");
  const double wall = Seconds(t0);
  Throughput t;
  const auto n = static_cast<double>(tasks);
  t.head_tasks_per_s = n / sim.head_seconds();
  t.wall_tasks_per_s = n / wall;
  t.head_ns_per_task = sim.head_seconds() * 1e9 / n;
  t.to_head_bytes_per_task = static_cast<double>(sim.to_head().bytes) / n;
  t.from_head_bytes_per_task = static_cast<double>(sim.from_head().bytes) / n;
  t.to_head_msgs_per_task = static_cast<double>(sim.to_head().messages) / n;
  t.from_head_msgs_per_task = static_cast<double>(sim.from_head().messages) / n;
  t.to_head_batches_per_task = static_cast<double>(sim.to_head().batches) / n;
  t.from_head_batches_per_task = static_cast<double>(sim.from_head().batches) / n;
  return t;
}

struct Decision {
  double with_room_ns = 0;
  double no_room_ns = 0;
};

Decision RunDecision(int ranks, int64_t iterations) {
  SimulationOptions o;
  o.num_ranks = ranks;
  Scheduler s(prism::sim::SimulatedCapacities(o));
  ResourceSet one;
  one.Set("CPU", prism::internal::kResourceUnit);
  ResourceSet half;
  half.Set("CPU", prism::internal::kResourceUnit / 2);
  // Every rank half loaded; a decision takes the least loaded rank with room.
  for (int r = 0; r < ranks; ++r) s.Commit(r, half);
  const std::vector<uint64_t> no_bytes;
  Decision d;
  int64_t sink = 0;
  double t0 = CpuSeconds();
  for (int64_t i = 0; i < iterations; ++i) {
    // A half-CPU task: every rank has room, the least loaded (ties round-robin) takes it.
    int r = s.Place("NoOp", half, 0, no_bytes);
    s.Commit(r, half);
    s.Release(r, half);
    sink += r;
  }
  d.with_room_ns = (CpuSeconds() - t0) * 1e9 / static_cast<double>(iterations);
  // Full: every rank's CPU committed.
  for (int r = 0; r < ranks; ++r) s.Commit(r, half);
  t0 = CpuSeconds();
  for (int64_t i = 0; i < iterations; ++i) sink += s.Place("NoOp", one, 0, no_bytes);
  d.no_room_ns = (CpuSeconds() - t0) * 1e9 / static_cast<double>(iterations);
  if (sink == 42) std::printf(" ");
  return d;
}

double HeadBytesPerRank(int ranks) {
  malloc_trim(0);
  const int64_t before = HeapInUse();
  {
    SimulationOptions o;
    o.num_ranks = ranks;
    std::vector<std::string> nodes;
    for (int r = 0; r < ranks; ++r) nodes.push_back("node-" + std::to_string(r));
    auto head = std::make_unique<prism::internal::Head>(
        prism::sim::SimulatedCapacities(o), [](int, prism::internal::Message&&) {}, nodes);
    prism::internal::JobInfo job;
    job.job_id = "simulated";
    job.hosts = nodes;
    job.pids.assign(static_cast<size_t>(ranks), 12345);
    head->SetJobInfo(std::move(job));
    nodes.clear();
    nodes.shrink_to_fit();
    const int64_t with_head = HeapInUse();
    return static_cast<double>(with_head - before) / ranks;
  }
}

double HeadBytesPerQueuedTask(int ranks, int64_t tasks, size_t* queued) {
  SimulationOptions o;
  o.num_ranks = ranks;
  HeadSimulation sim(o);
  sim.Hold(true);
  sim.Reserve(static_cast<size_t>(tasks));
  malloc_trim(0);
  const int64_t before = HeapInUse();
  for (int64_t i = 0; i < tasks; ++i) sim.Submit("NoOp");
  const int64_t after = HeapInUse();
  *queued = static_cast<size_t>(tasks) - sim.running();
  return static_cast<double>(after - before) / static_cast<double>(tasks);
}

struct GroupTimes {
  double pack4_ms = 0, spread4_ms = 0, every_rank_ms = 0;
};

GroupTimes RunGroups(int ranks, bool every_rank) {
  SimulationOptions o;
  o.num_ranks = ranks;
  HeadSimulation sim(o);
  auto create = [&](prism::PlacementStrategy strategy, int bundles, bool one_per_rank) {
    prism::PlacementGroupCreationOptions g;
    g.strategy = strategy;
    g.one_bundle_per_rank = one_per_rank;
    for (int b = 0; b < bundles; ++b) g.bundles.push_back({{"CPU", 1}});
    const double t0 = CpuSeconds();
    std::string id = sim.head().CreatePlacementGroup(g);
    const double ms = (CpuSeconds() - t0) * 1e3;
    if (sim.head().PlacementGroupState(id) != prism::internal::PlacementGroupStatus::kCreated) {
      throw std::runtime_error("placement group of " + std::to_string(bundles) +
                               " bundles not created at " + std::to_string(ranks) + " ranks");
    }
    sim.head().RemovePlacementGroup(id);
    return ms;
  };
  GroupTimes t;
  t.pack4_ms = create(prism::PlacementStrategy::PACK, 4, false);
  t.spread4_ms = create(prism::PlacementStrategy::SPREAD, 4, false);
  if (every_rank) t.every_rank_ms = create(prism::PlacementStrategy::SPREAD, ranks, true);
  return t;
}

/// Creates `actors` actors of `cpu_units` CPU ({CPU: 0} for 0) one after another, a round
/// of the simulated ranks after every `per_round`, and runs until every creation is done.
void CreateActors(HeadSimulation& sim, int actors, int64_t cpu_units, int per_round) {
  for (int i = 0; i < actors; ++i) {
    prism::internal::TaskSpec spec;
    spec.kind = prism::internal::TaskKind::kActorCreation;
    spec.Edit().function = "Actor::Create";
    spec.Edit().class_name = "Actor";
    if (cpu_units > 0) spec.Edit().demand.Set("CPU", cpu_units);
    sim.Submit(std::move(spec));
    if (i % per_round == per_round - 1) sim.Round();
  }
  if (!sim.RunUntilDone(600) || sim.failed() != 0)
    throw std::runtime_error("actor creations did not all succeed");
}

/// Rank 0's time per actor creation (placement, dispatch, the creation's completion) with
/// `actors` actors of {CPU: 1} created one after another on N one-CPU ranks.
double ActorCreationUs(int ranks, int actors) {
  SimulationOptions o;
  o.num_ranks = ranks;
  HeadSimulation sim(o);
  CreateActors(sim, actors, prism::internal::kResourceUnit, 100);
  return sim.head_seconds() * 1e6 / actors;
}

struct ActorsAlive {
  double us_per_creation = 0;  // rank 0's CPU time
  double head_bytes_per_actor = 0;
};

/// `actors` actors of {CPU: 0} (as many per rank as the head places) created and all kept
/// alive: rank 0's CPU time per creation and the head's heap per live actor.
ActorsAlive RunActorsAlive(int ranks, int actors) {
  SimulationOptions o;
  o.num_ranks = ranks;
  HeadSimulation sim(o);
  malloc_trim(0);
  const int64_t before = HeapInUse();
  CreateActors(sim, actors, 0, 1000);
  ActorsAlive a;
  a.us_per_creation = sim.head_seconds() * 1e6 / actors;
  a.head_bytes_per_actor = static_cast<double>(HeapInUse() - before) / actors;
  return a;
}

struct Heartbeats {
  double in_per_s = 0, out_per_s = 0, bytes_in_per_s = 0, bytes_out_per_s = 0;
  double head_cpu_fraction = 0;  // rank 0's CPU time per second of wall time
  double timeout_s = 0;
};

Heartbeats RunHeartbeats(int ranks, double seconds, double timeout_s) {
  SimulationOptions o;
  o.num_ranks = ranks;
  o.rank_timeout_s = timeout_s;
  HeadSimulation sim(o);
  sim.RunFor(timeout_s / 6 + 0.2);  // every rank's first heartbeat is due once
  sim.ResetCounters();
  const auto t0 = Clock::now();
  sim.RunFor(seconds);
  const double wall = Seconds(t0);
  Heartbeats h;
  h.timeout_s = timeout_s;
  h.in_per_s = static_cast<double>(sim.to_head().heartbeats) / wall;
  h.out_per_s = static_cast<double>(sim.from_head().heartbeats) / wall;
  h.bytes_in_per_s = static_cast<double>(sim.to_head().bytes) / wall;
  h.bytes_out_per_s = static_cast<double>(sim.from_head().bytes) / wall;
  h.head_cpu_fraction = sim.head_seconds() / wall;
  return h;
}

struct Exchange {
  double info_bytes = 0, ucx_address_bytes = 0;
};

Exchange RunExchange(int ranks_hint) {
  // Rank info as runtime.cc's ExchangeRankInfo writes it: node id, host, pid, resources.
  SimulationOptions o;
  o.num_ranks = ranks_hint;
  const ResourceSet own = prism::sim::SimulatedCapacities(o).back();
  const std::string host = prism_bench::HostName();
  prism::internal::Buffer mine;
  prism::internal::Writer w(mine);
  w.Str(host);  // the node id is the host name unless ranks_per_node is set
  w.Str(host);
  w.Pod<int32_t>(12345);
  w.Pod<uint64_t>(own.Entries().size());
  for (const auto& [name, units] : own.Entries()) {
    w.Str(name);
    w.Pod(units);
  }
  Exchange e;
  e.info_bytes = static_cast<double>(mine.size());
  try {
    prism::internal::UcxDataPlane ucx(0, 1,
                                      [](prism::ObjectId) { return prism::internal::Payload(); });
    e.ucx_address_bytes = static_cast<double>(ucx.Address().size());
  } catch (const std::exception& ex) {
    std::fprintf(stderr,
                 "UCX could not start here (%s): the exchange size leaves its address out\n",
                 ex.what());
  }
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  prism_bench::Cli cli("prism_head_simulation_benchmark",
                       "The real head driven by N simulated ranks in one process");
  cli.AddQuick("ranks 100,1000,10000, 5000 tasks, 1 round, 2000 actors alive: a smoke run").AddJson();
  std::vector<int> rank_counts = {100, 1000, 10000, 100000};
  int64_t tasks = 200000;
  int rounds = 3, actors_alive = 100000;
  std::string parts = "throughput,decision,memory,pg,actors,alive,heartbeats";
  cli.app.add_option("--ranks", rank_counts, "simulated rank counts (default 100,1000,10000,100000)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--tasks", tasks, "no-op tasks per throughput round and queued for memory (default 200000)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--rounds", rounds, "throughput rounds per rank count (default 3)")->check(CLI::PositiveNumber);
  cli.app.add_option("--parts", parts, "of throughput,decision,memory,pg,actors,alive,heartbeats (default all)");
  cli.app.add_option("--actors-alive", actors_alive, "actors alive at once in the alive part (default 100000)");
  cli.Parse(argc, argv, [&] {
    rank_counts = {100, 1000, 10000};
    tasks = 5000;
    rounds = 1;
    actors_alive = 2000;
  });
  const bool quick = cli.quick;
  const std::string& json = cli.json;
  parts = "," + parts + ",";
  auto wants = [&](const char* part) {
    return parts.find(std::string(",") + part + ",") != std::string::npos;
  };
  double load_start[3];
  prism_bench::LoadAverage(load_start);
  std::printf(
      "Prism head simulation: the real head, N simulated ranks (1 CPU each), %lld no-op tasks, %d "
      "round(s)\n",
      static_cast<long long>(tasks), rounds);
  std::vector<prism_bench::Entry> entries;
  auto add = [&](const std::string& name, const std::string& unit, std::vector<double> per_round,
                 int64_t iterations, const std::string& label) {
    prism_bench::Entry e;
    e.name = name;
    e.family_index = static_cast<int64_t>(entries.size());
    e.unit = unit;
    e.iterations = iterations;
    e.per_round = std::move(per_round);
    e.real_time = prism_bench::Median(e.per_round);
    e.cpu_time = e.real_time;
    e.label = label;
    entries.push_back(std::move(e));
    return &entries.back();
  };
  std::map<int, double> throughput_by_n;
  const Exchange exchange = RunExchange(rank_counts.empty() ? 1 : rank_counts.back());
  for (int n : rank_counts) {
    const std::string suffix = "_" + std::to_string(n);
    std::printf("\n== %d ranks\n", n);
    std::fflush(stdout);
    // Throughput.
    std::vector<double> head_rate, wall_rate, ns_per_task;
    Throughput last;
    for (int r = 0; r < rounds && wants("throughput"); ++r) {
      last = RunThroughput(n, tasks);
      head_rate.push_back(last.head_tasks_per_s);
      wall_rate.push_back(last.wall_tasks_per_s);
      ns_per_task.push_back(last.head_ns_per_task);
      std::printf(
          "  throughput round %d: %.0f tasks/s of rank 0 CPU time (%.2f us/task), %.0f tasks/s "
          "wall\n",
          r, last.head_tasks_per_s, last.head_ns_per_task / 1e3, last.wall_tasks_per_s);
      std::fflush(stdout);
    }
    if (wants("throughput")) {
      // The best round: the one least disturbed by whatever else runs on the machine.
      throughput_by_n[n] = prism_bench::Max(head_rate);
      std::printf("  throughput: best %.0f, median %.0f tasks/s of rank 0's CPU time\n",
                  prism_bench::Max(head_rate), prism_bench::Median(head_rate));
      add("head_throughput" + suffix, "tasks/s", head_rate, tasks,
          "tasks completed per second of rank 0's CPU time (decode, head, encode; no MPI calls)");
      entries.back().items_per_second = prism_bench::Median(head_rate);
      add("head_wall_throughput" + suffix, "tasks/s", wall_rate, tasks,
          "tasks completed per second of the whole one-thread simulation (simulated ranks "
          "included)")
          ->extra = true;
      add("head_ns_per_task" + suffix, "ns", ns_per_task, tasks,
          "rank 0's CPU time per task: submit, dispatch, done, ref drop");
      std::printf(
          "  control traffic per task: to rank 0 %.2f msgs %.2f batches %.0f B; from rank 0 %.2f "
          "msgs %.2f batches %.0f B\n",
          last.to_head_msgs_per_task, last.to_head_batches_per_task, last.to_head_bytes_per_task,
          last.from_head_msgs_per_task, last.from_head_batches_per_task,
          last.from_head_bytes_per_task);
      add("control_bytes_per_task_to_head" + suffix, "bytes", {last.to_head_bytes_per_task}, tasks,
          "encoded TaskDone bytes per task")
          ->extra = true;
      add("control_bytes_per_task_from_head" + suffix, "bytes", {last.from_head_bytes_per_task},
          tasks, "encoded DispatchTask (and other) bytes per task")
          ->extra = true;
      add("control_batches_per_task_from_head" + suffix, "batches",
          {last.from_head_batches_per_task}, tasks, "MPI messages rank 0 would send per task")
          ->extra = true;
    }
    // Decisions.
    const int64_t iterations = quick ? 2000 : 20000;
    if (wants("decision")) {
      Decision d = RunDecision(n, iterations);
      std::printf("  scheduling decision: %.0f ns with room, %.0f ns on a full cluster\n",
                  d.with_room_ns, d.no_room_ns);
      add("scheduler_decision_ns" + suffix, "ns", {d.with_room_ns}, iterations,
          "Scheduler::Place + Commit + Release, every rank half loaded");
      add("scheduler_no_room_ns" + suffix, "ns", {d.no_room_ns}, iterations,
          "Scheduler::Place on a full cluster");
    }
    if (wants("memory")) {
      // Memory.
      const double per_rank = HeadBytesPerRank(n);
      size_t queued = 0;
      const double per_task = HeadBytesPerQueuedTask(n, tasks, &queued);
      std::printf(
          "  head memory: %.0f B per rank, %.0f B per submitted task (%zu of %lld queued, the rest "
          "held by ranks; sizeof TaskSpec %zu, ObjectEntry %zu)\n",
          per_rank, per_task, queued, static_cast<long long>(tasks),
          sizeof(prism::internal::TaskSpec), sizeof(prism::internal::ObjectEntry));
      auto* e = add("head_bytes_per_rank" + suffix, "bytes", {per_rank}, n,
                    "head heap per rank: Head over N ranks with its job info (mallinfo2)");
      e->target = prism_bench::Target{"<= 1024 bytes per rank", 1024, per_rank / 1024,
                                      per_rank <= 1024, !quick};
      e = add("head_bytes_per_queued_task" + suffix, "bytes", {per_task}, tasks,
              "head heap per submitted task while the ranks hold theirs (mallinfo2)");
      e->target = prism_bench::Target{"<= 300 bytes per queued task", 300, per_task / 300,
                                      per_task <= 300, !quick};
    }
    if (wants("pg")) {
      // Placement groups.
      const bool every_rank = n <= 100000;
      GroupTimes g = RunGroups(n, every_rank);
      std::printf(
          "  placement group creation: 4 bundles PACK %.3f ms, SPREAD %.3f ms; %d bundles, one per "
          "rank %.3f ms\n",
          g.pack4_ms, g.spread4_ms, n, g.every_rank_ms);
      add("pg_create_pack4_ms" + suffix, "ms", {g.pack4_ms}, 1,
          "CreatePlacementGroup, 4 x {CPU: 1}, PACK, idle cluster");
      add("pg_create_spread4_ms" + suffix, "ms", {g.spread4_ms}, 1,
          "CreatePlacementGroup, 4 x {CPU: 1}, SPREAD, idle cluster");
      if (every_rank) {
        add("pg_create_every_rank_ms" + suffix, "ms", {g.every_rank_ms}, 1,
            "CreatePlacementGroup, N x {CPU: 1}, SPREAD, one bundle per rank");
      }
    }
    if (wants("actors")) {
      const int actors = std::min(n / 2, quick ? 200 : 2000);
      const double us = ActorCreationUs(n, actors);
      std::printf("  actor creation: %.1f us of rank 0 CPU time each (%d actors)\n", us, actors);
      add("actor_creation_us" + suffix, "us", {us}, actors,
          "rank 0's CPU time per actor creation, {CPU: 1} actors");
    }
    if (wants("alive")) {
      const ActorsAlive a = RunActorsAlive(n, actors_alive);
      std::printf("  actors alive: %d created ({CPU: 0}), %.1f us of rank 0 CPU time each, %.0f B "
                  "of head heap per live actor\n",
                  actors_alive, a.us_per_creation, a.head_bytes_per_actor);
      add("actors_alive_us_per_creation" + suffix, "us", {a.us_per_creation}, actors_alive,
          "rank 0's CPU time per creation, all actors kept alive");
      add("actors_alive_head_bytes_per_actor" + suffix, "bytes", {a.head_bytes_per_actor},
          actors_alive, "head heap per live actor (mallinfo2)");
    }
    if (wants("heartbeats")) {
      // Heartbeats.
      Heartbeats h = RunHeartbeats(n, quick ? 1.0 : 3.0, 3.0);
      const double scale = h.timeout_s / 30.0;  // to the default PRISM_RANK_TIMEOUT
      std::printf(
          "  heartbeats (timeout %.0f s): %.0f/s in, %.0f/s out, %.0f B/s in, %.0f B/s out, rank 0 "
          "busy %.3f%%; "
          "at 30 s: %.0f/s in, rank 0 busy %.4f%%\n",
          h.timeout_s, h.in_per_s, h.out_per_s, h.bytes_in_per_s, h.bytes_out_per_s,
          100 * h.head_cpu_fraction, h.in_per_s * scale, 100 * h.head_cpu_fraction * scale);
      add("heartbeats_in_per_s_timeout30" + suffix, "messages/s", {h.in_per_s * scale}, n,
          "heartbeats reaching rank 0 per second, idle, PRISM_RANK_TIMEOUT=30 (measured at 3 s, "
          "scaled)");
      add("heartbeat_bytes_per_s_timeout30" + suffix, "bytes/s",
          {(h.bytes_in_per_s + h.bytes_out_per_s) * scale}, n,
          "heartbeat bytes per second both ways at rank 0, idle, PRISM_RANK_TIMEOUT=30");
      add("heartbeat_head_cpu_fraction_timeout30" + suffix, "fraction",
          {h.head_cpu_fraction * scale}, n,
          "rank 0's CPU time per second on heartbeats and the liveness check, idle (no MPI calls)");
    }
    // Init's exchange.
    const double per_rank_exchange = exchange.info_bytes + exchange.ucx_address_bytes;
    std::printf(
        "  Init exchange: %.0f B per rank (%.0f info + %.0f UCX address); every rank receives %.1f "
        "MiB\n",
        per_rank_exchange, exchange.info_bytes, exchange.ucx_address_bytes,
        per_rank_exchange * n / (1024.0 * 1024.0));
    add("init_exchange_bytes_received_per_rank" + suffix, "bytes", {per_rank_exchange * n}, n,
        "bytes every rank receives from Init's two all-gathers (rank info + UCX address, N each)");
    std::fflush(stdout);
  }
  if (throughput_by_n.count(100) && throughput_by_n.count(10000)) {
    const double ratio = throughput_by_n[10000] / throughput_by_n[100];
    std::printf("\nthroughput at 10,000 ranks / at 100 (best rounds): %.2f (target >= 0.80)\n",
                ratio);
    auto* e = add("head_throughput_ratio_10000_to_100", "ratio", {ratio}, tasks,
                  "head throughput at 10,000 ranks over that at 100, best round of each");
    e->target = prism_bench::Target{">= 0.8 (within 20%)", 0.8, ratio / 0.8, ratio >= 0.8, !quick};
  }
  if (!json.empty()) {
    prism_bench::Context c;
    c.executable = argv[0];
    c.load_avg_at_start = std::vector<double>(load_start, load_start + 3);
    c.quick = quick;
    c.rounds = rounds;
    c.fields.push_back({"tasks", prism_bench::JsonNumber(static_cast<double>(tasks))});
    c.fields.push_back({"init_info_bytes_per_rank", prism_bench::JsonNumber(exchange.info_bytes)});
    c.fields.push_back({"ucx_address_bytes", prism_bench::JsonNumber(exchange.ucx_address_bytes)});
    c.statistic = "median of rounds";
    try {
      prism_bench::WriteReport(json, c, entries);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism_head_simulation_benchmark: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
