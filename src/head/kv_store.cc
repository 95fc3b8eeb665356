#include "head/kv_store.h"

#include <cctype>

#include "prism/errors.h"
#include "prism/kv.h"

namespace prism::internal {

namespace {
/// The start of a key for a message: at most 40 bytes, unprintable ones as '?'.
std::string Quote(const std::string& key) {
  std::string out = "\"";
  for (size_t i = 0; i < key.size() && i < 40; ++i) {
    out += std::isprint(static_cast<unsigned char>(key[i])) ? key[i] : '?';
  }
  return out + (key.size() > 40 ? "...\"" : "\"");
}

void CheckSize(const std::string& key, const char* call, const char* noun) {
  if (key.size() > kv::kMaxKeyBytes) {
    throw Error(std::string("prism: ") + call + "(" + Quote(key) + "): the " + noun + " has " +
                std::to_string(key.size()) + " bytes, above the limit of " +
                std::to_string(kv::kMaxKeyBytes) +
                " (kv::kMaxKeyBytes); a key names a value: keep the data in the value");
  }
}

/// First key after every key starting with `prefix` (empty: none).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char last = static_cast<unsigned char>(prefix.back());
    if (last != 0xff) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return prefix;
}
}  // namespace

void KvStore::CheckKey(const std::string& key, const char* call, bool non_empty) {
  if (non_empty && key.empty()) throw Error(std::string("prism: ") + call + ": the key is empty");
  CheckSize(key, call, "key");
}

void KvStore::CheckPrefix(const std::string& prefix, const char* call) {
  CheckSize(prefix, call, "prefix");
}

void KvStore::CheckPut(const std::string& key, size_t value_bytes) {
  CheckKey(key, "kv::Put", true);
  if (value_bytes > kv::kMaxValueBytes) {
    throw Error("prism: kv::Put(" + Quote(key) + "): the value has " + std::to_string(value_bytes) +
                " bytes, above the limit of " + std::to_string(kv::kMaxValueBytes) +
                "; keep large data in the object store (prism::Put)");
  }
}

bool KvStore::Put(const std::string& key, std::string value, bool overwrite) {
  CheckPut(key, value.size());
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    bytes_ += key.size() + value.size();
    entries_.emplace(key, std::move(value));
    return false;
  }
  if (overwrite) {
    bytes_ += value.size();
    bytes_ -= it->second.size();
    it->second = std::move(value);
  }
  return true;
}

std::optional<std::string> KvStore::Get(const std::string& key) const {
  CheckKey(key, "kv::Get", false);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool KvStore::Exists(const std::string& key) const {
  CheckKey(key, "kv::Exists", false);
  return entries_.count(key) > 0;
}

int64_t KvStore::Delete(const std::string& key, bool by_prefix) {
  if (!by_prefix) {
    CheckKey(key, "kv::Delete", true);
    auto it = entries_.find(key);
    if (it == entries_.end()) return 0;
    bytes_ -= it->first.size() + it->second.size();
    entries_.erase(it);
    return 1;
  }
  CheckPrefix(key, "kv::Delete");
  auto first = entries_.lower_bound(key);
  std::string end = PrefixEnd(key);
  auto last = end.empty() ? entries_.end() : entries_.lower_bound(end);
  int64_t n = 0;
  for (auto it = first; it != last; ++it, ++n) bytes_ -= it->first.size() + it->second.size();
  entries_.erase(first, last);
  return n;
}

std::vector<std::string> KvStore::Keys(const std::string& prefix) const {
  CheckPrefix(prefix, "kv::List");
  std::vector<std::string> out;
  for (auto it = entries_.lower_bound(prefix);
       it != entries_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    out.push_back(it->first);
  }
  return out;
}

}  // namespace prism::internal
