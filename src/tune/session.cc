// Inside a trial: the trial task that runs the user's function, and what the function
// calls (Report, GetCheckpoint, TrialId, TrialDir). A report commits its checkpoint into
// the trial's directory first (atomically, with checksums: prism_checkpoint), then goes to
// the driver on the experiment's channel. The driver stops a trial by cancelling its task:
// the next Report sees IsCancelled and ends the trial quietly after committing.

#include <chrono>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "prism/api.h"
#include "prism/checkpoint_store.h"
#include "prism/platform/channel.h"
#include "prism/platform/invoke.h"
#include "prism/tune/tuner.h"
#include "tune/trial_protocol.h"

namespace prism::tune {
namespace internal {
namespace {

using Clock = std::chrono::steady_clock;

/// The trial running on this thread.
struct TrialSession {
  TrialSpec spec;
  std::vector<ObjectRef<std::string>> parameters;
  std::unique_ptr<platform::Channel> decisions;  // the driver's answers, when it decides
  std::unique_ptr<prism::CheckpointStore> store;  // made at the first checkpoint
  int64_t iteration = 0;
  Clock::time_point started = Clock::now();
  Clock::time_point last_report = started;
};

thread_local TrialSession* t_session = nullptr;

TrialSession& Current(const char* what) {
  if (t_session == nullptr) {
    throw Error(std::string("prism::tune::") + what +
                " called outside a trial: only a Tuner's trainable (on the trial's thread) "
                "can call it");
  }
  return *t_session;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::string RunTrial(std::string spec_bytes, std::vector<ObjectRef<std::string>> parameters) {
  TrialSession session;
  session.spec = platform::FromBytes<TrialSpec>(spec_bytes);
  session.parameters = std::move(parameters);
  session.iteration = session.spec.iteration;
  const TrialSpec& spec = session.spec;
  TrialMessage end;
  end.kind = TrialMessage::kEnd;
  end.trial_id = spec.trial_id;
  end.attempt = spec.attempt;
  std::exception_ptr failure;
  t_session = &session;
  try {
    if (!spec.decisions.empty()) session.decisions = std::make_unique<platform::Channel>(spec.decisions);
    platform::Invoke<void>(spec.trainable, spec.config);
    end.outcome = TrialMessage::kFinished;
  } catch (const TrialStopSignal&) {
    end.outcome = TrialMessage::kStopped;
  } catch (...) {
    failure = std::current_exception();
    // A trial cancelled while blocked in a Get is a stop, not a failure.
    end.outcome = prism::IsCancelled() ? TrialMessage::kStopped : TrialMessage::kFailed;
    end.error = platform::DescribeException(failure);
  }
  t_session = nullptr;
  end.iteration = session.iteration;
  platform::Publish(spec.channel, platform::ToBytes(end));  // after every report, in order
  return "";
}

}  // namespace internal

namespace internal {
namespace {

/// Publishes one result; `checkpoint` is committed into the trial's directory first unless
/// `committed`. Returns whether the trial should stop.
bool Publish(const Metrics& metrics, const std::optional<Checkpoint>& checkpoint, bool committed) {
  TrialSession& s = Current("Report");
  const auto now = Clock::now();
  TrialMessage m;
  m.kind = TrialMessage::kResult;
  m.trial_id = s.spec.trial_id;
  m.attempt = s.spec.attempt;
  m.iteration = ++s.iteration;
  m.time_this_iter_s = Seconds(now - s.last_report);
  m.time_total_s = s.spec.time_total_s + Seconds(now - s.started);
  s.last_report = now;
  m.metrics = metrics;
  if (checkpoint && committed) {
    m.checkpoint = checkpoint->path();
  } else if (checkpoint) {
    if (!s.store) {
      s.store = std::make_unique<prism::CheckpointStore>(s.spec.trial_dir, s.spec.checkpoint_config);
    }
    Metrics with_iteration = metrics;
    with_iteration["training_iteration"] = static_cast<double>(m.iteration);
    m.checkpoint = s.store->Commit(*checkpoint, with_iteration, /*move=*/true).checkpoint.path();
  }
  platform::Publish(s.spec.channel, platform::ToBytes(m));
  bool stop = false;
  for (const auto& [key, bound] : s.spec.stop) {  // RunConfig::stop, without a round trip
    auto v = key == "training_iteration" ? std::optional<double>(static_cast<double>(m.iteration))
             : key == "time_total_s"      ? std::optional<double>(m.time_total_s)
             : metrics.count(key)         ? std::optional<double>(metrics.at(key))
                                          : std::nullopt;
    stop |= v && *v >= bound;
  }
  if (s.decisions && !stop) {
    // The driver answers every report; the job ends if the driver does, so the wait is
    // bounded by it. A cancel (preemption, the time budget) also ends it.
    while (true) {
      if (auto reply = s.decisions->Next(1000)) {
        auto d = platform::FromBytes<TrialDecision>(reply->bytes);
        if (d.iteration != m.iteration) continue;
        stop = d.stop;
        break;
      }
      if (prism::IsCancelled()) break;
    }
  }
  return stop || prism::IsCancelled();
}

}  // namespace

bool ReportCommitted(const Metrics& metrics, const std::optional<Checkpoint>& committed) {
  return Publish(metrics, committed, /*committed=*/true);
}

const std::string& TrainableArgs() { return Current("TrainableArgs").spec.args; }

bool ReportMayWait(bool with_checkpoint) {
  return t_session != nullptr && (with_checkpoint || t_session->decisions != nullptr);
}

}  // namespace internal

void Report(const Metrics& metrics, const std::optional<Checkpoint>& checkpoint) {
  if (internal::Publish(metrics, checkpoint, /*committed=*/false)) throw TrialStopSignal{};
}

std::optional<Checkpoint> GetCheckpoint() {
  internal::TrialSession& s = internal::Current("GetCheckpoint");
  if (s.spec.restore.empty()) return std::nullopt;
  return Checkpoint::FromDirectory(s.spec.restore);
}

ObjectId internal::ParameterId(const std::string& name) {
  internal::TrialSession& s = internal::Current("GetParameter");
  const auto& names = s.spec.parameter_names;
  for (size_t i = 0; i < names.size() && i < s.parameters.size(); ++i) {
    if (names[i] == name) return s.parameters[i].ID();
  }
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw Error("prism::tune::GetParameter: no shared input named \"" + name + "\" (the trainable has: " +
              (known.empty() ? "none" : known) + "); give it with tune::WithParameters");
}

std::string TrialId() { return internal::Current("TrialId").spec.trial_id; }
std::string TrialDir() { return internal::Current("TrialDir").spec.trial_dir; }

}  // namespace prism::tune

PRISM_REMOTE(prism::tune::internal::RunTrial);
