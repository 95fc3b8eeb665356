#pragma once
// The data plane: objects move rank to rank over UCX (ucp), never through the head.
//
// Protocol (UCP active messages, so UCX picks the transport and the protocol: shared
// memory, CMA, RDMA on InfiniBand, TCP elsewhere; eager for small objects, zero-copy
// rendezvous for large ones):
//   requester -> holder   kRequest {object id, request number}
//   holder -> requester   kReply   {request number, found, size} + the object's bytes
// The requester receives the bytes straight into a buffer of the object's size.
//
// Measured here and left out (256 MiB, same host, UCX 1.13):
//  - RMA get from the holder's pool blocks registered with UCX (CMA, one kernel copy):
//    8.8 GB/s inside Prism, the same as this AM path, for pins, keys and a release message.
//  - RMA get from UCX-allocated shared memory (UCP_MEM_MAP_ALLOCATE), copied out of a
//    mapping: 13.6 GB/s once the reader's mapping is warm, but every first pass over a
//    mapping runs at 0.3-1 GB/s on this VM (even with MAP_POPULATE), and shared memory gets
//    no transparent huge pages, so fresh blocks fault in at half speed: a broadcast to 4
//    ranks took 0.6-1 s instead of 0.11 s.
//
// One progress thread per rank owns the UCX worker. Other threads hand it fetches through
// a queue and wake it with an eventfd; when idle it sleeps in epoll on the worker's event
// fd (UCP_FEATURE_WAKEUP), so an idle rank costs no CPU. Worker addresses are exchanged
// once at Init (the caller all-gathers Address()); endpoints are created on first use.
// Requests for the same object on one rank are merged by the node before they get here.

#include <sys/types.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/object_fetcher.h"

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
  /// Every rank's address, by rank. Starts the progress thread.
  void Start(std::vector<std::vector<char>> addresses);
  void Fetch(int holder, ObjectId id,
             std::function<void(Payload, const std::string&)> done) override;
  /// Stops the progress thread; fetches still in flight fail with an error.
  void Stop();
  void PeerLost(int rank) override;

 private:
  struct Fetching;
  struct Sending;
  struct Reply {
    int to;
    uint64_t request;
    Payload value;
  };
  static constexpr unsigned kRequest = 1;
  static constexpr unsigned kReply = 2;

  static ucs_status_t OnRequest(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnReply(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param);
  static void SendDone(void* request, ucs_status_t status, void* user_data);
  static void RecvDone(void* request, ucs_status_t status, size_t length, void* user_data);

  void Loop();
  ucp_ep_h Endpoint(int rank);
  /// Starts an AM send; `ctx` (header and data owner) is freed when it completes.
  void Send(int to, unsigned id, std::unique_ptr<Sending> ctx);
  void Finish(uint64_t request, Payload value, const std::string& error);
  void Wake();
  /// Progresses the worker until every send and receive it started has completed, or
  /// `limit` has passed; true if none is left. UCX must not be torn down with requests
  /// outstanding (ucp_worker_destroy reads freed protocol state on them and crashes).
  bool Drain(std::chrono::milliseconds limit);

  int rank_;
  int world_;
  Lookup lookup_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<char> address_;
  std::vector<std::vector<char>> peers_;
  std::vector<ucp_ep_h> eps_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};

  std::mutex queue_mu_;
  std::deque<std::unique_ptr<Fetching>> queued_;  // from other threads
  std::vector<int> newly_lost_;                     // PeerLost, for the progress thread

  // Progress-thread only:
  std::unordered_map<uint64_t, std::unique_ptr<Fetching>> fetches_;  // by request number
  std::deque<Reply> replies_;  // answers to send once the current progress call returns
  uint64_t next_request_ = 0;
  // Fetches answered at Stop whose receive buffers UCX may still write into until drained.
  std::vector<std::unique_ptr<Fetching>> abandoned_;
  std::unordered_set<void*> in_flight_;  // UCX requests not completed yet (sends and receives)
  std::vector<bool> lost_;               // peers lost (PeerLost): never sent to again
  /// Fails the fetches from ranks PeerLost named since the last call.
  void LoseNewPeers();
};

}  // namespace prism::internal
