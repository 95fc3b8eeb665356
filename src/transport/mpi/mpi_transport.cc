#include "transport/mpi/mpi_transport.h"


#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "common/check.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "prism/errors.h"
#include "transport/codec.h"

namespace prism::internal {

using Clock = std::chrono::steady_clock;

MpiTransport::MpiTransport(MPI_Comm comm, double rank_timeout_s, Handlers handlers)
    : comm_(comm),
      rank_timeout_(std::chrono::nanoseconds(static_cast<int64_t>(rank_timeout_s * 1e9))),
      handlers_(std::move(handlers)) {
  PRISM_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  PRISM_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  last_heard_.assign(size_, Clock::now());
  last_sent_.assign(size_, Clock::now());
  last_heard_work_.assign(size_, Clock::time_point{});
  last_rang_.assign(size_, Clock::time_point{});
  outbox_work_.assign(size_, 0);
  lost_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) lost_[static_cast<size_t>(r)].store(false);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw Error(std::string("prism: the MPI transport's eventfd: ") + std::strerror(errno));
}

MpiTransport::~MpiTransport() {
  Stop(std::chrono::milliseconds(1000));
  close(wake_fd_);
}

namespace {

// The thread holds the transport (a pass of the progress thread or of a helper): Send
// only queues, and the pass sends what it queued before it ends.
thread_local bool t_driving = false;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace

// Graded back-off: short naps while traffic may resume, longer ones after a quiet 200 ms
// (5 ms), second (10 ms) and 5 s (20 ms: the longest a first message waits). (A wake-up
// costs about 40 us of CPU on this VM: 100 a second is 0.4% of a core.)
int64_t MpiTransport::IdleNapNs(int64_t idle_ns) {
  int64_t cap = idle_ns < kLongIdleNs / 5   ? kMaxSleepNs
                : idle_ns < kLongIdleNs     ? kLongIdleSleepNs / 2
                : idle_ns < 5 * kLongIdleNs ? kLongIdleSleepNs
                                            : 2 * kLongIdleSleepNs;
  return std::clamp<int64_t>(idle_ns / 8, 20'000, cap);
}

void MpiTransport::Start() {
  cpu_set_t allowed;
  one_core_ = sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) <= 1;
  last_liveness_check_ = Clock::now();
  last_sent_.assign(size_, last_liveness_check_);
  thread_ = std::thread([this] { Loop(); });
  SetProgressHelper(this);
}

bool MpiTransport::TryDrive() {
  if (t_driving || driving_.exchange(true, std::memory_order_acquire)) return false;
  t_driving = true;
  return true;
}

void MpiTransport::EndDrive() {
  t_driving = false;
  driving_.store(false, std::memory_order_release);
}

void MpiTransport::Wake() {
  has_work_.store(true);
  if (sleeping_.load() || aside_.load()) NotifyLoop();
}

void MpiTransport::NotifyLoop() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void MpiTransport::Nap(int64_t ns, bool ring, bool& rung) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {doorbell_ && ring ? doorbell_->fd() : -1, POLLIN, 0}};
  const timespec timeout{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  if (ppoll(fds, 2, &timeout, nullptr) <= 0) return;
  if (fds[0].revents & POLLIN) {
    uint64_t count;
    (void)!read(wake_fd_, &count, sizeof count);
  }
  if ((fds[1].revents & POLLIN) && doorbell_->Drain() > 0) {
    rings_heard_.fetch_add(1, std::memory_order_relaxed);
    rung = true;
  }
}

void MpiTransport::Send(int dest, const Message& msg) {
  if (IsLost(dest)) return;  // it would hang in MPI, or be dropped there silently
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    EncodeMessage(msg, outbox_[dest]);
    if (!std::holds_alternative<Heartbeat>(msg)) outbox_work_[dest] = 1;
    queued_.store(true, std::memory_order_release);
  }
  if (t_driving) return;  // the pass under way sends it
  // With the progress thread aside, nobody may look for a while (the helper that was
  // waiting got what it waited for): send it now, unless someone drives already. The same
  // when it naps: waking it first would put a thread's wake-up (tens of microseconds, far
  // more after an idle second on this VM) before the message leaves; it is woken after,
  // to keep the send progressing and to look for the answer (the send counts as activity).
  const bool aside = aside_.load(std::memory_order_relaxed);
  if ((aside || sleeping_.load(std::memory_order_relaxed)) && TryDrive()) {
    if (FlushOutbox()) helper_active_ns_.store(NowNs(), std::memory_order_relaxed);
    EndDrive();
    if (aside) return;
  }
  Wake();
}

