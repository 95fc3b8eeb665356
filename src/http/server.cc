// Prism's HTTP/1.1 server on Boost.Beast over Asio (the contract is server.h): Serve's
// ingress and the dashboard on rank 0 both serve through it.
//
// Threads: `io_threads` threads run one io_context. The acceptor and every connection have a
// strand of their own, so one connection's completion handlers never run at once while
// different connections run on different threads. No handler ever blocks.
//
// A connection is one loop, all on its strand:
//   1. wait for the request's first bytes (a fresh connection: request_read_timeout_s; an
//      idle keep-alive one: keep_alive_timeout_s; expiry closes it without a word);
//   2. arm the request timer (request_read_timeout_s) and read the header with a fresh
//      request_parser (header_limit, body_limit). Beast checks Content-Length against the
//      body limit when the header completes, so an oversized body is refused (413) before a
//      byte of it is read; "Expect: 100-continue" gets its interim response only then;
//   3. read the body, disarm the timer, and hand the request to the handler;
//   4. wait for its Respond, write the response (response_write_timeout_s), and go to 1.
// Requests pipelined on one connection wait in the read buffer and are thus handled one
// after another, answered in order as HTTP/1.1 requires.
//
// Timeouts use a timer of our own that cancels the socket's pending read, not
// beast::tcp_stream::expires_after: the stream's expiry closes the socket, which would leave
// no way to answer 408. A connection the server answers with an error (400, 408, 413, 431,
// 503) is closed after a "lingering close": shut down our side, read and discard what the
// client is still sending for up to kLingerSeconds, then close, so the client reads the
// answer rather than a reset.
//
// Respond may run on any thread: it posts the response onto the connection's strand. It
// holds the connection, and through it the Shared state that owns the io_context, so a
// Respond after Stop, or after the Server is destroyed, is harmless: it is dropped. Stop
// marks the server stopped (under the mutex Respond posts under, so nothing is posted after),
// closes the acceptor and every connection, and lets the threads run out of work: every
// pending operation completes with operation_aborted and lets go of its connection.
#include "http/server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "prism/errors.h"

namespace prism::http {

Response ErrorResponse(int status, const std::string& message) {
  Response r;
  r.status = status;
  // A message may quote the request's bytes (a parse error does): bytes that are not
  // UTF-8 become U+FFFD, or dump would throw.
  r.body = nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                   nlohmann::json::error_handler_t::replace);
  return r;
}

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

constexpr double kLingerSeconds = 2.0;     // a closing connection drains the client this long
constexpr double kStopGraceSeconds = 2.0;  // Stop lets the threads finish this long, then stops
constexpr size_t kReadChunk = 16 << 10;   // bytes read at once when a request starts
constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";

void Log(const std::string& message) {
  std::fprintf(stderr, "[prism http] %s\n", message.c_str());
}

std::string Lower(beast::string_view s) {
  std::string out(s.data(), s.size());
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}


