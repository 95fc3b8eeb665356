#pragma once
// What the Tuner (driver) and a trial's task (any rank) send each other: the trial's spec
// as the task's argument, and its reports and end on the experiment's channel, in order,
// each channel message a TrialBatch of one trial's messages.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prism/object_ref.h"

#include "prism/checkpoint.h"
#include "prism/tune/search_space.h"

namespace prism::tune::internal {

/// The trial task's argument.
struct TrialSpec {
  std::string trainable;  // registered name of the user's function
  std::string trial_id;
  std::string trial_dir;
  std::string channel;    // the driver's channel for this experiment
  std::string restore;    // checkpoint directory to start from ("" = fresh)
  Config config;
  int attempt = 0;        // the Tuner's run number of this trial (0, 1, ...)
  int64_t iteration = 0;  // reports before this run
  double time_total_s = 0;
  CheckpointConfig checkpoint_config;
  std::vector<std::string> parameter_names;  // WithParameters, in the order of the task's refs
  std::string args;                          // Trainable::args
  /// When the scheduler decides on results (not FIFO): the channel the trial opens for the
  /// driver's answer to each report, which Report waits for (Ray's report blocks the
  /// same way), so a stopped trial does not train another iteration. "": no waiting.
  std::string decisions;
  std::map<std::string, double> stop;  // RunConfig::stop, checked by the trial too
  int driver_rank = 0;                 // where Fit runs: a trial there holds its results

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& trainable& trial_id& trial_dir& channel& restore& config& attempt& iteration&
        time_total_s& checkpoint_config& parameter_names& args& decisions& stop& driver_rank;
  }
};

/// The driver's answer to one report of a trial that waits for it.
struct TrialDecision {
  int64_t iteration = 0;
  bool stop = false;

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& iteration& stop;
  }
};

/// From a trial to the driver: a report, or the end of the run (always its last message).
struct TrialMessage {
  /// kTaskDone: posted by the driver's own OnReady callback when the trial's task
  /// finished (`error` says how, if it threw); the end message should follow shortly.
  enum Kind : int32_t { kResult = 0, kEnd = 1, kTaskDone = 2 };
  enum Outcome : int32_t { kFinished = 0, kStopped = 1, kFailed = 2 };
  int32_t kind = kResult;
  std::string trial_id;
  int32_t attempt = 0;
  // kResult
  int64_t iteration = 0;
  double time_this_iter_s = 0;
  double time_total_s = 0;
  Metrics metrics;
  std::string checkpoint;  // committed directory, "" if none with this report
  // kEnd
  int32_t outcome = kFinished;
  std::string error;       // kFailed: "<type>: <message>"
  // kTaskDone: the task's process died (a crashed worker: its rank was lost), so no end
  // message can follow but one already on its way.
  bool process_died = false;

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar& kind& trial_id& attempt& iteration& time_this_iter_s& time_total_s& metrics& checkpoint&
        outcome& error& process_died;
  }
};

/// One message on the experiment's channel: one trial's messages, in order (its held
/// results, then maybe its end: session.cc), or the driver's own kTaskDone.
using TrialBatch = std::vector<TrialMessage>;

/// The trial task (registered as "prism_tune_trial" on every rank): runs the trainable
/// with the spec's config, publishing its reports and then its end.
/// `parameters`: the trainable's shared inputs (WithParameters), named in the spec.
std::string RunTrial(std::string spec_bytes, std::vector<ObjectRef<std::string>> parameters);

}  // namespace prism::tune::internal
