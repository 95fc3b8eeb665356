// prism._tune: the C++ half of prism.tune (python/prism/tune/ is the other half), Ray Tune's
// Python API over Prism's one Tune engine (prism/tune/tuner.h). The Tuner, its searchers and
// schedulers, the journal, checkpoints and results all stay in C++; only the user's
// trainable runs in Python.
//
// One trampoline trainable, PrismTunePythonTrial, is registered here (so on every rank that
// imported prism.tune before prism.init). Every Python experiment runs it: its Trainable::args
// carry the cloudpickled Python side of the trial (the user's function, the codecs of the
// config's values, the names of with_parameters inputs), and it calls
// prism.tune._session.run_trial with the trial's config as text on the executor's thread,
// holding the GIL as Python tasks do. tune.report goes back into C++ (tune::Report), with the
// GIL released only when it may wait (a deciding scheduler's answer, a checkpoint); a stop
// comes back as Python's _TrialStop (a BaseException user code does not catch), which the
// trampoline turns into the engine's TrialStopSignal.
//
// This module links prism_tune and prism_checkpoint but not the core: it is loaded after
// prism._prism, which is loaded with RTLD_GLOBAL and exports the core, so the process holds
// one copy of the core's globals (tests/python_tune/test_module.py checks this).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gil.h"
#include "stoppers.h"
#include "prism/api.h"
#include "prism/checkpoint.h"
#include "prism/platform/invoke.h"
#include "prism/tune/schedulers.h"
#include "prism/tune/searcher.h"
#include "prism/tune/search_space.h"
#include "prism/tune/tuner.h"
#include "python_searcher.h"

namespace py = pybind11;

