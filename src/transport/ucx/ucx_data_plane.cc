#include "transport/ucx/ucx_data_plane.h"

#include <sys/epoll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/thread_name.h"
#include "prism/errors.h"

namespace prism::internal {

struct UcxDataPlane::Fetching {
  int holder = -1;
  ObjectId id;
  std::function<void(Payload, const std::string&)> done;
  Buffer buffer;  // rendezvous target
};

/// What an AM send needs until it completes: its header and the bytes it sends.
struct UcxDataPlane::Sending {
  UcxDataPlane* self = nullptr;
  unsigned kind = 0;
  uint64_t header[3] = {0, 0, 0};
  Payload value;
};

namespace {

struct Receiving {
  UcxDataPlane* self;
  uint64_t request;
};

[[noreturn]] void Fail(const std::string& what, ucs_status_t status) {
  throw Error("prism: UCX data plane: " + what + " failed: " + ucs_status_string(status) +
              ". Set PRISM_DATA_PLANE=mpi to move objects over MPI instead.");
}

}  // namespace

UcxDataPlane::UcxDataPlane(int rank, int world, Lookup lookup)
    : rank_(rank), world_(world), lookup_(std::move(lookup)), eps_(world, nullptr) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) Fail("reading the UCX configuration", st);
  // UCX 1.13's legacy protocol engine sends large active messages through shared-memory
  // bounce buffers (about 6 GB/s here); its newer engine (the default from UCX 1.16) picks
  // zero-copy rendezvous (about 11 GB/s). Transports stay UCX's choice; a user's own
  // UCX_PROTO_ENABLE wins.
  if (std::getenv("UCX_PROTO_ENABLE") == nullptr) ucp_config_modify(config, "PROTO_ENABLE", "y");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "prism";
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) Fail("ucp_init", st);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the progress thread touches it
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    ucp_cleanup(context_);
    Fail("ucp_worker_create", st);
  }
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = ucp_worker_get_address(worker_, &addr, &len);
  if (st != UCS_OK) Fail("ucp_worker_get_address", st);
  address_.assign(reinterpret_cast<char*>(addr), reinterpret_cast<char*>(addr) + len);
  ucp_worker_release_address(worker_, addr);

  for (auto [id, cb] : {std::pair{kRequest, &OnRequest}, std::pair{kReply, &OnReply}}) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = id;
    hp.cb = cb;
    hp.arg = this;
    st = ucp_worker_set_am_recv_handler(worker_, &hp);
    if (st != UCS_OK) Fail("ucp_worker_set_am_recv_handler", st);
  }

  int worker_fd = -1;
  st = ucp_worker_get_efd(worker_, &worker_fd);
  if (st != UCS_OK) Fail("ucp_worker_get_efd", st);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || event_fd_ < 0) {
    throw Error(std::string("prism: UCX data plane: epoll/eventfd: ") + std::strerror(errno));
  }
  for (int fd : {worker_fd, event_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

UcxDataPlane::~UcxDataPlane() {
  Stop();
  // The peers may have stopped already: what is still in flight is cancelled by closing
  // the endpoints (FORCE) and, for receives, by ucp_request_cancel.
  for (ucp_ep_h& ep : eps_) {
    if (ep == nullptr) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;  // peers are shutting down too: do not wait for them
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
    if (UCS_PTR_IS_PTR(req)) {
      while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker_);
      ucp_request_free(req);
    }
    ep = nullptr;
  }
  for (void* request : in_flight_) ucp_request_cancel(worker_, request);
  if (!Drain(std::chrono::milliseconds(500))) {
    // Rather a worker left to the process's exit than a crash in UCX's teardown.
    PRISM_LOG_WARN("UCX: " << in_flight_.size()
                              << " transfers did not end at shutdown; the UCX worker is left open");
    worker_ = nullptr;
    context_ = nullptr;
    for (auto& f : abandoned_) f.release();  // UCX may still write into their buffers
  }
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
}

void UcxDataPlane::Start(std::vector<std::vector<char>> addresses) {
  peers_ = std::move(addresses);
  thread_ = std::thread([this] { Loop(); });
}

void UcxDataPlane::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  Wake();
  thread_.join();
  std::deque<std::unique_ptr<Fetching>> queued;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queued.swap(queued_);
  }
  for (auto& f : queued) f->done(nullptr, "the runtime is shutting down");
  for (auto& [request, f] : fetches_) {
    f->done(nullptr, "the runtime is shutting down");
    abandoned_.push_back(std::move(f));  // a receive may still be writing into its buffer
  }
  fetches_.clear();
  replies_.clear();
  // Transfers already started end here (their fetches are answered above), while the peers
  // still progress; the bound keeps a stopped peer from holding this one up.
  Drain(std::chrono::milliseconds(500));
}

bool UcxDataPlane::Drain(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!in_flight_.empty() && std::chrono::steady_clock::now() < deadline) {
    if (ucp_worker_progress(worker_) == 0) sched_yield();
  }
  return in_flight_.empty();
}

