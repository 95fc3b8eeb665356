#include "transport/ucx/ucx_data_plane.h"

#include <sys/epoll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "prism/errors.h"

namespace prism::internal {

struct UcxDataPlane::Fetching {
  int holder = -1;
  ObjectId id;
  bool may_read_remote = false;
  std::function<void(Payload, const std::string&)> done;
  Buffer buffer;  // rendezvous or RMA target
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

/// Reads the fixed-size AM header: n words, zero-padded if the sender sent fewer.
template <size_t N>
bool ReadHeader(const void* header, size_t length, uint64_t (&h)[N]) {
  if (length < sizeof(uint64_t)) return false;
  std::memset(h, 0, sizeof h);
  std::memcpy(h, header, std::min(length, sizeof h));
  return true;
}

}  // namespace

UcxDataPlane::UcxDataPlane(int rank, int world, Lookup lookup)
    : rank_(rank), world_(world), lookup_(std::move(lookup)), eps_(world, nullptr) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) Fail("reading the UCX configuration", st);
  // UCX's defaults throughout (no UCX_TLS, no protocol choice): shared memory here,
  // RDMA on InfiniBand. Measured here with UCX 1.13: its default (legacy) protocols read a
  // UCX-allocated shared-memory region with ucp_get at 16-17 GB/s, while its newer engine
  // emulates that get in software at 11 GB/s.
  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.name = "prism";
  params.mt_workers_shared = 1;  // the buffer pool maps and unmaps memory from any thread
  context_ = std::make_shared<UcxContext>();
  st = ucp_init(&params, config, &context_->handle);
  ucp_config_release(config);
  if (st != UCS_OK) {
    context_->handle = nullptr;
    Fail("ucp_init", st);
  }

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the progress thread touches it
  st = ucp_worker_create(context_->handle, &wp, &worker_);
  if (st != UCS_OK) Fail("ucp_worker_create", st);
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = ucp_worker_get_address(worker_, &addr, &len);
  if (st != UCS_OK) Fail("ucp_worker_get_address", st);
  address_.assign(reinterpret_cast<char*>(addr), reinterpret_cast<char*>(addr) + len);
  ucp_worker_release_address(worker_, addr);

  for (auto [id, cb] : {std::pair{kRequest, &OnRequest}, std::pair{kReply, &OnReply},
                        std::pair{kRelease, &OnRelease}, std::pair{kForget, &OnForget}}) {
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
  memory_ = std::make_shared<UcxMemory>(context_);
}

UcxDataPlane::~UcxDataPlane() {
  Stop();
  for (auto& [key, rkey] : rkeys_) ucp_rkey_destroy(rkey);
  rkeys_.clear();
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
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
  // context_ goes with the last UCX-allocated block still alive (memory_ holds it).
}

void UcxDataPlane::Start(std::vector<std::vector<char>> addresses, std::vector<bool> same_host) {
  peers_ = std::move(addresses);
  same_host_ = std::move(same_host);
  same_host_.resize(world_, false);
  memory_->SetOnFree([this] { Wake(); });
  SetBlockSource(memory_);
  thread_ = std::thread([this] { Loop(); });
}

void UcxDataPlane::Stop() {
  if (!thread_.joinable()) return;
  ClearBlockSource(memory_.get());
  memory_->SetOnFree(nullptr);
  stop_ = true;
  Wake();
  thread_.join();
  std::deque<std::unique_ptr<Fetching>> queued;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queued.swap(queued_);
  }
  for (auto& f : queued) f->done(nullptr, "the runtime is shutting down");
  for (auto& [request, f] : fetches_) f->done(nullptr, "the runtime is shutting down");
  fetches_.clear();
  pins_.clear();
  outbox_.clear();
}

void UcxDataPlane::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(event_fd_, &one, sizeof one);
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
  f->may_read_remote = same_host_[holder];
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

void UcxDataPlane::Post(int to, unsigned kind, std::initializer_list<uint64_t> header,
                        Payload value) {
  auto out = std::make_unique<Outgoing>();
  out->self = this;
  out->to = to;
  out->kind = kind;
  std::copy(header.begin(), header.end(), out->header);
  out->value = std::move(value);
  outbox_.push_back(std::move(out));
}

void UcxDataPlane::Send(std::unique_ptr<Outgoing> out) {
  ucp_ep_h ep = Endpoint(out->to);
  const bool is_request = out->kind == kRequest;
  if (ep == nullptr) {
    if (is_request) Finish(out->header[1], nullptr, "cannot connect to rank " + std::to_string(out->to));
    return;
  }
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &SendDone;
  p.user_data = out.get();
  const void* data = out->value ? out->value->data() : nullptr;
  const size_t size = out->value ? out->value->size() : 0;
  ucs_status_ptr_t req =
      ucp_am_send_nbx(ep, out->kind, out->header, sizeof out->header, data, size, &p);
  if (req == nullptr) return;  // done already; `out` goes now
  if (UCS_PTR_IS_ERR(req)) {
    std::string why = ucs_status_string(UCS_PTR_STATUS(req));
    PRISM_LOG_ERROR("UCX: send to rank " << out->to << " failed: " << why);
    if (is_request) Finish(out->header[1], nullptr, why);
    return;
  }
  out.release();  // SendDone frees it
}

