#include "runtime/stop_signals.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <list>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/thread_name.h"
#include "prism/platform/preemption.h"
#include "prism/preemption.h"

namespace prism {
namespace internal {
namespace {

constexpr int kSignals[] = {SIGUSR1, SIGTERM};
constexpr int kGuarded = 0x80;   // in a pipe byte: a PreemptionGuard was alive
constexpr int kLauncher = 0x40;  // in a pipe byte: SIGTERM from mpirun/orted, our parent

std::atomic<int> g_signal{0};          // the first stop signal since Init
std::atomic<int> g_users{0};           // live platform::PreemptionGuards
int g_pipe[2] = {-1, -1};              // handler -> watcher; a 0 byte stops the watcher
bool g_installed[2] = {false, false};  // per kSignals entry: ours to restore
struct sigaction g_previous[2];
std::thread g_watcher;
std::mutex g_mu;  // Install / Uninstall
std::mutex g_hooks_mu;
std::list<std::function<void(int)>> g_hooks;  // PreemptionHooks, called by the watcher
std::list<std::string> g_guard_messages;      // live PreemptionGuards' on_signal, newest last
std::function<void()> g_last_words;          // rank 0, under g_hooks_mu
std::string g_ack_file;  // rank 0: PRISM_SIGNAL_ACK_FILE, written once a signal is heard
bool g_parent_is_mpi_launcher = false;  // our parent is mpirun/orted (Open MPI) or prted
std::vector<std::string> g_hosts;       // per rank, to look for dead ranks on this host
std::vector<int> g_pids;

/// What a PreemptionGuard without a message (a training or tuning run) does on the signal.
std::string TrainingStopMessage() {
  return "the training or tuning run stops at its next checkpoint; exit status " + std::to_string(kExitPreempted) +
         " asks the job script to requeue";
}

/// Whether process `pid` is Open MPI's launcher or its daemon (mpirun, orted, prted, ...):
/// the process that SIGTERMs every rank when one rank dies or mpirun itself is stopped.
bool IsMpiLauncher(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  for (const char* name : {"mpirun", "mpiexec", "orterun", "orted", "prterun", "prted", "prte"}) {
    if (comm == name) return true;
  }
  return false;
}

/// What became of the other ranks on this host, from /proc: "rank 2 (pid 123) was killed by
/// signal 9; ..." or "" if they all still run. (A rank that its launcher already reaped has
/// no /proc entry left: it has ended, and the launcher's own message says how.)
std::string DeadRanksHere(int me) {
  std::string out;
  for (size_t r = 0; r < g_pids.size() && r < g_hosts.size(); ++r) {
    if (static_cast<int>(r) == me || g_hosts[r] != g_hosts[static_cast<size_t>(me)]) continue;
    const std::string who = "rank " + std::to_string(r) + " (pid " + std::to_string(g_pids[r]) + ")";
    std::ifstream in("/proc/" + std::to_string(g_pids[r]) + "/stat");
    std::string stat;
    std::getline(in, stat);
    std::string what;
    if (!in && stat.empty()) {
      what = who + " has ended";
    } else if (auto close = stat.rfind(')'); close != std::string::npos) {
      std::istringstream fields(stat.substr(close + 1));
      std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
      if (!f.empty() && f[0] == "Z") {
        // Field 52 (exit_code, Linux 3.5+), the 50th after the name: a wait status.
        const int status = f.size() > 49 ? std::atoi(f[49].c_str()) : -1;
        what = who + (status < 0              ? " has ended"
                      : WIFSIGNALED(status)   ? " was killed by signal " + std::to_string(WTERMSIG(status))
                                              : " exited with status " + std::to_string(WEXITSTATUS(status)));
      }
    }
    if (!what.empty()) out += (out.empty() ? "" : "; ") + what;
  }
  return out;
}

// Tells the job script that rank 0 heard the signal, so it stops re-sending it. The script
// re-sends because a signal that reaches srun while it is still launching the step can be
// lost there (see jobs/train_fashion_mnist.sbatch).
void Acknowledge(int sig) {
  if (g_ack_file.empty()) return;
  const int fd = open(g_ack_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    PRISM_LOG_WARN("cannot write PRISM_SIGNAL_ACK_FILE " << g_ack_file << ": " << std::strerror(errno));
    return;
  }
  const std::string line = std::string(StopSignalName(sig)) + "\n";
  (void)!write(fd, line.data(), line.size());
  close(fd);
}

void OnStopSignal(int sig, siginfo_t* info, void*) {
  const int saved = errno;
  // SIGTERM from our parent when that is mpirun or its daemon: the launcher is ending the
  // job (a rank died, or mpirun itself was stopped), which is no preemption. Slurm's
  // preemption and time-limit signals come from slurmstepd, never from mpirun.
  const bool launcher = sig == SIGTERM && g_parent_is_mpi_launcher && info != nullptr &&
                        info->si_pid != 0 && info->si_pid == getppid();
  if (launcher && g_pipe[1] < 0) {
    // Before Init (the early handler) there is no watcher to end the process: end it as
    // SIGTERM would.
    std::signal(SIGTERM, SIG_DFL);
    std::raise(SIGTERM);
    errno = saved;
    return;
  }
  if (!launcher) {
    int none = 0;
    g_signal.compare_exchange_strong(none, sig);
  }
  // The top bit: whether a PreemptionGuard was alive when the signal came (the decision is
  // taken then, not when the watcher gets to it).
  const char byte = static_cast<char>(sig | (g_users.load() > 0 ? kGuarded : 0) | (launcher ? kLauncher : 0));
  // Async-signal-safe; a full pipe only loses a wake-up. Before Init (g_pipe[1] is -1, the
  // early handler below) the signal is only recorded; InstallStopSignals replays it.
  if (g_pipe[1] >= 0) (void)!write(g_pipe[1], &byte, 1);
  errno = saved;
}

// Installs OnStopSignal for kSignals[i] if the signal still has its default disposition
// (a handler the program set is left alone; ours, installed early, is kept).
void InstallIfDefault(size_t i) {
  struct sigaction current {};
  sigaction(kSignals[i], nullptr, &current);
  if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) return;
  struct sigaction mine {};
  mine.sa_sigaction = OnStopSignal;
  sigemptyset(&mine.sa_mask);
  mine.sa_flags = SA_RESTART | SA_SIGINFO;
  g_installed[i] = sigaction(kSignals[i], &mine, &g_previous[i]) == 0;
}

// A stop signal that comes while the program is still starting (loading its libraries, in
// MPI_Init, before Init installs the watcher) must not be lost, nor end some ranks and not
// others: in a Slurm step, or with PRISM_SIGNAL_ACK_FILE set (a job script that forwards
// signals), the handler is installed as the program loads and only records the signal.
// Init replays it to the watcher (rank 0 acknowledges it and a run about to start stops at
// once). Elsewhere the defaults stay until Init, as without Prism.
__attribute__((constructor)) void InstallEarlyStopSignals() {
  if (std::getenv("SLURM_STEP_ID") == nullptr && std::getenv("PRISM_SIGNAL_ACK_FILE") == nullptr) return;
  g_parent_is_mpi_launcher = IsMpiLauncher(getppid());
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    InstallIfDefault(i);
  }
}

// A rank whose launcher (mpirun, orted) is killed outright would otherwise live on as an
// orphan, still writing a Tune journal or a checkpoint that a restarted job is about to
// read: the kernel kills it when its parent ends (a parent-death signal). It is set on this
// thread, which lives from Init to Shutdown: the kernel looks at the setting of each live
// thread of the child, and a thread's setting ends with the thread. The launcher forks its
// ranks from its main thread, so a launcher thread ending does not fire it. A launcher that
// died before the setting took is seen by the parent having changed.
void EndWithLauncher(pid_t launcher) {
  if (launcher <= 0) return;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    PRISM_LOG_WARN("cannot ask to end with the MPI launcher (prctl: " << std::strerror(errno)
                   << "); a rank outlives a launcher killed with SIGKILL");
    return;
  }
  if (getppid() != launcher) {
    std::fprintf(stderr, "prism: the MPI launcher (pid %d) has ended; exiting\n", static_cast<int>(launcher));
    std::fflush(stderr);
    _exit(1);
  }
}

