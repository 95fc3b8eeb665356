#pragma once
// What ScriptTrainer's driver and its workers share: the worker's spec, the environment a
// script gets (pure, unit-tested), and the messages on the pipe between a script's
// prism_train module and its worker.
//
// The pipe protocol: one JSON object per line.
//   script -> worker (fd PRISM_TRAIN_TO_WORKER_FD):
//     {"op": "report", "metrics": {"name": number, ...}, "checkpoint_dir": "dir" | null}
//         answered with {"op": "reply", "ok": true, "iteration": n, "checkpoint": "committed
//         dir" | null} or {"op": "reply", "ok": false, "error": "what was wrong"}
//     {"op": "stopping"}: should_stop() returned true; the script is about to return, so an
//         exit 0 now ends the run as preempted, not finished. No answer.
//   worker -> script (fd PRISM_TRAIN_FROM_WORKER_FD):
//     replies, and {"op": "stop"} (at any time; SIGUSR1 is sent too) when the driver asks
//     the workers to stop.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "prism/checkpoint.h"
#include "prism/platform/worker_group.h"
#include "prism/train/config.h"

namespace prism::train::internal {

/// The fds the script's end of the pipes gets (after 0, 1, 2).
inline constexpr int kScriptToWorkerFd = 3;
inline constexpr int kWorkerToScriptFd = 4;

struct ScriptWorkerSpec {
  std::string run_id;
  std::string name, trial_dir, resume_path;
  CheckpointConfig checkpoint_config;
  std::vector<std::string> command;
  std::string backend;  // "torch" or "tensorflow"
  /// torch: world rank 0's host and a free port there.
  std::string master_addr;
  int master_port = 0;
  /// tensorflow: every worker's host:port, by world rank.
  std::vector<std::string> tf_workers;
  double report_timeout_s = 0;
  int max_restarts = 0;  // FailureConfig::max_failures, for TORCHELASTIC_MAX_RESTARTS
  int cpus_per_worker = 1;
  std::map<std::string, std::string> env;
  std::string working_dir;
  std::string python_dir;  // holds prism_train

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& run_id& name& trial_dir& resume_path& checkpoint_config& command& backend;
    ar& master_addr& master_port& tf_workers& report_timeout_s& max_restarts& cpus_per_worker;
    ar& env& working_dir& python_dir;
  }
};

/// The variables Prism sets for one worker's script (script_trainer.h lists them), given
/// the rank's own environment `base` (for PYTHONPATH and OMP_NUM_THREADS). Pure.
std::map<std::string, std::string> ScriptEnvironment(const ScriptWorkerSpec& spec,
                                                     const platform::WorkerInfo& me,
                                                     const std::vector<platform::WorkerInfo>& group,
                                                     int attempt,
                                                     const std::map<std::string, std::string>& base);

/// TF_CONFIG for worker `index` of `workers` (host:port each), as Ray Train's
/// TensorflowTrainer writes it.
std::string TfConfig(const std::vector<std::string>& workers, int index);

/// A message from a script. Throws prism::Error naming what is wrong with the line.
struct ScriptMessage {
  enum Op { kReport, kStopping } op = kReport;
  Metrics metrics;
  std::optional<std::string> checkpoint_dir;
};
ScriptMessage ParseScriptMessage(const std::string& line);

/// Replies, as lines (with the '\n').
std::string ReplyOk(int64_t iteration, const std::string& committed_checkpoint);
std::string ReplyError(const std::string& error);
std::string StopLine();

}  // namespace prism::train::internal
