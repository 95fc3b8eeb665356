#pragma once
// Ray C++ compatibility: a program written against Ray's C++ API builds and runs on Prism
// with one change, its include line:
//
//   #include <ray/api.h>   ->   #include <prism/ray_compat.h>
//
// ray:: names are aliases of prism:: ones, so Ray's exception types catch Prism's errors.
// Like <ray/api.h>, this header brings the standard headers Ray's examples rely on
// (<iostream>, <string>, <vector>, <map>, <unordered_map>, <memory>, <thread>, ...),
// MSGPACK_DEFINE for user structs, nlohmann-json's `json` (Ray's RuntimeEnv fields) and
// every field of Ray's RayConfig. Where Ray and an MPI job differ (README.md, "Ray C++
// compatibility"): RayConfig's fields about connecting to a running Ray cluster are
// accepted and ignored (the cluster is the MPI job). A task, actor or placement group that
// no rank can hold waits with a warning, as in Ray (ray::Init sets Config::wait_infeasible;
// Prism's own Init refuses it at once).

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "prism/api.h"
#include "prism/runtime_env.h"

/// Ray's runtime_env.h makes nlohmann's json a global name (Ray's tests use it unqualified
/// for their to_json/from_json of RuntimeEnv fields).
using json = nlohmann::json;

namespace prism::internal {
/// MSGPACK_DEFINE's body: the fields, serialized in order.
template <class Archive, class... Fields>
void SerializeFields(Archive& ar, Fields&... fields) {
  ((ar & fields), ...);
}
}  // namespace prism::internal

/// Ray's MSGPACK_DEFINE(fields...) inside a user struct: its fields, in order, are what
/// Prism serializes (a Boost serialize member; msgpack is not used).
#define MSGPACK_DEFINE(...)                                               \
  template <class PrismArchive>                                           \
  void serialize(PrismArchive& prism_archive, unsigned) {                 \
    ::prism::internal::SerializeFields(prism_archive, __VA_ARGS__);       \
  }
#define MSGPACK_DEFINE_ARRAY(...) MSGPACK_DEFINE(__VA_ARGS__)
#define MSGPACK_DEFINE_MAP(...) MSGPACK_DEFINE(__VA_ARGS__)

namespace ray {

namespace internal {
using RayException = prism::Error;
using RayTaskException = prism::TaskError;
using RayActorException = prism::ActorError;
using RayFunctionNotFound = prism::FunctionNotFound;
using RayTimeoutException = prism::TimeoutError;
using UnreconstructableException = prism::ObjectLostError;
using RayWorkerException = prism::Error;
using RayRuntimeEnvException = prism::Error;
}  // namespace internal

/// Ray's RuntimeEnv: fields by name, each any value nlohmann-json converts (Set, Get) or a
/// JSON string (SetJsonStr, GetJsonStr); Serialize/Deserialize as JSON. Every field can be
/// set and read; where it is used (RayConfig::runtime_env at Init, SetRuntimeEnv on a task
/// or actor) only env_vars is accepted, and any other field throws
/// RayRuntimeEnvException naming it: Prism cannot install packages, a container or files
/// into ranks the launcher started. Plain value.
class RuntimeEnv {
 public:
  /// Sets field `name` to `value`. Throws RayRuntimeEnvException if it is not jsonable.
  template <typename T>
  void Set(const std::string& name, const T& value) {
    try {
      fields_[name] = json(value);
    } catch (const std::exception& e) {
      throw internal::RayRuntimeEnvException("Failed to set the field " + name + ": " + e.what());
    }
  }
  /// Field `name` as T. Throws RayRuntimeEnvException if it is not set or not a T.
  template <typename T>
  T Get(const std::string& name) const {
    if (!Contains(name)) throw internal::RayRuntimeEnvException("The field " + name + " not found.");
    try {
      return fields_.at(name).get<T>();
    } catch (const std::exception& e) {
      throw internal::RayRuntimeEnvException("Failed to get the field " + name + ": " + e.what());
    }
  }
  /// Sets field `name` from a JSON string. Throws RayRuntimeEnvException if it is not JSON.
  void SetJsonStr(const std::string& name, const std::string& json_str) {
    try {
      fields_[name] = json::parse(json_str);
    } catch (const std::exception& e) {
      throw internal::RayRuntimeEnvException("Failed to set the field " + name + " by json string: " + e.what());
    }
  }
  /// Field `name` as a JSON string. Throws RayRuntimeEnvException if it is not set.
  std::string GetJsonStr(const std::string& name) const {
    if (!Contains(name)) throw internal::RayRuntimeEnvException("The field " + name + " not found.");
    return fields_.at(name).dump();
  }
  bool Contains(const std::string& name) const { return fields_.contains(name); }
  /// Removes field `name`; true if it was set.
  bool Remove(const std::string& name) { return fields_.erase(name) > 0; }
  bool Empty() const { return fields_.empty(); }
  /// The fields as one JSON object.
  std::string Serialize() const { return fields_.dump(); }
  /// Inverse of Serialize. Throws RayRuntimeEnvException on anything but a JSON object.
  static RuntimeEnv Deserialize(const std::string& serialized_runtime_env) {
    RuntimeEnv env;
    try {
      env.fields_ = json::parse(serialized_runtime_env);
    } catch (const std::exception& e) {
      throw internal::RayRuntimeEnvException(std::string("Failed to deserialize a runtime env: ") + e.what());
    }
    if (!env.fields_.is_object()) throw internal::RayRuntimeEnvException("A serialized runtime env is a JSON object");
    return env;
  }

