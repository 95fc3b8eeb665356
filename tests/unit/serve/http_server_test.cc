// Prism Serve's HTTP server against real clients: curl and Python requests run as
// subprocesses, and raw POSIX sockets for what a polite client never does (garbage, half a
// request, pipelining). Every server binds 127.0.0.1 port 0; every wait has a deadline.
#include "http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "prism/errors.h"

namespace prism::http {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

// ---- subprocess clients ----------------------------------------------------------------

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` under `timeout 60` so that a wedged client fails the test instead of
// hanging it.
CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  std::string full = "timeout 60 " + command + " 2>&1";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (!pipe) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) result.output.append(buf, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A Python script in a temporary file, run with the port as its first argument.
CommandResult RunPython(const std::string& script, uint16_t port) {
  static std::atomic<int> counter{0};
  auto path = std::filesystem::temp_directory_path() /
              ("prism_http_test_" + std::to_string(::getpid()) + "_" +
               std::to_string(counter++) + ".py");
  std::ofstream(path) << script;
  CommandResult r = RunCommand("python3 " + path.string() + " " + std::to_string(port));
  std::filesystem::remove(path);
  return r;
}

std::string Url(const Server& server, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(server.port()) + path;
}

// curl printing the body, then a line with the status code.
std::pair<std::string, int> Curl(const std::string& args) {
  CommandResult r = RunCommand("curl -sS -m 20 -w '\\n%{http_code}' " + args);
  size_t nl = r.output.rfind('\n');
  if (r.exit_code != 0 || nl == std::string::npos) return {r.output, -1};
  return {r.output.substr(0, nl), std::atoi(r.output.c_str() + nl + 1)};
}

// ---- a raw socket client ---------------------------------------------------------------

class RawClient {
 public:
  // Connects to 127.0.0.1:port; connected() tells whether it worked, error() why not.
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      error_ = errno;
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return fd_ >= 0; }
  int error() const { return error_; }

  void Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      ASSERT_GT(n, 0) << "send failed: " << std::strerror(errno);
      sent += static_cast<size_t>(n);
    }
  }

  // One response (status line, headers, Content-Length body), or nullopt when the deadline
  // passed or the server closed first.
  struct Reply {
    int status = 0;
    std::string headers;  // lower-cased
    std::string body;
  };
  std::optional<Reply> ReadResponse(std::chrono::milliseconds timeout = 10s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t end;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos)
      if (!ReadMore(deadline)) return std::nullopt;
    Reply reply;
    reply.headers = pending_.substr(0, end);
    for (char& c : reply.headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    reply.status = std::atoi(pending_.c_str() + 9);  // "HTTP/1.1 200"
    size_t length = 0;
    size_t at = reply.headers.find("content-length:");
    if (at != std::string::npos) length = std::stoul(reply.headers.substr(at + 15));
    while (pending_.size() < end + 4 + length)
      if (!ReadMore(deadline)) return std::nullopt;
    reply.body = pending_.substr(end + 4, length);
    pending_.erase(0, end + 4 + length);
    return reply;
  }

  // True when the server closes the connection (EOF or reset) before the deadline.
  bool WaitClosed(std::chrono::milliseconds timeout = 10s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t before = pending_.size();
      if (!ReadMore(deadline)) return closed_;
      if (pending_.size() == before) return closed_;
    }
  }

 private:
  bool ReadMore(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    pending_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  int error_ = 0;
  bool closed_ = false;
  std::string pending_;
};

// ---- handlers --------------------------------------------------------------------------

// /bin echoes the body as bytes; anything else answers a JSON description of the request.
void Echo(Request request, Respond respond) {
  Response r;
  if (request.path == "/bin") {
    r.content_type = "application/octet-stream";
    r.body = std::move(request.body);
  } else {
    r.body = json{{"method", request.method},
                  {"path", request.path},
                  {"query", request.query},
                  {"content_type", request.content_type()},
                  {"body", request.body}}
                 .dump();
  }
  respond(std::move(r));
}

// Keeps each request's Respond until the test answers it.
class HeldResponds {
 public:
  Handler handler() {
    return [this](Request request, Respond respond) {
      std::lock_guard<std::mutex> lock(mu_);
      held_.push_back({std::move(request), std::move(respond)});
      cv_.notify_all();
    };
  }
  // Waits (up to 10 s) until `n` requests are held.
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return held_.size() >= n; });
  }
  std::pair<Request, Respond> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    auto front = std::move(held_.front());
    held_.pop_front();
    return front;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Request, Respond>> held_;
};

Response Text(std::string body, int status = 200) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = "text/plain";
  return r;
}

// ---- tests -----------------------------------------------------------------------------

TEST(HttpServer, GetAndPostJsonWithCurl) {
  Server server({}, Echo);
  EXPECT_EQ(server.endpoint(), "http://127.0.0.1:" + std::to_string(server.port()));

  auto [get, get_status] = Curl("'" + Url(server, "/echo?x=1&y=2") + "'");
  ASSERT_EQ(get_status, 200) << get;
  json g = json::parse(get);
  EXPECT_EQ(g["method"], "GET");
  EXPECT_EQ(g["path"], "/echo");
  EXPECT_EQ(g["query"], "x=1&y=2");
  EXPECT_EQ(g["body"], "");

  auto [post, post_status] = Curl("-X POST -H 'Content-Type: application/json' --data '{\"a\": [1, 2]}' " +
                                  Url(server, "/predict"));
  ASSERT_EQ(post_status, 200) << post;
  json p = json::parse(post);
  EXPECT_EQ(p["method"], "POST");
  EXPECT_EQ(p["path"], "/predict");
  EXPECT_EQ(p["content_type"], "application/json");
  EXPECT_EQ(json::parse(p["body"].get<std::string>()), json::parse("{\"a\": [1, 2]}"));
  EXPECT_EQ(server.requests_total(), 2u);
  // A request is in flight until its response is written, and curl may print it first.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.requests_in_flight() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(server.requests_in_flight(), 0u);
}

TEST(HttpServer, BinaryBodiesWithPythonRequests) {
  Server server({}, Echo);
  CommandResult r = RunPython(R"(
import sys, requests
port = sys.argv[1]
data = bytes(range(256)) * 4000 + b'\x00\r\n\r\n'
r = requests.post(f'http://127.0.0.1:{port}/bin', data=data,
                  headers={'Content-Type': 'application/octet-stream'}, timeout=30)
assert r.status_code == 200, r.status_code
assert r.headers['content-type'] == 'application/octet-stream', r.headers
assert r.content == data, (len(r.content), len(data))
j = requests.post(f'http://127.0.0.1:{port}/echo', json={'image': [0.5, 1.5]}, timeout=30).json()
assert j['content_type'] == 'application/json', j
assert j['body'].replace(' ', '') == '{"image":[0.5,1.5]}', j
print('ok')
)",
                              server.port());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "ok\n");
}

TEST(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  Server server({}, Echo);
  // curl reuses its connection for several URLs in one invocation.
  CommandResult c = RunCommand("curl -sS " + Url(server, "/a") + " " + Url(server, "/b") + " " +
                        Url(server, "/c"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(server.requests_total(), 3u);
  EXPECT_EQ(server.connections_total(), 1u);

  CommandResult p = RunPython(R"(
import sys, requests
s = requests.Session()
for i in range(5):
    r = s.get(f'http://127.0.0.1:{sys.argv[1]}/s{i}', timeout=30)
    assert r.status_code == 200 and r.json()['path'] == f'/s{i}', r.text
print('ok')
)",
                              server.port());
  EXPECT_EQ(p.exit_code, 0) << p.output;
  EXPECT_EQ(server.requests_total(), 8u);
  EXPECT_EQ(server.connections_total(), 2u);
}

TEST(HttpServer, HandlerRespondsLaterFromAnotherThread) {
  std::vector<std::thread> workers;
  std::mutex mu;
  Server server({}, [&](Request request, Respond respond) {
    std::lock_guard<std::mutex> lock(mu);
    workers.emplace_back([path = request.path, respond = std::move(respond)] {
      std::this_thread::sleep_for(50ms);
      respond(Text("later " + path));
    });
  });
  auto [body, status] = Curl(Url(server, "/x"));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, "later /x");
  std::lock_guard<std::mutex> lock(mu);
  for (auto& t : workers) t.join();
}

TEST(HttpServer, BodyOverTheLimitIs413WithoutReachingTheHandler) {
  std::atomic<int> handled{0};
  ServerOptions options;
  options.max_body_bytes = 1024;
  Server server(options, [&](Request request, Respond respond) {
    ++handled;
    Echo(std::move(request), std::move(respond));
  });
  // Python sends the whole body at once; curl (2 MB) asks "Expect: 100-continue" first and
  // gets its answer before sending a byte of the body.
  CommandResult p = RunPython(R"(
import sys, requests
r = requests.post(f'http://127.0.0.1:{sys.argv[1]}/bin', data=b'x' * 200000, timeout=30)
assert r.status_code == 413, r.status_code
assert 'max_body_bytes' in r.json()['error'], r.text
print('ok')
)",
                              server.port());
  EXPECT_EQ(p.exit_code, 0) << p.output;
  auto big = std::filesystem::temp_directory_path() / ("prism_http_big_" + std::to_string(::getpid()));
  std::ofstream(big) << std::string(2 << 20, 'y');
  auto [body, status] = Curl("--data-binary @" + big.string() + " " + Url(server, "/bin"));
  std::filesystem::remove(big);
  EXPECT_EQ(status, 413) << body;
  // A body at the limit is fine.
  auto [ok, ok_status] = Curl("--data-binary " + std::string(1024, 'z') + " " + Url(server, "/bin"));
  EXPECT_EQ(ok_status, 200);
  EXPECT_EQ(ok, std::string(1024, 'z'));
  EXPECT_EQ(handled.load(), 1);
}

TEST(HttpServer, LargeBodyWithExpectContinue) {
  Server server({}, Echo);
  auto big = std::filesystem::temp_directory_path() / ("prism_http_big2_" + std::to_string(::getpid()));
  std::string data(3 << 20, 'q');
  std::ofstream(big) << data;
  CommandResult r = RunCommand("curl -sS -o /dev/null -w '%{http_code} %{size_download}' --data-binary @" +
                        big.string() + " " + Url(server, "/bin"));
  std::filesystem::remove(big);
  EXPECT_EQ(r.output, "200 " + std::to_string(data.size()));
}

TEST(HttpServer, ChunkedBodiesAreReadAndLimited) {
  ServerOptions options;
  options.max_body_bytes = 1000;
  Server server(options, Echo);
  RawClient client(server.port());
  ASSERT_TRUE(client.connected());
  client.Send(
      "POST /bin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  auto reply = client.ReadResponse();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "hello world");
  // Chunks adding up past the limit: 413 once the limit is crossed, then closed.
  std::string chunks = "POST /bin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) chunks += "1f4\r\n" + std::string(500, 'c') + "\r\n";
  client.Send(chunks);
  auto over = client.ReadResponse();
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 413);
  EXPECT_TRUE(client.WaitClosed());
}

TEST(HttpServer, Http10ClosesAfterItsResponseAndHeadHasNoBody) {
  Server server({}, Echo);
  RawClient old(server.port());
  ASSERT_TRUE(old.connected());
  old.Send("GET /old HTTP/1.0\r\n\r\n");
  auto reply = old.ReadResponse();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(json::parse(reply->body)["path"], "/old");
  EXPECT_TRUE(old.WaitClosed());

  RawClient head(server.port());
  ASSERT_TRUE(head.connected());
  head.Send("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /g HTTP/1.1\r\nHost: x\r\n\r\n");
  // HEAD: the length a GET would have, no body; the next response follows at once.
  auto head_reply = head.ReadResponse();  // reads Content-Length bytes: they must be the GET's
  ASSERT_TRUE(head_reply);
  EXPECT_EQ(head_reply->status, 200);
  EXPECT_EQ(head_reply->body.rfind("HTTP/1.1 200", 0), 0u) << head_reply->body;
}

TEST(HttpServer, GarbageIs400AndTheConnectionCloses) {
  Server server({}, Echo);
  RawClient client(server.port());
  ASSERT_TRUE(client.connected());
  const char garbage[] = "\x16\x03\x01\x02 this is not HTTP\r\n\r\n";
  client.Send(std::string(garbage, sizeof garbage - 1));
  auto reply = client.ReadResponse();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 400);
  EXPECT_NE(reply->body.find("malformed HTTP request"), std::string::npos) << reply->body;
  EXPECT_NE(reply->headers.find("connection: close"), std::string::npos) << reply->headers;
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_EQ(server.requests_total(), 0u);
  // The server still serves.
  EXPECT_EQ(Curl(Url(server, "/after")).second, 200);
}

TEST(HttpServer, HeadersOverTheLimitAre431) {
  ServerOptions options;
  options.max_header_bytes = 1024;
  Server server(options, Echo);
  RawClient client(server.port());
  ASSERT_TRUE(client.connected());
  client.Send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'b') + "\r\n\r\n");
  auto reply = client.ReadResponse();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 431);
  EXPECT_TRUE(client.WaitClosed());
}

TEST(HttpServer, SlowClientGets408WhileOthersAreServed) {
  ServerOptions options;
  options.request_read_timeout_s = 0.5;
  Server server(options, Echo);
  RawClient slow(server.port());
  ASSERT_TRUE(slow.connected());
  slow.Send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly part of it");
  // Meanwhile another client is served at once (one I/O thread).
  auto [body, status] = Curl(Url(server, "/fast"));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(json::parse(body)["path"], "/fast");
  auto reply = slow.ReadResponse(10s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 408);
  EXPECT_NE(reply->body.find("request_read_timeout_s"), std::string::npos) << reply->body;
  EXPECT_TRUE(slow.WaitClosed());
  EXPECT_EQ(Curl(Url(server, "/after")).second, 200);
}

TEST(HttpServer, IdleKeepAliveConnectionIsClosedQuietly) {
  ServerOptions options;
  options.keep_alive_timeout_s = 0.3;
  Server server(options, Echo);
  RawClient client(server.port());
  ASSERT_TRUE(client.connected());
  client.Send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n");
  auto reply = client.ReadResponse();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_TRUE(client.WaitClosed(10s));  // no 408: nothing was half-sent
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  std::vector<std::thread> workers;
  std::mutex mu;
  Server server({}, [&](Request request, Respond respond) {
    if (request.path == "/first") {  // the first answers late, from another thread
      std::lock_guard<std::mutex> lock(mu);
      workers.emplace_back([respond = std::move(respond)] {
        std::this_thread::sleep_for(100ms);
        respond(Text("first"));
      });
    } else {
      respond(Text(request.path.substr(1)));
    }
  });
  RawClient client(server.port());
  ASSERT_TRUE(client.connected());
  client.Send(
      "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /second HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /third HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  for (const char* expected : {"first", "second", "third"}) {
    auto reply = client.ReadResponse();
    ASSERT_TRUE(reply) << expected;
    EXPECT_EQ(reply->body, expected);
  }
  std::lock_guard<std::mutex> lock(mu);
  for (auto& t : workers) t.join();
}

TEST(HttpServer, StopAcceptingRefusesNewConnectionsWhileInFlightCompletes) {
  HeldResponds held;
  Server server({}, held.handler());
  auto in_flight = std::async(std::launch::async, [&] { return Curl(Url(server, "/slow")); });
  ASSERT_TRUE(held.WaitFor(1));
  EXPECT_EQ(server.requests_in_flight(), 1u);

  server.StopAccepting();
  RawClient refused(server.port());
  EXPECT_FALSE(refused.connected());
  EXPECT_EQ(refused.error(), ECONNREFUSED) << std::strerror(refused.error());

  auto [request, respond] = held.Take();
  respond(Text("finished " + request.path));
  auto [body, status] = in_flight.get();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, "finished /slow");
  EXPECT_TRUE(server.Drain(5s));
}

TEST(HttpServer, RequestOnAnOldConnectionAfterStopAcceptingIs503) {
  std::atomic<int> handled{0};
  Server server({}, [&](Request request, Respond respond) {
    ++handled;
    Echo(std::move(request), std::move(respond));
  });
  RawClient client(server.port());
  ASSERT_TRUE(client.connected());
  client.Send("GET /before HTTP/1.1\r\nHost: x\r\n\r\n");
  auto before = client.ReadResponse();
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 200);

  server.StopAccepting();
  client.Send("GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
  auto after = client.ReadResponse();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 503);
  EXPECT_NE(after->headers.find("connection: close"), std::string::npos) << after->headers;
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_EQ(handled.load(), 1);
}

TEST(HttpServer, DrainIsFalseUntilTheHandlerAnswers) {
  HeldResponds held;
  Server server({}, held.handler());
  EXPECT_TRUE(server.Drain(0s));  // nothing in flight
  RawClient client(server.port());
  ASSERT_TRUE(client.connected());
  client.Send("GET /held HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(held.WaitFor(1));
  EXPECT_FALSE(server.Drain(50ms));
  EXPECT_EQ(server.requests_in_flight(), 1u);
  auto [request, respond] = held.Take();
  respond(Text("done"));
  EXPECT_TRUE(server.Drain(10s));
  auto reply = client.ReadResponse();
  ASSERT_TRUE(reply);  // Drain counts a request done once its response is written
  EXPECT_EQ(reply->body, "done");
}

// A small thread pool standing in for the replicas: the handler queues, the pool answers.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this] {
        for (;;) {
          std::function<void()> job;
          {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
            if (jobs_.empty()) return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
          }
          job();
        }
      });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void Submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

TEST(HttpServer, SixtyFourConcurrentClientsAnsweredFromAThreadPool) {
  Pool pool(4);
  std::atomic<int> in_handler{0}, peak{0};
  ServerOptions options;
  options.io_threads = 2;
  Server server(options, [&](Request request, Respond respond) {
    int now = ++in_handler;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    pool.Submit([&, body = std::move(request.body), respond = std::move(respond)]() mutable {
      std::this_thread::sleep_for(2ms);
      --in_handler;
      respond(Text("echo:" + body));
    });
  });
  CommandResult r = RunPython(R"(
import sys, threading, requests
port = sys.argv[1]
barrier = threading.Barrier(64)
errors = []
def client(i):
    s = requests.Session()
    barrier.wait(timeout=30)
    for k in range(10):
        body = f'{i}-{k}'
        r = s.post(f'http://127.0.0.1:{port}/c', data=body, timeout=30)
        if r.status_code != 200 or r.text != 'echo:' + body:
            errors.append((i, k, r.status_code, r.text))
threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors[:5]
print('ok')
)",
                              server.port());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "ok\n");
  EXPECT_EQ(server.requests_total(), 640u);
  EXPECT_EQ(server.connections_total(), 64u);
  EXPECT_GT(peak.load(), 1);  // the requests really overlapped
  EXPECT_TRUE(server.Drain(10s));
}

TEST(HttpServer, KeepsAcceptingAfterRunningOutOfDescriptors) {
  Server server({}, Echo);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  size_t open_now = 0;
  for (auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) (void)entry, ++open_now;
  rlimit tight = saved;
  tight.rlim_cur = open_now + 8;  // a few accepted connections, then accept fails (EMFILE)
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 12; ++i) clients.push_back(std::make_unique<RawClient>(server.port()));
  std::this_thread::sleep_for(300ms);  // the acceptor fails and retries meanwhile
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_LT(server.connections_total(), 12u);  // it did run out
  clients.clear();
  auto [body, status] = Curl(Url(server, "/after"));
  EXPECT_EQ(status, 200) << body;
}

TEST(HttpServer, BindFailureSaysWhichAddressAndWhy) {
  Server first({}, Echo);
  ServerOptions options;
  options.port = first.port();
  try {
    Server second(options, Echo);
    FAIL() << "a second server bound the same port";
  } catch (const prism::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(first.port())), std::string::npos) << what;
    EXPECT_NE(what.find("in use"), std::string::npos) << what;
    EXPECT_NE(what.find("port 0"), std::string::npos) << what;
  }
  ServerOptions bad_host;
  bad_host.host = "not an address";
  EXPECT_THROW(Server(bad_host, Echo), prism::Error);
}

TEST(HttpServer, BadOptionsAreRejected) {
  ServerOptions threads;
  threads.io_threads = 0;
  EXPECT_THROW(Server(threads, Echo), prism::Error);
  ServerOptions timeout;
  timeout.request_read_timeout_s = 0;
  EXPECT_THROW(Server(timeout, Echo), prism::Error);
  EXPECT_THROW(Server({}, Handler{}), prism::Error);
}

TEST(HttpServer, HandlerFailuresAre500AndTheServerGoesOn) {
  Server server({}, [](Request request, Respond respond) {
    if (request.path == "/throw") throw std::runtime_error("model exploded");
    if (request.path == "/drop") return;  // never responds: the server answers 500
    if (request.path == "/twice") {
      respond(Text("one"));
      respond(Text("two"));  // ignored
      return;
    }
    if (request.path == "/badstatus") {
      respond(Text("x", 42));
      return;
    }
    respond(Text("fine"));
  });
  auto [thrown, thrown_status] = Curl(Url(server, "/throw"));
  EXPECT_EQ(thrown_status, 500);
  EXPECT_NE(thrown.find("model exploded"), std::string::npos) << thrown;
  auto [dropped, dropped_status] = Curl(Url(server, "/drop"));
  EXPECT_EQ(dropped_status, 500);
  EXPECT_NE(dropped.find("without responding"), std::string::npos) << dropped;
  EXPECT_EQ(Curl(Url(server, "/twice")), std::make_pair(std::string("one"), 200));
  EXPECT_EQ(Curl(Url(server, "/badstatus")).second, 500);
  EXPECT_EQ(Curl(Url(server, "/ok")), std::make_pair(std::string("fine"), 200));
  EXPECT_TRUE(server.Drain(5s));
}

TEST(HttpServer, ResponseHeadersAndStatusReachTheClient) {
  Server server({}, [](Request request, Respond respond) {
    Response r = Text("nope", 404);
    r.headers["X-Prism-Route"] = "none";
    r.headers["X-Bad"] = "a\r\nInjected: yes";  // dropped: would split the header
    respond(std::move(r));
  });
  RawClient client(server.port());
  ASSERT_TRUE(client.connected());
  client.Send("GET /missing HTTP/1.1\r\nHost: x\r\n\r\n");
  auto reply = client.ReadResponse();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 404);
  EXPECT_NE(reply->headers.find("x-prism-route: none"), std::string::npos) << reply->headers;
  EXPECT_EQ(reply->headers.find("injected"), std::string::npos) << reply->headers;
  EXPECT_EQ(reply->body, "nope");
}

TEST(HttpServer, StopWithARequestInFlightAndRespondAfterwards) {
  HeldResponds held;
  auto server = std::make_unique<Server>(ServerOptions{}, held.handler());
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  client.Send("GET /held HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(held.WaitFor(1));
  server->Stop();
  EXPECT_TRUE(client.WaitClosed());
  auto [request, respond] = held.Take();
  Respond copy = respond;
  respond(Text("after stop"));  // dropped, no crash
  server->Stop();               // idempotent
  server.reset();
  copy(Text("after the server is gone"));  // a second call, after destruction: ignored
}

TEST(HttpServer, RespondFromAnotherThreadRacingStop) {
  // Many requests held, answered from another thread while Stop runs: nothing crashes,
  // nothing hangs.
  for (int round = 0; round < 5; ++round) {
    HeldResponds held;
    ServerOptions options;
    options.io_threads = 2;
    auto server = std::make_unique<Server>(options, held.handler());
    std::vector<std::unique_ptr<RawClient>> clients;
    for (int i = 0; i < 8; ++i) {
      clients.push_back(std::make_unique<RawClient>(server->port()));
      ASSERT_TRUE(clients.back()->connected());
      clients.back()->Send("GET /r HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    ASSERT_TRUE(held.WaitFor(8));
    std::thread answerer([&] {
      for (int i = 0; i < 8; ++i) {
        auto [request, respond] = held.Take();
        respond(Text("r"));
      }
    });
    server.reset();
    answerer.join();
  }
}

TEST(HttpServer, WriteEndpointFileIsAtomicAndSaysWhatFailed) {
  auto dir = std::filesystem::temp_directory_path() / ("prism_endpoint_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "serve_endpoint").string();
  WriteEndpointFile(path, "http://127.0.0.1:1234");
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "http://127.0.0.1:1234");
  WriteEndpointFile(path, "http://127.0.0.1:5678");  // replaces
  std::ifstream again(path);
  std::getline(again, line);
  EXPECT_EQ(line, "http://127.0.0.1:5678");
  size_t files = 0;
  for (auto& entry : std::filesystem::directory_iterator(dir)) (void)entry, ++files;
  EXPECT_EQ(files, 1u);  // no temp file left behind
  std::filesystem::remove_all(dir);

  try {
    WriteEndpointFile((dir / "no/such/dir/endpoint").string(), "x");
    FAIL() << "wrote into a missing directory";
  } catch (const prism::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir/endpoint"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace prism::http
