#include "serve/replica.h"

#include <cstdio>

#include "prism/api.h"
#include "serve/registry.h"

namespace prism::serve::internal {

ReplicaActor::ReplicaActor(std::string deployment, std::string replica_id, const ClassEntry* entry, void* instance)
    : deployment_(std::move(deployment)), replica_id_(std::move(replica_id)), entry_(entry), instance_(instance) {}

ReplicaActor* ReplicaActor::Create(std::string deployment, std::string replica_id, std::string class_key,
                                   std::string init_args, std::string user_config) {
  const ClassEntry* entry = FindClass(class_key);
  if (entry == nullptr) {
    throw DeploymentError("serve: replica " + replica_id + ": its class is not registered in this binary");
  }
  void* instance = entry->create(init_args);
  auto replica = std::unique_ptr<ReplicaActor>(new ReplicaActor(deployment, replica_id, entry, instance));
  if (!user_config.empty()) replica->Reconfigure(user_config);
  return replica.release();
}

ReplicaActor::~ReplicaActor() { entry_->destroy(instance_); }

std::string ReplicaActor::Call(std::string method, std::string args) {
  if (method == kHttpMethod) {
    if (!entry_->http) {
      throw DeploymentError("serve: deployment \"" + deployment_ +
                            "\" has no HTTP handler (Response operator()(const Request&))");
    }
    return entry_->http(instance_, args);
  }
  const MethodInvoker* invoker = FindMethod(method);
  if (invoker == nullptr) {
    throw DeploymentError("serve: deployment \"" + deployment_ + "\": unknown method (binary mismatch?)");
  }
  return (*invoker)(instance_, args);
}

std::string LoadReport(uint64_t incarnation, int ongoing) {
  return std::to_string(incarnation) + " " + std::to_string(ongoing);
}

int ParseLoadReport(const std::string& value, uint64_t incarnation) {
  unsigned long long inc = 0;
  int ongoing = 0;
  if (std::sscanf(value.c_str(), "%llu %d", &inc, &ongoing) != 2 || inc != incarnation || ongoing < 0) return 0;
  return ongoing;
}

int ReplicaActor::Ready() { return prism::GetRuntimeContext().GetRank(); }

void ReplicaActor::Reconfigure(std::string user_config) {
  if (!entry_->reconfigure) {
    throw DeploymentError("serve: deployment \"" + deployment_ +
                          "\" has a user_config but its class has no void Reconfigure(const nlohmann::json&)");
  }
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(user_config);
  } catch (const std::exception& e) {
    throw DeploymentError("serve: deployment \"" + deployment_ + "\": user_config is not JSON: " + e.what());
  }
  entry_->reconfigure(instance_, config);
}

void ReplicaActor::CheckHealth() {
  if (entry_->check_health) entry_->check_health(instance_);
}

}  // namespace prism::serve::internal

PRISM_REMOTE(prism::serve::internal::ReplicaActor::Create, &prism::serve::internal::ReplicaActor::Call,
             &prism::serve::internal::ReplicaActor::Ready, &prism::serve::internal::ReplicaActor::Reconfigure,
             &prism::serve::internal::ReplicaActor::CheckHealth);