// Asio opens sockets without SOCK_CLOEXEC: a process the serving program starts (a shell, a
// curl) would inherit the listening socket and keep the port accepting after StopAccepting.
void CloseOnExec(int fd) {
  int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

std::chrono::steady_clock::duration Seconds(double s) {
  // Clamp so that an "infinite" option does not overflow the clock.
  s = std::clamp(s, 0.0, 1e9);
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

class Connection;

// What the server, its threads, its connections and every outstanding Respond share. It owns
// the io_context, so it lives until the last of them lets go.
struct Shared {
  Shared(ServerOptions o, Handler h) : options(std::move(o)), handler(std::move(h)) {}

  ServerOptions options;
  Handler handler;
  asio::io_context ioc;
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  asio::steady_timer accept_retry{acceptor.get_executor()};

  std::atomic<bool> accepting{true};
  std::mutex mu;         // guards stopped and connections
  bool stopped = false;  // Responds after this are dropped
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> connections;
  uint64_t next_connection_id = 0;

  std::atomic<uint64_t> in_flight{0}, total{0}, connections_total{0};
  std::mutex drain_mu;
  std::condition_variable drained;
  std::atomic<bool> double_respond_logged{false};
  std::atomic<bool> accept_failing{false};  // logged when it starts and when it ends

  void FinishRequest() {
    if (in_flight.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(drain_mu);
      drained.notify_all();
    }
  }
};

// One accepted socket and its request/response loop (see the top of the file).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Shared> shared, tcp::socket socket, uint64_t id)
      : s_(std::move(shared)), stream_(std::move(socket)), timer_(stream_.get_executor()), id_(id) {}

  uint64_t id() const { return id_; }

  void Start() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->WaitForRequest(true); });
  }
  // Any thread: closes the socket on the connection's strand.
  void Close() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->DoClose(); });
  }
  // Any thread, via Responder: hands the response for request `seq` to the strand.
  void Deliver(uint64_t seq, Response response) {
    asio::post(stream_.get_executor(),
               [self = shared_from_this(), seq, r = std::move(response)]() mutable {
                 self->OnResponse(seq, std::move(r));
               });
  }

 private:
  // ---- timer ----
  void ArmTimer(double seconds) {
    timed_out_ = false;
    uint64_t gen = ++timer_gen_;
    timer_.expires_after(Seconds(seconds));
    timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->timer_gen_ || self->closed_) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
  }
  void CancelTimer() {
    ++timer_gen_;
    timer_.cancel();
  }

  // ---- reading a request ----
  void WaitForRequest(bool fresh) {
    if (closed_) return;
    if (buffer_.size() > 0) {  // a pipelined request is already here
      ReadHeader();
      return;
    }
    ArmTimer(fresh ? s_->options.request_read_timeout_s : s_->options.keep_alive_timeout_s);
    // Read whatever arrives (Asio tries the read at once, then waits in epoll): one
    // syscall fewer per request than waiting for readability and then reading.
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->OnFirstBytes(ec, n);
                            });
  }

  void OnFirstBytes(beast::error_code ec, size_t n) {
    if (closed_) return;
    CancelTimer();
    if (ec) {  // idle too long, the client left, or the socket failed: close without a word
      DoClose();
      return;
    }
    buffer_.commit(n);
    ReadHeader();
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(
        std::min<uint64_t>(s_->options.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(s_->options.max_body_bytes);
    ArmTimer(s_->options.request_read_timeout_s);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               self->OnHeader(ec);
                             });
  }

  void OnHeader(beast::error_code ec) {
    if (closed_) return;
    if (ec) {
      OnReadError(ec);
      return;
    }
    const auto& header = parser_->get();
    if (!parser_->is_done() && header.version() >= 11 &&
        Lower(header[bhttp::field::expect]) == "100-continue") {
      asio::async_write(stream_, asio::buffer(kContinue, sizeof kContinue - 1),
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (self->closed_) return;
                          if (ec) {
                            self->OnReadError(ec);
                            return;
                          }
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) {
      OnRequest();
      return;
    }
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (self->closed_) return;
                        if (ec) {
                          self->OnReadError(ec);
                          return;
                        }
                        self->OnRequest();
                      });
  }

  void OnReadError(beast::error_code ec) {
    CancelTimer();
    if (timed_out_) {
      ReplyError(408, "the request was not received within request_read_timeout_s (" +
                          FormatSeconds(s_->options.request_read_timeout_s) + ")");
    } else if (ec == bhttp::error::body_limit) {
      ReplyError(413, "the request body is larger than max_body_bytes (" +
                          std::to_string(s_->options.max_body_bytes) + " bytes)");
    } else if (ec == bhttp::error::header_limit) {
      ReplyError(431, "the request line and headers are larger than max_header_bytes (" +
                          std::to_string(s_->options.max_header_bytes) + " bytes)");
    } else if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
               ec.category() != bhttp::make_error_code(bhttp::error::bad_method).category()) {
      DoClose();  // the client went away (or the socket failed): nobody to answer
    } else {
      ReplyError(400, "malformed HTTP request: " + ec.message());
    }
  }

  static std::string FormatSeconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g s", s);
    return buf;
  }

  // ---- dispatching ----
  void OnRequest() {
    CancelTimer();
    bhttp::request<bhttp::string_body> message = parser_->release();
    parser_.reset();
    keep_alive_ = message.keep_alive();
    version_ = message.version();
    is_head_ = message.method() == bhttp::verb::head;
    request_open_ = true;
    s_->in_flight.fetch_add(1);
    s_->total.fetch_add(1);
    uint64_t seq = ++seq_;
    waiting_ = true;
    if (!s_->accepting.load()) {
      keep_alive_ = false;
      OnResponse(seq, ErrorResponse(503, "the server is shutting down and takes no new requests"));
      return;
    }

    Request request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    size_t q = request.target.find('?');
    request.path = request.target.substr(0, q);
    if (q != std::string::npos) request.query = request.target.substr(q + 1);
    for (const auto& field : message) {
      std::string name = Lower(field.name_string());
      auto [it, inserted] = request.headers.emplace(name, std::string(field.value()));
      if (!inserted) it->second += ", " + std::string(field.value());
    }
    request.body = std::move(message.body());

    auto responder = std::make_shared<Responder>(shared_from_this(), seq);
    try {
      s_->handler(std::move(request), [responder](Response r) { responder->Send(std::move(r)); });
    } catch (const std::exception& e) {
      if (!responder->TrySend(ErrorResponse(500, std::string("the handler threw: ") + e.what())))
        Log(std::string("the handler threw after responding: ") + e.what());
    } catch (...) {
      if (!responder->TrySend(ErrorResponse(500, "the handler threw a non-std::exception")))
        Log("the handler threw a non-std::exception after responding");
    }
  }

 public:
  // The state behind one request's Respond: sends once, then ignores; answers 500 if every
  // copy of the Respond is dropped without a call, so no client waits for nothing.
  class Responder {
   public:
    Responder(std::shared_ptr<Connection> connection, uint64_t seq)
        : connection_(std::move(connection)), seq_(seq) {}
    ~Responder() {
      if (!done_.exchange(true))
        Post(ErrorResponse(500, "the handler dropped the request without responding"));
    }
    void Send(Response r) {
      if (done_.exchange(true)) {
        if (!connection_->s_->double_respond_logged.exchange(true))
          Log("a handler called Respond twice for one request; the second call is ignored "
              "(logged once per server)");
        return;
      }
      Post(std::move(r));
    }
    // Sends unless already sent; returns whether it sent.
    bool TrySend(Response r) {
      if (done_.exchange(true)) return false;
      Post(std::move(r));
      return true;
    }

   private:
    void Post(Response r) {
      Shared& s = *connection_->s_;
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.stopped) return;  // Stop has closed the connection: nobody to answer
      connection_->Deliver(seq_, std::move(r));
    }
    std::shared_ptr<Connection> connection_;
    uint64_t seq_;
    std::atomic<bool> done_{false};
  };

 private:
  // ---- writing ----
  void OnResponse(uint64_t seq, Response r) {
    if (closed_ || !waiting_ || seq != seq_) return;
    waiting_ = false;
    if (r.status < 100 || r.status > 999) {
      Log("a handler answered with status " + std::to_string(r.status) + "; sent 500 instead");
      r = ErrorResponse(500, "the handler answered with an invalid HTTP status " +
                                 std::to_string(r.status));
    }
    response_ = {};
    response_.version(version_);
    response_.result(static_cast<unsigned>(r.status));
    if (!r.content_type.empty()) response_.set(bhttp::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) {
      if (name.empty() || name.find_first_of("\r\n:") != std::string::npos ||
          value.find_first_of("\r\n") != std::string::npos) {
        Log("a handler's response header '" + name + "' holds a line break or colon; dropped");
        continue;
      }
      response_.set(name, value);
    }
    size_t length = r.body.size();
    if (!is_head_) response_.body() = std::move(r.body);
    response_.keep_alive(keep_alive_ && s_->accepting.load());
    response_.content_length(length);
    Write();
  }

  // The server's own answer to a request it could not read; the connection closes after.
  void ReplyError(int status, const std::string& message) {
    keep_alive_ = false;
    waiting_ = true;
    is_head_ = false;
    if (version_ == 0) version_ = 11;
    OnResponse(seq_, ErrorResponse(status, message));
  }

  void Write() {
    ArmTimer(s_->options.response_write_timeout_s);
    bhttp::async_write(stream_, response_,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         self->OnWrite(ec);
                       });
  }

  void OnWrite(beast::error_code ec) {
    if (closed_) return;
    CancelTimer();
    FinishRequest();
    if (ec) {
      DoClose();
    } else if (!response_.keep_alive()) {
      LingeringClose();
    } else {
      WaitForRequest(false);
    }
  }

  // ---- closing ----
  void LingeringClose() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    ArmTimer(kLingerSeconds);
    DiscardUntilEof();
  }
  void DiscardUntilEof() {
    stream_.async_read_some(asio::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (self->closed_) return;
                              if (ec) {
                                self->DoClose();
                                return;
                              }
                              self->DiscardUntilEof();
                            });
  }

  void FinishRequest() {
    if (!request_open_) return;
    request_open_ = false;
    s_->FinishRequest();
  }

  void DoClose() {
    if (closed_) return;
    closed_ = true;
    CancelTimer();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    FinishRequest();
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->connections.erase(id_);
  }

  std::shared_ptr<Shared> s_;
  beast::tcp_stream stream_;
  asio::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bhttp::response<bhttp::string_body> response_;
  std::array<char, 16 << 10> discard_;
  uint64_t id_;
  uint64_t seq_ = 0;        // the current request's number on this connection
  bool waiting_ = false;    // its response has not arrived yet
  bool request_open_ = false;  // counted in Shared::in_flight
  bool keep_alive_ = true;
  bool is_head_ = false;
  unsigned version_ = 11;
  bool closed_ = false;
};

