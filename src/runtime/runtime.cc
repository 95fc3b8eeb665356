// Init/Shutdown and the life of a rank.
//
// A session is what runs between Init and Shutdown. Init: detect the launcher; under
// mpirun/srun start MPI (once per process: MPI_Init_thread at the first Init), resolve the
// settings (code < env < flags), agree on the launch id, exchange every rank's resources
// and node id (MPI_Allgather), copy MPI_COMM_WORLD for the transport and for the
// communicator service (MPI_Comm_dup: a session's messages never reach the next one), then
// build the node manager (every rank), the head (rank 0) and the MPI transport. Rank 0
// returns to the driver; the other ranks serve until the driver's Shutdown.
//
// Sessions, as Ray has them: Init while a session runs is a no-op (an error if it asks for
// a different configuration), and Init after Shutdown starts a new one. In an MPI job the
// worker ranks never return from their first Init: after a session they tear it down and
// wait (polling, idle) for rank 0's word, which is either "a new session, with this
// configuration" (rank 0's next Init, announced with MPI_Ibcast) or "the driver's process
// is exiting, with this status" (rank 0's on_exit hook), after which they finalize MPI and
// exit 0: the job's status is rank 0's (a worker exiting non-zero first would have the
// launcher kill rank 0 mid-exit). MPI is finalized at process exit, never at Shutdown. A driver
// whose main returns without Shutdown is shut down at exit, as Ray does, and the job ends
// with main's own exit status. Without a launcher everything lives in one process and MPI
// is never touched.
//
// Ending badly never hangs: an uncaught exception anywhere calls the terminate handler
// (message, then MPI_Abort); a task that calls exit() is caught by the on_exit hook
// (message naming the task and rank, MPI_Abort with its status); a silent rank is reported
// by the transport's heartbeat check (message, MPI_Abort); a driver process that dies
// between sessions is the launcher's to report (it ends the waiting ranks).
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "common/check.h"
#include "common/log.h"
#include "common/private_dir.h"
#include "object_store/buffer_pool.h"
#include "prism/api.h"
#include "prism/preemption.h"
#include "head/head.h"
#include "runtime/communicator_service.h"
#include "runtime/config_fields.h"
#include "runtime/dashboard_feed.h"
#include "runtime/launch.h"
#include "runtime/output_capture.h"
#include "node_manager/node.h"
#include "runtime/settings.h"
#include "runtime/stop_signals.h"
#include "runtime/waiting_watch.h"
#include "transport/mpi/mpi_transport.h"
#include "transport/ucx/ucx_data_plane.h"

