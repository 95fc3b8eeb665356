// ScriptTrainer::Fit, on the driver: checks the command and options, then runs
// PrismScriptWorkerLoop (script_worker.cc) as one worker per rank through RunGroup
// (group_run.h: placement, the run directory, reports, failure restarts from the latest
// checkpoint, preemption: the same code as TorchTrainer's). Before each attempt it picks
// the rendezvous addresses on the workers' ranks: for torch a free port on world rank 0's
// host (MASTER_ADDR:MASTER_PORT), for tensorflow one on every worker's (TF_CONFIG).
#include "prism/train/script_trainer.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "prism/api.h"
#include "prism/platform/invoke.h"
#include "prism/remote.h"
#include "train/group_run.h"
#include "train/script_process.h"
#include "train/script_worker.h"

namespace prism::train {
namespace internal {
std::string PrismScriptWorkerLoop(std::string spec_bytes);
std::string PrismScriptHostPort();
}  // namespace internal

namespace {

/// host and port of "host:port".
std::pair<std::string, int> SplitHostPort(const std::string& text) {
  const size_t colon = text.rfind(':');
  return {text.substr(0, colon), std::stoi(text.substr(colon + 1))};
}

bool HoldsModule(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && std::filesystem::is_regular_file(dir + "/prism_train/__init__.py", ec);
}

}  // namespace

std::string PrismPythonDir() {
  const char* env = std::getenv("PRISM_PYTHON_DIR");
  if (env != nullptr && *env != '\0') {
    if (!HoldsModule(env)) {
      throw Error(std::string("prism::train::ScriptTrainer: PRISM_PYTHON_DIR is ") + env +
                  ", which holds no prism_train/__init__.py: point it at the folder that does "
                  "(python/ in Prism's sources), or unset it");
    }
    return env;
  }
  for (const char* dir : {PRISM_SOURCE_PYTHON_DIR, PRISM_INSTALL_PYTHON_DIR}) {
    if (HoldsModule(dir)) return dir;
  }
  throw Error(std::string("prism::train::ScriptTrainer: cannot find the prism_train Python module "
                          "(looked in ") + PRISM_SOURCE_PYTHON_DIR + " and " + PRISM_INSTALL_PYTHON_DIR +
              "): set PRISM_PYTHON_DIR to the folder that holds prism_train/");
}

ScriptTrainer::ScriptTrainer(std::vector<std::string> command, ScriptTrainerOptions options)
    : command_(std::move(command)), options_(std::move(options)) {}

Result ScriptTrainer::Fit() {
  const ScalingConfig& scaling = options_.scaling_config;
  const RunConfig& run = options_.run_config;
  const std::string who = "prism::train::ScriptTrainer: ";
  if (command_.empty() || command_[0].empty()) {
    throw Error(who + "the command is empty: give the program and its arguments, e.g. "
                      "{\"python3\", \"train.py\"}");
  }
  if (options_.backend != "torch" && options_.backend != "tensorflow") {
    throw Error(who + "backend \"" + options_.backend + "\" is not one of torch, tensorflow");
  }
  if (scaling.num_workers < 1) {
    throw Error(who + "ScalingConfig::num_workers is " + std::to_string(scaling.num_workers) +
                "; it must be at least 1");
  }
  if (scaling.use_gpu) {
    throw Error(who + "use_gpu is not supported yet: the scripts would not be told which GPU "
                      "is theirs. Ask for GPUs in resources_per_worker and pick the device in "
                      "the script from LOCAL_RANK");
  }
  if (!(options_.report_timeout_s >= 0) || std::isinf(options_.report_timeout_s)) {
    throw Error(who + "report_timeout_s must be 0 (no limit) or a positive number of seconds");
  }
  const char* path = std::getenv("PATH");
  if (internal::ResolveProgram(command_[0], path ? path : "").empty()) {
    throw Error(who + "cannot run `" + command_[0] + "`: " +
                (command_[0].find('/') != std::string::npos
                     ? "no such executable file"
                     : "not found in PATH (" + std::string(path ? path : "") + ")") +
                ". Give the program's full path, or fix PATH");
  }
  if (!options_.working_dir.empty() && !std::filesystem::is_directory(options_.working_dir)) {
    throw Error(who + "working_dir " + options_.working_dir + " is not a directory");
  }
  const std::string python_dir = PrismPythonDir();
  double cpus = 1;
  if (auto it = scaling.resources_per_worker.find("CPU"); it != scaling.resources_per_worker.end()) {
    cpus = it->second;
  }

  internal::GroupRun spec;
  spec.kind = "ScriptTrainer";
  spec.scaling = scaling;
  spec.run = run;
  spec.resume_from_checkpoint = options_.resume_from_checkpoint;
  spec.loop_entry = platform::RegisteredName(internal::PrismScriptWorkerLoop);
  spec.make_config = [&](const internal::AttemptInfo& attempt) {
    internal::ScriptWorkerSpec worker;
    worker.run_id = attempt.run_id;
    worker.name = attempt.name;
    worker.trial_dir = attempt.trial_dir;
    worker.resume_path = attempt.resume;
    worker.checkpoint_config = run.checkpoint_config;
    worker.command = command_;
    worker.backend = options_.backend;
    worker.report_timeout_s = options_.report_timeout_s;
    worker.max_restarts = run.failure_config.max_failures;
    worker.cpus_per_worker = std::max(1, static_cast<int>(cpus));
    worker.env = options_.env;
    worker.working_dir = options_.working_dir;
    worker.python_dir = python_dir;
    // Rendezvous addresses, picked on the workers' own ranks (a free port there, now).
    const auto& workers = *attempt.workers;
    std::vector<ObjectRef<std::string>> refs;
    const size_t asked = options_.backend == "torch" ? 1 : workers.size();
    for (size_t i = 0; i < asked; ++i) {
      refs.push_back(internal::PinnedToRank(internal::PrismScriptHostPort, workers[i].rank).Remote());
    }
    for (auto& ref : refs) worker.tf_workers.push_back(*ref.Get(60000));
    if (options_.backend == "torch") {
      std::tie(worker.master_addr, worker.master_port) = SplitHostPort(worker.tf_workers.at(0));
      worker.tf_workers.clear();
    }
    return platform::ToBytes(worker);
  };
  return internal::RunGroup(spec);
}

}  // namespace prism::train