void Accept(const std::shared_ptr<Shared>& s);

void OnAccept(const std::shared_ptr<Shared>& s, beast::error_code ec, tcp::socket socket) {
  if (!s->acceptor.is_open() || ec == asio::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors, for example: say so once, and try again shortly rather than spin.
    if (!s->accept_failing.exchange(true))
      Log("accept failed: " + ec.message() + "; retrying every 100 ms until it works "
          "(too many open connections? raise `ulimit -n`)");
    s->accept_retry.expires_after(std::chrono::milliseconds(100));
    s->accept_retry.async_wait([s](beast::error_code ec) {
      if (!ec && s->acceptor.is_open()) Accept(s);
    });
    return;
  }
  CloseOnExec(socket.native_handle());
  if (s->accept_failing.exchange(false)) Log("accepting connections again");
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->stopped) return;  // the socket closes as it goes out of scope
    connection = std::make_shared<Connection>(s, std::move(socket), s->next_connection_id++);
    s->connections.emplace(connection->id(), connection);
  }
  s->connections_total.fetch_add(1);
  connection->Start();
  Accept(s);
}

void Accept(const std::shared_ptr<Shared>& s) {
  s->acceptor.async_accept(asio::make_strand(s->ioc),
                           [s](beast::error_code ec, tcp::socket socket) {
                             OnAccept(s, ec, std::move(socket));
                           });
}

