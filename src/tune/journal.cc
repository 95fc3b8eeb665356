#include "tune/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include "prism/errors.h"
#include "prism/internal/json.h"

namespace prism::tune::internal {

namespace {

/// `line` as an event, or nullopt if it is not a whole one: not a JSON object, or nested
/// deeper than any event is (damage, and copying it would recurse once per level, so it is
/// not parsed).
std::optional<nlohmann::json> ParseEvent(const std::string& line) {
  if (prism::internal::JsonNestingDepth(line) > prism::internal::kMaxJsonDepth) return std::nullopt;
  auto event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (event.is_discarded() || !event.is_object()) return std::nullopt;
  return event;
}

}  // namespace

Journal::Journal(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw Error("prism::tune: cannot open the experiment journal " + path_ + ": " +
                std::strerror(errno) + "; check that storage_path is writable");
  }
  // One writer per experiment: a second Fit or Restore of it (another job, or a job
  // requeued while its first run still dies) is refused until the writer has exited. The
  // lock goes with the process, however it ends. A file system without flock (some
  // parallel file systems) is used without it.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    ::close(fd_);
    fd_ = -1;
    throw Error("prism::tune: the experiment journal " + path_ + " is held by another process "
                "that is running this experiment; wait for it to end (a job's ranks can outlive "
                "its launcher by seconds), or give RunConfig::name a new name");
  }
  // A torn last line (a kill or a full disk mid-write) is cut off before anything is
  // appended, so the next event starts a line of its own and every later Read still works.
  // A last line that lacks only its '\n' is a whole event, which Read returns: it gets its
  // '\n' instead, so the journal keeps what a restore read from it.
  std::ifstream in(path_, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t cut = std::string::npos;  // where the torn line starts, if there is one
  if (!text.empty() && text.back() != '\n') {
    const size_t newline = text.rfind('\n');
    const size_t start = newline == std::string::npos ? 0 : newline + 1;
    if (ParseEvent(text.substr(start))) {
      if (::write(fd_, "\n", 1) != 1) {
        const int err = errno;
        ::close(fd_);
        fd_ = -1;
        throw Error("prism::tune: cannot end the last line of the experiment journal " + path_ +
                    ": " + std::strerror(err) + " (is the file system full?)");
      }
    } else {
      cut = start;
    }
  } else if (text.size() >= 2) {
    const size_t newline = text.rfind('\n', text.size() - 2);
    const size_t start = newline == std::string::npos ? 0 : newline + 1;
    const std::string last = text.substr(start, text.size() - 1 - start);
    if (!last.empty() && !ParseEvent(last)) cut = start;
  }
  if (cut != std::string::npos) {
    if (::ftruncate(fd_, static_cast<off_t>(cut)) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      throw Error("prism::tune: cannot cut the torn last line off the experiment journal " +
                  path_ + ": " + std::strerror(err));
    }
    std::fprintf(stderr, "prism.tune: the experiment journal %s ended in a torn line (%zu bytes, "
                 "from a kill or a full disk): cut off before resuming\n",
                 path_.c_str(), text.size() - cut);
  }
  last_sync_ = std::chrono::steady_clock::now();
}

Journal::~Journal() {
  if (fd_ >= 0) {
    try {
      Release();
    } catch (const Error&) {  // a full disk: the held events are lost, as at a kill
    }
    if (dirty_) ::fsync(fd_);
    ::close(fd_);
  }
}

void Journal::Append(const nlohmann::json& event) {
  std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  if (holding_) {
    held_ += line;
    return;
  }
  Write(line);
}

void Journal::Release() {
  holding_ = false;
  if (held_.empty()) return;
  std::string lines;
  lines.swap(held_);
  Write(lines);
}

void Journal::Write(const std::string& lines) {
  // O_APPEND and one write: the lines land whole or (killed mid-write) the last one torn at
  // the end. A write that fails (a full disk) takes its part back off the file.
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  while (done < lines.size()) {
    ssize_t n = ::write(fd_, lines.data() + done, lines.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      if (done > 0 && before >= 0) (void)::ftruncate(fd_, before);
      throw Error("prism::tune: writing the experiment journal " + path_ + " failed: " +
                  std::strerror(err) + " (is the file system full?)");
    }
    done += static_cast<size_t>(n);
  }
  dirty_ = true;
}

void Journal::Sync(bool force) {
  if (!held_.empty()) Write(std::exchange(held_, std::string()));
  if (!dirty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_sync_ < std::chrono::seconds(1)) return;
  ::fsync(fd_);
  last_sync_ = now;
  dirty_ = false;
}

std::vector<nlohmann::json> Journal::Read(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("prism::tune: cannot read the experiment journal " + path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  std::vector<nlohmann::json> events;
  events.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    std::optional<nlohmann::json> event = ParseEvent(lines[i]);
    if (!event) {
      if (i + 1 == lines.size()) break;  // torn by a kill mid-write: the prefix stands
      throw Error("prism::tune: the experiment journal " + path + " is damaged at line " +
                  std::to_string(i + 1) + " (not a JSON object); restore from a copy or start "
                  "a new experiment");
    }
    events.push_back(std::move(*event));
  }
  return events;
}

}  // namespace prism::tune::internal
