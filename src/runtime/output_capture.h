#pragma once
// log_to_driver: worker ranks' stdout and stderr on the driver's console, each line as
// "(rank=N, host=H) line" (Ray's log_to_driver), and in the rank's own file.
//
// On a worker rank, OutputForwarder puts a pipe under fd 1 and another under fd 2 (the
// process's own and every thread's output, C and C++ alike: tasks share the process). One
// thread ("output forwarder") sleeps in poll() on both and on a wake-up pipe; it splits
// what arrives into lines, appends them to <log_dir>/rank-N.out, and publishes them to
// the driver's channel kLogChannel in one message per read (so a flood travels in few
// large messages). Lines stay whole: the driver prints each with one write. A flood is
// bounded: past kForwardBytesPerSecond the forwarder drops lines (the file keeps them)
// and later forwards one line saying how many it dropped. A line without its newline is
// forwarded once it reaches kMaxLineBytes, or at a flush.
//
// On rank 0, DriverPrinter owns the channel and one thread ("log printer") that sleeps on
// it and prints each line to the driver's stdout or stderr, as the worker wrote it.
//
// Shutdown: the driver runs FlushOutput on every worker rank (a task pinned there) and
// waits for each, then stops the printer: a task's FlushOutput ends only after its rank's
// output so far was published, and the head delivers a rank's channel messages before
// that task's result, so nothing printed before Shutdown is lost.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "prism/internal/channel_inbox.h"

namespace prism::internal {

/// The channel the forwarders publish to and the driver reads.
inline constexpr const char* kLogChannel = "prism.log_to_driver";
/// Most bytes of output per second one rank forwards; beyond it lines are dropped and
/// counted (the rank's .out file keeps everything).
inline constexpr uint64_t kForwardBytesPerSecond = 4u << 20;
/// A line longer than this is forwarded in pieces of this size.
inline constexpr size_t kMaxLineBytes = 64u << 10;

/// Lines of one forwarded batch: each is a stream byte ('o' stdout, 'e' stderr), the text
/// and '\n'. Encode and decode are inverse; decode skips a malformed tail.
struct OutputLine {
  bool is_stderr = false;
  std::string text;
};
void AppendOutputLine(std::string& batch, bool is_stderr, const std::string& text);
std::vector<OutputLine> DecodeOutputBatch(const std::string& batch);

class OutputForwarder {
 public:
  using PublishFn = std::function<void(std::string&& batch)>;
  /// Captures fds 1 and 2 and starts the thread. `file` is the rank's .out file (created
  /// on the first line, 0600, never through a link). Throws RuntimeError if a pipe or the
  /// thread cannot be made (nothing is captured then).
  OutputForwarder(std::string file, PublishFn publish);
  /// Puts the original fds back (a process that still runs after it prints as before).
  ~OutputForwarder();

  /// Flushes stdio and std::cout/cerr, then waits up to `timeout_ms` until everything
  /// written to fds 1 and 2 so far (a partial last line included) is in the file and
  /// published. Returns false on timeout. Thread-safe.
  bool Flush(int64_t timeout_ms);
  /// Puts the original fds 1 and 2 back at once, so that what a dying rank prints next
  /// reaches the launcher directly. Async-signal-unsafe; idempotent.
  void Restore();

 private:
  void ThreadMain();
  void Take(int stream, const char* data, size_t n);  // requires thread
  void EmitPartial(int stream);
  void Line(int stream, const std::string& text);
  void Send();
  void NoteDropped();  // a line saying what the rate limit dropped, if anything

  std::string path_;
  PublishFn publish_;
  int saved_[2] = {-1, -1};  // the original fds 1 and 2
  int read_[2] = {-1, -1};   // the pipes' read ends
  int wake_[2] = {-1, -1};   // Flush wakes the thread through this pipe
  std::thread thread_;
  std::mutex restore_mu_;
  bool restored_ = false;

  // The thread's own state.
  std::string partial_[2];
  std::string batch_;
  int file_fd_ = -1;
  bool file_failed_ = false;
  int64_t window_start_ns_ = 0;
  uint64_t window_bytes_ = 0;
  uint64_t dropped_lines_ = 0, dropped_bytes_ = 0;

  std::mutex mu_;
  std::condition_variable flushed_cv_;
  uint64_t flush_asked_ = 0, flush_done_ = 0;
  bool stop_ = false;
};

class DriverPrinter {
 public:
  /// Starts printing what `inbox` receives; `hosts[r]` names rank r's host.
  DriverPrinter(std::shared_ptr<ChannelInbox> inbox, std::vector<std::string> hosts);
  /// Prints what arrived so far and stops the thread.
  ~DriverPrinter();

  /// How one line is shown: "(rank=1, host=h) text".
  static std::string Format(int rank, const std::string& host, const std::string& text);

 private:
  void Print(const ChannelMessage& m);
  std::shared_ptr<ChannelInbox> inbox_;
  std::vector<std::string> hosts_;
  std::thread thread_;
};

/// Registered task body the driver runs on each worker rank at Shutdown: flushes the
/// rank's forwarder (up to 5 s). Returns false if it timed out or nothing forwards there.
bool FlushOutput();
/// The calling rank's forwarder (nullptr when log_to_driver is off or on rank 0).
void SetOutputForwarder(OutputForwarder* forwarder);
OutputForwarder* CurrentOutputForwarder();

}  // namespace prism::internal

namespace prism_output_capture {
/// FlushOutput as a registered remote function (PRISM_REMOTE in output_capture.cc).
bool PrismFlushOutput();
}  // namespace prism_output_capture