tcp::endpoint ResolveListenAddress(const ServerOptions& o) {
  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(o.host, ec);
  if (!ec) return {address, o.port};
  // A host name ("localhost"): the first address it resolves to.
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(o.host, std::to_string(o.port), ec);
  if (ec || results.empty())
    throw Error("prism http: cannot listen on host '" + o.host + "': it is neither an IP "
                "address nor a name that resolves (" + ec.message() + "); use e.g. 127.0.0.1 "
                "(loopback) or 0.0.0.0 (every interface)");
  return results.begin()->endpoint();
}

void ValidateOptions(const ServerOptions& o) {
  auto positive = [](double v, const char* name) {
    if (!(v > 0))
      throw Error(std::string("prism http: ServerOptions::") + name + " must be > 0 seconds, got " +
                  std::to_string(v));
  };
  positive(o.request_read_timeout_s, "request_read_timeout_s");
  positive(o.keep_alive_timeout_s, "keep_alive_timeout_s");
  positive(o.response_write_timeout_s, "response_write_timeout_s");
  if (o.io_threads < 1 || o.io_threads > 256)
    throw Error("prism http: ServerOptions::io_threads must be in 1..256, got " +
                std::to_string(o.io_threads));
  if (o.max_header_bytes < 64)
    throw Error("prism http: ServerOptions::max_header_bytes must be at least 64, got " +
                std::to_string(o.max_header_bytes));
}

}  // namespace

std::string Request::content_type() const {
  auto it = headers.find("content-type");
  return it == headers.end() ? "" : it->second;
}

struct Server::Impl {
  std::shared_ptr<Shared> s;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  // How many I/O threads still run; shared with them, since Stop on an I/O thread detaches.
  struct Running {
    std::mutex mu;
    std::condition_variable exited;
    int count = 0;
  };
  std::shared_ptr<Running> running = std::make_shared<Running>();
  std::mutex stop_mu;  // one Stop at a time
  bool joined = false;
  uint16_t port = 0;
  std::string endpoint;
};

