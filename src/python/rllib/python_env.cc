// PythonEnv and its registration on every rank (python_env.h).

#include "python_env.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "gil.h"
#include "prism/api.h"
#include "prism/errors.h"
#include "prism/rl/env.h"
#include "prism/runtime_context.h"
#include "prism/scheduling_strategy.h"

namespace py = pybind11;

namespace prism::python::rllib_binding {
namespace {

/// A py::object C++ may drop on any thread: the last owner takes the GIL to release it (and
/// leaks it once the interpreter is gone).
std::shared_ptr<py::object> SharedPy(py::object o) {
  return std::shared_ptr<py::object>(new py::object(std::move(o)), [](py::object* p) {
    if (!Py_IsInitialized()) {
      p->release();
      delete p;
      return;
    }
    TaskGil gil;
    delete p;
  });
}

/// The error a Python exception in the env becomes: what it was doing, then the traceback
/// and the pickled exception (prism.rllib._env.describe), which the driver raises again.
Error PythonFailure(const std::string& env_name, const std::string& what, py::error_already_set& e) {
  std::string text;
  try {
    text = py::module_::import("prism.rllib._env")
               .attr("describe")(e.type(), e.value(), e.trace())
               .cast<std::string>();
  } catch (py::error_already_set& inner) {
    text = std::string(e.what()) + " (and describing it failed: " + inner.what() + ")";
  }
  return Error("prism.rllib: the Python environment " + env_name + " failed in " + what + ": " + text);
}

/// Copies a float32 array (the adapter made it C-contiguous) into `out`.
void CopyFloats(const py::handle& array, std::vector<float>& out) {
  auto a = py::reinterpret_borrow<py::array_t<float, py::array::c_style>>(array);
  out.resize(static_cast<size_t>(a.size()));
  if (a.size() > 0) std::memcpy(out.data(), a.data(), sizeof(float) * out.size());
}

rl::Space ToSpace(const py::handle& spec) {
  auto t = py::reinterpret_borrow<py::tuple>(spec);
  if (t[0].cast<std::string>() == "discrete") return rl::Space::Discrete(t[1].cast<int64_t>());
  std::vector<float> low, high;
  CopyFloats(t[1], low);
  CopyFloats(t[2], high);
  return rl::Space::Box(std::move(low), std::move(high), t[3].cast<std::vector<int64_t>>());
}

/// A Python env behind prism::rl::Env: every call takes the GIL and goes through the
/// adapter (prism.rllib._env.EnvAdapter), which checks the user's return values.
class PythonEnv : public rl::Env {
 public:
  PythonEnv(std::string name, py::object adapter) : name_(std::move(name)) {
    py::tuple spaces = adapter.attr("spaces")();
    observation_space_ = ToSpace(spaces[0]);
    action_space_ = ToSpace(spaces[1]);
    reset_ = SharedPy(adapter.attr("reset"));
    step_ = SharedPy(adapter.attr("step"));
    adapter_ = SharedPy(std::move(adapter));
  }

  const rl::Space& observation_space() const override { return observation_space_; }
  const rl::Space& action_space() const override { return action_space_; }

  std::vector<float> Reset(std::optional<uint64_t> seed) override {
    std::vector<float> obs;
    TaskGil gil;
    try {
      py::object r = (*reset_)(seed ? py::object(py::int_(*seed)) : py::object(py::none()));
      CopyFloats(r, obs);
    } catch (py::error_already_set& e) {
      throw PythonFailure(name_, "reset()", e);
    }
    return obs;
  }

  rl::StepResult Step(const rl::Action& action) override {
    rl::StepResult s;
    TaskGil gil;
    try {
      py::object a;
      if (action_space_.kind == rl::Space::Kind::kDiscrete) {
        a = py::int_(action.index);
      } else {
        py::array_t<float> values(static_cast<py::ssize_t>(action.values.size()));
        std::memcpy(values.mutable_data(), action.values.data(), sizeof(float) * action.values.size());
        a = std::move(values);
      }
      py::tuple r = (*step_)(a);
      CopyFloats(r[0], s.observation);
      s.reward = r[1].cast<double>();
      s.terminated = r[2].cast<bool>();
      s.truncated = r[3].cast<bool>();
    } catch (py::error_already_set& e) {
      throw PythonFailure(name_, "step(" + rl::ToString(action) + ")", e);
    }
    return s;
  }

