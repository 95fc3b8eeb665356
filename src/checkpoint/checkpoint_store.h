#pragma once
// A run's checkpoints on storage: run_dir/checkpoint_NNNNNN/ (six digits, increasing).
//
// Commit copies (or renames, when on the same file system and `move` is set) a worker's
// checkpoint directory into run_dir/.staging-checkpoint_NNNNNN-<pid>, writes
// prism_checkpoint.json (index, metrics, time) into it, fsyncs every file and the
// directory, renames it to checkpoint_NNNNNN and fsyncs run_dir. A crash at any point
// leaves either no checkpoint_NNNNNN or a complete one; staging leftovers are never
// listed and are removed by the next Commit. Retention (CheckpointConfig) runs after each
// commit: keep the best num_to_keep by the score attribute (checkpoints without the
// attribute rank last), or the newest num_to_keep without one; the newest is always kept.
// Everything is read back from the directory, so a new process (a resumed run) sees the
// same state.

#include <optional>
#include <string>
#include <vector>

#include "prism/train/checkpoint.h"

namespace prism::train::internal {

struct StoredCheckpoint {
  int index = 0;
  Checkpoint checkpoint;
  Metrics metrics;
};

class CheckpointStore {
 public:
  /// Creates run_dir (and parents) if needed. Throws prism::Error naming the path if it
  /// cannot be created or written (an unwritable storage_path).
  CheckpointStore(std::string run_dir, CheckpointConfig config);

  /// Commits `from` as the next checkpoint with `metrics`, applies retention, returns it.
  /// With `move`, `from` is renamed away when possible (else copied, then removed).
  StoredCheckpoint Commit(const Checkpoint& from, const Metrics& metrics, bool move = true);
  /// Every complete checkpoint, oldest first.
  std::vector<StoredCheckpoint> List() const;
  /// The newest complete checkpoint, if any.
  std::optional<StoredCheckpoint> Latest() const;
  /// The kept checkpoints, best first (by score; newest first without a score attribute).
  std::vector<StoredCheckpoint> Best() const;
  const std::string& run_dir() const { return run_dir_; }

 private:
  std::string run_dir_;
  CheckpointConfig config_;
};

}  // namespace prism::train::internal
