#pragma once
// Control plane and (for now) object transfer over MPI. One progress thread per rank drives
// MPI_COMM_WORLD after Init (libraries' collectives run on communicators of their own:
// prism/platform/communicator.h; docs/ARCHITECTURE.md lists every tag):
//   * Send() from any thread encodes the message into a per-destination batch; the
//     progress thread ships each batch as one MPI_Isend on kControlTag.
//   * Incoming batches are matched with MPI_Improbe/MPI_Mrecv, decoded and handed to
//     the on_message handler on the thread that drives.
//   * Helpers (common/progress_helper.h): a thread that spins waiting for work or a result
//     makes passes itself when no other thread drives (driving_), so what it waits for
//     reaches it without a hand-off; while helpers are at work the progress thread naps
//     (at least kAsideNapNs, woken by a helper that stops) instead of competing with them
//     for the cores, and a Send then ships its batch at once. Measured on 3 ranks on 2
//     cores: a task pinned to another rank 21 -> 7.3 us a round trip.
//   * Fetch(): FetchRequest to the holder, which answers FetchReply(size) and then the
//     bytes on a tag private to that fetch, in chunks of at most kChunkBytes (so objects
//     over 2 GiB work despite MPI's int counts).
//   * Idle back-off: after kSpinNs without work (heartbeats are not work; up to kMaxSpinNs,
//     yielding, when traffic came back after a pause of up to half that: see Loop) the
//     thread sleeps on a condition variable for growing periods (up to kMaxSleepNs, longer
//     after 200 ms, 1 s and 5 s of quiet, at most 2 x kLongIdleSleepNs), woken early by
//     Send/Fetch. An idle rank thus costs about one MPI_Improbe per 20 ms (measured with
//     prism_microbenchmark's idle_rank_cpu: 0.36% of a core for the whole process). Open
//     MPI's blocking receives busy-poll, so they cannot be used for waiting. The naps are in
//     ppoll on an eventfd (Send/Fetch/StopHelping) and the doorbell's socket
//     (transport/doorbell.h): a pass that sends work to a peer that sent none for
//     kRingAfterNs rings it (at most once per kRingAfterNs), and a napping peer wakes at
//     once instead of at the nap's end (a task sent to a rank idle for a second: 22 ms
//     without it). Naps while helpers drive (below) do not listen for rings.
//   * Liveness: ranks exchange heartbeats with rank 0; a peer silent for rank_timeout is
//     reported through on_fatal (the job then ends), unless on_rank_lost is set (rank 0
//     in recovery mode: a launcher that keeps the job alive, docs/ARCHITECTURE.md "A lost
//     worker rank"): then a worker silent for rank_timeout, or whose process `exited` says
//     is gone (checked each 100 ms tick), is lost: reported once, and from then on nothing
//     is sent to it (MPI would hang or silently drop it), its sends in flight are
//     abandoned (their buffers kept: MPI may still read them), its fetches fail, and what
//     it may still send is ignored.

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/object_fetcher.h"
#include "common/progress_helper.h"
#include "common/protocol.h"
#include "transport/doorbell.h"

namespace prism::internal {

class MpiTransport : public ObjectFetcher, public ProgressHelper {
 public:
  static constexpr int kControlTag = 1;
  static constexpr int kFirstDataTag = 100;
  static constexpr uint64_t kChunkBytes = 1ULL << 28;  // 256 MiB
  static constexpr int64_t kSpinNs = 500'000;
  static constexpr int64_t kMaxSpinNs = 4'000'000;  // the spin widened for periodic traffic
  static constexpr int64_t kMaxSleepNs = 2'000'000;
  static constexpr int64_t kLongIdleNs = 1'000'000'000;
  static constexpr int64_t kLongIdleSleepNs = 10'000'000;
  /// Helpers this recent keep the progress thread aside, in naps of kAsideNapNs.
  static constexpr int64_t kHelpersActiveNs = 100'000;
  static constexpr int64_t kAsideNapNs = 250'000;
  /// A peer that sent no work for this long may be napping: work sent to it rings it
  /// (at most once per this period). A rank spins at least kSpinNs after its last work.
  static constexpr int64_t kRingAfterNs = 1'000'000;

  struct Handlers {
    std::function<void(int from, Message&& msg)> on_message;
    std::function<Payload(ObjectId id)> lookup;
    std::function<void(const std::string& why)> on_fatal;
    /// Called on the progress thread every 100 ms (with the liveness check); may be empty.
    std::function<void()> on_tick;
    /// Rank 0 in recovery mode: a worker rank was lost (`why`), on the progress thread.
    /// Empty: a silent rank is fatal.
    std::function<void(int rank, const std::string& why)> on_rank_lost;
    /// Recovery mode: true if the rank's process is known to have ended (a rank on this
    /// host whose pid is gone); may be empty. Called each tick: on rank 0 for every live
    /// worker (one that ended is lost), on a worker for rank 0 (the job ends: on_fatal).
    std::function<bool(int rank)> exited;
  };

  MpiTransport(MPI_Comm comm, double rank_timeout_s, Handlers handlers);
  ~MpiTransport() override;

