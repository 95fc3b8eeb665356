#pragma once
// Checkpoints: a directory of files (Ray's Checkpoint), the retention policy for a run's
// checkpoints, and a private scratch directory to write one into. Used by prism::train
// (whose HDF5 state dicts fill them, prism/train/checkpoint.h) and prism::tune.

#include <map>
#include <string>

#include "prism/errors.h"

namespace prism {

/// A directory of checkpoint files.
class Checkpoint {
 public:
  Checkpoint() = default;
  /// Throws prism::Error if `path` is not an existing directory.
  static Checkpoint FromDirectory(const std::string& path);
  const std::string& path() const { return path_; }
  /// Key/values stored with it (metadata.json in the directory); empty if none.
  std::map<std::string, std::string> GetMetadata() const;
  /// Replaces metadata.json (written atomically).
  void SetMetadata(const std::map<std::string, std::string>& metadata) const;

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& path_;
  }

 private:
  std::string path_;
};

/// Retention of a run's checkpoints (Ray's CheckpointConfig).
struct CheckpointConfig {
  /// Keep this many (0: keep all). With a score attribute, the best ones are kept;
  /// without, the newest. The newest is never deleted (a resume needs it): when it is not
  /// among the best, it is kept as well (num_to_keep + 1 on storage, as in Ray).
  int num_to_keep = 0;
  /// A reported metric to rank checkpoints by (empty: by recency).
  std::string checkpoint_score_attribute;
  /// "max" or "min".
  std::string checkpoint_score_order = "max";

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& num_to_keep& checkpoint_score_attribute& checkpoint_score_order;
  }
};

/// A fresh, empty directory for a worker to write a checkpoint into before Report (under
/// ${TMPDIR:-/tmp}/prism-checkpoints-<uid>/, made 0700; Report moves or copies it into the
/// run's storage). If that name is a symbolic link, another user's, or not a directory, it
/// is left alone and a private ${TMPDIR:-/tmp}/prism-checkpoints-<uid>-XXXXXX is used
/// instead (with a warning on stderr). Throws prism::Error if no directory can be made.
/// Thread-safe.
std::string MakeTempCheckpointDir();

/// Where runs and experiments live by default: $PRISM_STORAGE_PATH, else ~/prism_results.
std::string DefaultStoragePath();
/// A run's default name: "<prefix>_<job id>" under Slurm (array tasks get their own; a
/// requeued job keeps its id, so it finds its run again), else "<prefix>_<local time>".
std::string DefaultRunName(const std::string& prefix);

}  // namespace prism
