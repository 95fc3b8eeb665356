// Inside a trial: the trial task that runs the user's function, and what the function
// calls (Report, GetCheckpoint, TrialId, TrialDir). A report commits its checkpoint into
// the trial's directory first (atomically, with checksums: prism_checkpoint), then goes to
// the driver on the experiment's channel. The driver stops a trial by cancelling its task:
// the next Report sees IsCancelled and ends the trial quietly after committing.
//
// Held results. When the driver answers no report (a FIFO scheduler and no stopper), a
// trial on the driver's rank holds its results back and sends them together, as one
// message (a TrialBatch): when kHoldResults are held, when the first is kHoldTime old, with
// a checkpoint, and with the trial's end. The age is checked at each report, and by the
// rank's flusher thread (Flusher) for a trial that reports no more for a while, so no
// result waits longer than kHoldTime. There, publishing every result woke the driver for
// each: after 5 ms of work a report took 18-29 us, a second one right after it 4 us. On
// the other ranks results go out one by one: holding them there too quietened the MPI
// transport, whose progress threads then napped (up to 2 ms) before they saw a trial's end
// or the next trial's dispatch, which cost more idle slots than the reports saved (perf/
// README.md, Tune against Optuna). Ray Tune buffers results the same way when its
// scheduler allows it (Trainable.train_buffered). A result held when its rank dies is lost
// with the trial's state since its last checkpoint, which a restore runs again anyway.

#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "prism/api.h"
#include "prism/checkpoint_store.h"
#include "prism/platform/channel.h"
#include "prism/platform/invoke.h"
#include "prism/runtime_context.h"
#include "prism/tune/tuner.h"
#include "tune/trial_protocol.h"

namespace prism::tune {
namespace internal {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kHoldResults = 256;
constexpr auto kHoldTime = std::chrono::milliseconds(100);

/// A trial's messages to the driver, sent in order, in batches (see the top of the file).
/// Thread-safe: the trial's thread and the rank's flusher send.
class Outbox {
 public:
  explicit Outbox(std::string channel) : channel_(std::move(channel)) {}

  /// Adds `m` and sends what is held if `send` or the batch is due (kHoldResults held, or
  /// the first kHoldTime old). Throws what platform::Publish throws.
  void Add(TrialMessage m, bool send) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    if (held_.empty()) first_ = now;
    held_.push_back(std::move(m));
    if (send || held_.size() >= kHoldResults || now - first_ >= kHoldTime) SendLocked();
  }

  /// Sends what is held if the first is at least `age` old (the flusher).
  void SendOlderThan(Clock::duration age) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_.empty() || Clock::now() - first_ < age) return;
    try {
      SendLocked();
    } catch (const std::exception&) {  // Shutdown under way: nobody is listening
    }
  }

 private:
  // Under mu_ to the end of the publish, so batches leave in the order they were made.
  void SendLocked() {
    TrialBatch batch;
    batch.swap(held_);
    platform::Publish(channel_, platform::ToBytes(batch));
  }

  std::mutex mu_;
  const std::string channel_;
  TrialBatch held_;
  Clock::time_point first_;
};

/// The rank's flusher thread: while trials that hold results run here, it wakes every
/// kHoldTime / 2 and sends what has been held that long. Started at the first such trial;
/// never destroyed (its thread may outlive exit), and it sleeps while no trial holds.
class Flusher {
 public:
  static Flusher& Instance() {
    static auto* flusher = new Flusher;
    return *flusher;
  }

  void Add(const std::shared_ptr<Outbox>& outbox) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) {
      started_ = true;
      std::thread([this] { Loop(); }).detach();
    }
    if (outboxes_.empty()) cv_.notify_one();
    outboxes_.insert(outbox);
  }

  void Remove(const std::shared_ptr<Outbox>& outbox) {
    std::lock_guard<std::mutex> lock(mu_);
    outboxes_.erase(outbox);
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return !outboxes_.empty(); });
      cv_.wait_for(lock, kHoldTime / 2);
      std::vector<std::shared_ptr<Outbox>> now(outboxes_.begin(), outboxes_.end());
      lock.unlock();
      for (const auto& outbox : now) outbox->SendOlderThan(kHoldTime / 2);
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::shared_ptr<Outbox>> outboxes_;
  bool started_ = false;
};

/// The trial running on this thread.
struct TrialSession {
  TrialSpec spec;
  std::vector<ObjectRef<std::string>> parameters;
  std::unique_ptr<platform::Channel> decisions;  // the driver's answers, when it decides
  std::unique_ptr<prism::CheckpointStore> store;  // made at the first checkpoint
  std::shared_ptr<Outbox> outbox;
  bool hold = false;  // results are held (see the top of the file)
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
  session.outbox = std::make_shared<Outbox>(spec.channel);
  session.hold = spec.decisions.empty() && GetRuntimeContext().GetRank() == spec.driver_rank;
  if (session.hold) Flusher::Instance().Add(session.outbox);
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
  if (session.hold) Flusher::Instance().Remove(session.outbox);
  session.outbox->Add(std::move(end), /*send=*/true);  // after every report, in order
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
  const int64_t iteration = m.iteration;
  const double time_total_s = m.time_total_s;
  // Held on the driver's rank when the driver answers none, unless it carries a checkpoint
  // (see the top of the file).
  const bool send = !s.hold || !m.checkpoint.empty();
  s.outbox->Add(std::move(m), send);
  bool stop = false;
  for (const auto& [key, bound] : s.spec.stop) {  // RunConfig::stop, without a round trip
    auto v = key == "training_iteration" ? std::optional<double>(static_cast<double>(iteration))
             : key == "time_total_s"      ? std::optional<double>(time_total_s)
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
        if (d.iteration != iteration) continue;
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
