// Prism Serve survives a lost worker rank under `mpirun --enable-recovery` (issue 44, item
// 4): tests/failure/CMakeLists.txt runs it at 3 ranks through expect_failure.sh.
//
//   prism_serve_lost_rank_test
//
// A deployment of 2 replicas (one per worker rank, 0.5 CPU each) behind the HTTP ingress on
// rank 0 (127.0.0.1, a kernel-picked port). Four HTTP clients (Boost.Beast, a new
// connection per request, each request with a 5 s deadline) and one DeploymentHandle caller
// send requests without pause; after 1 s of that the driver SIGKILLs the process of the
// last rank, which holds one replica. Then:
//   * no request hangs: every one is answered before its deadline,
//   * the requests that fail during the loss are 503s only (HTTP) or ActorError /
//     DeploymentError (handle), and are counted (the router sends again what it can),
//   * the server keeps answering: 200s after the kill, and the last second of requests
//     all 200,
//   * the lost replica is replaced on a live rank: serve::Status shows 2 RUNNING replicas,
//     none on the lost rank, and a reply comes from the new replica, within kReplaceBoundS,
// and it prints the figures ("serve_lost_rank ok: ..."): time from the kill to the
// replacement serving its first request, and the requests failed.
#include <prism/api.h>
#include <prism/serve.h>
#include <prism/state.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace serve = prism::serve;
namespace beast = boost::beast;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kRequestTimeout = std::chrono::seconds(5);
// From the kill to the replacement answering, and to 2/2 RUNNING again.
constexpr double kReplaceBoundS = 5.0;

std::atomic<int> instances{0};

/// Says which replica answered: its rank, pid and a token naming the instance.
class Echo {
 public:
  Echo() : token_(std::to_string(::getpid()) + "-" + std::to_string(instances++)) {}
  serve::Response operator()(const serve::Request&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // so requests are in flight at the kill
    return serve::Response::Text(Info());
  }
  std::string Info() {
    return std::to_string(prism::GetRuntimeContext().GetRank()) + " " + std::to_string(::getpid()) + " " + token_;
  }

 private:
  const std::string token_;
};

struct Reply {
  int rank = -1;
  int pid = -1;
  std::string token;
};
Reply ParseReply(const std::string& body) {
  Reply r;
  char token[64] = "";
  if (std::sscanf(body.c_str(), "%d %d %63s", &r.rank, &r.pid, token) == 3) r.token = token;
  return r;
}

/// One request's outcome as a client saw it.
struct Outcome {
  Clock::time_point start, end;
  int status = 0;     // 0: no HTTP answer (error says why)
  std::string body;   // or the handle call's error
  std::string error;  // transport error: "timeout", a refused connection, ...
  bool handle = false;
};

