// A small HTTP/1.1 server on Boost.Beast over Asio: Serve's ingress (src/serve/ingress.cc)
// and rank 0's dashboard (src/dashboard/) each run one. Its own target (prism_http), below
// both, so the core's dashboard does not depend on the Serve library.
//
// CONTRACT (written before the implementation; the serve library and the server are built
// on separate branches against this header): the server knows nothing of deployments. It
// parses requests with Beast, enforces the limits below itself, and hands every well-formed
// request to one Handler with a `Respond` callback the handler may call later from any
// thread, exactly once. The server never blocks a thread on a handler.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace prism::http {

/// One parsed request. Header names are lower-case.
struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // the path and query as sent, e.g. "/classify?x=1"
  std::string path;    // the target without its query, e.g. "/classify"
  std::string query;   // after '?', or empty
  std::map<std::string, std::string> headers;
  std::string body;
  std::string content_type() const;  // headers["content-type"] or ""
};

/// One response. `content_type` defaults to JSON; `headers` are extra headers.
struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
};

/// A JSON error response: {"error": message} with `status` (bytes of `message` that are
/// not UTF-8 become U+FFFD).
Response ErrorResponse(int status, const std::string& message);

/// Called once per request on one of the server's I/O threads. Call `respond` exactly once,
/// now or later from any thread; a Respond after Stop is dropped. Never block inside.
using Respond = std::function<void(Response)>;
using Handler = std::function<void(Request, Respond)>;

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback by default; "0.0.0.0" to serve the network
  uint16_t port = 0;               // 0: the kernel picks a free port (see Server::port)
  uint64_t max_body_bytes = 64ull << 20;  // larger bodies get 413 without reading them
  double request_read_timeout_s = 10.0;   // a client that never finishes its request: 408, closed
  double keep_alive_timeout_s = 60.0;     // an idle keep-alive connection is closed
  int io_threads = 1;
  uint64_t max_header_bytes = 64ull << 10;  // a request line + headers over this: 431, closed
  double response_write_timeout_s = 30.0;   // a client that does not read its response: closed
};

/// Errors the server itself answers (the handler never sees these requests):
///   400 malformed HTTP (Beast's parser error in the body), 408 read timeout,
///   413 body over max_body_bytes, 431 headers over max_header_bytes, 503 after
///   StopAccepting (with "Connection: close"). 400, 408, 413 and 431 close the connection.
/// The handler's own failures: a handler that throws before responding gets 500 with the
/// exception's message; a Respond dropped without being called answers 500 too; a second
/// call of the same Respond is ignored (logged once per server).
///
/// Requests pipelined on one connection are handled one after another and answered in order;
/// clients get concurrency from several connections. Thread-safe: every member may be called
/// from any thread except Stop (and the destructor) from inside the handler, which cannot
/// join the I/O thread it runs on (it then stops without joining and the threads exit on
/// their own).
class Server {
 public:
  /// Binds and listens at once (throws prism::Error naming the address and errno text when
  /// it cannot bind); serves on its own I/O threads until Stop.
  Server(ServerOptions options, Handler handler);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const;              // the bound port (the kernel's choice for port 0)
  std::string endpoint() const;       // "http://127.0.0.1:PORT"

  /// Closes the listening socket: new connections are refused; requests already read still
  /// get their responses.
  void StopAccepting();
  /// Waits until no request is in flight (read but not yet answered), up to `timeout`.
  /// Returns true when drained, false when the timeout passed first.
  bool Drain(std::chrono::duration<double> timeout);
  /// Closes every connection and joins the I/O threads. Idempotent.
  void Stop();

  /// Requests read but whose response is not yet written (nor the connection lost).
  uint64_t requests_in_flight() const;
  /// Requests read since the start, including those the server answered itself (503).
  uint64_t requests_total() const;
  /// Connections accepted since the start (keep-alive reuse shows as fewer connections).
  uint64_t connections_total() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Writes `endpoint` to `path` atomically (a temp file then rename), so a script polling for
/// the file never reads half of it. Throws prism::Error naming the path on failure.
void WriteEndpointFile(const std::string& path, const std::string& endpoint);

}  // namespace prism::http
