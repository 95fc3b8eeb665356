// prism._rllib: the C++ half of prism.rllib (python/prism/rllib/ is the other half), RLlib's
// Python API over Prism's one RL engine (prism/rl/algorithm.h, prism/rl/dqn.h). The configs'
// checks, the env runner actors, the samplers, the learners (local or a learner group), the
// checkpoints and the Tune trial all stay in C++; Python holds a config as the engine's JSON
// settings (PPOConfig::ToJson's keys) and calls build, train, save and restore here with the
// GIL released. Only a Python environment's reset and step run in Python (python_env.h).
//
//   prism.rllib PPOConfig (settings dict) --to_json--> build("PPO", json)
//       -> rl::PPOConfig::FromJson(json).Build() -> Algorithm (this module's handle)
//   algo.train() -> rl::Algorithm::Train() -> TrainResult::ToRllibMap() (Python nests its
//       "a/b" paths into RLlib's result dict: env_runners/..., learners/default_policy/...)
//   Tuner("PPO", param_space=config) -> tune_trainable("PPO", json) -> tune::AlgorithmTrainable
//       (prism/rl/tune.h), a prism._tune.Trainable the Tuner runs like any other.
//
// The module registers remote functions (the env runner actors of prism::rl, its Tune trial,
// this module's RegisterPythonEnvHere), so every rank loads it before prism.init(). It links
// prism::rl's archives, the Train checkpoint archive (HDF5 state dicts), collectives and
// LibTorch, but not the core, Tune or the checkpoint store: their symbols come from
// prism._prism and prism._tune, loaded first with RTLD_GLOBAL, so the process holds one copy
// of each engine's globals (a test compares the core registry's address).

#include <ATen/Parallel.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gil.h"
#include "prism/api.h"
#include "prism/errors.h"
#include "prism/remote.h"
#include "prism/rl/algorithm.h"
#include "prism/rl/dqn.h"
#include "prism/rl/env.h"
#include "prism/rl/tune.h"
#include "python_env.h"

namespace py = pybind11;

namespace prism::python::rllib_binding {
namespace {

constexpr const char* kAttachmentMarker = "\n[prism-python-exception:";  // the core's

/// A built algorithm; stop() ends it (its runner actors) before Python drops the handle.
struct PyAlgorithm {
  std::unique_ptr<rl::Algorithm> algo;

  rl::Algorithm& Get() {
    if (!algo) throw py::value_error("prism.rllib: this Algorithm was stopped (algo.stop()); build a new one");
    return *algo;
  }
};

/// Runs `fn` without the GIL. A config's or checkpoint's prism::Error (a bad setting, a
/// missing file) becomes ValueError; one carrying a Python env's exception (the attachment
/// marker) and the core's typed errors (a runner's TaskError) pass through for prism.rllib
/// to raise again as the env's own exception.
template <typename F>
auto ConfigCall(F&& fn) -> decltype(fn()) {
  std::string bad;
  {
    ReleaseGil release;
    try {
      return fn();
    } catch (const TaskError&) {
      throw;
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.find(kAttachmentMarker) != std::string::npos) throw;
      bad = what;
    }
  }
  throw py::value_error(bad);
}

rl::PPOConfig PpoFromJson(const std::string& json) { return rl::PPOConfig::FromJson(json); }
rl::DQNConfig DqnFromJson(const std::string& json) { return rl::DQNConfig::FromJson(json); }

void CheckAlgorithm(const std::string& algorithm) {
  if (algorithm != "PPO" && algorithm != "DQN") {
    throw py::value_error("prism.rllib: unknown algorithm \"" + algorithm + "\"; prism::rl has PPO and DQN");
  }
}

py::tuple SpaceSpec(const rl::Space& s) {
  if (s.kind == rl::Space::Kind::kDiscrete) return py::make_tuple("discrete", s.n);
  return py::make_tuple("box", s.low, s.high, s.shape);
}

}  // namespace
}  // namespace prism::python::rllib_binding