namespace prism {
namespace internal {

namespace {

struct Runtime {
  Settings settings;
  LaunchInfo launch;
  bool mpi = false;
  int rank = 0;
  int world = 1;
  std::vector<ResourceSet> capacities;
  std::vector<std::string> node_ids;
  std::vector<std::string> hosts;  // per rank
  std::vector<int> pids;           // per rank
  std::unique_ptr<MpiTransport> transport;
  std::unique_ptr<UcxDataPlane> ucx;  // the data plane, unless PRISM_DATA_PLANE=mpi
  std::unique_ptr<Head> head;
  std::unique_ptr<WaitingWatch> waiting_watch;  // rank 0: warns of tasks waiting for good
  std::unique_ptr<Node> node;
  std::unique_ptr<OutputForwarder> forwarder;  // worker ranks, with log_to_driver
  std::unique_ptr<DriverPrinter> printer;      // rank 0, with log_to_driver
  std::unique_ptr<DashboardFeed> dashboard;    // rank 0, with the dashboard setting on
  std::unique_ptr<RankReporter> reporter;      // other ranks, with the dashboard setting on

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop_requested = false;
  int stop_code = 0;
  bool end_process = false;  // the Stop said to end the process after the session
  // Recovery mode (mpirun --enable-recovery): a lost worker rank does not end the job.
  bool recovery = false;
  MPI_Comm comm = MPI_COMM_NULL;  // the session's copy of MPI_COMM_WORLD (its transport)
};
std::atomic<Runtime*> g_runtime{nullptr};
std::mutex g_init_mu;

/// What outlives a session, in this process (guarded by g_init_mu, but read by the exit
/// hook, which runs when no other Init can).
struct ProcessState {
  bool mpi_started = false;  // MPI_Init_thread was called (or MPI found initialized) here
  bool mpi_ended = false;    // MPI_Finalize was called (at exit, or on a fatal config)
  int rank = 0;              // in MPI_COMM_WORLD, once MPI started
  int world = 1;
  bool announce = false;     // rank 0: the worker ranks wait between sessions for its word
  bool lost_ranks = false;   // rank 0: a rank was lost (recovery mode); no next session
  /// The running session's configuration and --prism-* flags, for a repeated Init.
  Config running;
  std::vector<std::string> running_flags;
};
ProcessState g_process;

/// This rank's log file (created on its first line).
std::string LogFile(const Runtime& rt) {
  return rt.settings.log_dir + "/rank-" + std::to_string(rt.rank) + ".log";
}

/// This worker rank's captured stdout and stderr (log_to_driver).
std::string OutputFile(const Runtime& rt) {
  return rt.settings.log_dir + "/rank-" + std::to_string(rt.rank) + ".out";
}

/// At a clean end, on every rank: its spill files, its log file when the logs are in the
/// session directory, then whichever of the session's directories are empty (so the last
/// rank on a host to leave removes them all). After a failure only the spill files go: the
/// logs stay, and the failure message says where.
/// Removes the session's directories that are empty (rmdir: another rank's files keep them).
void RemoveEmptySessionDirs(const Runtime& rt) {
  const Settings& s = rt.settings;
  ::rmdir((s.session_dir + "/spill").c_str());
  if (s.log_dir.rfind(s.session_dir + "/", 0) == 0) ::rmdir(s.log_dir.c_str());
  ::rmdir(s.session_dir.c_str());
}

void RemoveSessionFiles(Runtime& rt, bool clean) {
  rt.node->store().RemoveSpillFiles();
  if (!clean) return;
  const Settings& s = rt.settings;
  if (s.log_dir.rfind(s.session_dir + "/", 0) == 0) {
    SetLogFile("");  // closes it; later lines go to stderr only
    ::unlink(LogFile(rt).c_str());
    ::unlink(OutputFile(rt).c_str());
  }
  RemoveEmptySessionDirs(rt);
}

/// Rank 0 writes the job's exit status to $PRISM_EXIT_STATUS_FILE (if set) as it exits:
/// Open MPI's mpirun --enable-recovery (recovery mode) exits 0 whatever its ranks' statuses,
/// even after MPI_Abort, so a script learns the job's status from this file (a number and
/// a newline; jobs/requeue_step.sh and scripts/mpirun-recovery.sh read it). Async-signal-
/// safe calls only: it also runs on the way out of AbortJob.
void RecordExitStatus(int status) {
  const char* path = std::getenv("PRISM_EXIT_STATUS_FILE");
  if (path == nullptr || *path == '\0') return;
  char text[16];
  const int n = std::snprintf(text, sizeof text, "%d\n", status);
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  [[maybe_unused]] ssize_t written = ::write(fd, text, static_cast<size_t>(n));
  ::close(fd);
}

[[noreturn]] void AbortJob(const std::string& why, int code) {
  if (g_process.rank == 0) RecordExitStatus(code);
  // What a dying worker prints goes straight to the launcher, not through the driver.
  if (OutputForwarder* f = CurrentOutputForwarder()) f->Restore();
  Runtime* rt = g_runtime.load();
  if (rt != nullptr && ::access(LogFile(*rt).c_str(), F_OK) == 0) {
    std::fprintf(stderr, "prism: %s (this rank's log: %s)\n", why.c_str(), LogFile(*rt).c_str());
  } else {
    // Nothing of this rank's to look at: its empty session directories go (a failed job
    // left $TMPDIR/prism-<job>-... empty, named by no message).
    if (rt != nullptr) RemoveEmptySessionDirs(*rt);
    std::fprintf(stderr, "prism: %s\n", why.c_str());
  }
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void OnTerminate() {
  std::string what = "std::terminate called";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = std::string("uncaught exception: ") + ex.what();
    } catch (...) {
      what = "uncaught non-standard exception";
    }
  }
  Runtime* rt = g_runtime.load();
  int rank = rt ? rt->rank : 0;
  AbortJob((rank == 0 ? "the driver (rank 0) ended with an " : "rank " + std::to_string(rank) +
                                                                   " ended with an ") +
               what + "; ending the job",
           1);
}

/// exit() while the job runs (registered with on_exit, which passes the status, at Init on
/// every rank). On rank 0 outside a task, the driver's main ended without Shutdown: the
/// other ranks are stopped and the job ends with the status (1 if it was 0). Anywhere else
/// a task (or a thread of the program's) called exit(): the job ends with that status
/// (1 for exit(0)), saying which task on which rank, before static destructors can run
/// under the threads still working (which used to end in "std::terminate called").
/// What rank 0 tells the worker ranks waiting between sessions (MPI_Ibcast on
/// MPI_COMM_WORLD; for kNewSession an MPI_Bcast of the configuration follows).
struct SessionWord {
  enum Call : int32_t { kNewSession = 1, kEndProcess = 2 };
  int32_t call = kEndProcess;
  int32_t exit_code = 0;
  uint64_t config_bytes = 0;
};

/// Rank 0: an Ibcast of `word` that worker ranks wait for, then the configuration. Returns
/// false if MPI failed (in the exit hook nothing may throw).
bool Announce(const SessionWord& word, const Buffer& config) {
  SessionWord w = word;
  MPI_Request request;
  if (MPI_Ibcast(&w, sizeof w, MPI_BYTE, 0, MPI_COMM_WORLD, &request) != MPI_SUCCESS) return false;
  if (MPI_Wait(&request, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
  if (w.call != SessionWord::kNewSession) return true;
  return MPI_Bcast(const_cast<char*>(config.data()), static_cast<int>(config.size()), MPI_BYTE, 0,
                   MPI_COMM_WORLD) == MPI_SUCCESS;
}

/// A worker rank between sessions: waits for rank 0's next word (and for kNewSession its
/// configuration, into `config`). No timeout, by design: the driver's process decides when
/// the next session starts, and if it dies the launcher ends this rank. MPI_Test with naps
/// of up to 50 ms keeps the waiting rank idle (a blocking Ibcast wait would spin a core).
SessionWord AwaitDriver(Buffer& config) {
  SessionWord word;
  MPI_Request request;
  PRISM_MPI_CHECK(MPI_Ibcast(&word, sizeof word, MPI_BYTE, 0, MPI_COMM_WORLD, &request));
  auto nap = std::chrono::milliseconds(1);
  for (int done = 0;;) {
    PRISM_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) break;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(50));
  }
  if (word.call == SessionWord::kNewSession) {
    config = Buffer(static_cast<size_t>(word.config_bytes));
    PRISM_MPI_CHECK(MPI_Bcast(config.data(), static_cast<int>(word.config_bytes), MPI_BYTE, 0,
                              MPI_COMM_WORLD));
  }
  return word;
}

/// At exit on rank 0: the waiting worker ranks are told to exit, and MPI ends here.
void EndMpiAtExit(int status) {
  if (!g_process.mpi_started || g_process.mpi_ended) return;
  g_process.mpi_ended = true;
  // After a lost rank (recovery mode) the workers were told to end with the session, and
  // MPI_Finalize may wait for the lost rank: leave without it.
  if (g_process.lost_ranks) return;
  if (g_process.announce) Announce(SessionWord{SessionWord::kEndProcess, status, 0}, Buffer());
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

/// Rank 0: ends the running session (Shutdown). True if no thread was left in user code
/// (the session's runtime is freed), or if nothing was running.
bool EndSession();

/// exit() in this process, registered with on_exit (which passes the status) at each Init.
/// On rank 0 outside any task, the driver's main returned (or exited): a session still
/// running is shut down, as Ray does at exit, the worker ranks waiting between sessions are
/// told to exit, MPI is finalized, and exit goes on with main's own
/// status. Inside a task, or on a worker rank, a task (or a thread of the program's) called
/// exit() while the job runs: the job ends with that status (1 for exit(0)), saying which
/// task on which rank, before static destructors can run under the threads still working
/// (which used to end in "std::terminate called").
void OnProcessExit(int status, void*) {
  static std::atomic<bool> ran{false};
  Runtime* rt = g_runtime.load();
  const TaskId task = CurrentTaskId();
  if (rt != nullptr && (rt->rank != 0 || !task.IsNil())) {
    const int code = status != 0 ? status : 1;
    const std::string* name = CurrentTaskName();
    const std::string who =
        task.IsNil() ? "a thread outside any task on rank " + std::to_string(rt->rank)
                     : "task " + (name != nullptr && !name->empty() ? *name + " " : std::string()) +
                           "(id " + task.Hex() + ") on rank " + std::to_string(rt->rank);
    AbortJob(who + " called exit(" + std::to_string(status) + ") while the job was running; "
             "ending the job with exit status " + std::to_string(code) +
             " (return from the task, or throw, instead of exiting)",
             code);
  }
  if (g_process.rank != 0 || ran.exchange(true)) return;  // registered once per Init
  RecordExitStatus(status);
  bool clean = true;
  if (rt != nullptr) {
    PRISM_LOG_INFO("the driver's main() ended (exit status " << status
                   << ") without prism::Shutdown(): shutting down at exit");
    // On a thread of its own: exit() has already destroyed this thread's thread_locals
    // (the calling thread's cached task options among them), which Shutdown would use.
    std::thread([&clean] {
      try {
        clean = EndSession();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "prism: shutdown at exit failed: %s\n", e.what());
        clean = false;
      }
    }).join();
  }
  EndMpiAtExit(status);
  if (!clean) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(status);
  }
}

std::string MakeJobId() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lx-%x-%x", static_cast<long>(time(nullptr)),
                static_cast<unsigned>(getpid()), rd() & 0xffff);
  return buf;
}

