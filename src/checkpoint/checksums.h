#pragma once
// Checksums of a checkpoint's files. CheckpointStore::Commit records the size and CRC-32 of
// every file in prism_checkpoint.json ("files"); a resume verifies them before it trusts
// the checkpoint, and LoadStateDict verifies the file it reads, so a file changed after
// its commit (a partial overwrite, truncation, bit rot) is reported by name instead of
// trained on.
//
// Per file with zlib's crc32, not per HDF5 dataset with HDF5's Fletcher32 filter: a CRC of
// every byte also covers what a dataset filter misses (HDF5's own metadata, the root
// attributes a resume reads its epoch from, the optimizer archive) and files that are not
// HDF5 at all (whatever else a loop puts in its checkpoint); it needs no chunked layout, so
// files stay as plain for h5py as before; and it is computed once, at commit, from the
// bytes that are then fsynced. CRC-32 catches accidental damage, not tampering: whoever can
// rewrite a file can rewrite the record too.
//
// metadata.json is left out: Checkpoint::SetMetadata may replace it after the commit (as
// Ray's set_metadata may). Verification parses it instead, so a damaged one is still
// reported.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/json.h"

namespace prism::train::internal {

/// The commit record in a committed checkpoint's directory.
inline constexpr const char* kRecordFile = "prism_checkpoint.json";
/// The checkpoint's user metadata (Checkpoint::GetMetadata / SetMetadata).
inline constexpr const char* kMetadataFile = "metadata.json";

struct FileChecksum {
  std::string path;  // relative to the checkpoint directory, '/'-separated
  uint64_t size = 0;
  uint32_t crc32 = 0;
};

/// The size and CRC-32 of `dir`/`relative`. Throws prism::Error naming the file.
FileChecksum ChecksumFile(const std::string& dir, const std::string& relative);

/// Checksums of every regular file under `dir` (symbolic links are neither followed nor
/// listed), sorted by path, leaving out the top-level names in `skip`. Throws prism::Error.
std::vector<FileChecksum> ChecksumTree(const std::string& dir, const std::set<std::string>& skip);

/// What is wrong with `dir`/`expected.path` (missing, another size, another CRC-32), or ""
/// if it matches.
std::string CompareFile(const std::string& dir, const FileChecksum& expected);

/// The record's "files" member: {"model.h5": {"size": N, "crc32": "89abcdef"}, ...}, with
/// its lines indented by `indent`.
std::string FilesJson(const std::vector<FileChecksum>& files, const std::string& indent);

/// Reads what FilesJson wrote. Throws prism::Error naming `source` if it is malformed or
/// names a file outside the checkpoint.
std::vector<FileChecksum> ParseFiles(const JsonValue& files, const std::string& source);

/// The outcome of VerifyCheckpoint.
struct Verification {
  /// Empty when the checkpoint is intact; else every problem found, "; "-separated.
  std::string problem;
  /// False for a checkpoint committed by a Prism without checksums: nothing was verified.
  bool has_checksums = false;
};

/// Checks a committed checkpoint directory against its record: the record is readable,
/// every file it lists is present with its size and CRC-32, metadata.json (if any) parses.
/// Never throws for what it finds (every finding is in `problem`).
Verification VerifyCheckpoint(const std::string& dir);

/// Checks one file against the record of the checkpoint directory holding it: "" when it
/// matches, or when that directory has no record or the record does not list it (a file
/// that was never committed has nothing to be checked against).
std::string VerifyCheckpointFile(const std::string& file);

}  // namespace prism::train::internal
