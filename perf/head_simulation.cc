// The head simulation (head_simulation.h explains the rounds).
#include "head_simulation.h"

#include <time.h>

#include <stdexcept>
#include <thread>

#include "transport/codec.h"

namespace prism::sim {

using internal::Buffer;
using internal::Message;
using internal::ResourceSet;
using internal::TaskSpec;

std::vector<ResourceSet> SimulatedCapacities(const SimulationOptions& o) {
  std::vector<ResourceSet> capacities;
  capacities.reserve(static_cast<size_t>(o.num_ranks));
  for (int r = 0; r < o.num_ranks; ++r) {
    ResourceSet c;
    c.Set("CPU", internal::ToUnits(o.cpus_per_rank));
    c.Set("memory", (4LL << 30) * internal::kResourceUnit);
    c.Set("object_store_memory", (1LL << 30) * internal::kResourceUnit);
    c.Set("rank:" + std::to_string(r), internal::kResourceUnit);
    capacities.push_back(std::move(c));
  }
  return capacities;
}

HeadSimulation::HeadSimulation(SimulationOptions options)
    : options_(options), start_(Clock::now()) {
  if (options_.num_ranks < 1) throw std::invalid_argument("HeadSimulation: num_ranks must be >= 1");
  if (options_.ranks_per_node < 1) options_.ranks_per_node = 1;
  const auto n = static_cast<size_t>(options_.num_ranks);
  std::vector<std::string> nodes;
  nodes.reserve(n);
  for (int r = 0; r < options_.num_ranks; ++r) {
    nodes.push_back("node-" + std::to_string(r / options_.ranks_per_node));
  }
  head_ = std::make_unique<internal::Head>(
      SimulatedCapacities(options_),
      [this](int dest, Message&& m) {
        // The transport's Send: encoded for the wire on the head's thread (rank 0's own
        // node gets the struct).
        if (dest != 0) {
          internal::EncodeMessage(m, out_batches_[static_cast<size_t>(dest)]);
          ++from_head_.messages;
        }
        sent_.emplace_back(dest, std::move(m));
      },
      std::move(nodes));
  out_batches_.resize(n);
  in_batches_.resize(n);
  rank_last_sent_.assign(n, 0);
  head_last_sent_.assign(n, 0);
  head_last_heard_.assign(n, 0);
}

int64_t HeadSimulation::ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t HeadSimulation::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
}

void HeadSimulation::ResetCounters() {
  head_ns_ = 0;
  to_head_ = {};
  from_head_ = {};
}

void HeadSimulation::Reserve(size_t tasks) {
  dispatches_.reserve(dispatches_.size() + tasks);
  std::vector<Due> heap;
  heap.reserve(due_.size() + tasks);
  while (!due_.empty()) {
    heap.push_back(due_.top());
    due_.pop();
  }
  due_ = decltype(due_)(std::greater<Due>(), std::move(heap));
  sent_.reserve(64);
}

TaskId HeadSimulation::Submit(TaskSpec spec) {
  // The driver's ids, as rank 0's node mints them (rank 0, a counter; one id per return).
  spec.id = ObjectId::Make(0, next_id_);
  next_id_ += static_cast<uint64_t>(std::max(1, spec.num_returns));
  spec.submitter = 0;
  if (spec.options->name.empty()) spec.Edit().name = spec.options->function;
  const TaskId id = spec.id;
  // An actor lives while its handle does: the driver keeps the creation's ref.
  if (spec.kind == internal::TaskKind::kActorCreation) actors_.insert(id);
  ++submitted_;
  const int64_t t0 = ThreadCpuNs();
  head_->Post(0, internal::SubmitTask{std::move(spec)});
  head_ns_ += ThreadCpuNs() - t0;
  HandleSent();
  return id;
}

void HeadSimulation::SubmitMany(int count, const std::string& function) {
  // The specs are the driver's node's work; posting them is the head's.
  auto options = OptionsOf(function, ResourceSet(), {});
  std::vector<internal::SubmitTask> submits(static_cast<size_t>(count));
  for (auto& m : submits) {
    m.spec = std::make_shared<internal::TaskSpec>();
    m.spec->id = ObjectId::Make(0, next_id_++);
    m.spec->options = options;
  }
  submitted_ += static_cast<uint64_t>(count);
  const int64_t t0 = ThreadCpuNs();
  for (auto& m : submits) head_->Post(0, std::move(m));
  head_ns_ += ThreadCpuNs() - t0;
  HandleSent();
}

