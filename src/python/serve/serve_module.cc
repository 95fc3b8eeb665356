// prism._serve: the C++ half of prism.serve (python/prism/serve/ is the other half), Ray
// Serve's Python API over Prism's one Serve engine (prism/serve.h). The controller, the
// routers, the replicas' placement, health checks, autoscaling and the Boost.Beast HTTP
// server all stay in C++; only the user's deployment code runs in Python.
//
// One deployment class, PythonDeployment, is registered here (so on every rank that
// imported prism.serve before prism.init). Every Python deployment is one of it: its
// constructor argument is the cloudpickled Python side of the deployment (the user's class
// or function, its bound arguments, its name), and it holds the replica object that
// prism.serve._replica builds from them. The engine calls it as it calls a C++ class:
//
//   operator()(Request)    an HTTP request: prism.serve._replica.Replica.http turns it into
//                          a Starlette Request, calls the user's handler and turns its
//                          return value (dict, str, bytes, Starlette Response) into a
//                          serve::Response; a handler's exception is answered there (500,
//                          or 400 for invalid JSON), never thrown back into the engine
//   Call(parts)            a handle call: parts[0] is the pickled (method, args, kwargs),
//                          parts[1..] the pickled results of the DeploymentResponses passed
//                          as arguments; the result goes back pickled. A Python exception
//                          leaves as a C++ exception whose message is the traceback and the
//                          pickled exception (prism._worker.describe), so the caller's
//                          DeploymentResponse.result() raises the same type
//   Reconfigure, CheckHealth   the user's reconfigure(user_config) and check_health()
//
// Each runs on the replica's actor thread holding the GIL (TaskGil, as Python tasks do);
// async methods run on the replica's event loop (prism._worker._AsyncActor) while the actor
// thread waits without the GIL.
//
// Handle calls from Python (on any rank) go through the engine's SubmitCall; the
// DeploymentResponse is the engine's ResponseState, waited on without the GIL. For `await`,
// a completed response puts its token in a queue that one Python thread per process
// (prism.serve._handle's waker) takes and hands to the right event loop: the engine's
// completion threads never wait for the GIL.
//
// This module links prism_serve and prism_http whole but not the core: it is loaded
// after prism._prism, which is loaded with RTLD_GLOBAL and exports the core, so the process
// holds one copy of the core's globals (tests/python_serve/test_module.py checks this).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gil.h"
#include "prism/api.h"
#include "prism/platform/invoke.h"
#include "prism/serve.h"

namespace py = pybind11;

namespace prism::python::serve_binding {

namespace serve = prism::serve;
namespace si = prism::serve::internal;

/// A Python exception leaving a replica: what() is the traceback, then (for handle calls)
/// the pickled exception after prism._worker's marker.
class PythonReplicaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

bool InterpreterGone() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

/// prism.serve._replica, imported once per process (kept for the process's life: the
/// engine's threads may call in until exit). Not a function-local static: an import lets go
/// of the GIL, and a second replica thread would then wait for the static's guard holding
/// the GIL the first one needs back. Read and written under the GIL.
py::object* g_replica_module = nullptr;
py::object& ReplicaModule() {
  if (g_replica_module == nullptr) {
    py::object module = py::module_::import("prism.serve._replica");
    if (g_replica_module == nullptr) g_replica_module = new py::object(std::move(module));
  }
  return *g_replica_module;
}

/// One Python deployment's replica, as the engine sees it.
class PythonDeployment {
 public:
  explicit PythonDeployment(std::string spec) {
    std::string error;
    {
      TaskGil gil;
      try {
        py::tuple r = ReplicaModule().attr("create")(py::bytes(spec));
        if (r[0].cast<std::string>() == "ok") {
          replica_ = new py::object(r[1]);
          return;
        }
        error = r[1].cast<std::string>();
      } catch (py::error_already_set& e) {
        error = std::string("prism.serve: the replica could not start: ") + e.what();
      }
    }
    throw PythonReplicaError(error);
  }
  ~PythonDeployment() {
    if (replica_ == nullptr) return;
    if (InterpreterGone()) return;  // leak rather than touch a dying interpreter
    TaskGil gil;
    try {
      replica_->attr("close")();
    } catch (py::error_already_set&) {
    }
    delete replica_;
  }
  PythonDeployment(const PythonDeployment&) = delete;
  PythonDeployment& operator=(const PythonDeployment&) = delete;