ResourceSet OwnResources(const Settings& s, const HostFacts& host, const LaunchInfo& launch,
                         int rank) {
  ResourceSet r;
  r.Set("CPU", ToUnits(s.num_cpus));
  if (s.num_gpus > 0) r.Set("GPU", ToUnits(s.num_gpus));
  // "memory" in bytes, as Ray counts it: 70% of this rank's share of the host.
  r.Set("memory", static_cast<int64_t>(host.memory_bytes * 0.7 / std::max(1, launch.local_size)) *
                      kResourceUnit);
  // "object_store_memory" in bytes, as Ray reports it: this rank's store capacity. No task
  // asks for it (it is never held), so the public API can read the capacity from it.
  r.Set("object_store_memory",
        static_cast<int64_t>(std::min<double>(static_cast<double>(s.object_store_memory), kMaxResourceAmount)) *
            kResourceUnit);
  for (const auto& [name, amount] : s.custom_resources) r.Set(name, ToUnits(amount));
  r.Set("rank:" + std::to_string(rank), kResourceUnit);
  return r;
}

/// Every rank's resources and node id, gathered to all (one MPI_Allgatherv of strings).
/// Every rank's bytes, by rank (an all-gather of variable-length blocks).
std::vector<Buffer> AllGatherBytes(const Runtime& rt, const Buffer& mine) {
  std::vector<Buffer> all(rt.world);
  if (rt.world == 1) {
    all[0] = mine;
    return all;
  }
  int n = static_cast<int>(mine.size());
  std::vector<int> sizes(rt.world), offsets(rt.world);
  PRISM_MPI_CHECK(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD));
  int total = 0;
  for (int r = 0; r < rt.world; ++r) {
    offsets[r] = total;
    total += sizes[r];
  }
  Buffer gathered(static_cast<size_t>(total));
  PRISM_MPI_CHECK(MPI_Allgatherv(mine.data(), n, MPI_BYTE, gathered.data(), sizes.data(),
                                 offsets.data(), MPI_BYTE, MPI_COMM_WORLD));
  for (int r = 0; r < rt.world; ++r) all[r] = Buffer(gathered.data() + offsets[r], sizes[r]);
  return all;
}

/// Every rank's node id, host, pid, resources and given settings (GivenSettings), gathered
/// to all in the one exchange of Init; `given_by_rank` receives the settings, by rank.
void ExchangeRankInfo(Runtime& rt, const ResourceSet& own, const std::string& node_id,
                      const std::string& host, const std::vector<GivenSetting>& given,
                      std::vector<std::vector<GivenSetting>>& given_by_rank) {
  Buffer mine;
  Writer w(mine);
  w.Str(node_id);
  w.Str(host);
  w.Pod<int32_t>(static_cast<int32_t>(getpid()));
  w.Pod<uint64_t>(own.Entries().size());
  for (const auto& [name, units] : own.Entries()) {
    w.Str(name);
    w.Pod(units);
  }
  w.Pod<uint64_t>(given.size());
  for (const auto& g : given) {
    w.Str(g.name);
    w.Str(g.value);
    w.Str(g.source);
  }
  std::vector<Buffer> raw = AllGatherBytes(rt, mine);
  given_by_rank.assign(static_cast<size_t>(rt.world), {});
  for (int r = 0; r < rt.world; ++r) {
    Reader rd(raw[r].data(), raw[r].size());
    rt.node_ids.push_back(rd.Str());
    rt.hosts.push_back(rd.Str());
    rt.pids.push_back(rd.Pod<int32_t>());
    ResourceSet set;
    auto n = rd.Pod<uint64_t>();
    for (uint64_t i = 0; i < n; ++i) {
      std::string name = rd.Str();
      set.Set(name, rd.Pod<int64_t>());
    }
    rt.capacities.push_back(std::move(set));
    const auto settings = rd.Pod<uint64_t>();
    for (uint64_t i = 0; i < settings; ++i) {
      GivenSetting g;
      g.name = rd.Str();
      g.value = rd.Str();
      g.source = rd.Str();
      given_by_rank[static_cast<size_t>(r)].push_back(std::move(g));
    }
  }
}