void UcxDataPlane::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(event_fd_, &one, sizeof one);
}

void UcxDataPlane::PeerLost(int rank) {
  if (rank < 0 || rank >= world_) return;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    newly_lost_.push_back(rank);
  }
  Wake();
}

void UcxDataPlane::LoseNewPeers() {
  std::vector<int> lost;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    lost.swap(newly_lost_);
  }
  if (lost.empty()) return;
  if (lost_.empty()) lost_.resize(static_cast<size_t>(world_));
  for (int r : lost) lost_[static_cast<size_t>(r)] = true;
  for (auto it = fetches_.begin(); it != fetches_.end();) {
    if (!lost_[static_cast<size_t>(it->second->holder)]) {
      ++it;
      continue;
    }
    it->second->done(nullptr, "UCX fetch of object " + it->second->id.Hex() + " from rank " +
                                  std::to_string(it->second->holder) + ": the rank was lost");
    abandoned_.push_back(std::move(it->second));  // its receive buffer stays alive
    it = fetches_.erase(it);
  }
}

void UcxDataPlane::Fetch(int holder, ObjectId id,
                         std::function<void(Payload, const std::string&)> done) {
  if (holder < 0 || holder >= world_ || holder == rank_) {
    done(nullptr, "no rank " + std::to_string(holder) + " to fetch from");
    return;
  }
  auto f = std::make_unique<Fetching>();
  f->holder = holder;
  f->id = id;
  f->done = std::move(done);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queued_.push_back(std::move(f));
  }
  Wake();
}

ucp_ep_h UcxDataPlane::Endpoint(int rank) {
  if (eps_[rank] != nullptr) return eps_[rank];
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.address = reinterpret_cast<const ucp_address_t*>(peers_.at(rank).data());
  p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucs_status_t st = ucp_ep_create(worker_, &p, &eps_[rank]);
  if (st != UCS_OK) {
    eps_[rank] = nullptr;
    PRISM_LOG_ERROR("UCX: cannot connect to rank " << rank << ": " << ucs_status_string(st));
  }
  return eps_[rank];
}

void UcxDataPlane::Send(int to, unsigned id, std::unique_ptr<Sending> ctx) {
  ucp_ep_h ep = Endpoint(to);
  const bool is_request = id == kRequest;
  if (ep == nullptr) {
    if (is_request) Finish(ctx->header[1], nullptr, "cannot connect to rank " + std::to_string(to));
    return;
  }
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &SendDone;
  p.user_data = ctx.get();
  const void* data = ctx->value ? ctx->value->data() : nullptr;
  const size_t size = ctx->value ? ctx->value->size() : 0;
  ucs_status_ptr_t req = ucp_am_send_nbx(ep, id, ctx->header, sizeof ctx->header, data, size, &p);
  if (req == nullptr) return;  // done already; ctx goes now
  if (UCS_PTR_IS_ERR(req)) {
    std::string why = ucs_status_string(UCS_PTR_STATUS(req));
    PRISM_LOG_ERROR("UCX: send to rank " << to << " failed: " << why);
    if (is_request) Finish(ctx->header[1], nullptr, why);
    return;
  }
  in_flight_.insert(req);
  ctx.release();  // SendDone frees it
}

void UcxDataPlane::SendDone(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<Sending> ctx(static_cast<Sending*>(user_data));
  if (status != UCS_OK && ctx->kind == kRequest) {
    ctx->self->Finish(ctx->header[1], nullptr, ucs_status_string(status));
  }
  ctx->self->in_flight_.erase(request);
  ucp_request_free(request);
}

ucs_status_t UcxDataPlane::OnRequest(void* arg, const void* header, size_t header_length, void*,
                                     size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxDataPlane*>(arg);
  if (header_length < 3 * sizeof(uint64_t)) return UCS_OK;
  uint64_t h[3];
  std::memcpy(h, header, sizeof h);
  Payload value;
  try {
    value = self->lookup_(ObjectId(h[0]));
  } catch (const std::exception& e) {
    PRISM_LOG_ERROR("UCX: serving object " << ObjectId(h[0]).Hex() << ": " << e.what());
  }
  // Answered after this progress call returns (no sends from inside a callback).
  self->replies_.push_back({static_cast<int>(h[2]), h[1], std::move(value)});
  return UCS_OK;
}

