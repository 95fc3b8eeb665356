#pragma once
// A run's checkpoints on storage: run_dir/checkpoint_NNNNNN/ (six digits, increasing).
//
// Commit copies (or renames, when on the same file system and `move` is set) a worker's
// checkpoint directory into run_dir/.staging-checkpoint_NNNNNN-<pid>, writes
// prism_checkpoint.json (index, metrics, time, and the size and CRC-32 of every file: see
// checksums.h) into it, fsyncs every file and the directory, renames it to
// checkpoint_NNNNNN and fsyncs run_dir. A crash at any point
// leaves either no checkpoint_NNNNNN or a complete one; staging leftovers are never
// listed and are removed by the next Commit. Retention (CheckpointConfig) runs after each
// commit: keep the best num_to_keep by the score attribute (checkpoints without the
// attribute rank last), or the newest num_to_keep without one; the newest is always kept.
// Everything is read back from the directory, so a new process (a resumed run) sees the
// same state. A resume starts from NewestValid(): the newest checkpoint whose files still
// match their checksums; newer ones that do not are reported, never loaded.

#include <optional>
#include <string>
#include <vector>

#include "prism/checkpoint.h"
#include "prism/train/config.h"

namespace prism::train::internal {

struct StoredCheckpoint {
  int index = 0;
  Checkpoint checkpoint;
  Metrics metrics;
};

/// A checkpoint directory a resume could not use, and what is wrong with it.
struct RejectedCheckpoint {
  std::string path;
  std::string problem;
};

/// Where a resume starts (CheckpointStore::NewestValid).
struct ResumePoint {
  /// The newest checkpoint that verified; none if none did (or there is none).
  std::optional<StoredCheckpoint> checkpoint;
  /// Every newer checkpoint directory that failed verification, newest first.
  std::vector<RejectedCheckpoint> rejected;
  /// False when `checkpoint` was committed without checksums (by an older Prism), so it
  /// could not be verified.
  bool verified = false;
};

class CheckpointStore {
 public:
  /// Creates run_dir (and parents) if needed. Throws prism::Error naming the path if it
  /// cannot be created or written (an unwritable storage_path).
  CheckpointStore(std::string run_dir, CheckpointConfig config);

  /// Commits `from` as the next checkpoint with `metrics`, applies retention, returns it.
  /// With `move`, `from` is renamed away when possible (else copied, then removed).
  StoredCheckpoint Commit(const Checkpoint& from, const Metrics& metrics, bool move = true);
  /// Every complete checkpoint, oldest first. Directories whose record cannot be read are
  /// left out (NewestValid reports them). Files are not verified.
  std::vector<StoredCheckpoint> List() const;
  /// The newest complete checkpoint, if any.
  std::optional<StoredCheckpoint> Latest() const;
  /// The kept checkpoints, best first (by score; newest first without a score attribute).
  std::vector<StoredCheckpoint> Best() const;
  /// The checkpoint to resume from: tries every checkpoint_NNNNNN directory newest first
  /// and returns the first whose record reads and whose files match it (VerifyCheckpoint in
  /// checksums.h: present, same size, same CRC-32), with every newer one that failed.
  /// Reads every byte of the checkpoints it tries. Does not throw for what it finds.
  ResumePoint NewestValid() const;
  const std::string& run_dir() const { return run_dir_; }

 private:
  std::string run_dir_;
  CheckpointConfig config_;
};

}  // namespace prism::train::internal