/// Before Shutdown stops the ranks: every worker's output so far reaches the driver's
/// console (a flush task pinned to each, up to 5 s in all), then the printer stops.
void FlushWorkerOutput(Runtime& rt) {
  std::vector<ObjectRef<bool>> flushed;
  const std::vector<int> lost = rt.transport ? rt.transport->LostRanks() : std::vector<int>();
  try {
    for (int r = 1; r < rt.world; ++r) {
      if (std::find(lost.begin(), lost.end(), r) != lost.end()) continue;
      flushed.push_back(prism::Task(prism_output_capture::PrismFlushOutput)
                            .SetResource("CPU", 0)
                            .SetResource("rank:" + std::to_string(r), 0.001)
                            .Remote());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (auto& ref : flushed) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      (void)ref.Get(std::max<int64_t>(1, left.count()));
    }
  } catch (const std::exception& e) {
    PRISM_LOG_WARN("log_to_driver: workers' last output may be missing from the console ("
                   << e.what() << "); each worker rank's .out file in " << rt.settings.log_dir
                   << " has it");
  }
  rt.printer.reset();
}

void RequestStop(Runtime& rt, int code) {
  std::lock_guard<std::mutex> lock(rt.stop_mu);
  rt.stop_requested = true;
  rt.stop_code = code;
  rt.stop_cv.notify_all();
}