PYBIND11_MODULE(_rllib, m) {
  using namespace prism::python::rllib_binding;  // NOLINT(google-build-using-namespace)
  namespace rl = prism::rl;
  using prism::python::ReleaseGil;
  m.doc() = "The C++ half of prism.rllib (use prism.rllib)";

  // The core this module resolved: prism._prism's (the test compares the two).
  m.def("_core_registry_address", [] {
    return reinterpret_cast<uintptr_t>(&prism::internal::FunctionRegistry::Instance());
  });

  // ---- configs: the engine's JSON settings ----------------------------------------------
  m.def("default_config", [](const std::string& algorithm) {
    CheckAlgorithm(algorithm);
    return algorithm == "PPO" ? rl::PPOConfig().ToJson() : rl::DQNConfig().ToJson();
  });
  // The config after the engine read it (FromJson then ToJson), validated: ValueError naming
  // what to change.
  m.def("validate", [](const std::string& algorithm, const std::string& json) {
    CheckAlgorithm(algorithm);
    return ConfigCall([&] {
      if (algorithm == "PPO") {
        auto c = PpoFromJson(json);
        c.Validate();
        return c.ToJson();
      }
      auto c = DqnFromJson(json);
      c.Validate();
      return c.ToJson();
    });
  });

  // ---- environments ----------------------------------------------------------------------
  m.def("registered_envs", &rl::RegisteredEnvs);
  m.def("env_spaces", [](const std::string& name) {
    auto spaces = ConfigCall([&] {
      auto env = rl::MakeEnv(name, {});
      return std::make_pair(env->observation_space(), env->action_space());
    });
    return py::make_tuple(SpaceSpec(spaces.first), SpaceSpec(spaces.second));
  });
  m.def("register_python_env", [](const std::string& name, const py::bytes& pickled, double timeout_s) {
    const std::string bytes = pickled;
    ConfigCall([&] {
      RegisterPythonEnvEverywhere(name, bytes, static_cast<int64_t>(timeout_s * 1000));
      return 0;
    });
  });
  m.def("check_every_rank", [](double timeout_s) {
    ConfigCall([&] {
      CheckEveryRankLoaded(static_cast<int64_t>(timeout_s * 1000));
      return 0;
    });
  });

  // ---- the algorithm ---------------------------------------------------------------------
  py::class_<PyAlgorithm>(m, "Algorithm")
      .def("train",
           [](PyAlgorithm& a) {
             rl::Algorithm& algo = a.Get();
             std::map<std::string, double> result;
             {
               ReleaseGil release;
               result = algo.Train().ToRllibMap(algo.algorithm_name());
             }
             return result;
           })
      .def("save",
           [](PyAlgorithm& a, const std::string& dir) {
             rl::Algorithm& algo = a.Get();
             ConfigCall([&] {
               algo.Save(dir);
               return 0;
             });
           })
      .def("restore",
           [](PyAlgorithm& a, const std::string& dir) {
             rl::Algorithm& algo = a.Get();
             ConfigCall([&] {
               algo.Restore(dir);
               return 0;
             });
           })
      .def("compute_single_action",
           [](PyAlgorithm& a, py::array_t<float, py::array::c_style | py::array::forcecast> obs,
              bool explore) -> py::object {
             rl::Algorithm& algo = a.Get();
             std::vector<float> o(obs.data(), obs.data() + obs.size());
             rl::Action action;
             try {
               action = algo.ComputeSingleAction(o, explore);
             } catch (const prism::Error& e) {
               throw py::value_error(e.what());
             }
             if (action.values.empty()) return py::int_(action.index);
             return py::array_t<float>(static_cast<py::ssize_t>(action.values.size()), action.values.data());
           })
      .def("algorithm_name", [](PyAlgorithm& a) { return a.Get().algorithm_name(); })
      .def("config_json",
           [](PyAlgorithm& a) {
             rl::Algorithm& algo = a.Get();
             return algo.algorithm_name() == "PPO" ? algo.config().ToJson() : algo.dqn_config().ToJson();
           })
      .def("iteration", [](PyAlgorithm& a) { return a.Get().iteration(); })
      .def("num_env_steps_sampled_lifetime", [](PyAlgorithm& a) { return a.Get().num_env_steps_sampled_lifetime(); })
      .def("kill_env_runner", [](PyAlgorithm& a, int index) {
        rl::Algorithm& algo = a.Get();
        ConfigCall([&] {
          algo.KillEnvRunner(index);
          return 0;
        });
      })
      .def("stop", [](PyAlgorithm& a) {
        ReleaseGil release;  // the runners' ends are core calls; a Python env's drop takes the GIL
        a.algo.reset();
      });

  m.def("build", [](const std::string& algorithm, const std::string& json) {
    CheckAlgorithm(algorithm);
    auto algo = ConfigCall([&] {
      // The learner's tiny MLPs: one LibTorch thread is fastest and leaves the runners the
      // other cores (apps/rl_cartpole does the same).
      at::set_num_threads(1);
      if (algorithm == "PPO") return std::make_unique<rl::Algorithm>(PpoFromJson(json).Build());
      return std::make_unique<rl::Algorithm>(DqnFromJson(json).Build());
    });
    return PyAlgorithm{std::move(algo)};
  });
  m.def("from_checkpoint", [](const std::string& dir) {
    auto algo = ConfigCall([&] {
      at::set_num_threads(1);
      return std::make_unique<rl::Algorithm>(rl::Algorithm::FromCheckpoint(dir));
    });
    return PyAlgorithm{std::move(algo)};
  });

  // ---- Tune: the engine's AlgorithmTrainable (prism/rl/tune.h) ---------------------------
  // Returns prism._tune.Trainable: Tune's engine resolves from prism._tune (RTLD_GLOBAL), so
  // the trial reports to the Tuner that runs it.
  m.def("tune_trainable", [](const std::string& algorithm, const std::string& json, int checkpoint_frequency) {
    CheckAlgorithm(algorithm);
    py::module_::import("prism._tune");  // registers the Trainable type
    prism::tune::AlgorithmTrainableOptions options;
    options.checkpoint_frequency = checkpoint_frequency;
    options.rllib_result_names = true;  // metric="env_runners/episode_return_mean", as in Ray
    return ConfigCall([&] {
      if (algorithm == "PPO") return prism::tune::AlgorithmTrainable(PpoFromJson(json), options);
      return prism::tune::AlgorithmTrainable(DqnFromJson(json), options);
    });
  });
}