ucs_status_t UcxDataPlane::OnReply(void* arg, const void* header, size_t header_length, void* data,
                                   size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxDataPlane*>(arg);
  if (header_length < 3 * sizeof(uint64_t)) return UCS_OK;
  uint64_t h[3];
  std::memcpy(h, header, sizeof h);
  const uint64_t request = h[0];
  auto it = self->fetches_.find(request);
  if (it == self->fetches_.end()) return UCS_OK;  // abandoned: dropping it completes the sender
  Fetching& f = *it->second;
  if (h[1] == 0) {
    self->Finish(request, nullptr, "rank " + std::to_string(f.holder) + " has no copy of it (freed?)");
    return UCS_OK;
  }
  if (length != h[2]) {
    self->Finish(request, nullptr, "size mismatch: " + std::to_string(length) + " bytes, expected " +
                                       std::to_string(h[2]));
    return UCS_OK;
  }
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0) {  // eager: the bytes are here
    f.buffer = Buffer(data, length);
    self->Finish(request, std::make_shared<const Buffer>(std::move(f.buffer)), "");
    return UCS_OK;
  }
  f.buffer = Buffer(length);  // straight into the object's own buffer, zero-copy if possible
  auto* ctx = new Receiving{self, request};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = &RecvDone;
  p.user_data = ctx;
  ucs_status_ptr_t req = ucp_am_recv_data_nbx(self->worker_, data, f.buffer.data(), length, &p);
  if (req == nullptr) {
    delete ctx;
    self->Finish(request, std::make_shared<const Buffer>(std::move(f.buffer)), "");
  } else if (UCS_PTR_IS_ERR(req)) {
    delete ctx;
    self->Finish(request, nullptr, ucs_status_string(UCS_PTR_STATUS(req)));
  } else {
    self->in_flight_.insert(req);
  }
  return UCS_INPROGRESS;
}

void UcxDataPlane::RecvDone(void* request, ucs_status_t status, size_t, void* user_data) {
  std::unique_ptr<Receiving> ctx(static_cast<Receiving*>(user_data));
  UcxDataPlane* self = ctx->self;
  auto it = self->fetches_.find(ctx->request);
  if (it != self->fetches_.end()) {
    if (status == UCS_OK) {
      self->Finish(ctx->request, std::make_shared<const Buffer>(std::move(it->second->buffer)), "");
    } else {
      self->Finish(ctx->request, nullptr, ucs_status_string(status));
    }
  }
  self->in_flight_.erase(request);
  ucp_request_free(request);
}

void UcxDataPlane::Finish(uint64_t request, Payload value, const std::string& error) {
  auto it = fetches_.find(request);
  if (it == fetches_.end()) return;
  std::unique_ptr<Fetching> f = std::move(it->second);
  fetches_.erase(it);
  if (value) {
    f->done(std::move(value), "");
  } else {
    f->done(nullptr, "UCX fetch of object " + f->id.Hex() + " from rank " +
                         std::to_string(f->holder) + ": " + error);
  }
}

void UcxDataPlane::Loop() {
  NameThisThread("prism-ucx");
  // Replies and requests come in bursts: keep polling for a moment after the last piece of
  // work before paying for a sleep and a wake-up (each costs tens of microseconds here).
  constexpr auto kSpin = std::chrono::microseconds(100);
  auto last_busy = std::chrono::steady_clock::now();
  while (!stop_) {
    bool busy = false;
    std::deque<std::unique_ptr<Fetching>> fresh;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      fresh.swap(queued_);
    }
    LoseNewPeers();
    for (auto& f : fresh) {
      if (!lost_.empty() && lost_[static_cast<size_t>(f->holder)]) {
        f->done(nullptr, "UCX fetch of object " + f->id.Hex() + " from rank " + std::to_string(f->holder) +
                             ": the rank was lost");
        continue;
      }
      const uint64_t request = ++next_request_;
      auto ctx = std::make_unique<Sending>();
      ctx->self = this;
      ctx->kind = kRequest;
      ctx->header[0] = f->id.Value();
      ctx->header[1] = request;
      ctx->header[2] = static_cast<uint64_t>(rank_);
      const int holder = f->holder;
      fetches_[request] = std::move(f);
      Send(holder, kRequest, std::move(ctx));
      busy = true;
    }
    while (!replies_.empty()) {
      Reply r = std::move(replies_.front());
      replies_.pop_front();
      auto ctx = std::make_unique<Sending>();
      ctx->self = this;
      ctx->kind = kReply;
      ctx->header[0] = r.request;
      ctx->header[1] = r.value ? 1 : 0;
      ctx->header[2] = r.value ? r.value->size() : 0;
      ctx->value = std::move(r.value);
      Send(r.to, kReply, std::move(ctx));
      busy = true;
    }
    while (ucp_worker_progress(worker_) != 0) busy = true;
    auto now = std::chrono::steady_clock::now();
    if (busy || !replies_.empty()) {
      last_busy = now;
      continue;
    }
    if (now - last_busy < kSpin) {
      sched_yield();  // see SpinWhile: the core goes to whoever has work meanwhile
      continue;
    }
    // Nothing to do: sleep until UCX or another thread has something.
    ucs_status_t st = ucp_worker_arm(worker_);
    if (st == UCS_ERR_BUSY) continue;
    epoll_event events[2];
    int n = epoll_wait(epoll_fd_, events, 2, 100);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == event_fd_) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = read(event_fd_, &count, sizeof count);
      }
    }
  }
}

}  // namespace prism::internal