/// A worker rank's session, until the driver's Stop; then tears it down (MPI stays up).
/// Returns the Stop's exit code, and whether it said to end the process (`end_process`).
int ServeUntilStop(Runtime* rt, bool& end_process) {
  {
    std::unique_lock<std::mutex> lock(rt->stop_mu);
    rt->stop_cv.wait(lock, [&] { return rt->stop_requested; });
  }
  const int code = rt->stop_code;
  end_process = rt->end_process;
  UninstallStopSignals();
  if (rt->forwarder) {
    rt->forwarder->Flush(1000);  // into the .out file at least
    SetOutputForwarder(nullptr);
    rt->forwarder.reset();  // fds 1 and 2 are the launcher's again
  }
  const bool clean = rt->node->Stop();
  rt->transport->Stop(std::chrono::milliseconds(2000));
  if (rt->ucx) rt->ucx->Stop();
  RemoveSessionFiles(*rt, code == 0);
  SetProcessCore(nullptr);
  g_runtime.store(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  CloseCommunicatorService();
  // With tasks still running user code, their threads keep using the runtime: leave it.
  if (clean) delete rt;
  return code;
}

Runtime* StartSession(const Config& config, const std::vector<std::string>& args);

/// A worker rank of an MPI job from its first Init on: serves each session, then waits for
/// rank 0's next Init (a new session with the driver's configuration and this rank's own
/// flags) or for the driver's exit (finalize MPI and exit 0; rank 0 gives the status).
[[noreturn]] void ServeSessions(Runtime* rt) {
  for (;;) {
    bool end_process = false;
    const int code = ServeUntilStop(rt, end_process);
    Buffer config;
    SessionWord word = code != 0 || end_process ? SessionWord{SessionWord::kEndProcess, code, 0}
                                                : AwaitDriver(config);
    if (word.call != SessionWord::kNewSession) {
      std::fflush(stdout);
      std::fflush(stderr);
      g_process.mpi_ended = true;
      if (!end_process) MPI_Finalize();  // after a lost rank it may wait for that rank
      // The driver's exit status is rank 0's to give: a worker rank that exited with it
      // (75 after a preemption, say) before rank 0 was done exiting would have srun
      // --kill-on-bad-exit (or mpirun) kill rank 0 and end the job 143. A session that
      // ended on a failure (code != 0) still ends this rank with that code.
      std::_Exit(code != 0 ? word.exit_code : 0);  // no static destructors here
    }
    std::lock_guard<std::mutex> lock(g_init_mu);
    Reader r(config.data(), config.size());
    ByteView encoded = r.Bytes();
    std::vector<std::string> argv(r.Pod<uint64_t>());
    for (auto& a : argv) a = r.Str();
    rt = StartSession(DecodeConfig(encoded.data, encoded.size), argv);
  }
}

/// Creates the UCX data plane on every rank and exchanges worker addresses (collective).
/// If UCX cannot start on some rank, every rank falls back to MPI transfers, and rank 0
/// says why.
void StartUcx(Runtime& rt) {
  Runtime* self = &rt;
  std::string error;
  try {
    rt.ucx = std::make_unique<UcxDataPlane>(rt.rank, rt.world, [self](ObjectId id) {
      return self->node ? self->node->LocalValue(id) : nullptr;
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  int ok = error.empty() ? 1 : 0, all_ok = 0;
  PRISM_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (!all_ok) {
    if (!error.empty()) PRISM_LOG_WARN(error);
    if (rt.rank == 0) {
      std::fprintf(stderr, "prism: UCX could not start on every rank; objects move over MPI "
                           "instead (see the rank logs for the reason)\n");
    }
    rt.ucx.reset();
    return;
  }
  const auto& address = rt.ucx->Address();
  std::vector<Buffer> all = AllGatherBytes(rt, Buffer(address.data(), address.size()));
  std::vector<std::vector<char>> peers;
  for (auto& b : all) peers.emplace_back(b.data(), b.data() + b.size());
  rt.ucx->Start(std::move(peers));
}

/// Opens this rank's doorbell (transport/doorbell.h) and gives the transport every rank's
/// (collective). A rank that cannot open one is never rung; PRISM_DOORBELL=off leaves
/// every rank without (the naps alone, for comparisons).
void StartDoorbell(Runtime& rt) {
  const char* off = std::getenv("PRISM_DOORBELL");
  std::string why = "PRISM_DOORBELL=off";
  std::unique_ptr<Doorbell> doorbell;
  if (off == nullptr || std::string(off) != "off") doorbell = Doorbell::Open(rt.settings.network, &why);
  if (!doorbell) PRISM_LOG_INFO("no doorbell (" + why + "): idle ranks see messages at their next look");
  const std::string mine = doorbell ? doorbell->Address() : "";
  std::vector<Buffer> all = AllGatherBytes(rt, Buffer(mine.data(), mine.size()));
  if (!doorbell) return;
  std::vector<std::string> peers;
  for (const Buffer& b : all) peers.emplace_back(reinterpret_cast<const char*>(b.data()), b.size());
  doorbell->SetPeers(peers);
  rt.transport->SetDoorbell(std::move(doorbell));
}

/// Recovery mode: whether rank `r`'s process is known to have ended. Only for a rank on
/// this host (its pid means something here): gone, or a zombie its launcher has not
/// reaped. A rank elsewhere is judged by its heartbeats alone.
bool RankProcessEnded(const Runtime& rt, int r) {
  const auto u = static_cast<size_t>(r);
  const auto self = static_cast<size_t>(rt.rank);
  if (u >= rt.pids.size() || u >= rt.hosts.size() || self >= rt.hosts.size() || rt.hosts[u] != rt.hosts[self] ||
      rt.pids[u] <= 0) {
    return false;
  }
  std::ifstream stat("/proc/" + std::to_string(rt.pids[u]) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');  // the state follows the command name
  return paren != std::string::npos && paren + 2 < line.size() &&
         (line[paren + 2] == 'Z' || line[paren + 2] == 'X');
}

/// Recovery mode: Open MPI's mpirun --enable-recovery (orte_enable_recovery) keeps the job
/// alive when a rank dies, and says so to the ranks in their environment. Slurm's pmix
/// plugin kills the step 1.3 s after any task dies, --no-kill or not (measured), and a
/// plain mpirun ends the job: there a lost rank ends the job as before.
bool RecoveryMode(const EnvFn& env, int world) {
  const std::string v = env("OMPI_MCA_orte_enable_recovery").value_or("");
  return world > 1 && (v == "1" || v == "true" || v == "yes");
}

void Build(Runtime& rt) {
  NodeOptions options;
  options.rank = rt.rank;
  options.world_size = rt.world;
  options.capacities = rt.capacities;
  options.max_inline_bytes = rt.settings.max_inline_bytes;
  options.object_store_memory = rt.settings.object_store_memory;
  options.spill_dir = rt.settings.session_dir + "/spill/rank-" + std::to_string(rt.rank);
  options.node_ids = rt.node_ids;
  options.job_id = rt.settings.job_id;
  options.ray_namespace = rt.settings.ray_namespace;
  options.gpus = rt.settings.gpus;
  options.batch_releases = rt.world > 1;  // the progress loop's on_tick sends them
  options.wait_infeasible = rt.settings.wait_infeasible;
  options.recovery = rt.recovery;
  Runtime* self = &rt;
  if (rt.world > 1) {
    MpiTransport::Handlers handlers;
    handlers.on_message = [self](int from, Message&& m) {
      if (auto* stop = std::get_if<Stop>(&m)) {
        if (stop->end_process) self->end_process = true;
        RequestStop(*self, stop->exit_code);
      } else if (IsForHead(m)) {
        if (self->head) self->head->Post(from, std::move(m));
      } else {
        self->node->Handle(std::move(m));
      }
    };
    handlers.lookup = [self](ObjectId id) { return self->node->LocalValue(id); };
    handlers.on_fatal = [](const std::string& why) { AbortJob(why + "; ending the job", 3); };
    if (rt.recovery && rt.rank == 0) {
      handlers.on_rank_lost = [self](int r, const std::string& why) {
        if (self->head) self->head->OnRankLost(r, why);
        const int limit = self->settings.max_lost_ranks;
        const size_t lost = self->transport->LostRanks().size();
        if (limit >= 0 && lost > static_cast<size_t>(limit)) {
          AbortJob("rank " + std::to_string(r) + " was lost (" + why + "): " + std::to_string(lost) +
                       " worker ranks lost, more than max_lost_ranks=" + std::to_string(limit) +
                       " (PRISM_MAX_LOST_RANKS); ending the job with exit status " +
                       std::to_string(kExitPreempted) + " so that a job script requeues it",
                   kExitPreempted);
        }
      };
    }
    // Recovery mode: rank 0 loses a worker whose process ended; a worker ends with rank 0
    // (mpirun --enable-recovery would leave it running, waiting for a dead head).
    if (rt.recovery) handlers.exited = [self](int r) { return RankProcessEnded(*self, r); };
    // Dropped refs reach the head in batches; this bounds how long one waits.
    handlers.on_tick = [self] {
      if (self->node) self->node->SendReleases();
      if (self->reporter) self->reporter->Tick();  // a sample for the dashboard, once a second
      if (self->head && self->recovery) self->head->Tick();
    };
    rt.transport =
        std::make_unique<MpiTransport>(rt.comm, rt.settings.rank_timeout_s, handlers);
    StartDoorbell(rt);
  }
  ObjectFetcher* fetcher = rt.transport.get();
  if (rt.world > 1 && rt.settings.data_plane == "ucx") {
    StartUcx(rt);
    if (rt.ucx) fetcher = rt.ucx.get();
  }
  if (rt.rank == 0) {
    rt.head = std::make_unique<Head>(
        rt.capacities,
        [self](int dest, Message&& m) {
          if (dest == 0) {
            self->node->Handle(std::move(m));
          } else {
            self->transport->Send(dest, m);
          }
        },
        rt.node_ids);
    rt.head->SetWaitInfeasible(rt.settings.wait_infeasible);
    rt.node = std::make_unique<Node>(
        options, [self](Message&& m) { self->head->Post(0, std::move(m)); }, fetcher);
  } else {
    rt.node = std::make_unique<Node>(
        options, [self](Message&& m) { self->transport->Send(0, m); }, fetcher);
  }
}

/// Starts MPI at the first session of the process (the network setting applies then only);
/// later sessions reuse it.
void StartMpi(Runtime& rt, const Config& config, const std::vector<std::string>& args, const EnvFn& env) {
  if (!g_process.mpi_started) {
    // Where ranks listen (Config::network) is MPI's and UCX's environment: set before both.
    ApplyNetwork(NetworkSetting(config, args, env));
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      PRISM_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
      if (provided < MPI_THREAD_SERIALIZED) {
        AbortJob("this MPI library provides no thread support beyond FUNNELED; Prism needs "
                 "MPI_THREAD_SERIALIZED or better",
                 2);
      }
    }
    g_process.mpi_started = true;
    PRISM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_process.rank));
    PRISM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_process.world));
  }
  rt.rank = g_process.rank;
  rt.world = g_process.world;
}