std::shared_ptr<const internal::TaskOptions> HeadSimulation::OptionsOf(const std::string& function, ResourceSet demand,
                                                                       internal::SchedulingStrategy strategy) {
  // As a driver's node does: a recent copy while the options are equal.
  internal::TaskOptions o;
  o.function = function;
  o.name = function;
  o.demand = std::move(demand);
  if (o.demand.Empty()) o.demand.Set("CPU", internal::kResourceUnit);
  o.strategy = strategy;
  return recent_options_.Share(o);
}

TaskId HeadSimulation::Submit(const std::string& function, ResourceSet demand,
                              internal::SchedulingStrategy strategy) {
  TaskSpec spec;
  spec.options = OptionsOf(function, std::move(demand), strategy);
  return Submit(std::move(spec));
}

void HeadSimulation::HandleSent() {
  for (;;) {
    HandOn();
    if (drops_.empty()) return;
    // The driver's refs go: one RefUpdate each (what the head sends back is handed on next).
    const int64_t t0 = ThreadCpuNs();
    for (ObjectId id : drops_) {
      internal::RefUpdate drop;
      drop.remove.push_back(id);
      head_->Post(0, std::move(drop));
    }
    head_ns_ += ThreadCpuNs() - t0;
    drops_.clear();
  }
}

void HeadSimulation::HandOn() {
  // Flush: each destination's batch is one MPI message.
  for (size_t i = 0; i < sent_.size(); ++i) {
    auto& [dest, m] = sent_[i];
    if (dest != 0) {
      Buffer& b = out_batches_[static_cast<size_t>(dest)];
      if (!b.empty()) {
        ++from_head_.batches;
        from_head_.bytes += b.size();
        b.Clear();
        head_last_sent_[static_cast<size_t>(dest)] = NowNs();
      }
    }
    if (auto* d = std::get_if<internal::DispatchTask>(&m)) {
      dispatches_.emplace_back(d->spec->id, dest);
      const int64_t at = NowNs() + options_.task_delay_ns;
      Due due{at, dest, d->spec->id, d->spec->attempt};
      if (hold_) {
        held_.emplace(due.id, due);
      } else {
        due_.push(due);
      }
    } else if (auto* ready = std::get_if<internal::ObjectReady>(&m)) {
      if (dest == 0) {
        // The driver's Get returns, then its ref goes.
        ++completed_;
        if (ready->failed) ++failed_;
        if (track_completed_) completed_ids_.insert(ready->id);
        if (actors_.count(ready->id) == 0) drops_.push_back(ready->id);
      }
    }
    // Everything else (FreeObjects, heartbeats, ...) needs no answer from a simulated rank.
  }
  sent_.clear();
}

void HeadSimulation::Deliver(int from, Message&& m) {
  // Not timed: the caller times rank 0's side as a whole.
  head_->Post(from, std::move(m));
}

void HeadSimulation::Heartbeats(int64_t now) {
  // MpiTransport::CheckLiveness, every 100 ms: each rank heartbeats rank 0 after
  // timeout/6 of sending nothing; rank 0 does the same towards each rank and checks that
  // each was heard within the timeout.
  if (now - last_liveness_check_ < 100'000'000) return;
  last_liveness_check_ = now;
  const auto period = static_cast<int64_t>(options_.rank_timeout_s * 1e9 / 6);
  for (int r = 1; r < options_.num_ranks; ++r) {
    auto& last = rank_last_sent_[static_cast<size_t>(r)];
    if (now - last > period) {
      Buffer& b = in_batches_[static_cast<size_t>(r)];
      if (b.empty()) in_ranks_.push_back(r);
      internal::EncodeMessage(internal::Heartbeat{}, b);
      last = now;
    }
  }
  const int64_t t0 = ThreadCpuNs();
  const auto timeout = static_cast<int64_t>(options_.rank_timeout_s * 1e9);
  uint64_t silent = 0;
  for (int r = 1; r < options_.num_ranks; ++r) {
    const auto i = static_cast<size_t>(r);
    if (now - head_last_sent_[i] > period) {
      internal::EncodeMessage(internal::Heartbeat{}, out_batches_[i]);
      ++from_head_.messages;
      ++from_head_.heartbeats;
      ++from_head_.batches;
      from_head_.bytes += out_batches_[i].size();
      out_batches_[i].Clear();
      head_last_sent_[i] = now;
    }
    if (now - head_last_heard_[i] > timeout) {
      ++silent;
      head_last_heard_[i] = now;
    }
  }
  head_ns_ += ThreadCpuNs() - t0;
  if (silent > 0 && now > timeout) {
    throw std::runtime_error("HeadSimulation: " + std::to_string(silent) +
                             " simulated rank(s) went silent for the rank timeout");
  }
}