  /// Prism's RuntimeEnv of the same environment, for where it is used. Throws
  /// RayRuntimeEnvException naming the fields other than env_vars, or an env_vars that is
  /// not a map of strings to strings.
  operator prism::RuntimeEnv() const {
    std::string unsupported;
    for (const auto& [name, value] : fields_.items()) {
      if (name != "env_vars") unsupported += (unsupported.empty() ? "" : ", ") + name;
    }
    if (!unsupported.empty()) {
      throw internal::RayRuntimeEnvException(
          "prism: runtime_env field(s) " + unsupported + " cannot be honoured: Prism supports "
          "only env_vars. Ranks are the job's MPI processes, started by the launcher: Prism cannot "
          "install packages, a container or files for them; prepare them before the job starts");
    }
    prism::RuntimeEnv env;
    if (Contains("env_vars")) env.Set("env_vars", Get<std::map<std::string, std::string>>("env_vars"));
    return env;
  }

 private:
  json fields_ = json::object();
};

/// Ray's actor lifetimes. Prism's actors are never ended with the actor or task that made
/// them (they live until killed or until the session ends), which is DETACHED within the
/// session; nothing outlives the session. Both values are accepted.
enum class ActorLifetime { NON_DETACHED, DETACHED };

/// Ray's RayConfig, every public field. The cluster is the MPI job: the fields about
/// connecting to a running Ray cluster or starting one are accepted and ignored, except
/// head_args's resource flags (below).
class RayConfig {
 public:
  /// Ignored: the cluster is the MPI job, started by mpirun/srun.
  std::string address = "";
  /// Ignored: tasks run on the job's ranks (run the program without mpirun for one process).
  bool local_mode = false;
  /// Ignored: every rank runs this program's own binary, so its functions are known.
  std::vector<std::string> code_search_path;
  /// Ray's `ray start` arguments for a head it starts. Honoured per rank (each rank is a
  /// node): --num-cpus N, --num-gpus N, --resources '{"name": amount, ...}',
  /// --object-store-memory BYTES ("--flag value" or "--flag=value"); Config values set in
  /// `prism` win. Any other flag (--include-dashboard, --port, ...) is ignored. A bad value
  /// throws RayException at Init.
  std::vector<std::string> head_args = {};
  /// Accepted: see ActorLifetime.
  ActorLifetime default_actor_lifetime = ActorLifetime::NON_DETACHED;
  /// The job's runtime environment: only env_vars (set in every rank's process at Init).
  std::optional<RuntimeEnv> runtime_env;
  /// Ignored: there is no Redis.
  std::optional<std::string> redis_password_;
  /// Ignored: there is no Redis.
  std::optional<std::string> redis_username_;
  /// Ignored (Ray's flag for its own default_worker).
  bool is_worker_ = false;
  /// The job's namespace for named actors; "" = an anonymous one of this job.
  std::string ray_namespace = "";
  /// Prism's own settings, if wanted (num_cpus, ...).
  prism::Config prism;

  /// The prism::Config these fields make, with Ray's rule for requests no rank can hold
  /// (Config::wait_infeasible, unless `prism` says otherwise). Throws RayException for a
  /// bad head_args value and RayRuntimeEnvException for a runtime_env field other than
  /// env_vars.
  prism::Config ToPrism() const {
    prism::Config out = prism;
    if (!out.wait_infeasible) out.wait_infeasible = true;
    if (!ray_namespace.empty()) out.ray_namespace = ray_namespace;
    if (runtime_env) {
      for (const auto& [name, value] : prism::RuntimeEnv(*runtime_env).EnvVars()) out.env_vars[name] = value;
    }
    ApplyHeadArgs(out);
    return out;
  }