/// Fatal at Init in an MPI job: rank 0 says why, then every rank leaves together, so that
/// no early exit lets the launcher kill rank 0 before it spoke. Every rank must call it.
[[noreturn]] void EndJobAtInit(const Runtime& rt, const std::string& error) {
  if (rt.rank == 0) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::fflush(stderr);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  g_process.mpi_ended = true;
  MPI_Finalize();
  std::_Exit(2);
}

/// Every rank resolves its settings; in an MPI job any failure stops every rank (fatal:
/// rank 0 says why, then all leave together), without one an error is thrown.
void ResolveOnEveryRank(Runtime& rt, const Config& config, const std::vector<std::string>& args,
                        const EnvFn& env, const HostFacts& host) {
  // This launch's id, made by rank 0 and shared: the job id when no launcher gives one,
  // and what keeps two launches (or sessions) apart (their directories, spill files).
  std::string launch_id = MakeJobId();
  if (rt.mpi && rt.world > 1) {
    char buf[64] = {};
    std::snprintf(buf, sizeof buf, "%s", launch_id.c_str());
    PRISM_MPI_CHECK(MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD));
    launch_id = buf;
  }
  std::string error;
  try {
    rt.settings = ResolveSettings(config, args, env, rt.launch, host, launch_id);
    // Private to the user (0700), and never a link or a directory someone else made.
    if (std::string why = MakePrivateDir(rt.settings.session_dir); !why.empty()) {
      error = "prism: cannot use the session directory (logs, spilled objects): " + why;
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!rt.mpi) {
    if (!error.empty()) throw RuntimeError(error);
    return;
  }
  int bad = !error.empty(), any_bad = 0;
  PRISM_MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  int rank0_bad = bad;
  PRISM_MPI_CHECK(MPI_Bcast(&rank0_bad, 1, MPI_INT, 0, MPI_COMM_WORLD));
  if (bad && rt.rank != 0 && !rank0_bad) {
    std::fprintf(stderr, "prism[%d]: %s\n", rt.rank, error.c_str());
  }
  if (any_bad) {
    EndJobAtInit(rt, error.empty() ? "prism: invalid configuration on another rank (its "
                                     "environment differs from rank 0's)"
                                   : error);
  }
}

/// The PRISM_* variables of this process, "NAME=value".
std::vector<std::string> PrismEnvironment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "PRISM_", 6) == 0) out.emplace_back(*e);
  }
  return out;
}

/// Settings that differ between ranks (mpirun forwards only -x variables to the ranks it
/// starts): rank 0 warns, naming the ranks, hosts and values; when one that every rank must
/// agree on differs, every rank stops together (each reaches the same verdict from the
/// same exchange).
void CheckSettingsAgree(const Runtime& rt, const std::vector<std::vector<GivenSetting>>& by_rank) {
  if (rt.world == 1) return;
  SettingsAgreement agreement = CompareSettings(by_rank, rt.hosts);
  if (rt.rank == 0) {
    for (const auto& warning : agreement.warnings) PRISM_LOG_WARN(warning);
  }
  if (!agreement.error.empty()) EndJobAtInit(rt, agreement.error);
}

/// The --prism-* arguments of a command line (with the value of "--prism-x v").
std::vector<std::string> PrismFlags(const std::vector<std::string>& args) {
  std::vector<std::string> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--prism-", 0) != 0) continue;
    flags.push_back(args[i]);
    if (args[i].find('=') == std::string::npos && i + 1 < args.size()) flags.push_back(args[++i]);
  }
  return flags;
}