bool HeadSimulation::Round() {
  const int64_t now = NowNs();
  bool any = false;
  // 1. Simulated ranks report their due tasks, a batch per rank.
  std::vector<internal::TaskDone> rank0_done;
  while (!due_.empty() && due_.top().at_ns <= now) {
    Due d = due_.top();
    due_.pop();
    internal::TaskDone done;
    done.id = d.id;
    done.attempt = d.attempt;
    done.ok = true;
    done.size = 4;
    static const internal::Payload kResult = std::make_shared<const Buffer>("\0\0\0\0", 4);
    done.inline_value = kResult;
    done.exec_ns = options_.reported_exec_ns > 0
                       ? options_.reported_exec_ns
                       : static_cast<uint64_t>(std::max<int64_t>(1, options_.task_delay_ns));
    if (d.rank == 0) {
      rank0_done.push_back(std::move(done));
      continue;
    }
    Buffer& b = in_batches_[static_cast<size_t>(d.rank)];
    if (b.empty()) in_ranks_.push_back(d.rank);
    internal::EncodeMessage(done, b);
    rank_last_sent_[static_cast<size_t>(d.rank)] = now;
  }
  Heartbeats(now);
  // 2. Rank 0: decode each batch and post its messages (the progress thread), rank 0's
  // own node posts structs; the head's sends are encoded as it makes them.
  if (!in_ranks_.empty() || !rank0_done.empty()) {
    any = true;
    const int64_t t0 = ThreadCpuNs();
    for (int r : in_ranks_) {
      Buffer& b = in_batches_[static_cast<size_t>(r)];
      ++to_head_.batches;
      to_head_.bytes += b.size();
      head_last_heard_[static_cast<size_t>(r)] = now;
      std::vector<Message> messages = internal::DecodeBatch(b.data(), b.size());
      b.Clear();
      for (auto& m : messages) {
        ++to_head_.messages;
        if (std::holds_alternative<internal::Heartbeat>(m)) {
          ++to_head_.heartbeats;
          continue;  // the transport keeps it (liveness); the head never sees it
        }
        Deliver(r, std::move(m));
      }
    }
    for (auto& done : rank0_done) Deliver(0, std::move(done));
    head_ns_ += ThreadCpuNs() - t0;
    in_ranks_.clear();
  }
  // 3. What the head sent reaches its ranks.
  if (!sent_.empty()) {
    any = true;
    HandleSent();
  }
  return any;
}

void HeadSimulation::Hold(bool hold) {
  hold_ = hold;
  track_completed_ |= hold;
  if (hold) return;
  for (auto& [id, due] : held_) due_.push(due);
  held_.clear();
}

void HeadSimulation::Finish(TaskId id) {
  auto it = held_.find(id);
  if (it == held_.end())
    throw std::invalid_argument("HeadSimulation::Finish: task " + id.Hex() + " is not held");
  it->second.at_ns = NowNs();
  due_.push(it->second);
  held_.erase(it);
}

bool HeadSimulation::RunUntilCompleted(TaskId id, double timeout_s) {
  const int64_t deadline = NowNs() + static_cast<int64_t>(timeout_s * 1e9);
  while (completed_ids_.count(id) == 0) {
    if (NowNs() > deadline) return false;
    if (!Round()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

bool HeadSimulation::RunUntilDone(double timeout_s) {
  const int64_t deadline = NowNs() + static_cast<int64_t>(timeout_s * 1e9);
  while (completed_ < submitted_) {
    if (NowNs() > deadline) return false;
    if (!Round() && !due_.empty() && options_.task_delay_ns > 0) {
      // Nothing due yet: the simulated ranks are still running their tasks.
      const int64_t wait = due_.top().at_ns - NowNs();
      if (wait > 50'000)
        std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(wait, 1'000'000)));
    }
  }
  return true;
}

void HeadSimulation::RunFor(double seconds) {
  const int64_t end = NowNs() + static_cast<int64_t>(seconds * 1e9);
  while (NowNs() < end) {
    if (!Round()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace prism::sim
