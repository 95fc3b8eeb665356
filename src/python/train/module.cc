// prism._train: Ray Train's Python front end (python/prism/train/) over Prism's C++ Train
// engine. One engine, two front ends: the worker group, placement, failure restarts,
// checkpoint commits (atomic, with checksums, through the same CheckpointStore as C++
// Train), retention and preemption all stay in train::TorchTrainer; only the user's
// train_loop_per_worker runs in Python.
//
// How a Python loop runs on the C++ engine:
//
//   driver (fit)                          every worker's rank
//   TorchTrainer(PrismPythonTrainLoop,    PrismTrainWorkerLoop -> RunWorker (session.cc)
//     {train_loop_config: {kPayloadKey:     -> PrismPythonTrainLoop(config), registered
//      cloudpickled (loop, config, ...)}}   here with PRISM_REMOTE: takes the GIL and calls
//     .Fit(), GIL released                  prism.train._session.run_worker(payload)
//
// The payload travels as one value of train::Config (its values are strings, and a string
// holds any bytes), so the engine needs no hook of its own. report/get_checkpoint/
// get_context call train::Report & co. on the worker's own thread (the engine keeps the
// session thread-local), with the GIL released while they wait on the group.
//
// Report ends the loop on preemption by throwing the engine's private stop type (not a
// std::exception); it is kept here (t_pending), raised in Python as _StopTraining (a
// BaseException, so the loop's `except Exception` does not swallow it) and thrown again
// when the loop returns. Any other C++ error of a session call is kept the same way, so a
// loop that lets it escape fails with the engine's own exception (e.g. CollectiveAborted).
//
// A TorchTrainer as a Tune trainable: torch_trainable returns the engine's TorchTrainable
// (prism/tune/torch.h) for prism.tune's Tuner; the trial's config reaches run_worker beside
// the payload, and the worker lays its train_loop_config values over the trainer's.
//
// This module links the Train engine, its Tune adapter and LibTorch but not the core, Tune
// or the checkpoint store: their symbols come from prism._prism and prism._tune, loaded
// first with RTLD_GLOBAL (one copy of each engine's globals).
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gil.h"
#include "prism/api.h"
#include "prism/checkpoint.h"
#include "prism/remote.h"
#include "prism/train/collective.h"
#include "prism/train/session.h"
#include "prism/train/trainer.h"
#include "prism/tune/torch.h"

namespace py = pybind11;

