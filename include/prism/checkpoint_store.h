#pragma once
// A run's checkpoints on storage (prism::checkpoint; prism::train keeps a run's with it,
// prism::tune a trial's): run_dir/checkpoint_NNNNNN/ (six digits, increasing).
//
// Commit copies (or renames, when on the same file system and `move` is set) a worker's
// checkpoint directory into run_dir/.staging-checkpoint_NNNNNN-<pid>, writes
// prism_checkpoint.json (index, metrics, time, and the size and CRC-32 of every file) into
// it, fsyncs every file and the directory, renames it to
// checkpoint_NNNNNN and fsyncs run_dir. A crash at any point
// leaves either no checkpoint_NNNNNN or a complete one; staging leftovers are never
// listed and are removed by the next Commit. Retention (CheckpointConfig) runs after each
// commit: keep the best num_to_keep by the score attribute (checkpoints without the
// attribute rank last), or the newest num_to_keep without one; the newest is always kept.
// Everything is read back from the directory, so a new process (a resumed run) sees the
// same state. A resume starts from NewestValid(): the newest checkpoint whose files still
// match their checksums; newer ones that do not are reported, never loaded.
//
// Checksums: the size and CRC-32 (zlib) of every file but metadata.json, which
// Checkpoint::SetMetadata may replace after the commit (verification parses it instead).
// A CRC of every byte covers what an HDF5 dataset filter would miss (HDF5's own metadata,
// root attributes, files that are not HDF5); it catches accidental damage (a partial
// overwrite, truncation, bit rot), not tampering: whoever can rewrite a file can rewrite
// the record too.
//
//   prism::CheckpointStore store(run_dir, {.num_to_keep = 2});
//   store.Commit(prism::Checkpoint::FromDirectory(tmp), {{"loss", 0.1}});
//   if (auto from = store.NewestValid().checkpoint) Resume(from->checkpoint.path());

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "prism/checkpoint.h"

namespace prism {

/// The commit record in a committed checkpoint's directory: a directory without it is not
/// a committed checkpoint.
inline constexpr const char* kCheckpointRecordFile = "prism_checkpoint.json";

/// A committed checkpoint, with the metrics it was committed with.
struct StoredCheckpoint {
  int index = 0;
  Checkpoint checkpoint;
  std::map<std::string, double> metrics;
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
  StoredCheckpoint Commit(const Checkpoint& from, const std::map<std::string, double>& metrics,
                          bool move = true);
  /// Every complete checkpoint, oldest first. Directories whose record cannot be read are
  /// left out (NewestValid reports them). Files are not verified.
  std::vector<StoredCheckpoint> List() const;
  /// The newest complete checkpoint, if any.
  std::optional<StoredCheckpoint> Latest() const;
  /// The kept checkpoints, best first (by score; newest first without a score attribute).
  std::vector<StoredCheckpoint> Best() const;
  /// The checkpoint to resume from: tries every checkpoint_NNNNNN directory newest first
  /// and returns the first whose record reads and whose files match it (VerifyCheckpoint:
  /// present, same size, same CRC-32), with every newer one that failed.
  /// Reads every byte of the checkpoints it tries. Does not throw for what it finds.
  ResumePoint NewestValid() const;
  const std::string& run_dir() const { return run_dir_; }

 private:
  std::string run_dir_;
  CheckpointConfig config_;
};

/// The outcome of VerifyCheckpoint.
struct CheckpointVerification {
  /// Empty when the checkpoint is intact; else every problem found, "; "-separated.
  std::string problem;
  /// False for a checkpoint committed by a Prism without checksums: nothing was verified.
  bool has_checksums = false;
};

/// Checks a committed checkpoint directory against its record: the record is readable,
/// every file it lists is present with its size and CRC-32, metadata.json (if any) parses.
/// Never throws for what it finds (every finding is in `problem`).
CheckpointVerification VerifyCheckpoint(const std::string& dir);

/// Checks one file against the record of the checkpoint directory holding it: "" when it
/// matches, or when that directory has no record or the record does not list it (a file
/// that was never committed has nothing to be checked against).
std::string VerifyCheckpointFile(const std::string& file);

}  // namespace prism
