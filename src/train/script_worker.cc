// A ScriptTrainer worker: a platform::WorkerGroup loop on its rank that starts the script
// (ScriptProcess), then serves it from one poll loop on the task's thread until it exits:
//   - the script's stdout and stderr, line by line, go to the rank's own stdout and stderr
//     with the prefix "(worker W) " (the core forwards a worker rank's output to the
//     driver's console), and the last stderr lines are kept for the failure message;
//   - the script's reports (JSON lines on its fd 3) are answered on its fd 4; world rank
//     0's are recorded (result.json, progress.csv), its checkpoint directory copied into
//     the run (CheckpointStore::Commit: atomic, retention), and sent on to the driver as
//     ReportRecords, like a TorchTrainer worker's;
//   - a stop request from the driver (preemption, on_report) becomes SIGUSR1 and a "stop"
//     line to the script; the driver's abort (another worker failed), or report_timeout_s
//     without a report, kills its process group.
// Exit 0 is the worker's success (stopped, if the script said it was stopping); anything
// else throws, naming the exit status and the last lines of stderr.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>

#include "prism/checkpoint_store.h"
#include "prism/platform/invoke.h"
#include "prism/platform/worker_group.h"
#include "prism/remote.h"
#include "train/script_process.h"
#include "train/script_worker.h"
#include "train/worker.h"

extern char** environ;

namespace prism::train::internal {
namespace {

constexpr size_t kTailLines = 20;
constexpr size_t kMaxLine = 64 * 1024;  // a longer line without a newline is cut there

std::map<std::string, std::string> RankEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  return env;
}

/// One output stream of the script: whole lines, prefixed, written to `fd` (one write per
/// read, so lines from the two streams and other threads never mix within a line).
class LineForwarder {
 public:
  LineForwarder(int fd, std::string prefix, bool keep_tail)
      : fd_(fd), prefix_(std::move(prefix)), keep_tail_(keep_tail) {}

  void Feed(const char* data, size_t n) {
    partial_.append(data, n);
    std::string out;
    size_t start = 0;
    for (;;) {
      size_t nl = partial_.find('\n', start);
      if (nl == std::string::npos) {
        if (partial_.size() - start < kMaxLine) break;
        nl = start + kMaxLine;
      }
      Line(partial_.substr(start, nl - start), out);
      start = nl + (nl < partial_.size() && partial_[nl] == '\n' ? 1 : 0);
    }
    partial_.erase(0, start);
    WriteAll(out);
  }
  void Flush() {
    if (partial_.empty()) return;
    std::string out;
    Line(partial_, out);
    partial_.clear();
    WriteAll(out);
  }
  std::string Tail() const {
    std::string text;
    for (const auto& l : tail_) text += "\n  " + l;
    return text;
  }

 private:
  void Line(const std::string& line, std::string& out) {
    out += prefix_ + line + "\n";
    if (keep_tail_) {
      tail_.push_back(line.size() > 300 ? line.substr(0, 300) + "..." : line);
      if (tail_.size() > kTailLines) tail_.pop_front();
    }
  }
  void WriteAll(const std::string& text) {
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t n = write(fd_, text.data() + off, text.size() - off);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        return;  // the rank's own output is gone: nothing to forward to
      }
      off += static_cast<size_t>(n);
    }
  }
  int fd_;
  std::string prefix_;
  bool keep_tail_;
  std::string partial_;
  std::deque<std::string> tail_;
};

/// Set by the driver's abort (on another thread): wakes the poll loop through a pipe.
struct AbortSignal {
  std::atomic<bool> aborted{false};
  int wake[2] = {-1, -1};
  AbortSignal() {
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) wake[0] = wake[1] = -1;
  }
  ~AbortSignal() {
    for (int fd : wake) {
      if (fd >= 0) close(fd);
    }
  }
};

/// Reads what `fd` has now into `sink`; false (and closes it) at end of file.
template <typename Sink>
bool ReadSome(ScriptProcess& proc, int& fd, Sink&& sink) {
  char buf[65536];
  for (int i = 0; i < 16; ++i) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      sink(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    proc.CloseRead(fd);
    return false;
  }
  return true;
}