namespace prism::python_train {

using python::ReleaseGil;
using python::TaskGil;

constexpr const char* kPayloadKey = "prism.python.train_loop";

/// The C++ error a session call raised in Python, kept to be thrown again if it ends the
/// loop (one per worker thread).
thread_local std::exception_ptr t_pending;

/// The one C++ training loop every Python trainer runs: calls the Python loop in the
/// payload. Python reports how it ended: None (returned), "stop"/"cpp" (a kept C++
/// exception ended it: thrown again), or the failure's text (traceback and the pickled
/// exception, which fit raises again as TrainingFailedError's cause).
void PrismPythonTrainLoop(train::Config config) {
  const std::string payload = config.Get<std::string>(kPayloadKey, "");
  if (payload.empty()) throw Error("prism.train: the Python training loop's payload is missing (a bug)");
  t_pending = nullptr;
  std::string failure;
  {
    TaskGil gil;
    try {
      // A Tune trial's config (prism/tune/torch.h merges it into the loop's config): the
      // keys besides the payload, as text, for the worker to decode into train_loop_config.
      py::dict trial_config;
      for (const auto& [k, v] : config.Values()) {
        if (k != kPayloadKey) trial_config[py::str(k)] = py::str(v);
      }
      py::object outcome =
          py::module_::import("prism.train._session").attr("run_worker")(py::bytes(payload), trial_config);
      if (!outcome.is_none()) {
        failure = outcome.cast<std::string>();
        if (failure == "cpp" && !t_pending) failure = "prism.train: a session call failed (its error was lost)";
      }
    } catch (py::error_already_set& e) {
      failure = std::string("prism.train: the worker's Python side failed: ") + e.what();
    }
  }
  if (failure == "cpp" || failure == "stop") {
    std::exception_ptr pending = t_pending;
    t_pending = nullptr;
    std::rethrow_exception(pending);
  }
  if (!failure.empty()) throw Error(failure);
}

namespace {

/// Runs a session call with the GIL released; a C++ exception is kept (t_pending) and
/// raised in Python as `error_type` (or _StopTraining for the engine's stop).
template <typename F>
auto SessionCall(F&& fn) {
  try {
    ReleaseGil release;
    return fn();
  } catch (const std::exception& e) {
    t_pending = std::current_exception();
    throw;  // pybind11 raises it as RuntimeError with what()
  } catch (...) {
    t_pending = std::current_exception();
    py::object stop = py::module_::import("prism.train._session").attr("_StopTraining");
    PyErr_SetString(stop.ptr(), "prism.train: the run stops (preemption): this report committed the checkpoint");
    throw py::error_already_set();
  }
}

/// Python numbers -> train::Metrics (the Python side already checked and flattened them).
train::Metrics ToMetrics(const std::map<std::string, double>& m) { return train::Metrics(m.begin(), m.end()); }

py::dict ResultDict(const train::Result& r) {
  py::dict d;
  d["metrics"] = r.metrics;
  d["checkpoint"] = r.checkpoint ? py::object(py::str(r.checkpoint->path())) : py::none();
  py::list best;
  for (const auto& b : r.best_checkpoints) best.append(py::make_tuple(b.checkpoint.path(), b.metrics));
  d["best_checkpoints"] = best;
  d["path"] = r.path;
  d["error"] = r.error;
  d["metrics_history"] = r.metrics_history;
  return d;
}

/// fit's and torch_trainable's options dict as the engine's: payload (bytes), num_workers,
/// use_gpu, resources_per_worker, placement_strategy, name, storage_path, max_failures,
/// num_to_keep, score_attribute, score_order, verbose, resume (path or None).
train::TorchTrainerOptions TrainerOptions(const py::dict& o) {
  train::TorchTrainerOptions options;
  options.train_loop_config.Set(kPayloadKey, o["payload"].cast<std::string>());
  auto& s = options.scaling_config;
  s.num_workers = o["num_workers"].cast<int>();
  s.use_gpu = o["use_gpu"].cast<bool>();
  s.resources_per_worker = o["resources_per_worker"].cast<std::map<std::string, double>>();
  s.placement_strategy = o["placement_strategy"].cast<std::string>();
  auto& r = options.run_config;
  r.name = o["name"].cast<std::string>();
  r.storage_path = o["storage_path"].cast<std::string>();
  r.failure_config.max_failures = o["max_failures"].cast<int>();
  r.checkpoint_config.num_to_keep = o["num_to_keep"].cast<int>();
  r.checkpoint_config.checkpoint_score_attribute = o["score_attribute"].cast<std::string>();
  r.checkpoint_config.checkpoint_score_order = o["score_order"].cast<std::string>();
  r.verbose = o["verbose"].cast<bool>();
  if (!o["resume"].is_none()) {
    options.resume_from_checkpoint = Checkpoint::FromDirectory(o["resume"].cast<std::string>());
  }
  return options;
}

}  // namespace

}  // namespace prism::python_train

PRISM_REMOTE(prism::python_train::PrismPythonTrainLoop);

