#pragma once
// Ray C++ compatibility: a program written against Ray's C++ API builds and runs on Prism
// with one change, its include line:
//
//   #include <ray/api.h>   ->   #include <prism/ray_compat.h>
//
// ray:: names are aliases of prism:: ones, so Ray's exception types catch Prism's errors.
// RayConfig's fields about connecting to a running Ray cluster (address, local_mode,
// code_search_path, head_args) are accepted and ignored: the cluster is the MPI job.

#include <string>
#include <vector>

#include "prism/api.h"

namespace ray {

/// Ray's RayConfig. Prism ignores the connection fields; the cluster is the MPI job.
class RayConfig {
 public:
  std::string address;
  bool local_mode = false;
  std::vector<std::string> code_search_path;
  std::vector<std::string> head_args;
  /// Prism's own settings, if wanted (num_cpus, ...).
  prism::Config prism;
};

inline void Init() { prism::Init(); }
inline void Init(RayConfig& config) { prism::Init(config.prism); }
inline void Init(RayConfig& config, int argc, char** argv) { prism::Init(config.prism, argc, argv); }
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
}  // namespace internal

}  // namespace ray

#define RAY_REMOTE(...) PRISM_REMOTE(__VA_ARGS__)
#define RAY_FUNC(f, ...) PRISM_FUNC(f, __VA_ARGS__)