void UcxDataPlane::SendDone(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<Outgoing> out(static_cast<Outgoing*>(user_data));
  if (status != UCS_OK && out->kind == kRequest) {
    out->self->Finish(out->header[1], nullptr, ucs_status_string(status));
  }
  ucp_request_free(request);
}

void UcxDataPlane::Request(uint64_t request, Fetching& f) {
  Post(f.holder, kRequest,
       {f.id.Value(), request, static_cast<uint64_t>(rank_), f.may_read_remote ? kMayReadRemote : 0});
}

ucs_status_t UcxDataPlane::OnRequest(void* arg, const void* header, size_t header_length, void*,
                                     size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxDataPlane*>(arg);
  uint64_t h[4];
  if (!ReadHeader(header, header_length, h)) return UCS_OK;
  Payload value;
  try {
    value = self->lookup_(ObjectId(h[0]));
  } catch (const std::exception& e) {
    PRISM_LOG_ERROR("UCX: serving object " << ObjectId(h[0]).Hex() << ": " << e.what());
  }
  self->Serve(static_cast<int>(h[2]), h[1], h[3], std::move(value));
  return UCS_OK;
}

void UcxDataPlane::Serve(int to, uint64_t request, uint64_t flags, Payload value) {
  if (!value) {
    Post(to, kReply, {request, kMissing, 0});
    return;
  }
  const uint64_t size = value->size();
  std::optional<UcxMemory::Region> region;
  if ((flags & kMayReadRemote) != 0 && size > 0) region = memory_->Find(value->data(), size);
  if (!region) {
    Post(to, kReply, {request, kBytes, size}, std::move(value));
    return;
  }
  const uint64_t pin = ++next_pin_;
  Buffer remote;
  Writer w(remote);
  w.Pod<uint64_t>(region->id);
  w.Pod<uint64_t>(reinterpret_cast<uintptr_t>(value->data()));
  w.Pod<uint64_t>(pin);
  w.Bytes(region->rkey.data(), region->rkey.size());
  lent_[region->id].insert(to);
  pins_.emplace(pin, std::move(value));  // kept until the reader's kRelease
  Post(to, kReply, {request, kRemoteBytes, size}, std::make_shared<const Buffer>(std::move(remote)));
}

