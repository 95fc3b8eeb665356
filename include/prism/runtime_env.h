#pragma once
// Ray's RuntimeEnv, for the one field Prism can honour: env_vars.
//
//   prism::RuntimeEnv env;
//   env.Set("env_vars", std::map<std::string, std::string>{{"OMP_NUM_THREADS", "1"}});
//   config.env_vars = env.EnvVars();   // or ray::RayConfig::runtime_env = env
//
// Prism's ranks are the job's MPI processes, started by the launcher, and every task of a
// rank runs in that one process. So the environment is the job's: its variables are set in
// every rank's process at Init, before MPI starts and before any task runs. A task or
// actor cannot have variables of its own (CallOptions::SetRuntimeEnv accepts only an
// environment the job already has), and the fields that install software or files (pip,
// conda, container, working_dir, py_modules, ...) are refused: install what the job needs
// before it starts.

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <type_traits>

#include "prism/errors.h"

namespace prism {

/// The environment of a job (and what a task or actor asks for). Plain value.
class RuntimeEnv {
 public:
  /// Sets field `name`. Only "env_vars" is supported, as a map of strings to strings
  /// (std::map or std::unordered_map). Throws Error for any other field, saying why.
  template <typename T>
  void Set(const std::string& name, const T& value) {
    RequireEnvVars(name, "Set");
    if constexpr (std::is_constructible_v<std::string, typename T::key_type> &&
                  std::is_constructible_v<std::string, typename T::mapped_type>) {
      std::map<std::string, std::string> vars;
      for (const auto& [k, v] : value) vars.emplace(std::string(k), std::string(v));
      env_vars_ = std::move(vars);
    } else {
      static_assert(sizeof(T) == 0, "prism: RuntimeEnv env_vars is a map of strings to strings");
    }
  }
  /// Field `name` as T (for "env_vars": a map of strings to strings). Throws Error if it is
  /// not set.
  template <typename T>
  T Get(const std::string& name) const {
    RequireEnvVars(name, "Get");
    if (!env_vars_) throw Error("prism: RuntimeEnv::Get: the field env_vars is not set");
    return T(env_vars_->begin(), env_vars_->end());
  }
  /// Whether field `name` is set.
  bool Contains(const std::string& name) const { return name == "env_vars" && env_vars_.has_value(); }
  /// Removes field `name`; true if it was set.
  bool Remove(const std::string& name) {
    if (!Contains(name)) return false;
    env_vars_.reset();
    return true;
  }
  bool Empty() const { return !env_vars_.has_value(); }
  /// The env_vars field (empty if unset).
  std::map<std::string, std::string> EnvVars() const { return env_vars_.value_or(std::map<std::string, std::string>{}); }

 private:
  static void RequireEnvVars(const std::string& name, const char* what) {
    if (name == "env_vars") return;
    throw Error(std::string("prism: RuntimeEnv::") + what + "(\"" + name +
                "\"): Prism supports only env_vars. Ranks are the job's MPI processes, started "
                "by the launcher: Prism cannot install packages, a container or files for "
                "them; prepare them before the job starts");
  }
  std::optional<std::map<std::string, std::string>> env_vars_;
};

namespace internal {
/// Throws Error unless every variable of `env` already has that value in this process
/// (tasks share their rank's process, so a task cannot have an environment of its own).
inline void RequireJobEnvironment(const RuntimeEnv& env, const std::string& what) {
  for (const auto& [name, value] : env.EnvVars()) {
    const char* have = std::getenv(name.c_str());
    if (have != nullptr && value == have) continue;
    throw Error("prism: " + what + ": env var " + name + "=\"" + value + "\" differs from the job's (" +
                (have ? "\"" + std::string(have) + "\"" : std::string("unset")) +
                "). Tasks and actors run in their rank's process and share its environment: "
                "set the variable for the whole job (Config::env_vars, RayConfig::runtime_env)");
  }
}
}  // namespace internal

}  // namespace prism
