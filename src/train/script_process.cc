// ScriptProcess: posix_spawn with pipes, its own process group and SIGUSR1/SIGTERM blocked
// (script_process.h says why).
#include "train/script_process.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "prism/errors.h"
#include "train/script_worker.h"

namespace prism::train::internal {
namespace {

/// A pipe whose ends are close-on-exec (the child gets its end through dup2, which clears
/// the flag on the copy); the parent's end non-blocking.
void MakePipe(int fds[2], const char* what) {
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(std::string("prism::train::ScriptTrainer: pipe2 for the script's ") + what +
                " failed: " + strerror(errno) + " (out of file descriptors? check ulimit -n)");
  }
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

std::string ResolveProgram(const std::string& command0, const std::string& path) {
  auto executable = [](const std::string& file) {
    struct stat st {};
    return stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0;
  };
  if (command0.find('/') != std::string::npos) return executable(command0) ? command0 : "";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string file = (dir.empty() ? "." : dir) + "/" + command0;
    if (executable(file)) return file;
  }
  return "";
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? " (SIG" + std::string(name) + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

ScriptProcess::ScriptProcess(const std::vector<std::string>& command,
                             const std::map<std::string, std::string>& env, const std::string& working_dir) {
  if (command.empty()) throw Error("prism::train::ScriptTrainer: the command is empty");
  const auto path = env.find("PATH");
  const std::string program = ResolveProgram(command[0], path == env.end() ? "" : path->second);
  if (program.empty()) {
    throw Error("prism::train::ScriptTrainer: cannot run `" + command[0] + "`: " +
                (command[0].find('/') != std::string::npos ? "no such executable file"
                                                           : "not found in PATH (" +
                                                                 (path == env.end() ? "" : path->second) + ")") +
                ". Give the program's full path, or fix PATH");
  }
  int out[2], err[2], msg[2], reply[2];
  MakePipe(out, "stdout");
  MakePipe(err, "stderr");
  MakePipe(msg, "messages");
  MakePipe(reply, "replies");

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_adddup2(&actions, msg[1], kScriptToWorkerFd);
  posix_spawn_file_actions_adddup2(&actions, reply[0], kWorkerToScriptFd);
  // Whatever else the rank holds open without close-on-exec (MPI's, UCX's) stays out.
  posix_spawn_file_actions_addclosefrom_np(&actions, kWorkerToScriptFd + 1);
  if (!working_dir.empty()) posix_spawn_file_actions_addchdir_np(&actions, working_dir.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t mask, defaults;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR1);
  sigaddset(&mask, SIGTERM);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGPIPE, SIGHUP, SIGCHLD, SIGUSR2, SIGQUIT}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const int rc = posix_spawn(&pid_, program.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  close(msg[1]);
  close(reply[0]);
  out_ = out[0];
  err_ = err[0];
  msg_ = msg[0];
  reply_ = reply[1];
  if (rc != 0) {
    pid_ = -1;
    CloseFd(out_);
    CloseFd(err_);
    CloseFd(msg_);
    CloseFd(reply_);
    throw Error("prism::train::ScriptTrainer: cannot start `" + program + "`" +
                (working_dir.empty() ? "" : " in " + working_dir) + ": " + strerror(rc));
  }
  for (int fd : {out_, err_, msg_, reply_}) SetNonBlocking(fd);
}

ScriptProcess::~ScriptProcess() {
  if (pid_ > 0 && !reaped_) {
    Kill();
    waitpid(pid_, &status_, 0);  // SIGKILL cannot be caught: this returns at once
  }
  CloseFd(out_);
  CloseFd(err_);
  CloseFd(msg_);
  CloseFd(reply_);
}

void ScriptProcess::CloseRead(int& fd) {
  if (fd == out_) CloseFd(out_);
  else if (fd == err_) CloseFd(err_);
  else if (fd == msg_) CloseFd(msg_);
  fd = -1;
}

bool ScriptProcess::Send(const std::string& line) {
  if (reply_ < 0) return false;
  // A script that exited would make the write raise SIGPIPE, which ends the rank: block it on
  // this thread for the write and take the pending one back (a write's SIGPIPE goes to the
  // writing thread).
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const ssize_t n = write(reply_, line.data(), line.size());  // lines are far below PIPE_BUF
  const int write_errno = errno;
  if (n < 0 && write_errno == EPIPE) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);
    CloseFd(reply_);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return n == static_cast<ssize_t>(line.size());
}

void ScriptProcess::Signal(int signal) {
  if (pid_ > 0 && !reaped_) kill(pid_, signal);
}

void ScriptProcess::Kill() {
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);  // the group: the script and what it started
    kill(pid_, SIGKILL);   // in case it left its group
  }
}

std::optional<int> ScriptProcess::Poll() {
  if (reaped_) return status_;
  if (pid_ <= 0) return std::nullopt;
  const pid_t r = waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    // What it started may still run in its group (a data-loader process whose parent died):
    // nothing should outlive the worker's script.
    kill(-pid_, SIGKILL);
    return status_;
  }
  return std::nullopt;
}

}  // namespace prism::train::internal
