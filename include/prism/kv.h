#pragma once
// The internal key-value store (Ray's internal KV): small shared metadata kept by the head
// (rank 0) for the life of the job, visible from the driver and from every task and actor
// on every rank. Each call is one round trip to the head; writes are applied in the order
// the head receives them, and a call returns after the head applied it.
//
//   prism::kv::Put("config/lr", "0.001");
//   if (auto lr = prism::kv::Get("config/lr")) use(*lr);
//   for (const auto& key : prism::kv::List("config/")) ...
//
// Keys are non-empty strings; values are byte strings (binary is fine) of at most
// kMaxValueBytes. Large data belongs in the object store (prism::Put).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace prism::kv {

inline constexpr size_t kMaxValueBytes = 64 << 20;

/// Stores `value` under `key`. With overwrite = false an existing value is kept. Returns
/// true if the key already existed. Throws prism::Error on an empty key or a value above
/// kMaxValueBytes.
bool Put(const std::string& key, const std::string& value, bool overwrite = true);
/// The value under `key`, or nullopt.
std::optional<std::string> Get(const std::string& key);
bool Exists(const std::string& key);
/// Deletes `key` (with by_prefix: every key starting with it). Returns how many went.
int64_t Delete(const std::string& key, bool by_prefix = false);
/// Keys starting with `prefix`, sorted ("" lists every key).
std::vector<std::string> List(const std::string& prefix = "");

}  // namespace prism::kv
