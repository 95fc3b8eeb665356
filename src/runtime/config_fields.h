#pragma once
// prism::Config field by field: the one list that Init uses to tell the worker ranks of an
// MPI job the driver's configuration for a new session (EncodeConfig/DecodeConfig) and to
// compare a repeated Init's configuration with the running one (ConfigDifferences).

#include <string>
#include <vector>

#include "prism/config.h"
#include "prism/serialization.h"

namespace prism::internal {

/// Calls f(name, field of c...) for every field of Config, in declaration order, over one
/// or more Configs at once (Config or const Config). A field added to Config must be added
/// here: the static_assert below notices.
template <class F, class... C>
void ForEachConfigField(F&& f, C&... c) {
  f("num_cpus", c.num_cpus...);
  f("num_gpus", c.num_gpus...);
  f("object_store_memory", c.object_store_memory...);
  f("resources", c.resources...);
  f("log_dir", c.log_dir...);
  f("ranks_per_node", c.ranks_per_node...);
  f("max_inline_bytes", c.max_inline_bytes...);
  f("rank_timeout_s", c.rank_timeout_s...);
  f("pending_warn_s", c.pending_warn_s...);
  f("log_level", c.log_level...);
  f("task_table_size", c.task_table_size...);
  f("data_plane", c.data_plane...);
  f("network", c.network...);
  f("ray_namespace", c.ray_namespace...);
  f("env_vars", c.env_vars...);
  f("log_to_driver", c.log_to_driver...);
  f("wait_infeasible", c.wait_infeasible...);
  f("dashboard", c.dashboard...);
  f("max_lost_ranks", c.max_lost_ranks...);
}
static_assert(sizeof(Config) == 472,
              "prism::Config changed: list its new field in ForEachConfigField (config_fields.h), "
              "then update this size");

/// The configuration as bytes, each field serialized on its own.
inline Buffer EncodeConfig(const Config& config) {
  Buffer out;
  Writer w(out);
  ForEachConfigField([&w](const char*, const auto& field) {
    Buffer b = Serialize(field);
    w.Bytes(b.data(), b.size());
  }, config);
  return out;
}

/// Inverse of EncodeConfig. Throws SerializationError on bytes it did not write.
inline Config DecodeConfig(const char* data, size_t size) {
  Config config;
  Reader r(data, size);
  ForEachConfigField([&r](const char*, auto& field) {
    ByteView v = r.Bytes();
    field = Deserialize<std::decay_t<decltype(field)>>(v.data, v.size);
  }, config);
  return config;
}

/// The names of the fields in which `a` and `b` differ, in declaration order.
inline std::vector<std::string> ConfigDifferences(const Config& a, const Config& b) {
  std::vector<std::string> differ;
  ForEachConfigField([&differ](const char* name, const auto& x, const auto& y) {
    if (!(x == y)) differ.emplace_back(name);
  }, a, b);
  return differ;
}

}  // namespace prism::internal