void MpiTransport::Fetch(int holder, ObjectId id,
                         std::function<void(Payload, const std::string&)> done) {
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    queued_fetches_.push_back({id, holder, std::move(done), nullptr, {}});
    queued_.store(true, std::memory_order_release);
  }
  Wake();
}

void MpiTransport::Stop(std::chrono::milliseconds timeout) {
  if (!thread_.joinable()) return;
  RemoveProgressHelper(this);  // returns once no helper is inside a pass
  stop_ = true;
  NotifyLoop();
  thread_.join();
  // Ship what is still queued and wait, bounded, for every send to complete.
  const bool inside_pass = t_driving;  // stopped from a handler
  while (!inside_pass && !TryDrive()) sched_yield();  // a late Send's own flush
  FlushOutbox();
  auto deadline = Clock::now() + timeout;
  while (!pending_sends_.empty() && Clock::now() < deadline) {
    TestPending();
    PollIncoming();  // keep draining peers so that their sends to us complete too
  }
  for (auto& p : pending_sends_) {
    MPI_Cancel(&p.request);
    MPI_Request_free(&p.request);
  }
  pending_sends_.clear();
  if (!inside_pass) EndDrive();
}

void MpiTransport::Pass(bool& active, bool& progressed) {
  // The outbox's lock only when something is queued: helpers pass every microsecond or so.
  active = false;
  if (queued_.load(std::memory_order_acquire)) {
    active = FlushOutbox();
    active |= StartFetches();
  }
  active |= PollIncoming();
  progressed = TestPending();
  if (queued_.load(std::memory_order_acquire)) FlushOutbox();  // what the handlers queued
}

bool MpiTransport::Help() {
  if (t_driving || stop_.load(std::memory_order_relaxed)) return false;
  // A helper counts as present even when another thread drives now: the progress thread,
  // descheduled inside MPI (Open MPI yields in an empty poll when ranks outnumber cores)
  // while it drives, must still see that it can step aside.
  const int64_t now = NowNs();
  helped_at_ns_.store(now, std::memory_order_relaxed);
  if (!TryDrive()) return false;
  bool active, progressed;
  Pass(active, progressed);
  EndDrive();
  if (active) helper_active_ns_.store(now, std::memory_order_relaxed);
  return active || progressed;
}

void MpiTransport::StopHelping() {
  helped_at_ns_.store(0, std::memory_order_relaxed);
  if (aside_.load()) NotifyLoop();
}