Server::Server(ServerOptions options, Handler handler) : impl_(std::make_unique<Impl>()) {
  ValidateOptions(options);
  if (!handler) throw Error("prism http: the HTTP server needs a handler (got an empty one)");
  tcp::endpoint where = ResolveListenAddress(options);
  auto s = std::make_shared<Shared>(options, std::move(handler));
  impl_->s = s;

  std::string address_text = options.host + ":" + std::to_string(options.port);
  beast::error_code ec;
  auto fail = [&](const char* step) {
    throw Error("prism http: cannot listen on " + address_text + " (" + step + ": " +
                ec.message() + ")" +
                (ec == asio::error::address_in_use
                     ? "; another process holds this port: choose another, or port 0 to let "
                       "the kernel pick a free one"
                     : ""));
  };
  s->acceptor.open(where.protocol(), ec);
  if (ec) fail("socket");
  CloseOnExec(s->acceptor.native_handle());
  s->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) fail("setsockopt SO_REUSEADDR");
  s->acceptor.bind(where, ec);
  if (ec) fail("bind");
  s->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("listen");
  impl_->port = s->acceptor.local_endpoint().port();

  std::string host = options.host;
  if (where.address().is_unspecified()) {
    host = asio::ip::host_name();  // 0.0.0.0 serves every interface: name this machine
  } else if (where.address().is_v6() && host.find(':') != std::string::npos) {
    host = "[" + host + "]";
  }
  impl_->endpoint = "http://" + host + ":" + std::to_string(impl_->port);

  Accept(s);
  impl_->work.emplace(asio::make_work_guard(s->ioc));
  impl_->running->count = options.io_threads;
  for (int i = 0; i < options.io_threads; ++i) {
    impl_->threads.emplace_back([s, running = impl_->running] {
      for (;;) {
        try {
          s->ioc.run();
          break;
        } catch (const std::exception& e) {
          Log(std::string("an exception escaped an I/O handler (the thread keeps serving): ") +
              e.what());
        }
      }
      std::lock_guard<std::mutex> lock(running->mu);
      if (--running->count == 0) running->exited.notify_all();
    });
  }
}

Server::~Server() { Stop(); }

uint16_t Server::port() const { return impl_->port; }
std::string Server::endpoint() const { return impl_->endpoint; }

void Server::StopAccepting() {
  auto s = impl_->s;
  if (!s->accepting.exchange(false)) return;
  auto close = [s] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
    s->accept_retry.cancel();
  };
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->stopped) return;  // Stop closed it already
  }
  if (s->ioc.get_executor().running_in_this_thread()) {
    asio::post(s->acceptor.get_executor(), close);  // cannot wait here: we may be its thread
    return;
  }
  // Wait for the close, so that a connection attempted after we return is refused.
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> closed = done->get_future();
  asio::post(s->acceptor.get_executor(), [close, done] {
    close();
    done->set_value();
  });
  if (closed.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
    Log("StopAccepting: the I/O threads did not close the listening socket within 5 s");
}

bool Server::Drain(std::chrono::duration<double> timeout) {
  Shared& s = *impl_->s;
  std::unique_lock<std::mutex> lock(s.drain_mu);
  return s.drained.wait_for(lock, Seconds(timeout.count()),
                            [&] { return s.in_flight.load() == 0; });
}

void Server::Stop() {
  std::lock_guard<std::mutex> stop_lock(impl_->stop_mu);
  if (impl_->joined) return;
  auto s = impl_->s;
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->stopped = true;
    for (auto& [id, weak] : s->connections)
      if (auto c = weak.lock()) open.push_back(std::move(c));
  }
  s->accepting.store(false);
  asio::post(s->acceptor.get_executor(), [s] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
    s->accept_retry.cancel();
  });
  for (auto& c : open) c->Close();
  open.clear();
  impl_->work.reset();

  impl_->joined = true;
  if (s->ioc.get_executor().running_in_this_thread()) {
    // Called from a handler: this thread cannot join itself. The threads exit on their own
    // once the closes above have run; they hold what they use.
    Log("Stop called from an I/O thread: the I/O threads finish without being joined");
    s->ioc.stop();
    for (auto& t : impl_->threads) t.detach();
    return;
  }
  {
    Impl::Running& running = *impl_->running;
    std::unique_lock<std::mutex> lock(running.mu);
    if (!running.exited.wait_for(lock, Seconds(kStopGraceSeconds),
                                 [&] { return running.count == 0; }))
      s->ioc.stop();  // something still holds work: stop regardless
  }
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

uint64_t Server::requests_in_flight() const { return impl_->s->in_flight.load(); }
uint64_t Server::requests_total() const { return impl_->s->total.load(); }
uint64_t Server::connections_total() const { return impl_->s->connections_total.load(); }

void WriteEndpointFile(const std::string& path, const std::string& endpoint) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path tmp = target;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out)
      throw Error("prism http: cannot write the endpoint file " + path + " (creating " +
                  tmp.string() + " failed: " + std::strerror(errno) +
                  "); does its directory exist and is it writable?");
    out << endpoint << '\n';
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw Error("prism http: cannot write the endpoint file " + path + " (writing " +
                  tmp.string() + " failed)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error("prism http: cannot write the endpoint file " + path + " (renaming " +
                tmp.string() + " onto it failed: " + ec.message() + ")");
  }
}

}  // namespace prism::http
