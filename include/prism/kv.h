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
// Keys are non-empty strings of at most kMaxKeyBytes; values are byte strings (binary is
// fine) of at most kMaxValueBytes. Large data belongs in the object store (prism::Put).
// Both limits are checked on the caller's rank, before anything travels, and again by the
// head.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace prism::kv {

/// The largest value Put takes: metadata, not data.
inline constexpr size_t kMaxValueBytes = 64 << 20;
/// A key names a value ("job/config/lr"). 64 KiB is far beyond any name, even a composite
/// or hashed one, yet bounds what every key costs the head: it is held in the head's
/// ordered map, compared on every lookup and copied into every List. Prefixes (List,
/// Delete by_prefix) have the same limit: a longer one could match no key.
inline constexpr size_t kMaxKeyBytes = 64 << 10;

/// Stores `value` under `key`. With overwrite = false an existing value is kept. Returns
/// true if the key already existed. Throws prism::Error on an empty key, a key above
/// kMaxKeyBytes or a value above kMaxValueBytes.
bool Put(const std::string& key, const std::string& value, bool overwrite = true);
/// The value under `key`, or nullopt. Throws prism::Error on a key above kMaxKeyBytes.
std::optional<std::string> Get(const std::string& key);
/// Whether `key` holds a value. Throws prism::Error on a key above kMaxKeyBytes.
bool Exists(const std::string& key);
/// Deletes `key` (with by_prefix: every key starting with it). Returns how many went.
/// Throws prism::Error on an empty key (without by_prefix) or one above kMaxKeyBytes.
int64_t Delete(const std::string& key, bool by_prefix = false);
/// Keys starting with `prefix`, sorted ("" lists every key). Throws prism::Error on a
/// prefix above kMaxKeyBytes.
std::vector<std::string> List(const std::string& prefix = "");

}  // namespace prism::kv
