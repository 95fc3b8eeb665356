#include "runtime/stop_signals.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "common/log.h"
#include "prism/platform/preemption.h"
#include "prism/preemption.h"

namespace prism {
namespace internal {
namespace {

constexpr int kSignals[] = {SIGUSR1, SIGTERM};
constexpr int kGuarded = 0x80;  // in a pipe byte: a PreemptionGuard was alive

std::atomic<int> g_signal{0};          // the first stop signal since Init
std::atomic<int> g_users{0};           // live platform::PreemptionGuards
int g_pipe[2] = {-1, -1};              // handler -> watcher; a 0 byte stops the watcher
bool g_installed[2] = {false, false};  // per kSignals entry: ours to restore
struct sigaction g_previous[2];
std::thread g_watcher;
std::mutex g_mu;  // Install / Uninstall
std::mutex g_hooks_mu;
std::list<std::function<void(int)>> g_hooks;  // PreemptionHooks, called by the watcher
std::string g_ack_file;  // rank 0: PRISM_SIGNAL_ACK_FILE, written once a signal is heard

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

void OnStopSignal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
  const int saved = errno;
  // The top bit: whether a PreemptionGuard was alive when the signal came (the decision is
  // taken then, not when the watcher gets to it).
  const char byte = static_cast<char>(sig | (g_users.load() > 0 ? kGuarded : 0));
  (void)!write(g_pipe[1], &byte, 1);  // async-signal-safe; a full pipe only loses a wake-up
  errno = saved;
}

// Blocks in read() by design: woken by a signal, or by the 0 byte Uninstall writes.
void Watch(int rank) {
  for (;;) {
    char byte = 0;
    ssize_t n = read(g_pipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == 0) return;
    const int sig = static_cast<unsigned char>(byte) & ~kGuarded;
    const bool guarded = (static_cast<unsigned char>(byte) & kGuarded) != 0;
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
      std::fprintf(stderr,
                   "prism: received %s (preemption or time limit): the training run stops after "
                   "its next checkpoint; exit status %d asks the job script to requeue\n",
                   StopSignalName(sig), kExitPreempted);
      continue;
    }
    if (sig == SIGTERM) {
      std::fprintf(stderr, "prism: received SIGTERM with no training run to checkpoint; exiting\n");
      std::fflush(stderr);
      std::signal(SIGTERM, SIG_DFL);
      std::raise(SIGTERM);
      continue;
    }
    std::fprintf(stderr,
                 "prism: received %s with no training run to checkpoint; the program can check "
                 "prism::PreemptionSignal()\n",
                 StopSignalName(sig));
  }
}

}  // namespace

void InstallStopSignals(int rank) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_watcher.joinable()) return;
  g_signal.store(0);
  const char* ack = rank == 0 ? std::getenv("PRISM_SIGNAL_ACK_FILE") : nullptr;
  g_ack_file = ack != nullptr ? ack : "";
  if (pipe2(g_pipe, O_CLOEXEC) != 0) {
    PRISM_LOG_WARN("no pipe for the stop-signal watcher (" << std::strerror(errno)
                                                            << "); SIGUSR1/SIGTERM keep their defaults");
    return;
  }
  fcntl(g_pipe[1], F_SETFL, O_NONBLOCK);
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    struct sigaction current {};
    sigaction(kSignals[i], nullptr, &current);
    if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) continue;  // the program's own
    struct sigaction mine {};
    mine.sa_handler = OnStopSignal;
    sigemptyset(&mine.sa_mask);
    mine.sa_flags = SA_RESTART;
    g_installed[i] = sigaction(kSignals[i], &mine, &g_previous[i]) == 0;
  }
  g_watcher = std::thread(Watch, rank);
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


}  // namespace internal

int PreemptionSignal() { return internal::g_signal.load(); }

namespace platform {

PreemptionGuard::PreemptionGuard() { internal::g_users.fetch_add(1); }
PreemptionGuard::~PreemptionGuard() { internal::g_users.fetch_sub(1); }

PreemptionHook::PreemptionHook(std::function<void(int)> hook) {
  std::lock_guard<std::mutex> lock(internal::g_hooks_mu);
  it_ = internal::g_hooks.insert(internal::g_hooks.end(), std::move(hook));
}

PreemptionHook::~PreemptionHook() {
  std::lock_guard<std::mutex> lock(internal::g_hooks_mu);
  internal::g_hooks.erase(it_);
}

const char* SignalName(int signal) { return internal::StopSignalName(signal); }

}  // namespace platform

}  // namespace prism
