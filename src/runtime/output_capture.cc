#include "runtime/output_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "common/private_dir.h"
#include "common/thread_name.h"
#include "prism/errors.h"
#include "prism/remote.h"

namespace prism::internal {
namespace {

std::atomic<OutputForwarder*> g_forwarder{nullptr};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void AppendOutputLine(std::string& batch, bool is_stderr, const std::string& text) {
  batch += is_stderr ? 'e' : 'o';
  batch += text;
  batch += '\n';
}

std::vector<OutputLine> DecodeOutputBatch(const std::string& batch) {
  std::vector<OutputLine> lines;
  size_t pos = 0;
  while (pos < batch.size()) {
    size_t end = batch.find('\n', pos);
    if (end == std::string::npos || (batch[pos] != 'o' && batch[pos] != 'e')) break;
    lines.push_back({batch[pos] == 'e', batch.substr(pos + 1, end - pos - 1)});
    pos = end + 1;
  }
  return lines;
}

// ---- Worker side --------------------------------------------------------------------------

OutputForwarder::OutputForwarder(std::string file, PublishFn publish)
    : path_(std::move(file)), publish_(std::move(publish)) {
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  auto fail = [&](const std::string& what) {
    for (int fd : {out[0], out[1], err[0], err[1], wake_[0], wake_[1]}) {
      if (fd >= 0) ::close(fd);
    }
    throw RuntimeError("prism: log_to_driver: " + what + ": " + std::strerror(errno) +
                       " (set PRISM_LOG_TO_DRIVER=0 to leave the output alone)");
  };
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    fail("cannot make a pipe");
  }
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  std::fflush(stdout);
  std::fflush(stderr);
  saved_[0] = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  saved_[1] = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (saved_[0] < 0 || saved_[1] < 0) fail("cannot duplicate stdout/stderr");
  read_[0] = out[0];
  read_[1] = err[0];
  try {
    thread_ = std::thread([this] { ThreadMain(); });
  } catch (const std::system_error&) {
    ::close(saved_[0]);
    ::close(saved_[1]);
    fail("cannot start its thread");
  }
  // From here on fds 1 and 2 are the pipes' write ends (dup2 keeps them open for exec'd
  // children too, as a terminal would be).
  ::dup2(out[1], 1);
  ::dup2(err[1], 2);
  ::close(out[1]);
  ::close(err[1]);
}

OutputForwarder::~OutputForwarder() {
  Flush(1000);
  Restore();  // fds 1 and 2 no longer reach the pipes: the thread sees end of file
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  char c = 's';
  (void)::write(wake_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : {read_[0], read_[1], wake_[0], wake_[1], saved_[0], saved_[1], file_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void OutputForwarder::Restore() {
  std::lock_guard<std::mutex> lock(restore_mu_);
  if (restored_) return;
  restored_ = true;
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_[0], 1);
  ::dup2(saved_[1], 2);
}

bool OutputForwarder::Flush(int64_t timeout_ms) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = ++flush_asked_;
  char c = 'f';
  (void)::write(wake_[1], &c, 1);  // a full wake pipe already has the thread's attention
  return flushed_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                              [&] { return flush_done_ >= ticket || stop_; });
}

void OutputForwarder::ThreadMain() {
  NameThisThread("prism-output");
  char buf[64 * 1024];
  bool open[2] = {true, true};
  for (;;) {
    pollfd fds[3] = {{read_[0], POLLIN, 0}, {read_[1], POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (!open[0]) fds[0].fd = -1;
    if (!open[1]) fds[1].fd = -1;
    int ready = ::poll(fds, 3, -1);  // sleeps until output, a flush or the end: no polling
    if (ready < 0 && errno != EINTR) return;
    bool woken = fds[2].revents != 0;
    uint64_t asked = 0;
    if (woken) {
      while (::read(wake_[0], buf, sizeof buf) > 0) {
      }
      std::lock_guard<std::mutex> lock(mu_);
      asked = flush_asked_;
    }
    // Read each pipe until it is empty: at a flush, everything written before it.
    for (int s = 0; s < 2; ++s) {
      if (!open[s] || (!woken && fds[s].revents == 0)) continue;
      for (;;) {
        ssize_t n = ::read(read_[s], buf, sizeof buf);
        if (n > 0) {
          Take(s, buf, static_cast<size_t>(n));
          continue;
        }
        if (n == 0) {  // every writer closed it (Restore, then the end)
          EmitPartial(s);
          open[s] = false;
        } else if (errno == EINTR) {
          continue;
        }
        break;
      }
    }
    if (woken) {
      EmitPartial(0);
      EmitPartial(1);
      NoteDropped();  // a flush says what was dropped so far, even within the second
    }
    Send();
    if (woken) {
      std::lock_guard<std::mutex> lock(mu_);
      flush_done_ = std::max(flush_done_, asked);
      flushed_cv_.notify_all();
      if (stop_) return;
    }
    if (!open[0] && !open[1]) {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      // Restored but not stopped: wait for the stop on the wake-up pipe alone.
    }
  }
}

void OutputForwarder::Take(int stream, const char* data, size_t n) {
  std::string& partial = partial_[stream];
  size_t pos = 0;
  while (pos < n) {
    const char* nl = static_cast<const char*>(std::memchr(data + pos, '\n', n - pos));
    size_t end = nl ? static_cast<size_t>(nl - data) : n;
    partial.append(data + pos, end - pos);
    pos = nl ? end + 1 : n;
    if (nl) {
      Line(stream, partial);
      partial.clear();
    }
    while (partial.size() >= kMaxLineBytes) {
      Line(stream, partial.substr(0, kMaxLineBytes));
      partial.erase(0, kMaxLineBytes);
    }
  }
}

void OutputForwarder::EmitPartial(int stream) {
  if (partial_[stream].empty()) return;
  Line(stream, partial_[stream]);
  partial_[stream].clear();
}

void OutputForwarder::Line(int stream, const std::string& text) {
  // The rank's file keeps every line.
  if (file_fd_ < 0 && !file_failed_ && !path_.empty()) {
    std::string why = MakePrivateDir(std::filesystem::path(path_).parent_path().string());
    if (why.empty()) {
      file_fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    }
    file_failed_ = file_fd_ < 0;
  }
  if (file_fd_ >= 0) {
    std::string row = (stream == 1 ? "[stderr] " : "") + text + "\n";
    WriteAll(file_fd_, row.data(), row.size());
  }
  // The console gets at most kForwardBytesPerSecond of it.
  const int64_t now = NowNs();
  if (now - window_start_ns_ >= 1000000000) {
    window_start_ns_ = now;
    window_bytes_ = 0;
    NoteDropped();
  }
  if (window_bytes_ + text.size() + 1 > kForwardBytesPerSecond) {
    ++dropped_lines_;
    dropped_bytes_ += text.size() + 1;
    return;
  }
  window_bytes_ += text.size() + 1;
  AppendOutputLine(batch_, stream == 1, text);
}

void OutputForwarder::NoteDropped() {
  if (dropped_lines_ == 0) return;
  AppendOutputLine(batch_, true,
                   "prism: dropped " + std::to_string(dropped_lines_) + " lines (" +
                       std::to_string(dropped_bytes_) + " bytes) of this rank's output, more than " +
                       std::to_string(kForwardBytesPerSecond >> 20) + " MiB/s; " + path_ + " has all of it (removed at a clean end unless log_dir is set)");
  dropped_lines_ = dropped_bytes_ = 0;
}

void OutputForwarder::Send() {
  if (batch_.empty()) return;
  try {
    publish_(std::move(batch_));
  } catch (const std::exception& e) {
    // The runtime is going away: the file has the lines; say so where the rank can.
    std::string note = "prism: log_to_driver could not forward output: " + std::string(e.what()) + "\n";
    WriteAll(saved_[1], note.data(), note.size());
  }
  batch_.clear();
}

// ---- Driver side --------------------------------------------------------------------------

DriverPrinter::DriverPrinter(std::shared_ptr<ChannelInbox> inbox, std::vector<std::string> hosts)
    : inbox_(std::move(inbox)), hosts_(std::move(hosts)) {
  thread_ = std::thread([this] {
    NameThisThread("prism-printer");
    for (;;) {
      auto m = inbox_->Next(-1);  // sleeps until a batch comes; the destructor sends the end
      if (!m || m->from_rank < 0) return;
      Print(*m);
    }
  });
}

DriverPrinter::~DriverPrinter() {
  inbox_->Push({-1, ""});  // after every batch already queued
  if (thread_.joinable()) thread_.join();
}

std::string DriverPrinter::Format(int rank, const std::string& host, const std::string& text) {
  return "(rank=" + std::to_string(rank) + ", host=" + host + ") " + text;
}

void DriverPrinter::Print(const ChannelMessage& m) {
  const std::string& host =
      m.from_rank < static_cast<int>(hosts_.size()) ? hosts_[static_cast<size_t>(m.from_rank)] : "?";
  std::string out, err;
  for (const auto& line : DecodeOutputBatch(m.bytes)) {
    (line.is_stderr ? err : out) += Format(m.from_rank, host, line.text) + "\n";
  }
  // One write per stream and batch: whole lines, never interleaved with others' mid-line.
  if (!out.empty()) {
    std::fflush(stdout);
    WriteAll(1, out.data(), out.size());
  }
  if (!err.empty()) {
    std::fflush(stderr);
    WriteAll(2, err.data(), err.size());
  }
}

bool FlushOutput() {
  OutputForwarder* f = g_forwarder.load();
  return f != nullptr && f->Flush(5000);
}

void SetOutputForwarder(OutputForwarder* forwarder) { g_forwarder.store(forwarder); }
OutputForwarder* CurrentOutputForwarder() { return g_forwarder.load(); }

}  // namespace prism::internal

namespace prism_output_capture {
bool PrismFlushOutput() { return prism::internal::FlushOutput(); }
}  // namespace prism_output_capture
PRISM_REMOTE(prism_output_capture::PrismFlushOutput);