namespace prism::python_train {

PYBIND11_MODULE(_train, m) {
  m.doc() = "Prism's C++ Train engine for prism.train (see python/prism/train/)";
  m.attr("PAYLOAD_KEY") = kPayloadKey;
  static py::exception<train::TrainingFailedError> failed(m, "TrainingFailedError", PyExc_RuntimeError);
  static py::exception<train::TrainingPreemptedError> preempted(m, "TrainingPreemptedError", PyExc_RuntimeError);
  // Tried before prism._prism's translator (pybind11 tries the newest first), which makes
  // every other prism::Error a prism.exceptions.PrismError. TrainingPreemptedError carries
  // the signal and checkpoint: raised as (message, signal, path).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const train::TrainingPreemptedError& e) {
      py::object args = py::make_tuple(e.what(), e.Signal(), e.CheckpointPath());
      PyErr_SetObject(preempted.ptr(), args.ptr());
    } catch (const train::TrainingFailedError& e) {
      PyErr_SetString(failed.ptr(), e.what());
    }
  });

  // ---- The driver: fit ----------------------------------------------------------------
  // options: payload (bytes), num_workers, use_gpu, resources_per_worker, placement_strategy,
  // name, storage_path, max_failures, num_to_keep, score_attribute, score_order, verbose,
  // resume (path or None), on_report (callable(metrics, checkpoint path or None) -> bool, or
  // None).
  m.def("fit", [](const py::dict& o) {
    train::TorchTrainerOptions options = TrainerOptions(o);
    py::object on_report = o["on_report"];
    // On Fit's thread (this one), GIL released by the call below: take it back. An
    // exception in the callback stops the run and is raised by fit afterwards.
    auto callback_error = std::make_shared<std::optional<py::error_already_set>>();
    if (!on_report.is_none()) {
      options.run_config.on_report = [on_report, callback_error](const train::Metrics& metrics,
                                                                 const std::optional<Checkpoint>& ckpt) {
        py::gil_scoped_acquire gil;
        try {
          py::object path = ckpt ? py::object(py::str(ckpt->path())) : py::none();
          return on_report(metrics, path).cast<bool>();
        } catch (py::error_already_set& e) {
          if (!*callback_error) *callback_error = std::move(e);
          return false;
        }
      };
    }
    train::TorchTrainer trainer(&PrismPythonTrainLoop, std::move(options));
    train::Result result;
    {
      ReleaseGil release;
      result = trainer.Fit();
    }
    if (*callback_error) throw std::move(**callback_error);
    return ResultDict(result);
  });

  // ---- A Tune trial: the engine's TorchTrainable (prism/tune/torch.h) -----------------
  // The same options as fit (name, storage_path and resume are the Tuner's). Returns
  // prism._tune.Trainable: this module resolves Tune's engine from prism._tune, loaded
  // first with RTLD_GLOBAL, so the trial reports to the Tuner that runs it.
  m.def("torch_trainable", [](const py::dict& o) {
    py::module_::import("prism._tune");  // registers the Trainable type
    try {
      return tune::TorchTrainable(&PrismPythonTrainLoop, TrainerOptions(o));
    } catch (const Error& e) {
      throw py::value_error(e.what());
    }
  });

  // ---- A worker: the session calls ----------------------------------------------------
  m.def("report", [](const std::map<std::string, double>& metrics, const py::object& checkpoint_dir) {
    std::optional<Checkpoint> ckpt;
    if (!checkpoint_dir.is_none()) ckpt = Checkpoint::FromDirectory(checkpoint_dir.cast<std::string>());
    SessionCall([&] {
      train::Report(ToMetrics(metrics), ckpt);
      return 0;
    });
  });
  m.def("get_checkpoint", []() -> py::object {
    auto ckpt = SessionCall([] { return train::GetCheckpoint(); });
    return ckpt ? py::object(py::str(ckpt->path())) : py::none();
  });
  m.def("context", [] {
    const train::TrainContext& c = SessionCall([]() -> const train::TrainContext& { return train::GetContext(); });
    py::dict d;
    d["world_rank"] = c.GetWorldRank();
    d["world_size"] = c.GetWorldSize();
    d["local_rank"] = c.GetLocalRank();
    d["local_world_size"] = c.GetLocalWorldSize();
    d["node_rank"] = c.GetNodeRank();
    d["experiment_name"] = c.GetExperimentName();
    d["trial_dir"] = c.GetTrialDir();
    d["device"] = c.GetDevice().str();
    return d;
  });
  m.def("in_session", [] {
    try {
      train::GetContext();
      return true;
    } catch (const std::exception&) {
      return false;
    }
  });
  // World rank 0's bytes on every worker (a rendezvous address for torch.distributed).
  m.def("broadcast_bytes", [](const std::string& mine) {
    std::string out = SessionCall([&] {
      train::Collective& c = train::GetContext().GetCollective();
      torch::Tensor size = torch::tensor({static_cast<int64_t>(mine.size())}, torch::kInt64);
      c.Broadcast(size, 0);
      torch::Tensor bytes = torch::zeros({size.item<int64_t>()}, torch::kUInt8);
      if (c.Rank() == 0) std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
      if (bytes.numel() > 0) c.Broadcast(bytes, 0);
      return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(bytes.numel()));
    });
    return py::bytes(out);
  });
  m.def("make_temp_checkpoint_dir", &MakeTempCheckpointDir);
}

}  // namespace prism::python_train