void MpiTransport::Loop() {
  NameThisThread("prism-mpi");
  auto last_active = Clock::now();
  int64_t spin_ns = kSpinNs;  // how long to keep looking after the last activity
  while (!stop_.load()) {
    has_work_.store(false);
    // Work: messages other than heartbeats, sent or received, and transfers. Heartbeats
    // keep the peers' liveness, not the spin: counted as work, each (every
    // rank_timeout / 6, both ways) restarted a second of short naps, which tripled an idle
    // rank's wake-ups.
    while (!TryDrive()) sched_yield();  // a helper's pass: a few microseconds
    bool active, progressed;
    Pass(active, progressed);
    auto now = Clock::now();
    if (now - last_liveness_check_ > std::chrono::milliseconds(100)) {
      last_liveness_check_ = now;
      CheckLiveness();
      if (handlers_.on_tick) handlers_.on_tick();
      FlushOutbox();
    }
    const bool transfers = !pending_sends_.empty() || !fetches_.empty();
    EndDrive();
    // What the helpers found counts as activity too (for the spin and the naps below).
    const auto helper_active = Clock::time_point(
        std::chrono::nanoseconds(helper_active_ns_.load(std::memory_order_relaxed)));
    if (helper_active > last_active && !active) {
      last_active = helper_active;
      spin_ns = kSpinNs;
    }
    if (active) {
      // Traffic that pauses a little longer than the spin (a request every millisecond or
      // so) would meet a nap each time, and each answer the nap delays makes the next pause
      // longer: a job stuck at one nap per message (1.5 ms per remote round trip with 2
      // ranks, where 20 us is possible). After such a pause, look for twice as long; a
      // pause too long for that goes back to the plain spin.
      const int64_t gap = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_active).count();
      if (gap > kSpinNs) spin_ns = 2 * gap <= kMaxSpinNs ? 2 * gap : kSpinNs;
      last_active = now;
    }
    // Threads waiting on this rank look at the transport themselves (Help): step aside
    // rather than take a core from them, even while traffic flows (they see it first). A
    // nap, not a spin: the helpers may be the ones this thread would keep off the cores.
    // StopHelping, or a message a helper may not send, ends the nap early.
    auto helpers_active = [&] {
      const int64_t at = helped_at_ns_.load(std::memory_order_relaxed);
      return at != 0 && NowNs() - at < kHelpersActiveNs;
    };
    int64_t idle_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_active).count();
    if (helpers_active()) {
      // Helpers that find nothing either (a driver waiting for its own rank's tasks) let
      // the naps grow as an idle rank's do: fewer wake-ups to compete with them, up to
      // kMaxSleepNs. No more: a helper whose wait ended because its object came leaves
      // without StopHelping (that would wake this thread on every Get), and what arrives
      // next then waits for the nap's end (a Serve request after a pause waited a whole
      // 10-20 ms idle nap).
      aside_.store(true);
      bool rung = false;
      if (!stop_.load() && !has_work_.load() && helpers_active()) {
        // Not woken by rings: the helpers look at the transport meanwhile.
        Nap(std::clamp(IdleNapNs(idle_ns), kAsideNapNs, kMaxSleepNs), /*ring=*/false, rung);
      }
      aside_.store(false);
      continue;
    }
    if (active || progressed) continue;  // look again at once
    if (transfers) {
      sched_yield();  // transfers in flight need MPI progress; let other ranks run too
      continue;
    }
    if (idle_ns < kSpinNs && !one_core_) {
      for (int i = 0; i < 64; ++i) __builtin_ia32_pause();
      continue;
    }
    if (idle_ns < spin_ns) {
      // Yield on a rank bound to one core (mpirun binds each of 2 ranks to a core; HPC
      // jobs often bind a rank per core): spinning without yielding there keeps the
      // rank's executors off the core until the kernel's tick (measured: a remote round
      // trip with 2 ranks 1.5 ms, and 22 us when yielding).
      sched_yield();
      continue;
    }
    sleeping_.store(true);
    bool rung = false;
    if (!has_work_.load() && !stop_.load()) Nap(IdleNapNs(idle_ns), /*ring=*/true, rung);
    sleeping_.store(false);
    if (rung) {  // work is on its way: look for it as after any other
      last_active = Clock::now();
      spin_ns = kSpinNs;
    }
  }
}

bool MpiTransport::FlushOutbox() {
  std::map<int, Buffer> batches;
  std::vector<int>& work_to = work_to_;  // the ranks whose batch holds work
  work_to.clear();
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    queued_.store(!queued_fetches_.empty(), std::memory_order_relaxed);
    if (outbox_.empty()) return false;
    batches.swap(outbox_);
    for (const auto& [dest, buffer] : batches) {
      if (outbox_work_[dest]) work_to.push_back(dest);
      outbox_work_[dest] = 0;
    }
  }
  const auto now = Clock::now();
  // Ring the peers that may be napping, after their batches are on their way below: a
  // peer that sent no work lately (idle, or running a long task since our last message).
  // A busy exchange rings nobody; a peer that was not napping finds the ring at its next
  // nap, which then ends at once (one wasted look).
  auto ring = [&] {
    if (!doorbell_) return;
    const auto quiet = std::chrono::nanoseconds(kRingAfterNs);
    for (int dest : work_to) {
      if (now - last_heard_work_[dest] < quiet || now - last_rang_[dest] < quiet) continue;
      last_rang_[dest] = now;
      doorbell_->Ring(dest);
      rings_sent_.fetch_add(1, std::memory_order_relaxed);
    }
  };
  for (auto& [dest, buffer] : batches) {
    if (IsLost(dest)) continue;  // queued before it was lost
    last_sent_[dest] = now;
    if (buffer.size() > static_cast<size_t>(INT_MAX)) {
      handlers_.on_fatal("control batch of " + std::to_string(buffer.size()) +
                         " bytes exceeds MPI's int count");
      continue;
    }
    auto keep = std::make_shared<Buffer>(std::move(buffer));
    PendingSend p{MPI_REQUEST_NULL, keep, dest};
    PRISM_MPI_CHECK(MPI_Isend(keep->data(), static_cast<int>(keep->size()), MPI_BYTE, dest,
                              kControlTag, comm_, &p.request));
    pending_sends_.push_back(std::move(p));
  }
  ring();
  return !work_to.empty();
}

