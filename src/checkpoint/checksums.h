#pragma once
// Checksums of a checkpoint's files, inside prism::checkpoint (the design is in
// prism/checkpoint_store.h): CheckpointStore::Commit records the size and CRC-32 of every
// file in prism_checkpoint.json ("files"); VerifyCheckpoint and VerifyCheckpointFile
// compare them with what is on storage. Files stay as plain for h5py as before: no chunked
// layout, no dataset filter.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "prism/checkpoint_store.h"

namespace prism::internal {

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

/// The record's "files" member: {"model.h5": {"size": N, "crc32": "89abcdef"}, ...}.
nlohmann::json FilesJson(const std::vector<FileChecksum>& files);

/// Whether `record` has a commit record's shape: an object with "index" and a "metrics"
/// object ("files" is optional: a record from before checksums).
inline bool IsCheckpointRecord(const nlohmann::json& record) {
  return record.is_object() && record.contains("index") && record.contains("metrics") &&
         record["metrics"].is_object();
}

/// Reads what FilesJson wrote. Throws prism::Error naming `source` if it is malformed or
/// names a file outside the checkpoint.
std::vector<FileChecksum> ParseFiles(const nlohmann::json& files, const std::string& source);

}  // namespace prism::internal
