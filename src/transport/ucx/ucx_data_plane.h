#pragma once
// The data plane: objects move rank to rank over UCX (ucp), never through the head.
//
// Protocol (UCP active messages, so UCX picks the transport: shared memory, CMA, RDMA on
// InfiniBand, TCP elsewhere):
//   requester -> holder   kRequest {object id, request number, rank, flags}
//   holder -> requester   kReply   {request number, kBytes, size} + the object's bytes
//                              or  {request number, kRemote, size} + {region, address, pin,
//                                   packed remote key}
//   requester -> holder   kRelease {pin}          after reading a kRemote reply
//   holder -> requester   kForget  {region, rank} when a region it handed out is freed
// A kBytes reply is received straight into a buffer of the object's size (eager for small
// objects, zero-copy rendezvous for large ones). kRemote is for a requester on the same
// host (it says so in `flags`) when the object sits in UCX-allocated memory (UcxMemory,
// which the buffer pool uses for its blocks): the requester reads the bytes itself with
// ucp_get from the shared-memory region, and the holder keeps the object alive until the
// kRelease. RMA is never used across hosts (UCX emulates it over TCP at ~0.1 GB/s).
//
// One progress thread per rank owns the UCX worker. Other threads hand it fetches through
// a queue and wake it with an eventfd; when idle it sleeps in epoll on the worker's event
// fd (UCP_FEATURE_WAKEUP), so an idle rank costs no CPU. Worker addresses are exchanged
// once at Init (the caller all-gathers Address()); endpoints are created on first use.
// Requests for the same object on one rank are merged by the node before they get here.

#include <sys/types.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/node.h"
#include "transport/ucx/ucx_memory.h"

namespace prism::internal {

class UcxDataPlane : public ObjectFetcher {
 public:
  using Lookup = std::function<Payload(ObjectId id)>;
  /// Creates the UCX context and worker. Throws prism::Error if UCX cannot start (the
  /// message says why and how to fall back: PRISM_DATA_PLANE=mpi).
  UcxDataPlane(int rank, int world, Lookup lookup);
  ~UcxDataPlane() override;

  /// This rank's worker address, for the all-gather at Init.
  const std::vector<char>& Address() const { return address_; }
  /// Every rank's address, and whether it runs on this host, by rank. Starts the progress
  /// thread and has the buffer pool allocate from UCX memory.
  void Start(std::vector<std::vector<char>> addresses, std::vector<bool> same_host);
  void Fetch(int holder, ObjectId id,
             std::function<void(Payload, const std::string&)> done) override;
  /// Stops the progress thread; fetches still in flight fail with an error.
  void Stop();

  /// Objects this rank read straight from a same-host peer's memory (kRemote replies).
  uint64_t RemoteReads() const { return remote_reads_.load(); }
  /// Peers' memory keys this rank holds (each maps a region of the peer's memory).
  uint64_t RemoteKeysHeld() const { return keys_held_.load(); }

 private:
  struct Fetching;
  /// An AM to send from the progress thread: kind, header and the bytes (kept alive until
  /// the send completes).
  struct Outgoing {
    UcxDataPlane* self = nullptr;
    int to = -1;
    unsigned kind = 0;
    uint64_t header[4] = {0, 0, 0, 0};
    Payload value;
  };
  /// A kRemote reply to act on: read `size` bytes at `address` in the holder's region.
  struct Remote {
    uint64_t request;
    int holder;
    uint64_t region;
    uint64_t address;
    uint64_t pin;
    uint64_t size;
    std::vector<char> rkey;
  };
  static constexpr unsigned kRequest = 1;
  static constexpr unsigned kReply = 2;
  static constexpr unsigned kRelease = 3;
  static constexpr unsigned kForget = 4;
  static constexpr uint64_t kMayReadRemote = 1;  // request flag: same host
  static constexpr uint64_t kMissing = 0, kBytes = 1, kRemoteBytes = 2;

  static ucs_status_t OnRequest(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnReply(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnRelease(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnForget(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param);
  static void SendDone(void* request, ucs_status_t status, void* user_data);
  static void RecvDone(void* request, ucs_status_t status, size_t length, void* user_data);
  static void GetDone(void* request, ucs_status_t status, void* user_data);

  void Loop();
  /// One pass over the work other threads and callbacks left; true if there was any.
  bool DrainWork();
  ucp_ep_h Endpoint(int rank);
  /// Queues an AM; the progress thread sends it once the current progress call returns
  /// (no sends from inside UCX callbacks).
  void Post(int to, unsigned kind, std::initializer_list<uint64_t> header, Payload value = {});
  void Send(std::unique_ptr<Outgoing> out);
  void Request(uint64_t request, Fetching& f);
  void Serve(int to, uint64_t request, uint64_t flags, Payload value);
  void ReadRemote(Remote r);
  ucp_rkey_h RemoteKey(int holder, uint64_t region, const std::vector<char>& packed);
  void Finish(uint64_t request, Payload value, const std::string& error);
  void Wake();

  int rank_;
  int world_;
  Lookup lookup_;
  std::shared_ptr<UcxContext> context_;
  std::shared_ptr<UcxMemory> memory_;
  ucp_worker_h worker_ = nullptr;
  std::vector<char> address_;
  std::vector<std::vector<char>> peers_;
  std::vector<bool> same_host_;
  std::vector<ucp_ep_h> eps_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};

  std::mutex queue_mu_;
  std::deque<std::unique_ptr<Fetching>> queued_;  // from other threads

  // Progress-thread only:
  std::unordered_map<uint64_t, std::unique_ptr<Fetching>> fetches_;  // by request number
  std::deque<std::unique_ptr<Outgoing>> outbox_;
  std::deque<Remote> remotes_;
  std::unordered_map<uint64_t, Payload> pins_;          // objects peers are reading
  std::unordered_map<uint64_t, std::set<int>> lent_;    // region -> ranks holding its key
  std::map<std::pair<int, uint64_t>, ucp_rkey_h> rkeys_;  // (holder, region) -> key
  uint64_t next_request_ = 0;
  uint64_t next_pin_ = 0;
  std::atomic<uint64_t> remote_reads_{0};
  std::atomic<uint64_t> keys_held_{0};
};

}  // namespace prism::internal
