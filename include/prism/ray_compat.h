#pragma once
// Ray C++ compatibility: a program written against Ray's C++ API builds and runs on Prism
// with one change, its include line:
//
//   #include <ray/api.h>   ->   #include <prism/ray_compat.h>
//
// ray:: names are aliases of prism:: ones, so Ray's exception types catch Prism's errors.
// RayConfig's fields about connecting to a running Ray cluster (address, local_mode,
// code_search_path, head_args) are accepted and ignored: the cluster is the MPI job.
// README.md, "Ray C++ compatibility", lists what is supported and what is not, and why.

#include <optional>
#include <string>
#include <vector>

#include "prism/api.h"
#include "prism/runtime_env.h"

namespace ray {

using RuntimeEnv = prism::RuntimeEnv;

/// Ray's RayConfig. Prism ignores the connection fields; the cluster is the MPI job.
class RayConfig {
 public:
  std::string address;
  bool local_mode = false;
  std::vector<std::string> code_search_path;
  std::vector<std::string> head_args;
  std::optional<std::string> redis_password_;  // accepted and ignored: there is no Redis
  /// The job's namespace for named actors; "" = an anonymous one of this job.
  std::string ray_namespace;
  /// The job's runtime environment: only env_vars (set in every rank's process at Init).
  std::optional<RuntimeEnv> runtime_env;
  /// Prism's own settings, if wanted (num_cpus, ...).
  prism::Config prism;

  /// The prism::Config these fields make.
  prism::Config ToPrism() const {
    prism::Config out = prism;
    if (!ray_namespace.empty()) out.ray_namespace = ray_namespace;
    if (runtime_env) {
      for (const auto& [name, value] : runtime_env->EnvVars()) out.env_vars[name] = value;
    }
    return out;
  }
};

inline void Init() { prism::Init(); }
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

}  // namespace ray

#define RAY_REMOTE(...) PRISM_REMOTE(__VA_ARGS__)
#define RAY_FUNC(f, ...) PRISM_FUNC(f, __VA_ARGS__)