// Blocks in read() by design: woken by a signal, or by the 0 byte Uninstall writes.
void Watch(int rank, pid_t launcher) {
  NameThisThread("prism-signals");
  EndWithLauncher(launcher);
  for (;;) {
    char byte = 0;
    ssize_t n = read(g_pipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == 0) return;
    const int sig = static_cast<unsigned char>(byte) & ~(kGuarded | kLauncher);
    const bool guarded = (static_cast<unsigned char>(byte) & kGuarded) != 0;
    if ((static_cast<unsigned char>(byte) & kLauncher) != 0) {
      // Not a preemption: no checkpoint, no requeue (a dead rank is a failure to look at,
      // and mpirun kills the remaining ranks moments later anyway). End as SIGTERM would.
      if (rank == 0) {
        const std::string dead = DeadRanksHere(rank);
        std::fprintf(stderr,
                     "prism: received SIGTERM from the MPI launcher (pid %d), which is ending the "
                     "job because a rank ended or the launcher itself was stopped: %s. This is "
                     "not a preemption: no checkpoint, no requeue; exiting\n",
                     static_cast<int>(getppid()),
                     dead.empty() ? "no rank on this host has ended (see the launcher's message)"
                                  : dead.c_str());
        std::fflush(stderr);
      }
      std::signal(SIGTERM, SIG_DFL);
      std::raise(SIGTERM);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(g_hooks_mu);
      for (auto& hook : g_hooks) hook(sig);
    }
    if (rank != 0) {
      PRISM_LOG_INFO("received " << StopSignalName(sig) << "; rank 0 decides how the job stops");
      continue;
    }
    Acknowledge(sig);
    if (guarded) {
      std::string what;
      {
        std::lock_guard<std::mutex> lock(g_hooks_mu);
        // The guard may be gone already (the run ended as the signal came): say what the
        // newest one said, else the training message (the decision was taken when it came).
        if (!g_guard_messages.empty()) what = g_guard_messages.back();
      }
      if (what.empty()) what = TrainingStopMessage();
      std::fprintf(stderr, "prism: received %s (preemption or time limit): %s\n", StopSignalName(sig), what.c_str());
      continue;
    }
    if (sig == SIGTERM) {
      std::fprintf(stderr,
                   "prism: received SIGTERM outside a run that stops cleanly (training, tuning, serving); "
                   "exiting\n");
      std::fflush(stderr);
      std::function<void()> last_words;
      {
        std::lock_guard<std::mutex> lock(g_hooks_mu);
        last_words = g_last_words;
      }
      if (last_words) last_words();
      std::fflush(stderr);
      std::signal(SIGTERM, SIG_DFL);
      std::raise(SIGTERM);
      continue;
    }
    std::fprintf(stderr,
                 "prism: received %s outside a run that stops cleanly (training, tuning, serving); the "
                 "program can check prism::PreemptionSignal()\n",
                 StopSignalName(sig));
  }
}

}  // namespace