bool MpiTransport::StartFetches() {
  std::deque<PendingFetch> fresh;
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    if (queued_fetches_.empty()) return false;
    fresh.swap(queued_fetches_);
    queued_.store(!outbox_.empty(), std::memory_order_relaxed);
  }
  for (auto& f : fresh) {
    if (IsLost(f.holder)) {
      f.done(nullptr, "rank " + std::to_string(f.holder) + " was lost");
      continue;
    }
    uint32_t tag = next_tag_;
    next_tag_ = next_tag_ >= 30000 ? kFirstDataTag : next_tag_ + 1;
    Send(f.holder, FetchRequest{f.id, tag});
    fetches_.emplace(tag, std::move(f));
  }
  return true;
}

bool MpiTransport::PollIncoming() {
  bool work = false;  // something other than heartbeats came
  for (int i = 0; i < 64; ++i) {
    int flag = 0;
    MPI_Message handle;
    MPI_Status status;
    PRISM_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, kControlTag, comm_, &flag, &handle, &status));
    if (!flag) break;
    int count = 0;
    PRISM_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
    Buffer batch(static_cast<size_t>(count));
    PRISM_MPI_CHECK(MPI_Mrecv(batch.data(), count, MPI_BYTE, &handle, MPI_STATUS_IGNORE));
    int from = status.MPI_SOURCE;
    if (IsLost(from)) continue;  // declared lost (silent too long): what it says is too late
    last_heard_[from] = Clock::now();
    std::vector<Message> messages;
    try {
      messages = DecodeBatch(batch.data(), batch.size());
    } catch (const std::exception& e) {
      handlers_.on_fatal("corrupt control message from rank " + std::to_string(from) + ": " +
                         e.what());
      continue;
    }
    for (auto& m : messages) {
      if (!std::holds_alternative<Heartbeat>(m)) {
        work = true;
        last_heard_work_[from] = last_heard_[from];
      }
      if (auto* req = std::get_if<FetchRequest>(&m)) {
        OnFetchRequest(from, *req);
      } else if (auto* rep = std::get_if<FetchReply>(&m)) {
        OnFetchReply(from, *rep);
      } else if (!std::holds_alternative<Heartbeat>(m)) {
        handlers_.on_message(from, std::move(m));
      }
    }
  }
  return work;
}

void MpiTransport::OnFetchRequest(int from, const FetchRequest& req) {
  Payload value = handlers_.lookup(req.id);
  FetchReply reply{req.id, req.tag, value != nullptr, value ? value->size() : 0};
  Send(from, reply);
  FlushOutbox();  // the reply must leave before the data on its tag
  if (!value) return;
  for (uint64_t off = 0; off < value->size(); off += kChunkBytes) {
    int n = static_cast<int>(std::min<uint64_t>(kChunkBytes, value->size() - off));
    PendingSend p{MPI_REQUEST_NULL, value, from};
    PRISM_MPI_CHECK(MPI_Isend(value->data() + off, n, MPI_BYTE, from, static_cast<int>(req.tag),
                              comm_, &p.request));
    pending_sends_.push_back(std::move(p));
  }
}

void MpiTransport::OnFetchReply(int from, const FetchReply& rep) {
  auto it = fetches_.find(rep.tag);
  if (it == fetches_.end()) return;
  PendingFetch& f = it->second;
  if (!rep.found) {
    auto done = std::move(f.done);
    fetches_.erase(it);
    done(nullptr, "rank " + std::to_string(from) + " no longer holds it (freed)");
    return;
  }
  f.buffer = std::make_shared<Buffer>(rep.size);
  for (uint64_t off = 0; off < rep.size; off += kChunkBytes) {
    int n = static_cast<int>(std::min<uint64_t>(kChunkBytes, rep.size - off));
    MPI_Request r;
    PRISM_MPI_CHECK(MPI_Irecv(f.buffer->data() + off, n, MPI_BYTE, from, static_cast<int>(rep.tag),
                              comm_, &r));
    f.requests.push_back(r);
  }
}

