#pragma once
// The experiment's journal (storage_path/name/experiment_state.jsonl): one JSON object per
// line, appended with a single write(2) each, so a kill -9 at any moment leaves whole lines
// plus at most one torn last line, which Read drops (a killed process's writes are in the
// page cache). Sync (fsync, against a crash of the machine) runs at most once a second,
// and at preemption and the end of Fit: the journal costs a write per event (or per batch
// of results, Hold), never a rewrite of the whole state.
//
// Events ("e"): "experiment" (first line: trainable, metric, mode, searcher and scheduler
// kinds, seed, num_samples), "trial" (created: id, config, the searcher's state after
// suggesting it), "result" (id, attempt, metrics, checkpoint), "status" (id, status,
// error, failures, config and restore_from when a scheduler changed them), and
// "scheduler" (its SaveState, with how many trials it had seen).

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prism::tune::internal {

class Journal {
 public:
  /// Opens (creating) `path` for appending: cuts off a torn last line (the one Read drops),
  /// and ends with '\n' a last line that is a whole event but lacks it (one Read returns).
  /// Throws prism::Error naming it on failure, or when another process holds it.
  explicit Journal(std::string path);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  /// Appends one event as one line (held until Release after Hold). Throws prism::Error
  /// on a write failure (a full disk).
  void Append(const nlohmann::json& event);
  /// Holds the events appended from now on, to write them with one write(2) at Release:
  /// the driver's turn over a batch of results (a write per result was most of the
  /// driver's time per result). A kill before Release loses them, as a kill before Append.
  void Hold() { holding_ = true; }
  /// Writes the held events and stops holding. Throws as Append.
  void Release();
  /// Writes what is held, then fsyncs now (`force`) or if the last sync is a second old.
  void Sync(bool force);
  const std::string& path() const { return path_; }

  /// Every whole event of the journal at `path`, in order; a torn or unparsable last line
  /// is dropped (a kill -9 mid-write). Throws prism::Error if the file cannot be read or a
  /// line other than the last does not parse (the journal was damaged), naming the line.
  static std::vector<nlohmann::json> Read(const std::string& path);

 private:
  void Write(const std::string& lines);

  std::string path_;
  int fd_ = -1;
  bool holding_ = false;
  std::string held_;  // whole lines, Append's after Hold
  std::chrono::steady_clock::time_point last_sync_;
  bool dirty_ = false;
};

}  // namespace prism::tune::internal