 private:
  std::string name_;
  rl::Space observation_space_, action_space_;
  std::shared_ptr<py::object> adapter_, reset_, step_;
};

bool IsRegistered(const std::string& name) {
  for (const auto& n : rl::RegisteredEnvs()) {
    if (n == name) return true;
  }
  return false;
}

/// A no-op every rank runs if it loaded prism._rllib (CheckEveryRankLoaded).
int PrismRllibLoaded() { return 1; }

/// Runs `fn(args...)` once on every rank (a zero-CPU task pinned to each) and waits for all,
/// naming a rank that lacks prism._rllib or does not answer within `timeout_ms`.
template <typename F, typename... Args>
void OnEveryRank(const char* what, int64_t timeout_ms, F fn, const Args&... args) {
  const int world = GetRuntimeContext().GetWorldSize();
  std::vector<ObjectRef<std::invoke_result_t<F, Args...>>> refs;
  for (int rank = 0; rank < world; ++rank) {
    refs.push_back(Task(fn)
                       .SetResource("CPU", 0)
                       .SetSchedulingStrategy(NodeAffinitySchedulingStrategy{rank, false})
                       .Remote(args...));
  }
  for (int rank = 0; rank < world; ++rank) {
    try {
      Get(refs[rank], timeout_ms);
    } catch (const TimeoutError&) {
      throw Error(std::string("prism.rllib: ") + what + ": rank " + std::to_string(rank) + " did not answer within " +
                  std::to_string(timeout_ms / 1000) + " s");
    } catch (const TaskError& e) {
      const std::string message = e.what();
      if (message.find("not registered") != std::string::npos) {
        throw Error("prism.rllib: rank " + std::to_string(rank) +
                    " has not loaded prism.rllib: import it at the top of the script, before prism.init(), "
                    "so that every rank runs the import (e.g. `from prism.rllib.algorithms.ppo import "
                    "PPOConfig` above prism.init())");
      }
      throw;
    }
  }
}

std::atomic<bool> g_every_rank_loaded{false};

}  // namespace

void RegisterPythonEnvHere(std::string name, std::string pickled_creator) {
  if (IsRegistered(name)) return;
  auto pickled = std::make_shared<const std::string>(std::move(pickled_creator));
  try {
    rl::RegisterEnv(name, [name, pickled](const rl::EnvConfig&) -> std::unique_ptr<rl::Env> {
      TaskGil gil;
      try {
        py::object adapter =
            py::module_::import("prism.rllib._env").attr("make_adapter")(py::bytes(*pickled), name);
        return std::make_unique<PythonEnv>(name, std::move(adapter));
      } catch (py::error_already_set& e) {
        throw PythonFailure(name, "its creation", e);
      }
    });
  } catch (const Error&) {
    if (!IsRegistered(name)) throw;  // another thread registered it first: the same bytes
  }
}

void CheckEveryRankLoaded(int64_t timeout_ms) {
  if (g_every_rank_loaded.load()) return;
  OnEveryRank("checking that every rank imported prism.rllib", timeout_ms, &PrismRllibLoaded);
  g_every_rank_loaded = true;
}

void RegisterPythonEnvEverywhere(const std::string& name, const std::string& pickled_creator, int64_t timeout_ms) {
  RegisterPythonEnvHere(name, pickled_creator);
  if (!IsInitialized()) return;
  CheckEveryRankLoaded(timeout_ms);
  OnEveryRank("registering a Python environment", timeout_ms, &RegisterPythonEnvHere, name, pickled_creator);
}

}  // namespace prism::python::rllib_binding

PRISM_REMOTE(prism::python::rllib_binding::RegisterPythonEnvHere, prism::python::rllib_binding::PrismRllibLoaded);
