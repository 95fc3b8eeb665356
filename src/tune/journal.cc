#include "tune/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "prism/errors.h"
#include "prism/internal/json.h"

namespace prism::tune::internal {

Journal::Journal(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw Error("prism::tune: cannot open the experiment journal " + path_ + ": " +
                std::strerror(errno) + "; check that storage_path is writable");
  }
  last_sync_ = std::chrono::steady_clock::now();
}

Journal::~Journal() {
  if (fd_ >= 0) {
    if (dirty_) ::fsync(fd_);
    ::close(fd_);
  }
}

void Journal::Append(const nlohmann::json& event) {
  std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  // O_APPEND and one write: the line lands whole or (killed mid-write) torn at the end.
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error("prism::tune: writing the experiment journal " + path_ + " failed: " +
                  std::strerror(errno) + " (is the file system full?)");
    }
    done += static_cast<size_t>(n);
  }
  dirty_ = true;
}

void Journal::Sync(bool force) {
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
    // A line nested deeper than any event is damage (and copying it would recurse once per
    // level): it is not parsed.
    auto event = prism::internal::JsonNestingDepth(lines[i]) > prism::internal::kMaxJsonDepth
                     ? nlohmann::json(nlohmann::json::value_t::discarded)
                     : nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (event.is_discarded() || !event.is_object()) {
      if (i + 1 == lines.size()) break;  // torn by a kill mid-write: the prefix stands
      throw Error("prism::tune: the experiment journal " + path + " is damaged at line " +
                  std::to_string(i + 1) + " (not a JSON object); restore from a copy or start "
                  "a new experiment");
    }
    events.push_back(std::move(event));
  }
  return events;
}

}  // namespace prism::tune::internal
