#pragma once
// One script process of a ScriptTrainer worker, started with posix_spawn (not fork: the
// rank has MPI, UCX and many threads loaded, and a forked copy of them must not run), in a
// process group of its own so that killing it kills what it started (data-loader
// processes). Its fds: 0 /dev/null, 1 and 2 pipes to the worker, 3 the script's messages to
// the worker, 4 the worker's replies; nothing else of the rank's leaks into it. SIGUSR1
// and SIGTERM start blocked: one that comes before the prism_train module installed its
// handlers (Slurm signals every process of the step) stays pending instead of killing the
// interpreter, and the module unblocks them.

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace prism::train::internal {

class ScriptProcess {
 public:
  /// Starts `command` (looked up in PATH when argv[0] has no '/') with exactly `env`, in
  /// `working_dir` (empty: the rank's). Throws prism::Error naming the command and why it
  /// could not start.
  ScriptProcess(const std::vector<std::string>& command, const std::map<std::string, std::string>& env,
                const std::string& working_dir);
  /// Kills the process group (SIGKILL) if the script still runs, and reaps it.
  ~ScriptProcess();
  ScriptProcess(const ScriptProcess&) = delete;
  ScriptProcess& operator=(const ScriptProcess&) = delete;

  pid_t pid() const { return pid_; }
  /// The worker's ends, non-blocking: the script's stdout, stderr, messages (-1 once
  /// closed with CloseRead).
  int out_fd() const { return out_; }
  int err_fd() const { return err_; }
  int msg_fd() const { return msg_; }
  void CloseRead(int& fd);
  /// Writes `line` to the script's fd 4 without blocking. False if the pipe is full or
  /// the script closed it.
  bool Send(const std::string& line);
  /// Sends `signal` to the script's process.
  void Signal(int signal);
  /// SIGKILL to the script's process group.
  void Kill();
  /// The wait status once the script has exited (reaped), else nullopt. Does not block.
  std::optional<int> Poll();

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  int out_ = -1, err_ = -1, msg_ = -1, reply_ = -1;
};

/// "exited with status N" or "was killed by signal N (SIGKILL)", for a wait status.
std::string DescribeExit(int status);

/// The program `command0` resolves to (itself when it has a '/', else the first
/// executable of that name in PATH), or "" when there is none.
std::string ResolveProgram(const std::string& command0, const std::string& path);

}  // namespace prism::train::internal