void InstallStopSignals(int rank, std::vector<std::string> hosts, std::vector<int> pids) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_watcher.joinable()) return;
  // The first Init keeps a signal the early handler recorded; a later one (Init again
  // after Shutdown, in tests) starts clean.
  static bool first = true;
  if (!first) g_signal.store(0);
  first = false;
  const int early = g_signal.load();
  g_parent_is_mpi_launcher = IsMpiLauncher(getppid());
  g_hosts = std::move(hosts);
  g_pids = std::move(pids);
  const char* ack = rank == 0 ? std::getenv("PRISM_SIGNAL_ACK_FILE") : nullptr;
  g_ack_file = ack != nullptr ? ack : "";
  if (pipe2(g_pipe, O_CLOEXEC) != 0) {
    PRISM_LOG_WARN("no pipe for the stop-signal watcher (" << std::strerror(errno)
                                                            << "); SIGUSR1/SIGTERM keep their defaults");
    return;
  }
  fcntl(g_pipe[1], F_SETFL, O_NONBLOCK);
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    InstallIfDefault(i);
  }
  g_watcher = std::thread(Watch, rank, g_parent_is_mpi_launcher ? getppid() : 0);
  if (early != 0) {
    // Heard before Init: the watcher logs it and rank 0 acknowledges it now.
    const char byte = static_cast<char>(early);
    (void)!write(g_pipe[1], &byte, 1);
  }
}

void UninstallStopSignals() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_watcher.joinable()) return;
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    if (g_installed[i]) sigaction(kSignals[i], &g_previous[i], nullptr);
    g_installed[i] = false;
  }
  const char stop = 0;
  while (write(g_pipe[1], &stop, 1) < 0 && errno == EAGAIN) std::this_thread::yield();
  g_watcher.join();
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

const char* StopSignalName(int sig) {
  return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : "signal";
}

void ClearStopSignalForTesting() { g_signal.store(0); }

void SetLastWordsOnSigterm(std::function<void()> last_words) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  g_last_words = std::move(last_words);
}


}  // namespace internal

int PreemptionSignal() { return internal::g_signal.load(); }

namespace platform {

PreemptionGuard::PreemptionGuard() : PreemptionGuard(internal::TrainingStopMessage()) {}

PreemptionGuard::PreemptionGuard(std::string on_signal) {
  {
    std::lock_guard<std::mutex> lock(internal::g_hooks_mu);
    it_ = internal::g_guard_messages.insert(internal::g_guard_messages.end(), std::move(on_signal));
  }
  internal::g_users.fetch_add(1);
}

PreemptionGuard::~PreemptionGuard() {
  internal::g_users.fetch_sub(1);
  std::lock_guard<std::mutex> lock(internal::g_hooks_mu);
  internal::g_guard_messages.erase(it_);
}

PreemptionHook::PreemptionHook(std::function<void(int)> hook) {
  std::lock_guard<std::mutex> lock(internal::g_hooks_mu);
  it_ = internal::g_hooks.insert(internal::g_hooks.end(), std::move(hook));
}

PreemptionHook::~PreemptionHook() {
  std::lock_guard<std::mutex> lock(internal::g_hooks_mu);
  internal::g_hooks.erase(it_);
}

bool Guarded() { return internal::g_users.load() > 0; }

const char* SignalName(int signal) { return internal::StopSignalName(signal); }

}  // namespace platform

}  // namespace prism