bool MpiTransport::TestPending() {
  bool any = false;
  for (size_t i = 0; i < pending_sends_.size();) {
    int done = 0;
    PRISM_MPI_CHECK(MPI_Test(&pending_sends_[i].request, &done, MPI_STATUS_IGNORE));
    if (done) {
      pending_sends_[i] = std::move(pending_sends_.back());
      pending_sends_.pop_back();
      any = true;
    } else {
      ++i;
    }
  }
  for (auto it = fetches_.begin(); it != fetches_.end();) {
    PendingFetch& f = it->second;
    if (!f.buffer) {
      ++it;
      continue;
    }
    int done = 1;
    if (!f.requests.empty()) {
      PRISM_MPI_CHECK(MPI_Testall(static_cast<int>(f.requests.size()), f.requests.data(), &done,
                                  MPI_STATUSES_IGNORE));
    }
    if (done) {
      auto cb = std::move(f.done);
      Payload value = std::move(f.buffer);
      it = fetches_.erase(it);
      cb(std::move(value), "");
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

void MpiTransport::PeerLost(int rank) {
  if (rank < 0 || rank >= size_) return;
  std::lock_guard<std::mutex> lock(lost_mu_);
  told_lost_.push_back(rank);
}

void MpiTransport::CheckLiveness() {
  std::vector<int> told;
  {
    std::lock_guard<std::mutex> lock(lost_mu_);
    told.swap(told_lost_);
  }
  for (int r : told) {
    if (!IsLost(r)) LoseRank(r, "the head declared it lost");
  }
  auto now = Clock::now();
  // Heartbeats: workers to rank 0, rank 0 to every worker, to each peer that was sent
  // nothing else lately.
  auto heartbeat = [&](int r) {
    if (now - last_sent_[r] > rank_timeout_ / 6) Send(r, Heartbeat{});
  };
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) heartbeat(r);
  } else {
    heartbeat(0);
  }
  const bool recover = rank_ == 0 && handlers_.on_rank_lost != nullptr;
  auto check = [&](int r) {
    if (IsLost(r)) return;
    if (recover && handlers_.exited && handlers_.exited(r)) {
      LoseRank(r, "its process ended");
      return;
    }
    if (!recover && handlers_.exited && handlers_.exited(r)) {
      // A worker in recovery mode: the head is gone, and the job with it.
      handlers_.on_fatal("rank " + std::to_string(r) + " (the head) ended");
      last_heard_[r] = now;
      return;
    }
    if (now - last_heard_[r] > rank_timeout_) {
      const std::string why =
          "rank " + std::to_string(r) + " sent nothing for " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - last_heard_[r]).count()) +
          " s (limit " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(rank_timeout_).count()) +
          " s, PRISM_RANK_TIMEOUT)";
      if (recover) {
        LoseRank(r, "it sent nothing for longer than rank_timeout_s (" + why + ")");
        return;
      }
      handlers_.on_fatal(why + ": it died or hangs");
      last_heard_[r] = now;  // report once per period
    }
  };
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) check(r);
  } else {
    check(0);
  }
}

void MpiTransport::LoseRank(int r, const std::string& why) {
  lost_[static_cast<size_t>(r)].store(true);
  {
    std::lock_guard<std::mutex> lock(lost_mu_);
    lost_order_.push_back(r);
  }
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    outbox_.erase(r);
    outbox_work_[r] = 0;
  }
  // Its sends may never complete: keep them (MPI owns the buffers) without waiting.
  for (size_t i = 0; i < pending_sends_.size();) {
    if (pending_sends_[i].dest == r) {
      abandoned_.push_back(std::move(pending_sends_[i]));
      pending_sends_[i] = std::move(pending_sends_.back());
      pending_sends_.pop_back();
    } else {
      ++i;
    }
  }
  // Its fetches fail; their receives are cancelled (a receive from a dead rank pends for
  // good, and cancelling one works in Open MPI 4.1).
  const std::string error = "rank " + std::to_string(r) + " was lost (" + why + ")";
  for (auto it = fetches_.begin(); it != fetches_.end();) {
    if (it->second.holder != r) {
      ++it;
      continue;
    }
    for (MPI_Request& req : it->second.requests) {
      MPI_Cancel(&req);
      MPI_Request_free(&req);
    }
    auto done = std::move(it->second.done);
    it = fetches_.erase(it);
    done(nullptr, error);
  }
  PRISM_LOG_WARN("rank " << r << " was lost: " << why << "; the job goes on without it");
  if (handlers_.on_rank_lost) handlers_.on_rank_lost(r, why);
}

std::vector<int> MpiTransport::LostRanks() const {
  std::lock_guard<std::mutex> lock(lost_mu_);
  return lost_order_;
}

}  // namespace prism::internal