  /// Gives the transport its doorbell (before Start; without one it only naps).
  void SetDoorbell(std::unique_ptr<Doorbell> doorbell) { doorbell_ = std::move(doorbell); }
  void Start();
  /// Queues a message for `dest`. Thread-safe, never blocks on the network.
  void Send(int dest, const Message& msg);
  /// A worker rank hears from the head that `rank` was lost: handled at the next tick
  /// (LoseRank). Rank 0 finds out itself.
  void PeerLost(int rank) override;
  void Fetch(int holder, ObjectId id,
             std::function<void(Payload, const std::string&)> done) override;
  /// Sends what is queued, waits (up to timeout) for sends to complete, stops the thread.
  void Stop(std::chrono::milliseconds timeout);

  // ProgressHelper (installed by Start): a waiting thread's pass over the transport.
  bool Help() override;
  void StopHelping() override;

  int rank() const { return rank_; }
  /// Ranks lost so far (on_rank_lost), in the order they were. Thread-safe.
  std::vector<int> LostRanks() const;
  /// Rings sent to peers and rings that woke this rank (for tests and benchmarks).
  uint64_t RingsSent() const { return rings_sent_.load(std::memory_order_relaxed); }
  uint64_t RingsHeard() const { return rings_heard_.load(std::memory_order_relaxed); }
  int size() const { return size_; }

 private:
  struct PendingSend {
    MPI_Request request;
    std::shared_ptr<const void> keep_alive;
    int dest = -1;
  };
  struct PendingFetch {
    ObjectId id;
    int holder;
    std::function<void(Payload, const std::string&)> done;
    std::shared_ptr<Buffer> buffer;
    std::vector<MPI_Request> requests;
  };

  void Loop();
  /// One pass: send what is queued, start fetches, receive, complete transfers, and send
  /// what the handlers queued. Sets `active` if a message (not a heartbeat) went or came,
  /// `progressed` if a send or transfer completed. The caller holds the transport (driving_).
  void Pass(bool& active, bool& progressed);
  static int64_t IdleNapNs(int64_t idle_ns);
  bool TryDrive();
  void EndDrive();
  bool FlushOutbox();
  bool StartFetches();
  bool PollIncoming();
  bool TestPending();
  void CheckLiveness();
  /// Declares `r` lost: abandons what is in flight with it and reports it. The caller drives.
  void LoseRank(int r, const std::string& why);
  bool IsLost(int r) const { return lost_[static_cast<size_t>(r)].load(std::memory_order_relaxed); }
  void OnFetchRequest(int from, const FetchRequest& req);
  void OnFetchReply(int from, const FetchReply& rep);
  void Wake();
  void NotifyLoop();  // wakes the progress thread from a nap
  /// Naps up to `ns` in ppoll, woken by NotifyLoop or, if `ring`, a ring (then sets `rung`).
  void Nap(int64_t ns, bool ring, bool& rung);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::chrono::nanoseconds rank_timeout_;
  Handlers handlers_;
  std::thread thread_;
  std::atomic<bool> stop_{false};

  std::mutex out_mu_;
  std::map<int, Buffer> outbox_;
  std::vector<char> outbox_work_;  // by rank: its batch holds more than heartbeats (out_mu_)
  std::atomic<bool> queued_{false};  // the outbox or queued_fetches_ may hold something
  std::deque<PendingFetch> queued_fetches_;
  std::atomic<bool> has_work_{false};
  std::atomic<bool> sleeping_{false};
  // The MPI side (everything below "Whoever drives") belongs to whichever thread holds
  // this: the progress thread, or a helper (progress_helper.h) that took it.
  std::atomic<bool> driving_{false};
  std::atomic<bool> aside_{false};  // the progress thread naps because helpers drive
  std::atomic<int64_t> helped_at_ns_{0};  // a helper's last pass (steady clock; 0: stopped)
  std::atomic<int64_t> helper_active_ns_{0};  // a helper's last pass that found work
  int wake_fd_ = -1;  // an eventfd: NotifyLoop ends the progress thread's nap
  std::unique_ptr<Doorbell> doorbell_;
  std::atomic<uint64_t> rings_sent_{0}, rings_heard_{0};

  bool one_core_ = false;  // this process may run on one core only (Start)
  // Whoever drives (driving_):
  std::vector<PendingSend> pending_sends_;
  std::unordered_map<uint32_t, PendingFetch> fetches_;  // by tag
  uint32_t next_tag_ = kFirstDataTag;
  std::vector<std::chrono::steady_clock::time_point> last_heard_;
  // Per peer: when it last sent work (not a heartbeat), and when it was last rung.
  std::vector<std::chrono::steady_clock::time_point> last_heard_work_, last_rang_;
  std::vector<int> work_to_;  // FlushOutbox's ranks sent work, kept to not allocate per flush
  // Per peer: a busy head talking to some workers must still heartbeat the idle ones.
  std::vector<std::chrono::steady_clock::time_point> last_sent_;
  std::chrono::steady_clock::time_point last_liveness_check_;
  // Lost ranks (on_rank_lost): set by whoever drives, read by Send/Fetch on any thread.
  std::unique_ptr<std::atomic<bool>[]> lost_;
  mutable std::mutex lost_mu_;
  std::vector<int> lost_order_;  // lost_mu_
  std::vector<int> told_lost_;   // lost_mu_: PeerLost, for the next tick
  // Sends to a lost rank that MPI never completed: their requests and buffers are kept
  // (MPI may still touch them) and never waited for.
  std::vector<PendingSend> abandoned_;
};

}  // namespace prism::internal
