#pragma once
// A Python environment (gymnasium's reset/step shape) inside prism::rl's C++ env runners.
//
// prism.rllib gives a Python env (a class, or a creator registered with register_env) a name
// of its own, "python:<qualname>:<hash>", and registers that name in prism::rl's registry on
// every rank (RegisterPythonEnvEverywhere: one zero-CPU task pinned to each rank). The
// registered factory holds the cloudpickled (creator, env_config) and makes a PythonEnv: a
// prism::rl::Env whose Reset and Step take the GIL (TaskGil: the env runner's actor thread,
// or the driver's thread with the GIL released by the binding) and call the adapter
// prism.rllib._env.EnvAdapter, which checks what the user's env returns. So the runners,
// the samplers, the learners and the checkpoints stay the C++ engine's; only reset and step
// run in Python.
//
// A Python exception in the env becomes a prism::Error whose message carries the traceback
// and the pickled exception after the core's attachment marker, as a Python task's error
// does (prism._worker.describe): it travels to the driver as the runner task's error and
// prism.rllib raises it again as a TaskError that is also the env's exception type.

#include <string>

namespace prism::python::rllib_binding {

/// Registers `name` here (this rank), unless it is registered already. Thread-safe.
void RegisterPythonEnvHere(std::string name, std::string pickled_creator);

/// Registers `name` on every rank of the job (here too), waiting up to `timeout_ms` for
/// each. Throws prism::Error naming a rank that did not answer or lacks prism.rllib's
/// functions (it did not import prism.rllib before prism.init()).
void RegisterPythonEnvEverywhere(const std::string& name, const std::string& pickled_creator, int64_t timeout_ms);

/// Checks that every rank loaded prism._rllib before prism.init() (a zero-CPU task pinned to
/// each); throws prism::Error saying what to do otherwise. Remembers a success.
void CheckEveryRankLoaded(int64_t timeout_ms);

}  // namespace prism::python::rllib_binding
