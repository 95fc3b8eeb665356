// The registry of environments by name. One table per process behind a mutex, created on
// first use (a function-local static), so PRISM_RL_REGISTER_ENV may run during static
// initialisation in any order. The built-in environments are put in when the table is
// created, not by static registrars in this library, which a linker could drop.

#include <mutex>

#include "prism/errors.h"
#include "rl/env/internal.h"

namespace prism::rl {
namespace {

struct Entry {
  EnvFactory factory;
  internal::EnvBatchFactory batch = nullptr;  // built-ins with a batched form
};

class Registry {
 public:
  Registry() {
    entries_["CartPole-v1"] = {internal::MakeCartPole, internal::MakeCartPoleBatch};
    entries_["Pendulum-v1"] = {internal::MakePendulum, nullptr};
  }

  void Add(const std::string& name, EnvFactory factory) {
    if (name.empty()) throw Error("prism::rl::RegisterEnv: the environment name is empty");
    if (!factory)
      throw Error("prism::rl::RegisterEnv(\"" + name + "\"): the factory is empty");
    std::lock_guard lock(mu_);
    if (entries_.count(name))
      throw Error("prism::rl::RegisterEnv: an environment named '" + name +
                  "' is already registered; pick another name (a version suffix such as "
                  "'-v2' is the usual way)");
    entries_[name] = {std::move(factory), nullptr};
  }

  Entry Find(const std::string& name) const {
    std::lock_guard lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end()) return it->second;
    std::string names;
    for (const auto& [n, e] : entries_) names += (names.empty() ? "" : ", ") + n;
    throw Error("prism::rl: no environment registered as '" + name + "'; registered: " + names +
                ". Register yours with PRISM_RL_REGISTER_ENV(name, factory) or "
                "prism::rl::RegisterEnv before using it");
  }

  std::vector<std::string> Names() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> names;
    for (const auto& [n, e] : entries_) names.push_back(n);
    return names;  // std::map: sorted
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

}  // namespace

void RegisterEnv(const std::string& name, EnvFactory factory) {
  TheRegistry().Add(name, std::move(factory));
}

std::unique_ptr<Env> MakeEnv(const std::string& name, const EnvConfig& config) {
  Entry entry = TheRegistry().Find(name);  // the factory runs outside the lock
  std::unique_ptr<Env> env = entry.factory(config);
  if (!env) throw Error("prism::rl::MakeEnv: the factory of '" + name + "' returned no environment");
  return env;
}

std::vector<std::string> RegisteredEnvs() { return TheRegistry().Names(); }

namespace internal {
EnvBatchFactory FindBatchFactory(const std::string& name) { return TheRegistry().Find(name).batch; }
}  // namespace internal

}  // namespace prism::rl