  serve::Response operator()(const serve::Request& request) {
    serve::Response out;
    TaskGil gil;
    try {
      py::dict headers;
      for (const auto& [k, v] : request.headers) headers[py::str(k)] = py::str(v);
      py::tuple r = replica_->attr("http")(request.method, request.path, request.route_prefix, request.query,
                                           headers, py::bytes(request.body));
      out.status = r[0].cast<int>();
      out.body = r[1].cast<std::string>();
      out.content_type = r[2].cast<std::string>();
      for (auto item : r[3].cast<py::dict>()) {
        out.headers[item.first.cast<std::string>()] = item.second.cast<std::string>();
      }
    } catch (py::error_already_set& e) {
      out = serve::Response::Json({{"error", std::string("prism.serve: ") + e.what()}}, 500);
    }
    return out;
  }

  std::string Call(std::vector<std::string> parts) {
    std::string error;
    {
      TaskGil gil;
      try {
        py::list views;
        for (auto& p : parts) views.append(py::bytes(p));
        py::tuple r = replica_->attr("call")(views);
        if (r[0].cast<std::string>() == "ok") return r[1].cast<std::string>();
        error = r[1].cast<std::string>();
      } catch (py::error_already_set& e) {
        error = std::string("prism.serve: ") + e.what();
      }
    }
    throw PythonReplicaError(error);
  }

  void Reconfigure(const nlohmann::json& config) { Hook("reconfigure", config.dump()); }
  void CheckHealth() { Hook("check_health", ""); }

 private:
  void Hook(const char* name, const std::string& arg) {
    std::string error;
    {
      TaskGil gil;
      try {
        py::object r = replica_->attr(name)(arg);
        if (r.is_none()) return;
        error = r.cast<std::string>();
      } catch (py::error_already_set& e) {
        error = e.what();
      }
    }
    throw PythonReplicaError(error);
  }