/// Starts a session on this rank (every rank of the job at once: the steps are collective)
/// and publishes it. `argv` is the command line (argv[0] first) whose --prism-* flags count.
Runtime* StartSession(const Config& config, const std::vector<std::string>& argv) {
  std::set_terminate(OnTerminate);
  ApplyEnvVars(config.env_vars);  // the job's runtime environment, before anything reads it
  EnvFn env = ProcessEnv();
  std::string hint = LaunchMisuseHint(env);
  if (!hint.empty()) {
    std::fprintf(stderr, "%s\n", hint.c_str());
    std::_Exit(2);
  }
  auto rt = std::make_unique<Runtime>();
  rt->launch = DetectLaunch(env);
  rt->mpi = LaunchedByMpiLauncher(env);
  const std::vector<std::string> args(argv.begin() + std::min<size_t>(1, argv.size()), argv.end());
  if (rt->mpi) StartMpi(*rt, config, args, env);
  SetLogRank(rt->rank);
  if (std::string warning = SingleRankHint(env, rt->world); !warning.empty()) {
    std::fprintf(stderr, "%s\n", warning.c_str());
  }
  HostFacts host = ReadHostFacts();
  ResolveOnEveryRank(*rt, config, args, env, host);
  SetLogLevelValue(static_cast<int>(rt->settings.log_level));
  SetBufferPoolLimit(rt->settings.object_store_memory / 2);
  SetLogFile(LogFile(*rt));

  std::string node_id = rt->settings.ranks_per_node > 0
                            ? "node-" + std::to_string(rt->rank / rt->settings.ranks_per_node)
                            : NodeIdentity(rt->launch, host.hostname);
  std::vector<std::vector<GivenSetting>> given_by_rank;
  ExchangeRankInfo(*rt, OwnResources(rt->settings, host, rt->launch, rt->rank), node_id,
                   host.hostname, GivenSettings(rt->settings, config, args, env, PrismEnvironment()),
                   given_by_rank);
  CheckSettingsAgree(*rt, given_by_rank);
  if (rt->mpi) {
    // Collective, like the exchange before it. The session's own copy of MPI_COMM_WORLD
    // for its transport: a message of an ended session can never reach the next one. Not
    // freed (a cancelled receive may still name it): MPI_Finalize, at exit, releases it.
    if (rt->world > 1) PRISM_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &rt->comm));
    OpenCommunicatorService();
  }
  rt->recovery = RecoveryMode(env, rt->world);
  Build(*rt);
  if (rt->head) {
    JobInfo job;
    job.job_id = rt->settings.job_id;
    for (size_t i = 0; i < argv.size(); ++i) job.entrypoint += (i ? " " : "") + argv[i];
    job.launcher = rt->launch.launcher_name();
    job.start_time_ns = WallNowNs();
    job.hosts = rt->hosts;
    job.pids = rt->pids;
    job.task_table_size = rt->settings.task_table_size;
    rt->head->SetJobInfo(std::move(job));
    // A reader's failed pull waits for its source to be declared lost: rank_timeout_s is
    // the longest that takes (a rank on another host that went silent).
    if (rt->recovery) rt->head->SetRecovery(rt->settings.rank_timeout_s + 1);
    rt->waiting_watch = std::make_unique<WaitingWatch>(*rt->head, rt->settings.pending_warn_s);
  }

  if (rt->settings.log_to_driver && rt->world > 1) {
    if (rt->rank == 0) {
      rt->printer = std::make_unique<DriverPrinter>(rt->node->OpenChannel(kLogChannel), rt->hosts);
    } else {
      Node* node = rt->node.get();
      rt->forwarder = std::make_unique<OutputForwarder>(OutputFile(*rt), [node](std::string&& batch) {
        node->Publish(kLogChannel, Buffer(batch.data(), batch.size()));
      });
      SetOutputForwarder(rt->forwarder.get());
    }
  }

  if (rt->settings.dashboard.mode != dashboard::DashboardSetting::Mode::kOff) {
    if (rt->rank == 0) {
      rt->dashboard = std::make_unique<DashboardFeed>(
          DashboardFeed::Options{rt->settings.dashboard, rt->settings.session_dir,
                                 rt->settings.log_dir, rt->settings.job_id},
          *rt->node);
    } else {
      rt->reporter = std::make_unique<RankReporter>(rt->rank, *rt->node);
    }
  }

  // Publish the runtime before the transport starts: a task may arrive at once and must
  // find it (GetRuntimeContext, ObjectRef counting).
  Runtime* raw = rt.release();
  g_runtime.store(raw);
  SetProcessCore(raw->node.get());
  InstallStopSignals(raw->rank, raw->hosts, raw->pids);
  // At every Init: exit handlers run newest first, so the newest runs before the static
  // destructors of whatever the program made since (OnProcessExit acts once).
  on_exit(OnProcessExit, nullptr);  // glibc: like atexit, with the exit status
  if (raw->transport) raw->transport->Start();
  std::set_terminate(OnTerminate);
  if (raw->rank == 0) {
    g_process.running = config;
    g_process.running_flags = PrismFlags(args);
    g_process.announce = raw->mpi && raw->world > 1;
    if (raw->world > 1) {
      PRISM_LOG_INFO((raw->recovery
                          ? "a lost worker rank: the job goes on without it (mpirun --enable-recovery)"
                          : "a lost rank ends the job (recovery needs mpirun --enable-recovery)"));
    }
    PRISM_LOG_INFO("Prism up: " << raw->world << " ranks, launcher "
                                << raw->launch.launcher_name() << ", job " << raw->settings.job_id
                                << ", session directory " << raw->settings.session_dir);
    if (raw->dashboard) raw->dashboard->Start();  // the state API answers from here on
  }
  return raw;
}

/// Init while a session runs: Ray's no-op, unless the configuration asked for differs from
/// the running one (then an error naming what differs).
void CheckSameSession(const Config& config, const std::vector<std::string>& args) {
  std::vector<std::string> differ = ConfigDifferences(g_process.running, config);
  const std::vector<std::string> flags =
      PrismFlags(std::vector<std::string>(args.begin() + std::min<size_t>(1, args.size()), args.end()));
  if (flags != g_process.running_flags) differ.emplace_back("--prism-* flags");
  if (differ.empty()) return;
  std::string fields;
  for (const auto& d : differ) fields += (fields.empty() ? "" : ", ") + d;
  throw RuntimeError("prism: Init called while Prism is running, with a configuration that differs "
                     "from the running one in: " + fields +
                     ". Init while running changes nothing (Ray's rule): call Shutdown first "
                     "to start again with the new configuration, or call Init() without one");
}

