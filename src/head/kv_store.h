#pragma once
// The head's internal key-value table behind prism::kv (see prism/kv.h). Pure logic: no
// locks, no I/O; the head serialises calls.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace prism::internal {

// Every call checks its key (callers check the same before shipping it, with the static
// Check* below) and throws prism::Error naming the call, the size and the limit.
class KvStore {
 public:
  /// Returns true if the key existed. With overwrite = false an existing value stays.
  /// Throws prism::Error on an empty key, a key above kv::kMaxKeyBytes or a value above
  /// kv::kMaxValueBytes.
  bool Put(const std::string& key, std::string value, bool overwrite);
  /// Throws prism::Error on what Put rejects.
  static void CheckPut(const std::string& key, size_t value_bytes);
  /// Throws prism::Error naming `call` (e.g. "kv::Get") on a key above kv::kMaxKeyBytes;
  /// with `non_empty`, also on an empty key.
  static void CheckKey(const std::string& key, const char* call, bool non_empty);
  /// Throws prism::Error naming `call` on a prefix above kv::kMaxKeyBytes.
  static void CheckPrefix(const std::string& prefix, const char* call);
  std::optional<std::string> Get(const std::string& key) const;
  bool Exists(const std::string& key) const;
  /// Returns how many keys went.
  int64_t Delete(const std::string& key, bool by_prefix);
  /// Sorted keys starting with `prefix`.
  std::vector<std::string> Keys(const std::string& prefix) const;
  size_t Size() const { return entries_.size(); }
  uint64_t Bytes() const { return bytes_; }

 private:
  std::map<std::string, std::string> entries_;  // ordered: prefix scans are range scans
  uint64_t bytes_ = 0;
};

}  // namespace prism::internal