std::string CommandText(const std::vector<std::string>& command) {
  std::string text;
  for (const auto& a : command) text += (text.empty() ? "" : " ") + a;
  return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

/// A host name the other workers can reach this rank by: the host's name if it resolves,
/// else its first non-loopback IPv4 address, else 127.0.0.1.
std::string ReachableHost() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo(host, nullptr, &hints, &found) == 0) {
    freeaddrinfo(found);
    return host;
  }
  std::string address = "127.0.0.1";
  ifaddrs* addrs = nullptr;
  if (getifaddrs(&addrs) == 0) {
    for (ifaddrs* a = addrs; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
      if (std::string(text).rfind("127.", 0) != 0) {
        address = text;
        break;
      }
    }
    freeifaddrs(addrs);
  }
  return address;
}

}  // namespace

/// "host:port" of a TCP port free on this rank's host now (bound to port 0, then closed:
/// Ray Train picks MASTER_PORT the same way).
std::string PrismScriptHostPort() {
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) throw Error(std::string("prism::train::ScriptTrainer: socket: ") + strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    close(s);
    throw Error(std::string("prism::train::ScriptTrainer: cannot find a free TCP port: ") + strerror(e));
  }
  close(s);
  return ReachableHost() + ":" + std::to_string(ntohs(addr.sin_port));
}

