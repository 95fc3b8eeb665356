// prism._tune's stoppers: prism.tune.stopper's built-ins are the engine's (prism/tune/
// stopper.h), held by the Python objects as opaque Stopper handles, so the Tuner asks them
// without Python. A stopper written in Python (a prism.tune.stopper.Stopper subclass, a
// plain function through FunctionStopper, or one inside a CombinedStopper) is called through
// PythonStopper, the one trampoline here.
//
// The Tuner asks its stopper on its driver thread, the thread that called fit(), which runs
// the experiment with the GIL released (tune_module.cc's RunReleased): the trampoline takes
// the GIL for each call. A Python exception becomes a prism::Error holding its traceback
// (prism.tune.stopper._invoke formats it); the Tuner ends the experiment on it, running
// trials stopped, and fit() raises TuneError with that text. It never crosses C++ frames as
// a Python exception, and nothing waits on it.
//
// State for Restore: a Python stopper's SaveState is the object pickled (cloudpickle, as
// text), RestoreState replaces the object with the unpickled one (Ray pickles its stopper
// into the experiment's state the same way).
#include "stoppers.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "prism/errors.h"
#include "prism/tune/stopper.h"

namespace py = pybind11;

namespace prism::python::tune_binding {

namespace tune = prism::tune;

namespace {

/// A py::object that C++ owns and may drop on a thread without the GIL.
std::shared_ptr<py::object> HoldPy(py::object o) {
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

/// A result as Ray's stoppers see it: the metrics (training_iteration an int) and trial_id.
py::dict StopperResult(const std::string& trial_id, const tune::Metrics& result) {
  py::dict d;
  for (const auto& [k, v] : result) {
    if (k == "training_iteration" && v == static_cast<double>(static_cast<int64_t>(v))) {
      d[py::str(k)] = py::int_(static_cast<int64_t>(v));
    } else {
      d[py::str(k)] = v;
    }
  }
  d["trial_id"] = trial_id;
  return d;
}

/// A Python result dict as the engine's Metrics: its numbers (bools, ints, floats); other
/// values (trial_id, config) are no metric.
tune::Metrics StopperMetrics(const py::dict& result) {
  tune::Metrics m;
  for (auto [k, v] : result) {
    if (!PyUnicode_Check(k.ptr())) continue;
    if (PyBool_Check(v.ptr()) || PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr())) {
      m[k.cast<std::string>()] = v.cast<double>();
    }
  }
  return m;
}

py::object StopperModule() { return py::module_::import("prism.tune.stopper"); }

/// Calls `fn(args...)` through prism.tune.stopper._invoke, holding the GIL: its truth, or
/// a prism::Error with the traceback, naming `what`.
template <typename... Args>
bool CallStopper(const py::object& fn, const std::string& what, Args&&... args) {
  py::gil_scoped_acquire gil;
  std::string message;
  try {
    py::tuple r = StopperModule().attr("_invoke")(fn, std::forward<Args>(args)...);
    if (r[0].cast<bool>()) return r[1].cast<bool>();
    message = r[1].cast<std::string>();
  } catch (py::error_already_set& e) {  // a BaseException (KeyboardInterrupt) or an import error
    message = e.what();
  }
  throw Error("prism.tune: " + what + " raised:\n" + message);
}

class PythonStopper : public tune::Stopper {
 public:
  /// `stopper`: a prism.tune.stopper.Stopper whose __call__ or stop_all is Python. Call with
  /// the GIL held.
  explicit PythonStopper(py::object stopper)
      : name_(py::str(stopper.get_type().attr("__name__")).cast<std::string>()), stopper_(HoldPy(std::move(stopper))) {}

  bool ShouldStop(const std::string& trial_id, const tune::Metrics& result) override {
    py::gil_scoped_acquire gil;
    return CallStopper(*stopper_, "the stopper " + name_ + "(trial_id, result)", trial_id, StopperResult(trial_id, result));
  }