 private:
  void ApplyHeadArgs(prism::Config& out) const {
    for (size_t i = 0; i < head_args.size(); ++i) {
      std::string flag = head_args[i], value;
      if (flag.rfind("--", 0) != 0) continue;
      if (const size_t eq = flag.find('='); eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
      } else if (i + 1 < head_args.size() && head_args[i + 1].rfind("--", 0) != 0) {
        value = head_args[i + 1];
      }
      const bool known = flag == "--num-cpus" || flag == "--num-gpus" || flag == "--resources" ||
                         flag == "--object-store-memory";
      if (!known) continue;
      if (value.empty()) throw internal::RayException("prism: RayConfig::head_args: " + flag + " needs a value");
      if (head_args[i].find('=') == std::string::npos) ++i;
      try {
        if (flag == "--num-cpus" && !out.num_cpus) out.num_cpus = Number(value);
        if (flag == "--num-gpus" && !out.num_gpus) out.num_gpus = Number(value);
        if (flag == "--object-store-memory" && !out.object_store_memory) {
          out.object_store_memory = static_cast<uint64_t>(Number(value));
        }
        if (flag == "--resources" && out.resources.empty()) {
          const json resources = json::parse(value);
          if (!resources.is_object()) throw std::invalid_argument("not a JSON object");
          for (const auto& [name, amount] : resources.items()) out.resources[name] = amount.get<double>();
        }
      } catch (const std::exception& e) {
        throw internal::RayException("prism: RayConfig::head_args: " + flag + " \"" + value +
                                     "\" is not valid (" + e.what() +
                                     "); expected e.g. --num-cpus 4 or --resources '{\"ssd\": 1}'");
      }
    }
  }
  static double Number(const std::string& s) {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size() || v < 0) throw std::invalid_argument("not a non-negative number");
    return v;
  }
};

/// Ray's Init: starts Prism, or does nothing if it runs (an Init with another
/// configuration while it runs throws RayException saying what differs: Shutdown first).
/// A task, actor or placement group that no rank can hold waits with a warning, as in Ray
/// (Config::wait_infeasible; Prism's own Init refuses it at once).
inline void Init() {
  if (prism::IsInitialized()) return;
  RayConfig config;
  prism::Init(config.ToPrism());
}
inline void Init(RayConfig& config) { prism::Init(config.ToPrism()); }
inline void Init(RayConfig& config, int argc, char** argv) { prism::Init(config.ToPrism(), argc, argv); }
using prism::GetNamespace;
using prism::IsInitialized;
using prism::Shutdown;

template <typename T>
using ObjectRef = prism::ObjectRef<T>;
template <typename T>
using ActorHandle = prism::ActorHandle<T>;
template <typename T>
using WaitResult = prism::WaitResult<T>;
using prism::Actor;
using prism::ExitActor;
using prism::Get;
using prism::GetActor;
using prism::GetRuntimeContext;
using prism::Put;
using prism::Task;
using prism::Wait;
using prism::WasCurrentActorRestarted;

using PlacementGroup = prism::PlacementGroup;
using PlacementGroupCreationOptions = prism::PlacementGroupCreationOptions;
using PlacementGroupState = prism::PlacementGroupState;
using PlacementStrategy = prism::PlacementStrategy;
using prism::CreatePlacementGroup;
using prism::GetAllPlacementGroups;
using prism::GetPlacementGroup;
using prism::GetPlacementGroupById;
using prism::RemovePlacementGroup;

// Cross-language calls (Ray's xlang_function.h): declared, so that a program naming them
// fails to build at the call with the reason, not with "not declared".
template <typename R>
struct PyFunction {
  std::string module_name;
  std::string function_name;
};
struct PyActorClass {
  std::string module_name;
  std::string class_name;
};
template <typename R>
struct PyActorMethod {
  std::string function_name;
};
template <typename R>
struct JavaFunction {
  std::string class_name;
  std::string function_name;
};
struct JavaActorClass {
  std::string class_name;
};
template <typename R>
struct JavaActorMethod {
  std::string function_name;
};
namespace internal {
template <typename T>
inline constexpr bool kNoCrossLanguage = false;
#define PRISM_INTERNAL_NO_XLANG                                                                  \
  "prism: cross-language calls (Python or Java functions and actors) are not supported: every " \
  "rank of the MPI job runs this one C++ binary, so there is no Python or Java worker to call"
}  // namespace internal
template <typename R>
auto Task(const PyFunction<R>&) {
  static_assert(internal::kNoCrossLanguage<R>, PRISM_INTERNAL_NO_XLANG);
  return 0;
}
template <typename R>
auto Task(const JavaFunction<R>&) {
  static_assert(internal::kNoCrossLanguage<R>, PRISM_INTERNAL_NO_XLANG);
  return 0;
}
template <typename Class = PyActorClass>
auto Actor(const PyActorClass&) {
  static_assert(internal::kNoCrossLanguage<Class>, PRISM_INTERNAL_NO_XLANG);
  return 0;
}
template <typename Class = JavaActorClass>
auto Actor(const JavaActorClass&) {
  static_assert(internal::kNoCrossLanguage<Class>, PRISM_INTERNAL_NO_XLANG);
  return 0;
}

}  // namespace ray

#define RAY_REMOTE(...) PRISM_REMOTE(__VA_ARGS__)
#define RAY_FUNC(f, ...) PRISM_FUNC(f, __VA_ARGS__)