/// Init: a no-op while a session runs (`any_config`: Init() without a configuration, which
/// joins whatever runs), else a new session. On a worker rank of an MPI job it never
/// returns (ServeSessions).
void DoInit(const Config& config, int argc, char** argv, bool any_config) {
  std::unique_lock<std::mutex> lock(g_init_mu);
  std::vector<std::string> args;
  for (int i = 0; i < argc && argv != nullptr; ++i) args.emplace_back(argv[i] != nullptr ? argv[i] : "");
  if (g_runtime.load() != nullptr) {
    if (!any_config) CheckSameSession(config, args);
    return;
  }
  if (CurrentCore() != nullptr) {
    throw RuntimeError("prism: Init while an InProcessCluster runs in this process; end it first");
  }
  if (g_process.mpi_ended) {
    throw RuntimeError("prism: Init while the process exits (MPI is finalized)");
  }
  if (g_process.lost_ranks) {
    throw RuntimeError("prism: Init after a session that lost a rank: the worker ranks ended "
                       "with it (a new session needs every rank); start a new job");
  }
  if (g_process.announce) {
    // The worker ranks wait between sessions: this session is the driver's configuration
    // and flags on every rank.
    Buffer word;
    Writer w(word);
    Buffer encoded = EncodeConfig(config);
    w.Bytes(encoded.data(), encoded.size());
    w.Pod<uint64_t>(args.size());
    for (const auto& a : args) w.Str(a);
    if (!Announce(SessionWord{SessionWord::kNewSession, 0, word.size()}, word)) {
      throw RuntimeError("prism: Init could not reach the worker ranks (MPI_Ibcast failed)");
    }
  }
  Runtime* rt = StartSession(config, args);
  if (rt->rank == 0) return;
  lock.unlock();
  ServeSessions(rt);
}

/// Rank 0's Shutdown: stops every rank's session; MPI stays up for the next Init.
bool EndSession() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  Runtime* rt = g_runtime.load();
  if (rt == nullptr) return true;
  if (rt->rank != 0) throw RuntimeError("prism: Shutdown is for the driver (rank 0)");
  if (rt->printer) FlushWorkerOutput(*rt);
  if (rt->dashboard) rt->dashboard->Stop();  // the report, while the state API still answers
  g_runtime.store(nullptr);
  SetProcessCore(nullptr);  // from here on ObjectRef destructors are no-ops
  UninstallStopSignals();
  rt->waiting_watch.reset();
  if (rt->transport) {
    // After a lost rank the workers end with this session: MPI_COMM_WORLD, which the
    // next session's word and MPI_Finalize go over, holds the lost rank.
    g_process.lost_ranks = g_process.lost_ranks || !rt->transport->LostRanks().empty();
    for (int r = 1; r < rt->world; ++r) rt->transport->Send(r, Stop{0, "shutdown", g_process.lost_ranks});
    rt->transport->Stop(std::chrono::milliseconds(5000));
  }
  bool clean = rt->node->Stop();
  if (rt->ucx) rt->ucx->Stop();
  RemoveSessionFiles(*rt, true);
  CloseCommunicatorService();
  // With tasks still running user code, their threads keep using the runtime: leave it.
  if (clean) delete rt;
  return clean;
}

}  // namespace

namespace {
std::atomic<CoreApi*> g_core{nullptr};
}  // namespace

CoreApi* CurrentCore() {
  CoreApi* process = g_core.load(std::memory_order_acquire);
  if (process == nullptr) return nullptr;  // after Shutdown, ObjectRef destructors are no-ops
  if (CoreApi* task = RunningTaskCore()) return task;
  return process;
}

void SetProcessCore(CoreApi* core) {
  CoreApi* none = nullptr;
  if (core == nullptr) {
    g_core.store(nullptr, std::memory_order_release);
  } else if (!g_core.compare_exchange_strong(none, core)) {
    throw RuntimeError("prism: a Prism runtime (prism::Init or an InProcessCluster) is already "
                       "running in this process; end it first");
  }
}

bool DashboardSettingOn() {
  Runtime* rt = g_runtime.load();
  return rt != nullptr && rt->settings.dashboard.mode != dashboard::DashboardSetting::Mode::kOff;
}

CoreApi& RequireCore(const char* what) {
  CoreApi* core = CurrentCore();
  if (core == nullptr) {
    throw RuntimeError(std::string("prism: ") + what +
                       " called before prism::Init() or after prism::Shutdown()");
  }
  return *core;
}

}  // namespace internal

void Init() { internal::DoInit(Config{}, 0, nullptr, /*any_config=*/true); }
void Init(int argc, char** argv) { internal::DoInit(Config{}, argc, argv, false); }
void Init(const Config& config, int argc, char** argv) { internal::DoInit(config, argc, argv, false); }

bool IsInitialized() { return internal::CurrentCore() != nullptr; }

void Shutdown() { internal::EndSession(); }

std::map<std::string, double> ClusterResources() {
  internal::ResourceSet total;
  for (const auto& c : internal::RequireCore("ClusterResources").Capacities()) total.Add(internal::ResourceSet(c));
  return total.ToMap();
}

int RuntimeContext::GetRank() const { return internal::RequireCore("RuntimeContext").Rank(); }
int RuntimeContext::GetWorldSize() const { return internal::RequireCore("RuntimeContext").WorldSize(); }
std::string RuntimeContext::GetNodeId() const {
  auto& core = internal::RequireCore("RuntimeContext");
  return core.NodeIds().at(core.Rank());
}
std::string RuntimeContext::GetJobId() const { return internal::RequireCore("RuntimeContext").JobId(); }
TaskId RuntimeContext::GetTaskId() const { return internal::CurrentTaskId(); }
bool RuntimeContext::IsDriver() const { return GetRank() == 0 && GetTaskId().IsNil(); }

std::vector<std::string> GetGpuIds() {
  (void)GetRuntimeContext();  // throws when Prism is not initialized
  return internal::CurrentGpuIds();
}

std::vector<int> GetGpuDeviceIndices() {
  (void)GetRuntimeContext();
  return internal::CurrentGpuOrdinals();
}

RuntimeContext GetRuntimeContext() {
  if (!IsInitialized()) throw RuntimeError("prism: GetRuntimeContext called before Init");
  return RuntimeContext();
}

}  // namespace prism
