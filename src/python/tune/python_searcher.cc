// PythonSearcher: a Python object as the C++ Tuner's searcher (prism._tune.python_searcher).
//
// The Tuner asks its searcher on its driver thread, the thread that called fit(), which runs
// the experiment with the GIL released (tune_module.cc's RunReleased). Each call here takes
// the GIL and forwards to the "bridge" that prism.tune.search._python_searcher made around
// the user's searcher (OptunaSearch, or any prism.tune.search.Searcher subclass with Ray's
// suggest/on_trial_result/on_trial_complete). Configs cross as the engine keeps them, text
// per key: the bridge encodes a suggested dict with the param_space's codecs (as a trial's
// config is decoded, prism/tune/_space.py) and decodes the configs it is told about.
//
//   C++ Searcher call                 bridge method (Python)          returns
//   Setup(space, metric, mode, n, s)  setup(metric, mode, n, seed)    None
//   Suggest(trial_id)                 suggest(trial_id)               ("config", {key: text}),
//                                                                     ("wait", None), ("finished", None)
//   OnTrialResult(id, metrics)        on_trial_result(id, {k: float})  None
//   OnTrialComplete(id, cfg, r, err)  on_trial_complete(id, {k: text}, {k: float} | None, err)
//   SaveState / RestoreState          save_state() -> str / restore_state(str)
//   TotalTrials()                     total_trials() -> int           (-1: unknown)
//
// A Python exception becomes a prism::Error whose message holds the Python traceback; the
// Tuner ends the experiment on it (running trials stopped, fit() raises TuneError), never
// leaving Fit with trials running or crashing the process.
#include "python_searcher.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "prism/errors.h"
#include "prism/tune/searcher.h"

namespace py = pybind11;

namespace prism::python::tune_binding {

namespace tune = prism::tune;

namespace {

class PythonSearcher : public tune::Searcher {
 public:
  /// `bridge`: a prism.tune.search._python_searcher._Bridge; `name` names the user's
  /// searcher in messages. Call with the GIL held.
  PythonSearcher(py::object bridge, std::string name)
      : bridge_(new py::object(std::move(bridge))), name_(std::move(name)) {}

  ~PythonSearcher() override {
    // The Tuner may drop its searcher on a thread without the GIL.
    if (!Py_IsInitialized()) {
      bridge_->release();  // the interpreter is gone: leak rather than touch it
      return;
    }
    py::gil_scoped_acquire gil;
    bridge_.reset();
  }

  PythonSearcher(const PythonSearcher&) = delete;
  PythonSearcher& operator=(const PythonSearcher&) = delete;

  void Setup(const tune::ParamSpace& /*space: the bridge holds the Python one*/,
             const std::string& metric, const std::string& mode, int num_samples,
             uint64_t seed) override {
    Call("setup", [&](py::object& b) { b.attr("setup")(metric, mode, num_samples, seed); });
  }

  tune::Suggestion Suggest(const std::string& trial_id) override {
    tune::Suggestion s;
    Call("suggest", [&](py::object& b) {
      py::tuple r = b.attr("suggest")(trial_id);
      const std::string kind = r[0].cast<std::string>();
      if (kind == "wait") {
        s = tune::Suggestion::Wait();
      } else if (kind == "finished") {
        s = tune::Suggestion::Finished();
      } else {
        tune::Config config;
        for (auto [k, v] : r[1].cast<py::dict>()) config.Set(k.cast<std::string>(), v.cast<std::string>());
        s = tune::Suggestion::Of(std::move(config));
      }
    });
    return s;
  }

  void OnTrialResult(const std::string& trial_id, const tune::Metrics& result) override {
    Call("on_trial_result", [&](py::object& b) { b.attr("on_trial_result")(trial_id, ToDict(result)); });
  }

  void OnTrialComplete(const std::string& trial_id, const tune::Config& config, const tune::Metrics* result,
                       bool error) override {
    Call("on_trial_complete", [&](py::object& b) {
      py::dict text;
      for (const auto& [k, v] : config.Values()) text[py::str(k)] = py::str(v);
      py::object r = result == nullptr ? py::object(py::none()) : py::object(ToDict(*result));
      b.attr("on_trial_complete")(trial_id, text, r, error);
    });
  }

  std::string SaveState() const override {
    std::string state;
    Call("save_state", [&](py::object& b) { state = b.attr("save_state")().cast<std::string>(); });
    return state;
  }

  void RestoreState(const std::string& state) override {
    Call("restore_state", [&](py::object& b) { b.attr("restore_state")(state); });
  }

  int64_t TotalTrials() const override {
    py::gil_scoped_acquire gil;
    try {
      return bridge_->attr("total_trials")().cast<int64_t>();
    } catch (const py::error_already_set&) {
      return -1;  // only the status table and the trial count ask; unknown is a fine answer
    } catch (const py::cast_error&) {
      return -1;
    }
  }

 private:
  static py::dict ToDict(const tune::Metrics& m) {
    py::dict d;
    for (const auto& [k, v] : m) d[py::str(k)] = v;
    return d;
  }

  /// Runs `f(bridge)` holding the GIL; a Python exception becomes a prism::Error with the
  /// traceback (the Tuner turns it into the experiment's error).
  template <typename F>
  void Call(const char* method, F&& f) const {
    py::gil_scoped_acquire gil;
    std::string message;
    try {
      f(*bridge_);
      return;
    } catch (py::error_already_set& e) {
      message = Traceback(e);
    } catch (const py::cast_error& e) {
      message = std::string("it returned a value of the wrong type (") + e.what() + ")";
    }
    throw Error("prism.tune: the searcher " + name_ + " failed in " + method + ": " + message);
  }

  static std::string Traceback(py::error_already_set& e) {
    try {
      py::object lines = py::module_::import("traceback").attr("format_exception")(e.type(), e.value(), e.trace());
      return py::str("").attr("join")(lines).cast<std::string>();
    } catch (const py::error_already_set&) {
      return e.what();
    }
  }

  std::unique_ptr<py::object> bridge_;
  std::string name_;
};

}  // namespace

void BindPythonSearcher(py::module_& m) {
  m.def(
      "python_searcher",
      [](py::object bridge, std::string name) -> std::shared_ptr<tune::Searcher> {
        return std::make_shared<PythonSearcher>(std::move(bridge), std::move(name));
      },
      py::arg("bridge"), py::arg("name"),
      "The engine's searcher that asks a prism.tune.search bridge object (see "
      "prism/tune/search/_python_searcher.py)");
}

}  // namespace prism::python::tune_binding
