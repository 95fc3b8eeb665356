#pragma once
// Is a directory shared? A library that writes results on some ranks and reads them on
// others (Train's checkpoints, Tune's trial directories, Data's part files, RL checkpoints
// saved inside a trial) needs the directory on storage every rank sees: on a cluster, a
// node-local disk or /tmp holds files only its own host's ranks can read, and the job
// would fail at its very end. CheckStorageShared finds that out before any work is done.

#include <string>
#include <vector>

namespace prism::platform {

/// What CheckStorageShared's error names: which library, which setting, and where to
/// change it.
struct StorageCheck {
  std::string library = "prism";  ///< starts the message, e.g. "prism::tune"
  std::string setting = "storage path";  ///< the directory's name, e.g. "storage_path"
  /// Where to set it, e.g. "RunConfig::storage_path or PRISM_STORAGE_PATH"; "" says nothing.
  std::string how_to_set;
  int timeout_ms = 60000;  ///< how long each rank's probe may take
};

/// Checks that each rank of `ranks` (empty: every other rank of the job) sees the
/// directory `dir` as the calling rank does: the caller writes a probe file into `dir`, a
/// zero-CPU task pinned to each rank checks it is there and writes its own, and the caller
/// checks it sees each of those; all probe files (`.prism-probe-*`) are removed after.
/// `dir` must exist. Does nothing before Init, in a one-rank job or when `ranks` holds only
/// the caller.
/// Throws prism::Error when a rank cannot see the files, e.g.
///   prism::tune: storage_path is not shared: rank 1 (host h2) cannot see the probe file
///   rank 0 (host h1) wrote in /tmp/results. Put storage_path on a file system every node
///   mounts (your cluster's scratch or home file system), through RunConfig::storage_path
///   or PRISM_STORAGE_PATH.
/// and when the caller cannot write into `dir` (naming the error). Throws what Get throws
/// for a rank that is lost or does not answer within `about.timeout_ms`. Thread-safe;
/// callable from the driver or inside a task.
void CheckStorageShared(const std::string& dir, const StorageCheck& about, std::vector<int> ranks = {});

}  // namespace prism::platform