/// GET http://127.0.0.1:port/target on a new connection, everything within `timeout`.
Outcome Fetch(uint16_t port, const std::string& target, Clock::duration timeout) {
  namespace http = beast::http;
  Outcome out;
  out.start = Clock::now();
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, "127.0.0.1");
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  auto failed = [&out](beast::error_code ec) {
    out.error = ec == beast::error::timeout ? "timeout" : ec.message();
  };
  stream.expires_after(timeout);  // one deadline for connect, write and read together
  stream.async_connect({boost::asio::ip::make_address("127.0.0.1"), port}, [&](beast::error_code ec) {
    if (ec) return failed(ec);
    http::async_write(stream, request, [&](beast::error_code ec, size_t) {
      if (ec) return failed(ec);
      http::async_read(stream, buffer, response, [&](beast::error_code ec, size_t) {
        if (ec) return failed(ec);
        out.status = static_cast<int>(response.result_int());
        out.body = response.body();
      });
    });
  });
  ioc.run();
  out.end = Clock::now();
  return out;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int Fail(const std::string& what) {
  std::fprintf(stderr, "serve_lost_rank FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  serve::Shutdown();
  prism::Shutdown();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  prism::Init(argc, argv);
  const int world = prism::GetRuntimeContext().GetWorldSize();
  if (world != 3) return Fail("needs exactly 3 ranks (a replica on each worker rank), got " + std::to_string(world));
  const int victim = world - 1;

  auto app = serve::Deployment<Echo>("echo").NumReplicas(2).MaxOngoingRequests(8).RayActorOptions({{"CPU", 0.5}})
                 .Bind();
  serve::Run(app, {.route_prefix = "/echo", .port = 0, .ready_timeout_s = 30});
  const std::string endpoint = serve::Status().endpoint;  // http://127.0.0.1:PORT
  const uint16_t port = static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  {
    std::set<int> ranks;
    for (const auto& d : serve::Status().deployments) {
      for (const auto& r : d.replicas) ranks.insert(r.rank);
    }
    if (ranks != std::set<int>{1, 2}) return Fail("the 2 replicas are not on ranks 1 and 2");
  }
  auto handle = serve::GetDeploymentHandle<Echo>("echo");

  // The victim replica's process: ask until a reply comes from the last rank.
  Reply victim_reply;
  std::set<std::string> first_tokens;
  for (int i = 0; i < 200 && (first_tokens.size() < 2 || victim_reply.pid < 0); ++i) {
    const Reply r = ParseReply(handle.Method<&Echo::Info>().Result(10));
    first_tokens.insert(r.token);
    if (r.rank == victim) victim_reply = r;
  }
  if (victim_reply.pid <= 0 || victim_reply.pid == ::getpid()) return Fail("no reply from rank " + std::to_string(victim));

  // Load: HTTP clients and one handle caller, without pause, until told to stop.
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<Outcome> outcomes;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        Outcome o = Fetch(port, "/echo", kRequestTimeout);
        std::lock_guard<std::mutex> lock(mu);
        outcomes.push_back(std::move(o));
      }
    });
  }
  clients.emplace_back([&] {
    while (!stop) {
      Outcome o;
      o.handle = true;
      o.start = Clock::now();
      try {
        o.body = handle.Method<&Echo::Info>().Result(std::chrono::duration<double>(kRequestTimeout).count());
        o.status = 200;
      } catch (const prism::TimeoutError&) {
        o.error = "timeout";
      } catch (const prism::ActorError& e) {  // what the ingress answers with a 503
        o.status = 503;
        o.body = e.what();
      } catch (const serve::DeploymentError& e) {
        o.status = 503;
        o.body = e.what();
      } catch (const serve::BackPressureError& e) {
        o.status = 503;
        o.body = e.what();
      } catch (const std::exception& e) {
        o.status = 500;
        o.body = e.what();
      }
      o.end = Clock::now();
      std::lock_guard<std::mutex> lock(mu);
      outcomes.push_back(std::move(o));
    }
  });
  auto stop_clients = [&] {
    stop = true;
    for (auto& t : clients) t.join();
    clients.clear();
  };

  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto killed_at = Clock::now();
  ::kill(victim_reply.pid, SIGKILL);

  // Until the lost rank is DEAD, the deployment is 2/2 RUNNING off it, and a reply came
  // from a new replica.
  double dead_ms = -1, running_ms = -1, serving_ms = -1;
  int replacement_rank = -1;
  while (Clock::now() < killed_at + std::chrono::duration<double>(kReplaceBoundS) &&
         (dead_ms < 0 || running_ms < 0 || serving_ms < 0)) {
    if (dead_ms < 0) {
      for (const auto& n : prism::state::ListNodes()) {
        if (n.rank == victim && n.state == "DEAD") dead_ms = Ms(Clock::now() - killed_at);
      }
    }
    if (running_ms < 0) {
      int running = 0;
      bool on_victim = false;
      for (const auto& d : serve::Status().deployments) {
        for (const auto& r : d.replicas) {
          running += r.state == serve::ReplicaState::kRunning;
          on_victim |= r.rank == victim;
        }
      }
      if (running == 2 && !on_victim) running_ms = Ms(Clock::now() - killed_at);
    }
    if (serving_ms < 0) {
      std::lock_guard<std::mutex> lock(mu);
      for (const Outcome& o : outcomes) {
        if (o.status != 200 || o.end < killed_at) continue;
        const Reply r = ParseReply(o.body);
        if (first_tokens.count(r.token) == 0 && (serving_ms < 0 || Ms(o.end - killed_at) < serving_ms)) {
          serving_ms = Ms(o.end - killed_at);
          replacement_rank = r.rank;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // One more second of load on the repaired deployment.
  const auto repaired_at = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop_clients();

  int http_ok = 0, http_503 = 0, handle_ok = 0, handle_failed = 0, ok_after_kill = 0;
  int late_failures = 0;  // failures among requests started after the repair
  double slowest_ms = 0;
  std::vector<std::string> bad;
  for (const Outcome& o : outcomes) {
    slowest_ms = std::max(slowest_ms, Ms(o.end - o.start));
    if (!o.error.empty()) {
      bad.push_back(std::string(o.handle ? "handle" : "HTTP") + " request without an answer: " + o.error);
      continue;
    }
    if (o.status == 200) {
      (o.handle ? handle_ok : http_ok)++;
      ok_after_kill += o.start > killed_at;
      continue;
    }
    if (o.status != 503) {
      bad.push_back(std::string(o.handle ? "handle call: " : "HTTP ") + std::to_string(o.status) + ": " + o.body);
      continue;
    }
    (o.handle ? handle_failed : http_503)++;
    if (o.start > repaired_at) late_failures++;
  }
  std::printf("serve_lost_rank: rank %d DEAD %.0f ms after the kill; replacement on rank %d serving %.0f ms after "
              "it; 2/2 RUNNING after %.0f ms; HTTP %d ok, %d 503; handle %d ok, %d failed; slowest request %.0f ms\n",
              victim, dead_ms, replacement_rank, serving_ms, running_ms, http_ok, http_503, handle_ok, handle_failed,
              slowest_ms);
  std::fflush(stdout);
  if (!bad.empty()) return Fail(std::to_string(bad.size()) + " bad outcome(s), the first: " + bad.front());
  if (dead_ms < 0) return Fail("rank " + std::to_string(victim) + " is not DEAD in ListNodes after the kill");
  if (running_ms < 0) {
    return Fail("the deployment is not back to 2 RUNNING replicas off the lost rank within " +
                std::to_string(kReplaceBoundS) + " s: " + serve::Status().ToJson().dump());
  }
  if (serving_ms < 0) return Fail("no reply from a new replica within " + std::to_string(kReplaceBoundS) + " s");
  if (replacement_rank == victim || replacement_rank < 0) return Fail("the replacement is not on a live rank");
  if (ok_after_kill == 0) return Fail("no request succeeded after the kill");
  if (late_failures > 0) return Fail(std::to_string(late_failures) + " request(s) failed after the repair");

  serve::Shutdown();
  std::printf("serve_lost_rank ok: replacement serving %.0f ms after the kill, %d HTTP request(s) and %d handle "
              "call(s) failed (of %d and %d)\n",
              serving_ms, http_503, handle_failed, http_ok + http_503, handle_ok + handle_failed);
  std::fflush(stdout);
  prism::Shutdown();
  return 0;
}