  py::object* replica_ = nullptr;
};

using CallRegistrar = si::MethodRegistrar<&PythonDeployment::Call>;
[[maybe_unused]] const bool kCallRegistered = CallRegistrar::registered;

// ---- responses and the await bridge ----------------------------------------------------

/// A DeploymentResponse as Python holds it.
struct PyResponse {
  std::shared_ptr<si::ResponseState> state;
};

/// Tokens of completed responses someone awaits, for the waker thread (next_done).
struct Done {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<uint64_t> tokens;
};
Done& TheDone() {
  static auto* done = new Done;  // never destroyed: completion threads may outlive exit
  return *done;
}

/// The main thread's id: the only thread where Python runs signal handlers.
unsigned long g_main_thread = 0;

/// Waits up to timeout_s (< 0: no limit) for `state`, without the GIL; on the main thread
/// in 0.2 s slices with Python's signal handlers between them (Ctrl-C interrupts it).
bool WaitFor(const std::shared_ptr<si::ResponseState>& state, double timeout_s) {
  if (PyThread_get_thread_ident() != g_main_thread) {
    ReleaseGil release;
    return state->Wait(timeout_s);
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    double slice = 0.2;
    if (timeout_s >= 0) {
      const double left = timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      slice = std::max(0.0, std::min(slice, left));
    }
    bool done;
    {
      ReleaseGil release;
      done = state->Wait(slice);
    }
    if (done) return true;
    if (timeout_s >= 0 && slice < 0.2) return false;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

/// The outcome of a finished response: ("ok", pickled value) or (kind, fields...):
/// ("task", type, message, task name, rank) for the replica's exception, ("backpressure",
/// message), ("deployment", message), ("actor", message), ("error", message).
py::tuple Outcome(const si::CallResult& r) {
  if (!r.error) {
    try {
      return py::make_tuple("ok", py::bytes(platform::FromBytes<std::string>(r.bytes)));
    } catch (const std::exception& e) {
      return py::make_tuple("error", std::string("prism.serve: a result that is not a Python value: ") + e.what());
    }
  }
  try {
    std::rethrow_exception(r.error);
  } catch (const TaskError& e) {
    return py::make_tuple("task", e.OriginalType(), e.OriginalMessage(), e.TaskName(), e.Rank());
  } catch (const serve::BackPressureError& e) {
    return py::make_tuple("backpressure", std::string(e.what()));
  } catch (const serve::DeploymentError& e) {
    return py::make_tuple("deployment", std::string(e.what()));
  } catch (const ActorError& e) {
    return py::make_tuple("actor", std::string(e.what()));
  } catch (const std::exception& e) {
    return py::make_tuple("error", std::string(e.what()));
  }
}

/// Sends a handle call: the pickled call, once every dependency is done (their pickled
/// results travel beside it; a failed one fails this call with its error).
PyResponse Submit(const std::string& deployment, const py::bytes& call, const std::vector<PyResponse>& deps) {
  auto out = std::make_shared<si::ResponseState>();
  std::vector<std::shared_ptr<si::ResponseState>> states;
  for (const auto& d : deps) states.push_back(d.state);
  auto first = std::make_shared<std::string>(call);
  ReleaseGil release;
  si::WhenAll(
      states,
      [deployment, first, states, out] {
        std::vector<std::string> parts{std::move(*first)};
        try {
          for (const auto& s : states) parts.push_back(platform::FromBytes<std::string>(s->Result().bytes));
        } catch (...) {
          out->Fail(std::current_exception());
          return;
        }
        std::string args = platform::ToBytes(std::vector<std::string>{platform::ToBytes(parts)});
        si::SubmitCall(deployment, CallRegistrar::Key(), std::move(args),
                       [out](si::CallResult r) { out->Complete(std::move(r)); });
      },
      out);
  return PyResponse{out};
}

// ---- deploying ---------------------------------------------------------------------------

/// Runs `f` without the GIL, turning the engine's errors into Python's: prism::Error from
/// an option out of range -> ValueError; DeploymentError -> RuntimeError (Ray's serve.run).
template <typename F>
auto Released(F&& f) -> decltype(f()) {
  std::string value_error, runtime_error;
  {
    ReleaseGil release;
    try {
      return f();
    } catch (const serve::DeploymentError& e) {
      runtime_error = e.what();
    } catch (const RuntimeError& e) {
      runtime_error = e.what();
    } catch (const Error& e) {
      value_error = e.what();
    }
  }
  if (!value_error.empty()) throw py::value_error(value_error);
  throw std::runtime_error(runtime_error);
}

serve::Deployment<PythonDeployment> MakeDeployment(const py::dict& d) {
  serve::Deployment<PythonDeployment> dep(d["name"].cast<std::string>());
  dep.NumReplicas(d["num_replicas"].cast<int>())
      .MaxOngoingRequests(d["max_ongoing_requests"].cast<int>())
      .MaxQueuedRequests(d["max_queued_requests"].cast<int>())
      .RayActorOptions(d["resources"].cast<std::map<std::string, double>>())
      .HealthCheckPeriodS(d["health_check_period_s"].cast<double>())
      .HealthCheckTimeoutS(d["health_check_timeout_s"].cast<double>())
      .GracefulShutdownTimeoutS(d["graceful_shutdown_timeout_s"].cast<double>());
  if (!d["user_config"].is_none()) dep.UserConfig(nlohmann::json::parse(d["user_config"].cast<std::string>()));
  if (!d["autoscaling"].is_none()) {
    py::dict a = d["autoscaling"];
    serve::AutoscalingConfig c;
    c.min_replicas = a["min_replicas"].cast<int>();
    c.max_replicas = a["max_replicas"].cast<int>();
    if (!a["initial_replicas"].is_none()) c.initial_replicas = a["initial_replicas"].cast<int>();
    c.target_ongoing_requests = a["target_ongoing_requests"].cast<double>();
    c.upscale_delay_s = a["upscale_delay_s"].cast<double>();
    c.downscale_delay_s = a["downscale_delay_s"].cast<double>();
    c.look_back_period_s = a["look_back_period_s"].cast<double>();
    c.metrics_interval_s = a["metrics_interval_s"].cast<double>();
    dep.Autoscaling(c);
  }
  return dep;
}

/// serve::Run of the deployments described (dependencies first, the ingress last).
void Run(const py::list& deployments, const std::string& name, std::optional<std::string> route_prefix,
         const std::string& host, int port, double ready_timeout_s) {
  if (deployments.empty()) throw py::value_error("prism.serve.run: an application without a deployment");
  std::vector<serve::Application> parts;
  try {
    for (py::handle h : deployments) {
      py::dict d = py::reinterpret_borrow<py::dict>(h);
      parts.push_back(MakeDeployment(d).Bind(d["spec"].cast<std::string>()));
    }
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
  serve::Application app = parts.back();
  for (size_t i = 0; i + 1 < parts.size(); ++i) app.Include(parts[i]);
  serve::RunOptions options;
  options.name = name;
  options.http = route_prefix.has_value();
  if (route_prefix) options.route_prefix = *route_prefix;
  options.host = host;
  options.port = static_cast<uint16_t>(port);
  options.ready_timeout_s = ready_timeout_s;
  Released([&] { serve::Run(app, options); });
}

}  // namespace prism::python::serve_binding

PYBIND11_MODULE(_serve, m) {
  using namespace prism::python;
  using namespace prism::python::serve_binding;
  m.doc() = "prism.serve's C++ half (use prism.serve, not this module)";
  g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

  py::class_<PyResponse>(m, "Response")
      .def("done", [](const PyResponse& r) { return r.state->Done(); })
      .def("wait", [](const PyResponse& r, double timeout_s) { return WaitFor(r.state, timeout_s); },
           py::arg("timeout_s"))
      .def("outcome", [](const PyResponse& r) {
        if (!r.state->Done()) throw std::logic_error("prism.serve: outcome of an unfinished response");
        return Outcome(r.state->Result());
      })
      .def("notify", [](const PyResponse& r, uint64_t token) {
        r.state->OnDone([token] {
          Done& d = TheDone();
          {
            std::lock_guard<std::mutex> lock(d.mu);
            d.tokens.push_back(token);
          }
          d.cv.notify_one();
        });
      }, py::arg("token"), "Puts `token` in next_done's queue once the response is done (at once if it is).");
  m.def("next_done", [](double timeout_s) -> py::object {
    Done& d = TheDone();
    std::optional<uint64_t> token;
    {
      ReleaseGil release;
      std::unique_lock<std::mutex> lock(d.mu);
      if (d.cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&d] { return !d.tokens.empty(); })) {
        token = d.tokens.front();
        d.tokens.pop_front();
      }
    }
    if (!token) return py::none();
    return py::int_(*token);
  }, py::arg("timeout_s"), "The token of a done response someone awaits, or None after timeout_s.");

  m.def("submit", &Submit, py::arg("deployment"), py::arg("call"), py::arg("deps"));
  m.def("run", &Run, py::arg("deployments"), py::arg("name"), py::arg("route_prefix"), py::arg("host"),
        py::arg("port"), py::arg("ready_timeout_s"));
  m.def("status", [] { return Released([] { return prism::serve::Status().ToJson().dump(); }); });
  m.def("delete", [](const std::string& name) { return Released([&] { return prism::serve::Delete(name); }); });
  m.def("shutdown", [] {
    if (!prism::IsInitialized()) return;
    Released([] { prism::serve::Shutdown(); });
  });
  m.def("run_until_stopped", [] { return Released([] { return prism::serve::RunUntilStopped(); }); });
  m.def("exists", [](const std::string& deployment) {
    return Released([&] { return prism::serve::internal::DeploymentExists(deployment); });
  });
}
