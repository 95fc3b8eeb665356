// Fuzzes Serve's HTTP ingress end to end: each input is the bytes a client sends on one
// connection (one request, several pipelined, or garbage) to a real http::Server on
// loopback, whose handler routes as the ingress does (MatchRoute) to a few handlers that
// read the request as the serve library's do (serve::Request::Json, QueryParam, Header)
// and answer with serve::Response, an exception, or nothing at all.
//
// Properties: the server answers every connection in HTTP (or closes it) within a few
// seconds, never crashes or wedges; each answer is a whole HTTP/1.x response whose body,
// for the server's own errors, is valid JSON; a handler's exception is a 500 for that
// request only (the next input still gets served).
//
// The limits are set small (1 KiB of headers, 4 KiB of body) so the fuzzer reaches the
// 413 and 431 answers with small inputs.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "fuzz_util.h"
#include "prism/serve/http.h"
#include "http/server.h"
#include "serve/router_core.h"

namespace {

namespace http = prism::http;
using prism::fuzz::Fail;

constexpr int kAnswerSeconds = 8;  // how long a connection may take to be answered and closed

// route prefix -> handler name, as serve::Run would set them (prefixes start with '/').
const std::map<std::string, std::string>& Routes() {
  static const std::map<std::string, std::string> routes = {
      {"/", "echo"}, {"/json", "json"}, {"/json/v1", "json"}, {"/throw", "throw"},
      {"/drop", "drop"}, {"/status", "status"}};
  return routes;
}

// What the ingress hands a deployment (Ingress::Handle), then what its handler does.
void Handle(http::Request in, http::Respond respond) {
  auto prefix = prism::serve::internal::MatchRoute(Routes(), in.path);
  if (!prefix) {
    respond(http::ErrorResponse(404, "no route for " + in.path));
    return;
  }
  prism::serve::Request r;
  r.method = std::move(in.method);
  r.path = std::move(in.path);
  r.route_prefix = *prefix;
  r.query = std::move(in.query);
  r.headers = std::move(in.headers);
  r.body = std::move(in.body);
  const std::string& name = Routes().at(*prefix);
  prism::serve::Response out;
  if (name == "echo") {
    out = prism::serve::Response::Text(r.body);
    out.headers["x-echo"] = r.Header("x-echo");  // may hold anything: the server filters it
    out.headers[r.QueryParam("h", "x-h")] = r.QueryParam("v");
  } else if (name == "json") {
    try {
      out = prism::serve::Response::Json({{"got", r.Json()}, {"q", r.QueryParam("q")}, {"path", r.path}});
    } catch (const prism::serve::BadRequestError& e) {
      out.status = 400;  // as the ingress answers a BadRequestError
      out.body = http::ErrorResponse(400, e.what()).body;
    }
  } else if (name == "throw") {
    throw std::runtime_error(r.body);  // bytes that may not be UTF-8: the 500 must still be JSON
  } else if (name == "drop") {
    return;  // never responds: the server answers 500 when the Respond is dropped
  } else if (name == "status") {
    // Any number: one outside 100..999 must become the server's own 500.
    out.status = static_cast<int>(std::clamp<long>(std::strtol(r.QueryParam("s", "200").c_str(), nullptr, 10),
                                                   INT_MIN, INT_MAX));
    out.content_type = r.Header("accept");
  }
  respond(http::Response{out.status, std::move(out.body), std::move(out.content_type), std::move(out.headers)});
}

http::Server& TheServer() {
  static http::Server* server = [] {
    http::ServerOptions options;
    options.max_header_bytes = 1024;
    options.max_body_bytes = 4096;
    options.request_read_timeout_s = 5;
    options.keep_alive_timeout_s = 5;
    options.response_write_timeout_s = 5;
    return new http::Server(options, Handle);  // lives as long as the process
  }();
  return *server;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sends `bytes` on a fresh connection, half-closes it, and returns every byte the server
// sent until it closed. Aborts (a wedged server) if that takes longer than kAnswerSeconds.
std::string Exchange(const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(TheServer().port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    Fail(std::string("the server refused a connection: ") + std::strerror(errno));
  const auto start = std::chrono::steady_clock::now();
  std::string answer;
  size_t sent = 0;
  bool write_open = true;
  char buf[16 << 10];
  for (;;) {
    if (write_open && sent == bytes.size()) {
      ::shutdown(fd, SHUT_WR);  // end of the request bytes: the server sees end of stream
      write_open = false;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (write_open ? POLLOUT : 0)), 0};
    const int left_ms = static_cast<int>((kAnswerSeconds - SecondsSince(start)) * 1000);
    if (left_ms <= 0 || ::poll(&p, 1, left_ms) == 0) {
      Fail("the server neither answered nor closed the connection within " +
           std::to_string(kAnswerSeconds) + " s (" + std::to_string(answer.size()) + " bytes so far)");
    }
    if (p.revents & POLLIN || p.revents & (POLLHUP | POLLERR)) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;  // closed (or reset: the server closed after an error answer)
      answer.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (write_open && (p.revents & POLLOUT)) {
      ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0) {
        write_open = false;  // the server closed its side (it refused the request): read on
        ::shutdown(fd, SHUT_WR);
      } else {
        sent += static_cast<size_t>(n);
      }
    }
  }
  ::close(fd);
  return answer;
}

// Checks that `answer` is a sequence of whole HTTP/1.x responses with Content-Length
// bodies (the server always sends one) and that the server's own errors, {"error": ...},
// are valid JSON. The answer to a HEAD request has no body although its Content-Length
// counts one, so after one (the request bytes hold "HEAD") only the first is checked.
void CheckAnswer(const std::string& answer, const std::string& request) {
  const bool may_hold_head = request.find("HEAD") != std::string::npos;
  size_t at = 0;
  while (at < answer.size()) {
    if (answer.compare(at, 7, "HTTP/1.") != 0) Fail("an answer is not HTTP: " + answer.substr(at, 200));
    const size_t head_end = answer.find("\r\n\r\n", at);
    if (head_end == std::string::npos) Fail("an answer's header does not end: " + answer.substr(at, 200));
    const std::string head = answer.substr(at, head_end - at);
    const int status = std::atoi(head.c_str() + 9);
    if (status < 100 || status > 999) Fail("an answer's status is not a number: " + head);
    const size_t body_at = head_end + 4;
    if (status == 100) {  // the interim answer to "Expect: 100-continue"
      at = body_at;
      continue;
    }
    std::string lower = head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t cl = lower.find("\r\ncontent-length:");
    if (cl == std::string::npos) Fail("an answer has no Content-Length: " + head);
    if (may_hold_head) return;
    const size_t length = std::strtoull(head.c_str() + cl + 17, nullptr, 10);
    if (body_at + length > answer.size()) Fail("an answer's body is cut short: " + head);
    const std::string body = answer.substr(body_at, length);
    if (status >= 400 && body.rfind("{\"error\":", 0) == 0 && !nlohmann::json::accept(body))
      Fail("an error answer's body is not JSON: " + body);
    at = body_at + length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::signal(SIGPIPE, SIG_IGN);
  TheServer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string request(reinterpret_cast<const char*>(data), size);
  CheckAnswer(Exchange(request), request);
  return 0;
}