ucs_status_t UcxDataPlane::OnReply(void* arg, const void* header, size_t header_length, void* data,
                                   size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxDataPlane*>(arg);
  uint64_t h[4];
  if (!ReadHeader(header, header_length, h)) return UCS_OK;
  const uint64_t request = h[0];
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  auto it = self->fetches_.find(request);
  if (it == self->fetches_.end()) return UCS_OK;  // abandoned: dropping it completes the sender
  Fetching& f = *it->second;
  if (h[1] == kMissing) {
    self->Finish(request, nullptr, "rank " + std::to_string(f.holder) + " has no copy of it (freed?)");
    return UCS_OK;
  }
  if (h[1] == kRemoteBytes && !rndv) {
    try {
      Reader r(static_cast<const char*>(data), length);
      Remote remote{request, f.holder, r.Pod<uint64_t>(), r.Pod<uint64_t>(), r.Pod<uint64_t>(), h[2], {}};
      ByteView key = r.Bytes();
      remote.rkey.assign(key.data, key.data + key.size);
      self->remotes_.push_back(std::move(remote));  // read once this progress call returns
    } catch (const std::exception& e) {
      self->Finish(request, nullptr, std::string("malformed reply: ") + e.what());
    }
    return UCS_OK;
  }
  if (h[1] != kBytes || length != h[2]) {
    self->Finish(request, nullptr, "malformed reply: " + std::to_string(length) + " bytes, expected " +
                                       std::to_string(h[2]));
    return UCS_OK;
  }
  if (!rndv) {  // eager: the bytes are here
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
  ucp_request_free(request);
}

ucp_rkey_h UcxDataPlane::RemoteKey(int holder, uint64_t region, const std::vector<char>& packed) {
  auto key = std::make_pair(holder, region);
  auto it = rkeys_.find(key);
  if (it != rkeys_.end()) return it->second;
  ucp_ep_h ep = Endpoint(holder);
  if (ep == nullptr) return nullptr;
  ucp_rkey_h rkey = nullptr;
  ucs_status_t st = ucp_ep_rkey_unpack(ep, packed.data(), &rkey);
  if (st != UCS_OK) {
    PRISM_LOG_WARN("UCX: cannot use rank " << holder << "'s memory key (" << ucs_status_string(st)
                                           << "); asking for the bytes instead");
    return nullptr;
  }
  rkeys_.emplace(key, rkey);
  keys_held_ = rkeys_.size();
  return rkey;
}

namespace {
struct Getting {
  UcxDataPlane* self;
  uint64_t request;
  int holder;
  uint64_t pin;
};
}  // namespace

void UcxDataPlane::ReadRemote(Remote r) {
  auto it = fetches_.find(r.request);
  if (it == fetches_.end()) {  // abandoned: let the holder drop its pin
    Post(r.holder, kRelease, {r.pin});
    return;
  }
  Fetching& f = *it->second;
  const int holder = f.holder;
  ucp_rkey_h rkey = RemoteKey(holder, r.region, r.rkey);
  if (rkey == nullptr) {  // ask again, for the bytes this time
    Post(holder, kRelease, {r.pin});
    f.may_read_remote = false;
    Request(r.request, f);
    return;
  }
  f.buffer = Buffer(r.size);
  auto* ctx = new Getting{this, r.request, holder, r.pin};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &GetDone;
  p.user_data = ctx;
  ucs_status_ptr_t req = ucp_get_nbx(Endpoint(holder), f.buffer.data(), r.size, r.address, rkey, &p);
  if (UCS_PTR_IS_PTR(req)) return;  // GetDone finishes
  GetDone(nullptr, UCS_PTR_STATUS(req), ctx);
}

void UcxDataPlane::GetDone(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<Getting> ctx(static_cast<Getting*>(user_data));
  UcxDataPlane* self = ctx->self;
  self->Post(ctx->holder, kRelease, {ctx->pin});
  auto it = self->fetches_.find(ctx->request);
  if (it != self->fetches_.end()) {
    if (status == UCS_OK) {
      ++self->remote_reads_;
      self->Finish(ctx->request, std::make_shared<const Buffer>(std::move(it->second->buffer)), "");
    } else {
      self->Finish(ctx->request, nullptr, std::string("reading it: ") + ucs_status_string(status));
    }
  }
  if (request != nullptr) ucp_request_free(request);
}

ucs_status_t UcxDataPlane::OnRelease(void* arg, const void* header, size_t header_length, void*,
                                     size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxDataPlane*>(arg);
  uint64_t h[1];
  if (ReadHeader(header, header_length, h)) self->pins_.erase(h[0]);
  return UCS_OK;
}

ucs_status_t UcxDataPlane::OnForget(void* arg, const void* header, size_t header_length, void*,
                                    size_t, const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxDataPlane*>(arg);
  uint64_t h[2];
  if (!ReadHeader(header, header_length, h)) return UCS_OK;
  auto it = self->rkeys_.find({static_cast<int>(h[1]), h[0]});
  if (it != self->rkeys_.end()) {
    ucp_rkey_destroy(it->second);  // unmaps the holder's region here
    self->rkeys_.erase(it);
    self->keys_held_ = self->rkeys_.size();
  }
  return UCS_OK;
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

bool UcxDataPlane::DrainWork() {
  bool busy = false;
  std::deque<std::unique_ptr<Fetching>> fresh;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    fresh.swap(queued_);
  }
  for (auto& f : fresh) {
    const uint64_t request = ++next_request_;
    Request(request, *f);
    fetches_[request] = std::move(f);
    busy = true;
  }
  while (!remotes_.empty()) {
    Remote r = std::move(remotes_.front());
    remotes_.pop_front();
    ReadRemote(std::move(r));
    busy = true;
  }
  for (uint64_t region : memory_->TakeFreed()) {
    auto it = lent_.find(region);
    if (it == lent_.end()) continue;
    for (int peer : it->second) Post(peer, kForget, {region, static_cast<uint64_t>(rank_)});
    lent_.erase(it);
  }
  while (!outbox_.empty()) {
    std::unique_ptr<Outgoing> out = std::move(outbox_.front());
    outbox_.pop_front();
    Send(std::move(out));
    busy = true;
  }
  return busy;
}

void UcxDataPlane::Loop() {
  // Replies and requests come in bursts: keep polling for a moment after the last piece of
  // work before paying for a sleep and a wake-up (each costs tens of microseconds here).
  constexpr auto kSpin = std::chrono::microseconds(100);
  auto last_busy = std::chrono::steady_clock::now();
  while (!stop_) {
    bool busy = DrainWork();
    while (ucp_worker_progress(worker_) != 0) busy = true;
    auto now = std::chrono::steady_clock::now();
    if (busy || !outbox_.empty() || !remotes_.empty()) {
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