namespace prism::python::tune_binding {

namespace tune = prism::tune;

/// A Python trainable's failure: what() is its traceback.
class PythonTrialError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The trial: runs the Python trainable its args name, with `config` as text.
void PrismTunePythonTrial(tune::Config config) {
  std::string outcome, text;
  {
    TaskGil gil;
    try {
      py::dict values;
      for (const auto& [k, v] : config.Values()) values[py::str(k)] = py::str(v);
      py::tuple r = py::module_::import("prism.tune._session").attr("run_trial")(values);
      outcome = r[0].cast<std::string>();
      text = r[1].cast<std::string>();
    } catch (py::error_already_set& e) {
      outcome = "error";
      text = std::string("prism.tune: the trial could not start its Python trainable: ") + e.what();
    }
  }
  if (outcome == "stop") throw tune::TrialStopSignal{};
  if (outcome != "ok") throw PythonTrialError(text);
}

// ---- values and domains -----------------------------------------------------------------

/// A Python bool, int, float or str as a hyperparameter value. Throws TypeError otherwise
/// (prism.tune encodes other values as text first).
tune::Value ToValue(const py::handle& v) {
  if (PyBool_Check(v.ptr())) return tune::Value(v.cast<bool>());
  if (PyLong_Check(v.ptr())) return tune::Value(v.cast<int64_t>());
  if (PyFloat_Check(v.ptr())) return tune::Value(v.cast<double>());
  if (PyUnicode_Check(v.ptr())) return tune::Value(v.cast<std::string>());
  throw py::type_error("prism.tune: a hyperparameter value must be a bool, int, float or str here, not " +
                       std::string(py::str(v.get_type().attr("__name__"))));
}

std::vector<tune::Value> ToValues(const py::iterable& values) {
  std::vector<tune::Value> out;
  for (py::handle v : values) out.push_back(ToValue(v));
  return out;
}

/// Runs `make`, turning the engine's prism::Error (bad arguments) into ValueError.
template <typename F>
auto Checked(F&& make) {
  try {
    return make();
  } catch (const py::error_already_set&) {
    throw;
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

/// A py::object that C++ may copy and drop without the GIL (a SampleFrom function is copied
/// with its Domain inside Fit): only the last owner touches Python, under the GIL.
std::shared_ptr<py::object> SharedPy(py::object o) {
  return std::shared_ptr<py::object>(new py::object(std::move(o)), [](py::object* p) {
    if (!Py_IsInitialized()) {
      p->release();  // the interpreter is gone: leak rather than touch it
      delete p;
      return;
    }
    py::gil_scoped_acquire gil;
    delete p;
  });
}

tune::Domain SampleFromPython(py::function fn) {
  auto shared = SharedPy(std::move(fn));
  return Checked([&] {
    return tune::SampleFrom([shared](const tune::Config& partial) -> tune::Value {
      py::gil_scoped_acquire gil;
      try {
        py::dict values;
        for (const auto& [k, v] : partial.Values()) values[py::str(k)] = py::str(v);
        return ToValue((*shared)(values));
      } catch (py::error_already_set& e) {
        throw Error(std::string("sample_from raised ") + e.what());
      }
    });
  });
}

tune::ParamSpace ToSpace(const std::vector<std::pair<std::string, tune::Domain>>& items) {
  tune::ParamSpace space;
  for (const auto& [k, d] : items) space.insert_or_assign(k, d);
  return space;
}

// ---- results ----------------------------------------------------------------------------

py::dict ToDict(const std::map<std::string, std::string>& m) {
  py::dict d;
  for (const auto& [k, v] : m) d[py::str(k)] = py::str(v);
  return d;
}

py::dict ResultDict(const tune::Result& r) {
  py::dict d;
  d["trial_id"] = r.trial_id;
  d["config"] = ToDict(r.config.Values());
  d["metrics"] = py::cast(r.metrics);
  d["checkpoint"] = r.checkpoint;
  d["path"] = r.path;
  d["error"] = r.error;
  d["status"] = std::string(tune::StatusName(r.status));
  return d;
}

/// Raises prism.tune.<name>(args...) (the Python half defines the classes).
template <typename... Args>
[[noreturn]] void Raise(const char* name, Args&&... args) {
  py::object cls = py::module_::import("prism.tune._errors").attr(name);
  py::object e = cls(std::forward<Args>(args)...);
  PyErr_SetObject(cls.ptr(), e.ptr());
  throw py::error_already_set();
}

/// Runs a Fit-like call without the GIL and turns the engine's exceptions into Python's.
template <typename F>
auto RunReleased(F&& run) -> decltype(run()) {
  std::string preempted_path, tune_error, error;
  int signal = 0;
  {
    ReleaseGil release;
    try {
      return run();
    } catch (const tune::TunePreemptedError& e) {
      preempted_path = e.ExperimentPath();
      signal = e.Signal();
      error = e.what();
    } catch (const tune::TuneError& e) {
      tune_error = e.what();
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (!preempted_path.empty()) Raise("TunePreemptedError", error, signal, preempted_path);
  if (!tune_error.empty()) Raise("TuneError", tune_error);
  Raise("TuneError", error);
}

struct TrainableSpec {
  py::bytes args;
  std::map<std::string, double> resources;
  std::map<std::string, uint64_t> parameters;  // with_parameters: name -> object id
};

tune::Trainable MakeTrainable(const py::bytes& args, const std::map<std::string, double>& resources,
                              const std::map<std::string, uint64_t>& parameters) {
  tune::Trainable t(PrismTunePythonTrial);
  t.args = std::string(args);
  t.resources = resources;
  for (const auto& [name, id] : parameters) {
    t.parameters.insert_or_assign(name, ObjectRef<std::string>(ObjectId(id)));
  }
  return t;
}

// ---- inside a trial ---------------------------------------------------------------------

/// tune::Report; a stop raises prism.tune._session._TrialStop. The GIL is released only
/// where the report may wait (tune::internal::ReportMayWait: a checkpoint's commit, or the
/// driver's answer when it decides on every report). Otherwise the report only publishes
/// the result (platform::Publish: it waits on nothing, and the core's threads that handle
/// the message never wait for the GIL: prism._events in src/python/module.cc), so keeping
/// the GIL cannot deadlock; releasing it and taking it back queued behind the other trials'
/// threads (perf/README.md, Tune against Optuna).
void Report(const std::map<std::string, double>& metrics, const std::optional<std::string>& checkpoint) {
  bool stop = false;
  std::string error;
  auto report = [&] {
    try {
      std::optional<Checkpoint> c;
      if (checkpoint) c = Checkpoint::FromDirectory(*checkpoint);
      tune::Report(metrics, c);
    } catch (const tune::TrialStopSignal&) {
      stop = true;
    } catch (const Error& e) {
      error = e.what();
    }
  };
  if (tune::internal::ReportMayWait(checkpoint.has_value())) {
    ReleaseGil release;
    report();
  } else {
    report();
  }
  if (stop) {
    py::object cls = py::module_::import("prism.tune._session").attr("_TrialStop");
    PyErr_SetNone(cls.ptr());
    throw py::error_already_set();
  }
  if (!error.empty()) throw std::runtime_error(error);
}

}  // namespace prism::python::tune_binding

PRISM_REMOTE(prism::python::tune_binding::PrismTunePythonTrial);

PYBIND11_MODULE(_tune, m) {
  using namespace prism::python::tune_binding;  // NOLINT(google-build-using-namespace)
  using prism::Error;
  m.doc() = "The C++ half of prism.tune (use prism.tune)";

  // The core this module resolved: prism._prism's (the test compares the two).
  m.def("_core_registry_address", [] {
    return reinterpret_cast<uintptr_t>(&prism::internal::FunctionRegistry::Instance());
  });
  m.def("value_text", [](const py::handle& v) { return tune::ToText(ToValue(v)); });

  py::class_<tune::Domain>(m, "Domain")
      .def("__repr__", &tune::Domain::ToString)
      .def("__str__", &tune::Domain::ToString);
  m.def("uniform", [](double lo, double hi) { return Checked([&] { return tune::Uniform(lo, hi); }); });
  m.def("quniform", [](double lo, double hi, double q) { return Checked([&] { return tune::QUniform(lo, hi, q); }); });
  m.def("loguniform", [](double lo, double hi, double base) {
    return Checked([&] { return tune::LogUniform(lo, hi, base); });
  });
  m.def("qloguniform", [](double lo, double hi, double q, double base) {
    return Checked([&] { return tune::QLogUniform(lo, hi, q, base); });
  });
  m.def("randn", [](double mean, double sd) { return Checked([&] { return tune::Randn(mean, sd); }); });
  m.def("qrandn", [](double mean, double sd, double q) { return Checked([&] { return tune::QRandn(mean, sd, q); }); });
  m.def("randint", [](int64_t lo, int64_t hi) { return Checked([&] { return tune::RandInt(lo, hi); }); });
  m.def("qrandint", [](int64_t lo, int64_t hi, int64_t q) { return Checked([&] { return tune::QRandInt(lo, hi, q); }); });
  m.def("lograndint", [](int64_t lo, int64_t hi, double base) {
    return Checked([&] { return tune::LogRandInt(lo, hi, base); });
  });
  m.def("qlograndint", [](int64_t lo, int64_t hi, int64_t q, double base) {
    return Checked([&] { return tune::QLogRandInt(lo, hi, q, base); });
  });
  m.def("choice", [](const py::iterable& v) { auto values = ToValues(v); return Checked([&] { return tune::Choice(values); }); });
  m.def("grid_search", [](const py::iterable& v) {
    auto values = ToValues(v);
    return Checked([&] { return tune::GridSearch(values); });
  });
  m.def("constant", [](const py::handle& v) { return tune::Domain(ToValue(v)); });
  m.def("sample_from", &SampleFromPython);
  m.def("validate_space", [](const std::vector<std::pair<std::string, tune::Domain>>& items) {
    Checked([&] { tune::ValidateParamSpace(ToSpace(items)); return 0; });
  });

  // Schedulers and searchers: opaque handles the Python classes make.
  py::class_<tune::TrialScheduler, std::shared_ptr<tune::TrialScheduler>>(m, "Scheduler")
      .def("debug_string", &tune::TrialScheduler::DebugString);
  m.def("fifo", [] { return std::shared_ptr<tune::TrialScheduler>(std::make_shared<tune::FIFOScheduler>()); });
  m.def("asha", [](std::string time_attr, std::string metric, std::string mode, double max_t, double grace_period,
                   double reduction_factor, int brackets, bool stop_last_trials, uint64_t seed) {
    return Checked([&] {
      tune::AsyncHyperBandOptions o{time_attr, metric, mode, max_t, grace_period, reduction_factor, brackets,
                                    stop_last_trials, seed};
      return std::shared_ptr<tune::TrialScheduler>(std::make_shared<tune::AsyncHyperBandScheduler>(o));
    });
  });
  m.def("asha_rungs", [](const std::shared_ptr<tune::TrialScheduler>& s) {
    auto* asha = dynamic_cast<tune::AsyncHyperBandScheduler*>(s.get());
    if (asha == nullptr) throw py::type_error("not an ASHA scheduler");
    return asha->Rungs();
  });
  m.def("hyperband", [](std::string time_attr, std::string metric, std::string mode, double max_t,
                        double reduction_factor, bool stop_last_trials) {
    return Checked([&] {
      tune::HyperBandOptions o{time_attr, metric, mode, max_t, reduction_factor, stop_last_trials};
      return std::shared_ptr<tune::TrialScheduler>(std::make_shared<tune::HyperBandScheduler>(o));
    });
  });
  m.def("median_stopping", [](std::string time_attr, std::string metric, std::string mode, double grace_period,
                              int min_samples_required, int min_time_slice, bool hard_stop) {
    return Checked([&] {
      tune::MedianStoppingOptions o{time_attr, metric, mode, grace_period, min_samples_required, min_time_slice,
                                    hard_stop};
      return std::shared_ptr<tune::TrialScheduler>(std::make_shared<tune::MedianStoppingRule>(o));
    });
  });
  m.def("pbt", [](std::string time_attr, std::string metric, std::string mode, double perturbation_interval,
                  double burn_in_period, const std::vector<std::pair<std::string, tune::Domain>>& mutations,
                  double quantile_fraction, double resample_probability, std::pair<double, double> factors,
                  uint64_t seed) {
    return Checked([&] {
      tune::PBTOptions o;
      o.time_attr = time_attr;
      o.metric = metric;
      o.mode = mode;
      o.perturbation_interval = perturbation_interval;
      o.burn_in_period = burn_in_period;
      o.hyperparam_mutations = ToSpace(mutations);
      o.quantile_fraction = quantile_fraction;
      o.resample_probability = resample_probability;
      o.perturbation_factors = factors;
      o.seed = seed;
      return std::shared_ptr<tune::TrialScheduler>(std::make_shared<tune::PopulationBasedTraining>(o));
    });
  });
  m.def("pbt_policy_log", [](const std::shared_ptr<tune::TrialScheduler>& s) {
    auto* pbt = dynamic_cast<tune::PopulationBasedTraining*>(s.get());
    if (pbt == nullptr) throw py::type_error("not a PopulationBasedTraining scheduler");
    py::list out;
    for (const auto& r : pbt->PolicyLog()) {
      out.append(py::make_tuple(r.time, r.trial, r.source, r.source_checkpoint, ToDict(r.old_config.Values()),
                                ToDict(r.new_config.Values())));
    }
    return out;
  });

  py::class_<tune::Searcher, std::shared_ptr<tune::Searcher>>(m, "Searcher");
  m.def("basic_variant", [] { return std::shared_ptr<tune::Searcher>(std::make_shared<tune::BasicVariantGenerator>()); });
  m.def("tpe", [](int n_startup_trials, int n_ei_candidates, double gamma, int max_good, std::string metric,
                  std::string mode) {
    return Checked([&] {
      tune::TPEOptions o{n_startup_trials, n_ei_candidates, gamma, max_good, metric, mode};
      return std::shared_ptr<tune::Searcher>(std::make_shared<tune::TPESearch>(o));
    });
  });
  m.def("concurrency_limiter", [](std::shared_ptr<tune::Searcher> inner, int max_concurrent) {
    return Checked([&] {
      return std::shared_ptr<tune::Searcher>(std::make_shared<tune::ConcurrencyLimiter>(inner, max_concurrent));
    });
  });
  BindPythonSearcher(m);  // python_searcher(bridge, name): a Python searcher (python_searcher.cc)

  // Results: the engine's ResultGrid, so the best result is its GetBestResult.
  py::class_<tune::ResultGrid>(m, "ResultGrid")
      .def("results", [](const tune::ResultGrid& g) {
        py::list out;
        for (const auto& r : g) out.append(ResultDict(r));
        return out;
      })
      // A trial's reports, converted only when asked (metrics_dataframe, get_dataframe):
      // converting every history at fit's return cost 60-90 ms for 9,600 results.
      .def("history", [](const tune::ResultGrid& g, size_t i, bool last_only) {
        const auto& h = g[i].metrics_history;
        if (last_only) return h.empty() ? py::list() : py::list(py::make_tuple(py::cast(h.back())));
        return py::list(py::cast(h));
      })
      .def("best_index", [](const tune::ResultGrid& g, const std::string& metric, const std::string& mode,
                            const std::string& scope) {
        return Checked([&] { return static_cast<size_t>(&g.GetBestResult(metric, mode, scope) - &g[0]); });
      });

  // What a trial runs: a Python function (python_trainable) or, made by prism._train, a
  // TorchTrainer (the engine's TorchTrainable), opaque to Python.
  py::class_<tune::Trainable>(m, "Trainable")
      .def_property_readonly("resources", [](const tune::Trainable& t) { return t.resources; });
  m.def("python_trainable", &MakeTrainable, py::arg("args"), py::arg("resources"), py::arg("parameters"));

  BindStoppers(m);  // Stopper and its factories (stoppers.cc)

  // The Tuner.
  py::class_<tune::Tuner>(m, "Tuner")
      .def(py::init([](const tune::Trainable& trainable, const std::vector<std::pair<std::string, tune::Domain>>& space, std::string metric,
                       std::string mode, int num_samples, std::shared_ptr<tune::Searcher> search_alg,
                       std::shared_ptr<tune::TrialScheduler> scheduler, int max_concurrent_trials,
                       double time_budget_s, uint64_t seed, std::string name, std::string storage_path,
                       const std::map<std::string, double>& stop, int max_failures, bool fail_fast,
                       int num_to_keep, std::string score_attribute, std::string score_order, int verbose,
                       double status_interval_s,
                       std::shared_ptr<tune::Stopper> stopper /* RunConfig.stop's Stopper, or None */) {
             tune::TuneConfig tc{metric, mode, search_alg, scheduler, num_samples, max_concurrent_trials,
                                 time_budget_s, seed};
             tune::RunConfig rc;
             rc.name = name;
             rc.storage_path = storage_path;
             rc.stop = stop;
             rc.stopper = stopper;
             rc.failure_config = {max_failures, fail_fast};
             rc.checkpoint_config.num_to_keep = num_to_keep;
             rc.checkpoint_config.checkpoint_score_attribute = score_attribute;
             rc.checkpoint_config.checkpoint_score_order = score_order;
             rc.verbose = verbose;
             rc.status_interval_s = status_interval_s;
             return Checked([&] { return tune::Tuner(trainable, ToSpace(space), tc, rc); });
           }))
      .def("fit",
           [](tune::Tuner& t) {
             tune::ResultGrid grid = RunReleased([&] { return t.Fit(); });
             std::string path = grid.experiment_path();
             return py::make_tuple(py::cast(std::move(grid)), path);
           })
      .def("experiment_path", &tune::Tuner::ExperimentPath)
      .def_static("can_restore", &tune::Tuner::CanRestore)
      .def_static("restore", [](const std::string& path, const tune::Trainable& trainable,
                                const std::vector<std::pair<std::string, tune::Domain>>& space,
                                bool resume_unfinished, bool resume_errored, bool restart_errored,
                                std::shared_ptr<tune::Searcher> search_alg,
                                std::shared_ptr<tune::TrialScheduler> scheduler,
                                std::shared_ptr<tune::Stopper> stopper /* the experiment's, or None */) {
        tune::TuneConfig tc;
        tc.search_alg = search_alg;
        tc.scheduler = scheduler;
        auto s = ToSpace(space);
        return RunReleased([&] {
          return tune::Tuner::Restore(path, trainable, s, resume_unfinished, resume_errored, restart_errored, tc,
                                      stopper);
        });
      });

  // Inside a trial.
  m.def("report", &Report, py::arg("metrics"), py::arg("checkpoint") = py::none());
  m.def("get_checkpoint", []() -> std::optional<std::string> {
    auto c = tune::GetCheckpoint();
    if (!c) return std::nullopt;
    return c->path();
  });
  m.def("in_trial", [] {
    try {
      tune::TrialId();
      return true;
    } catch (const Error&) {
      return false;
    }
  });
  m.def("trial_id", [] { return tune::TrialId(); });
  m.def("trial_dir", [] { return tune::TrialDir(); });
  m.def("trainable_args", [] { return py::bytes(prism::tune::internal::TrainableArgs()); });
  m.def("parameter_id", [](const std::string& name) { return prism::tune::internal::ParameterId(name).Value(); });
}
