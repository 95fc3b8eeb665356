#pragma once
// The head's internal key-value table behind prism::kv (see prism/kv.h). Pure logic: no
// locks, no I/O; the head serialises calls.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace prism::internal {

class KvStore {
 public:
  /// Returns true if the key existed. With overwrite = false an existing value stays.
  /// Throws prism::Error on an empty key or a value above kv::kMaxValueBytes.
  bool Put(const std::string& key, std::string value, bool overwrite);
  /// Throws prism::Error on what Put rejects; callers check before shipping the value.
  static void CheckPut(const std::string& key, size_t value_bytes);
  std::optional<std::string> Get(const std::string& key) const;
  bool Exists(const std::string& key) const { return entries_.count(key) > 0; }
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