/// The worker: runs the script and serves it until it exits. Returns a WorkerOutcome's bytes.
std::string PrismScriptWorkerLoop(std::string spec_bytes) {
  const auto spec = platform::FromBytes<ScriptWorkerSpec>(spec_bytes);
  const auto& me = platform::CurrentWorker();
  const int index = me.info().index;
  std::map<std::string, std::string> env = RankEnvironment();
  for (auto& [k, v] : ScriptEnvironment(spec, me.info(), me.group(), me.attempt(), env)) env[k] = v;
  if (spec.resume_path.empty()) env.erase("PRISM_TRAIN_CHECKPOINT");
  env["PRISM_TRAIN_WORKER_PID"] = std::to_string(getpid());

  auto abort = std::make_shared<AbortSignal>();
  me.OnAbort([abort] {
    abort->aborted.store(true);
    if (abort->wake[1] >= 0) (void)!write(abort->wake[1], "x", 1);
  });

  ScriptProcess proc(spec.command, env, spec.working_dir);
  const std::string prefix = "(worker " + std::to_string(index) + ") ";
  LineForwarder out(STDOUT_FILENO, prefix, false), err(STDERR_FILENO, prefix, true);
  std::string messages;  // a partial message line
  int out_fd = proc.out_fd(), err_fd = proc.err_fd(), msg_fd = proc.msg_fd();
  int64_t reports = 0;
  bool stop_sent = false, stopping = false;
  std::string killed;  // why the worker killed the script
  using Clock = std::chrono::steady_clock;
  auto last_report = Clock::now();

  auto handle = [&](const std::string& line) {
    ScriptMessage m;
    try {
      m = ParseScriptMessage(line);
    } catch (const std::exception& e) {
      proc.Send(ReplyError(std::string("prism_train: the worker could not read the message: ") + e.what()));
      return;
    }
    if (m.op == ScriptMessage::kStopping) {
      stopping = true;
      return;
    }
    last_report = Clock::now();
    if (m.checkpoint_dir) {
      std::error_code ec;
      if (!std::filesystem::is_directory(*m.checkpoint_dir, ec)) {
        proc.Send(ReplyError("prism_train.report: checkpoint_dir '" + *m.checkpoint_dir +
                             "' is not a directory: pass the directory the script saved its "
                             "checkpoint files into"));
        return;
      }
    }
    ++reports;
    ReportRecord record;
    record.attempt = me.attempt();
    record.iteration = reports;
    record.metrics = m.metrics;
    if (index == 0) {  // world rank 0's reports and checkpoints are the run's
      try {
        if (m.checkpoint_dir) {
          CheckpointStore store(spec.trial_dir, spec.checkpoint_config);
          record.checkpoint_path =
              store.Commit(Checkpoint::FromDirectory(*m.checkpoint_dir), m.metrics, /*move=*/false)
                  .checkpoint.path();
        }
        AppendHistory(spec.trial_dir, record);
      } catch (const std::exception& e) {
        --reports;
        proc.Send(ReplyError(std::string("prism_train.report: could not commit the checkpoint: ") + e.what()));
        return;
      }
      me.Report(platform::ToBytes(record));
    }
    proc.Send(ReplyOk(record.iteration, record.checkpoint_path));
  };
  auto feed_messages = [&](const char* data, size_t n) {
    messages.append(data, n);
    size_t nl;
    while ((nl = messages.find('\n')) != std::string::npos) {
      std::string line = messages.substr(0, nl);
      messages.erase(0, nl + 1);
      if (!line.empty()) handle(line);
    }
  };

  std::optional<int> status;
  while (!status) {
    pollfd fds[4];
    int n = 0;
    for (int fd : {out_fd, err_fd, msg_fd, abort->wake[0]}) {
      if (fd >= 0) fds[n++] = pollfd{fd, POLLIN, 0};
    }
    poll(fds, static_cast<nfds_t>(n), 50);  // also the pace of the exit and timeout checks
    if (out_fd >= 0) ReadSome(proc, out_fd, [&](const char* d, size_t k) { out.Feed(d, k); });
    if (err_fd >= 0) ReadSome(proc, err_fd, [&](const char* d, size_t k) { err.Feed(d, k); });
    if (msg_fd >= 0) ReadSome(proc, msg_fd, feed_messages);
    if (killed.empty() && abort->aborted.load()) {
      proc.Kill();
      killed = "stopped: the group was aborted (another worker failed)";
    }
    if (!stop_sent && me.StopRequested()) {
      stop_sent = true;
      proc.Signal(SIGUSR1);
      proc.Send(StopLine());
    }
    if (killed.empty() && spec.report_timeout_s > 0 &&
        Clock::now() - last_report > std::chrono::duration<double>(spec.report_timeout_s)) {
      proc.Kill();
      killed = "the script `" + CommandText(spec.command) + "` was killed: no prism_train.report() for " +
               std::to_string(static_cast<int64_t>(spec.report_timeout_s)) +
               " s (report_timeout_s; --report-timeout of prism-train-script). It hung, or it "
               "reports less often than that: raise the timeout";
    }
    status = proc.Poll();
  }
  // What it wrote before it ended (its process group is gone, so the pipes reach their end).
  const auto drain_until = Clock::now() + std::chrono::seconds(2);
  while ((out_fd >= 0 || err_fd >= 0 || msg_fd >= 0) && Clock::now() < drain_until) {
    if (out_fd >= 0) ReadSome(proc, out_fd, [&](const char* d, size_t k) { out.Feed(d, k); });
    if (err_fd >= 0) ReadSome(proc, err_fd, [&](const char* d, size_t k) { err.Feed(d, k); });
    if (msg_fd >= 0) ReadSome(proc, msg_fd, feed_messages);
    if (out_fd >= 0 || err_fd >= 0 || msg_fd >= 0) usleep(10000);
  }
  out.Flush();
  err.Flush();
  const std::string tail = err.Tail();
  const std::string last_lines = tail.empty() ? "; it wrote nothing on stderr" : "; its last lines on stderr:" + tail;
  if (!killed.empty()) throw Error(killed + last_lines);
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    throw Error("the script `" + CommandText(spec.command) + "` " + DescribeExit(*status) + last_lines);
  }
  WorkerOutcome outcome;
  outcome.reports = reports;
  outcome.stopped = stop_sent && stopping;
  return platform::ToBytes(outcome);
}

}  // namespace prism::train::internal

PRISM_REMOTE(prism::train::internal::PrismScriptWorkerLoop, prism::train::internal::PrismScriptHostPort);