  bool StopAll() override {
    py::gil_scoped_acquire gil;
    return CallStopper(stopper_->attr("stop_all"), "the stopper " + name_ + ".stop_all()");
  }

  std::string SaveState() const override {
    py::gil_scoped_acquire gil;
    try {
      return StopperModule().attr("_save")(*stopper_).cast<std::string>();
    } catch (py::error_already_set& e) {
      throw Error("the stopper " + name_ + " does not pickle: " + e.what());
    }
  }

  void RestoreState(const std::string& state) override {
    if (state.empty()) return;
    py::gil_scoped_acquire gil;
    try {
      stopper_ = HoldPy(StopperModule().attr("_load")(state));
    } catch (py::error_already_set& e) {
      throw Error("prism.tune: the stopper " + name_ + " cannot be restored from the journal: " + e.what());
    }
  }

 private:
  std::string name_;
  std::shared_ptr<py::object> stopper_;
};

/// Runs `make`, turning the engine's prism::Error (bad arguments) into ValueError.
template <typename F>
std::shared_ptr<tune::Stopper> CheckedStopper(F&& make) {
  try {
    return make();
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace

void BindStoppers(py::module_& m) {
  // Called from Python (a built-in used by hand, or inside a user's stopper) with the GIL held.
  py::class_<tune::Stopper, std::shared_ptr<tune::Stopper>>(m, "Stopper")
      .def("should_stop", [](tune::Stopper& s, const std::string& trial_id, const py::dict& result) {
        return s.ShouldStop(trial_id, StopperMetrics(result));
      })
      .def("stop_all", &tune::Stopper::StopAll)
      .def("save_state", &tune::Stopper::SaveState)
      .def("restore_state", [](tune::Stopper& s, const std::string& state) {
        try {
          s.RestoreState(state);
        } catch (const Error& e) {
          throw py::value_error(e.what());
        }
      });

  m.def("maximum_iteration_stopper", [](int64_t max_iter) {
    return CheckedStopper([&] { return std::make_shared<tune::MaximumIterationStopper>(max_iter); });
  });
  m.def("trial_plateau_stopper", [](std::string metric, double std_dev, int num_results, int grace_period,
                                    std::optional<double> metric_threshold, std::string mode) {
    return CheckedStopper([&] {
      tune::TrialPlateauOptions o{metric, std_dev, num_results, grace_period, metric_threshold, mode};
      return std::make_shared<tune::TrialPlateauStopper>(o);
    });
  });
  m.def("experiment_plateau_stopper", [](std::string metric, double std_dev, int top, std::string mode,
                                         int patience) {
    return CheckedStopper([&] {
      tune::ExperimentPlateauOptions o{metric, std_dev, top, mode, patience};
      return std::make_shared<tune::ExperimentPlateauStopper>(o);
    });
  });
  m.def("timeout_stopper", [](double timeout_s) {
    return CheckedStopper([&] { return std::make_shared<tune::TimeoutStopper>(timeout_s); });
  });
  m.def("function_stopper", [](py::function fn) {
    std::shared_ptr<py::object> held = HoldPy(fn);
    const std::string name = py::str(py::getattr(fn, "__qualname__", py::str("function"))).cast<std::string>();
    return CheckedStopper([&] {
      return std::make_shared<tune::FunctionStopper>([held, name](const std::string& trial_id, const tune::Metrics& r) {
        py::gil_scoped_acquire gil;
        return CallStopper(*held, "the stop function " + name + "(trial_id, result)", trial_id, StopperResult(trial_id, r));
      });
    });
  });
  m.def("combined_stopper", [](const std::vector<std::shared_ptr<tune::Stopper>>& stoppers) {
    return CheckedStopper([&] { return std::make_shared<tune::CombinedStopper>(stoppers); });
  });
  m.def("python_stopper", [](py::object stopper) -> std::shared_ptr<tune::Stopper> {
    return std::make_shared<PythonStopper>(std::move(stopper));
  });
}

}  // namespace prism::python::tune_binding
