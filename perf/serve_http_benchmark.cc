// prism_serve_http_benchmark: the ceiling of Prism Serve's HTTP layer alone (no replicas, no
// ranks): an in-process prism::http::Server whose handler answers "ok" inline,
// loaded over 127.0.0.1 by
//
//   wrk          `wrk -t T -c C -d D --latency` at 1, 8 and 64 connections (--connections),
//                each for D seconds (--duration, default 5): requests/s, and p50/p99 latency
//                from wrk's latency distribution. Skipped, with a note, if wrk is not on
//                PATH (Debian: apt-get install wrk; scripts/install-deps.sh has it);
//   sync client  a C++ keep-alive client (Boost.Beast, synchronous) sending one request at a
//                time on one connection: p50/p99 of each request's round trip, over
//                --sync-requests requests (default 20,000) after 1,000 warm-up ones.
//
//   ./prism_serve_http_benchmark [--quick] [--json=PATH] [--rounds=N] [--duration=S]
//       [--connections=1,8,64] [--wrk-threads=T] [--io-threads=N] [--sync-requests=N]
//
// Every run is a round; --rounds (default 1) repeats the whole set and reports medians with
// min/max across rounds. The whole program has a watchdog: it exits 1 with a message if it
// runs far past its planned time (a synchronous read has no timeout of its own). Every wrk
// run must see only 2xx responses and no socket errors, else it fails (exit 1). Table on
// stdout, JSON in Google Benchmark's shape at --json (default
// perf/results/serve_http_benchmark.json). Issue 18's end-to-end targets (p50 <= 0.3 ms at 1
// connection, >= 10,000 requests/s) are shown beside the figures: the HTTP layer alone has
// to beat them by a margin for the full path through replicas to meet them.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "bench_cli.h"
#include "bench_report.h"
#include "wrk_runner.h"
#include "http/server.h"

namespace {

namespace http = prism::http;
namespace asio = boost::asio;
namespace beast = boost::beast;
using Clock = std::chrono::steady_clock;

struct Options {
  bool quick = false;
  std::string json = "perf/results/serve_http_benchmark.json";
  int rounds = 1;
  double duration_s = 5;
  std::vector<int> connections = {1, 8, 64};
  int wrk_threads = 1;
  int io_threads = 1;
  int sync_requests = 20000;
};

/// Parses our flags (bench_cli.h). Exits on --help and on a bad flag.
Options ParseOptions(int argc, char** argv) {
  Options o;
  prism_bench::Cli cli("prism_serve_http_benchmark", "prism::serve's HTTP proxy under wrk and a C++ client");
  cli.AddQuick("1 s per wrk run, 2,000 synchronous requests (a smoke run)")
      .AddJson("perf/results/serve_http_benchmark.json");
  cli.app.add_option("--rounds", o.rounds, "repeat the whole set N times (default 1)")->check(CLI::PositiveNumber);
  cli.app.add_option("--duration", o.duration_s, "seconds per wrk run (default 5)")->check(CLI::Range(0.5, 600.0));
  cli.app.add_option("--connections", o.connections, "wrk's connection counts (default 1,8,64)")
      ->delimiter(',')
      ->check(CLI::Range(1, 10000));
  cli.app.add_option("--wrk-threads", o.wrk_threads,
                     "wrk's threads, at most the connections (default 1: the server's I/O thread "
                     "and wrk each get one of this machine's 2 cores)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--io-threads", o.io_threads, "the server's I/O threads (default 1)")
      ->check(CLI::PositiveNumber);
  cli.app.add_option("--sync-requests", o.sync_requests, "the C++ client's measured requests (default 20000)")
      ->check(CLI::Range(10, 1 << 30));
  cli.Parse(argc, argv, [&] {
    o.duration_s = 1;
    o.sync_requests = 2000;
  });
  o.quick = cli.quick;
  o.json = cli.json;
  return o;
}

// ---- wrk (perf/wrk_runner.h) -------------------------------------------------------------

using prism_bench::OnPath;
using prism_bench::RunCapture;
using prism_bench::RunWrk;
using prism_bench::WrkResult;

// ---- the synchronous C++ client ------------------------------------------------------------

struct SyncResult {
  double p50_us = 0, p99_us = 0, requests_per_s = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

// One keep-alive connection, one request at a time: write, read the whole response, repeat.
SyncResult RunSyncClient(uint16_t port, int warmup, int measured) {
  asio::io_context ioc;
  asio::ip::tcp::socket socket(ioc);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  socket.set_option(asio::ip::tcp::no_delay(true));
  beast::http::request<beast::http::empty_body> request(beast::http::verb::get, "/", 11);
  request.set(beast::http::field::host, "127.0.0.1");
  request.keep_alive(true);
  beast::flat_buffer buffer;
  std::vector<double> us;
  us.reserve(static_cast<size_t>(measured));
  auto start = Clock::now();
  for (int i = 0; i < warmup + measured; ++i) {
    if (i == warmup) start = Clock::now();
    auto t0 = Clock::now();
    beast::http::write(socket, request);
    beast::http::response<beast::http::string_body> response;
    beast::http::read(socket, buffer, response);
    auto t1 = Clock::now();
    if (response.result_int() != 200 || response.body() != "ok")
      throw std::runtime_error("the sync client got " + std::to_string(response.result_int()) +
                               " '" + response.body() + "'");
    if (i >= warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  double wall = std::chrono::duration<double>(Clock::now() - start).count();
  return {Percentile(us, 0.5), Percentile(us, 0.99), measured / wall};
}

std::string Cell(const std::vector<double>& v, const char* fmt) {
  char a[32], b[32], c[32], out[112];
  std::snprintf(a, sizeof a, fmt, prism_bench::Median(v));
  if (v.size() < 2) return a;
  std::snprintf(b, sizeof b, fmt, prism_bench::Min(v));
  std::snprintf(c, sizeof c, fmt, prism_bench::Max(v));
  std::snprintf(out, sizeof out, "%s [%s, %s]", a, b, c);
  return out;
}

prism_bench::Json Num(double v) { return prism_bench::JsonNumber(v); }

}  // namespace

int main(int argc, char** argv) {
  Options opt = ParseOptions(argc, argv);
  double load_start[3];
  prism_bench::LoadAverage(load_start);

  // The watchdog: the planned time, generously padded.
  double planned_s = opt.rounds * (opt.connections.size() * (opt.duration_s + 2) + 30) + 60;
  std::thread([planned_s] {
    std::this_thread::sleep_for(std::chrono::duration<double>(planned_s));
    std::fprintf(stderr, "prism_serve_http_benchmark: still running after %.0f s; giving up\n", planned_s);
    std::_Exit(1);
  }).detach();

  http::ServerOptions server_options;
  server_options.io_threads = opt.io_threads;
  http::Server server(server_options, [](http::Request, http::Respond respond) {
    http::Response r;
    r.body = "ok";
    r.content_type = "text/plain";
    respond(std::move(r));
  });
  std::string url = server.endpoint() + "/";
  bool have_wrk = OnPath("wrk");
  std::string wrk_version;
  if (have_wrk) {
    int rc = 0;
    std::string v = RunCapture("wrk --version", &rc);  // "wrk 4.1.0 [epoll] ..." (exit 1)
    wrk_version = v.substr(0, v.find('\n'));
    wrk_version = wrk_version.substr(0, wrk_version.find(" ["));
  }

  std::printf("Prism Serve HTTP server alone: handler answers \"ok\" inline; %d I/O thread(s); %s; "
              "%d round(s); load avg %.2f\n",
              opt.io_threads, url.c_str(), opt.rounds, load_start[0]);
  if (!have_wrk)
    std::printf("  note: wrk is not on PATH, so the wrk rows are skipped (Debian: apt-get install wrk)\n");

  int status = 0;
  std::vector<std::vector<double>> rps(opt.connections.size()), p50(opt.connections.size()),
      p99(opt.connections.size()), cpu(opt.connections.size());
  std::vector<double> sync_p50, sync_p99, sync_rps;
  try {
    for (int round = 0; round < opt.rounds; ++round) {
      if (have_wrk) {
        for (size_t i = 0; i < opt.connections.size(); ++i) {
          WrkResult r = RunWrk(url, opt.connections[i], opt.wrk_threads, opt.duration_s);
          if (!r.ok) {
            std::fprintf(stderr, "prism_serve_http_benchmark: wrk at %d connections FAILED: %s\n",
                         opt.connections[i], r.error.c_str());
            status = 1;
            continue;
          }
          rps[i].push_back(r.requests_per_s);
          p50[i].push_back(r.p50_us);
          p99[i].push_back(r.p99_us);
          cpu[i].push_back(r.server_cpu_us);
        }
      }
      SyncResult s = RunSyncClient(server.port(), opt.quick ? 200 : 1000, opt.sync_requests);
      sync_p50.push_back(s.p50_us);
      sync_p99.push_back(s.p99_us);
      sync_rps.push_back(s.requests_per_s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism_serve_http_benchmark: %s\n", e.what());
    status = 1;
  }
  server.StopAccepting();
  bool drained = server.Drain(std::chrono::seconds(5));
  server.Stop();
  if (!drained) {
    std::fprintf(stderr, "prism_serve_http_benchmark: requests still in flight after the clients finished\n");
    status = 1;
  }

  std::printf("\n  %-40s %-26s %-22s %-28s %s\n", "client", "requests/s", "p50 (us)", "p99 (us)",
              "server CPU us/request");
  std::vector<prism_bench::Entry> entries;
  int family = 0;
  for (size_t i = 0; i < opt.connections.size(); ++i) {
    if (rps[i].empty()) continue;
    int c = opt.connections[i];
    char what[64];
    std::snprintf(what, sizeof what, "wrk, %d connection%s (-t%d)", c, c == 1 ? "" : "s",
                  std::min(opt.wrk_threads, c));
    std::printf("  %-40s %-26s %-22s %-28s %s\n", what, Cell(rps[i], "%.0f").c_str(),
                Cell(p50[i], "%.1f").c_str(), Cell(p99[i], "%.1f").c_str(), Cell(cpu[i], "%.2f").c_str());
    prism_bench::Entry e;
    e.name = "serve_http_wrk_c" + std::to_string(c);
    e.family_index = family++;
    e.iterations = 1;
    e.real_time = prism_bench::Median(p50[i]);
    e.cpu_time = e.real_time;
    e.items_per_second = prism_bench::Median(rps[i]);
    e.before_unit = {{"connections", Num(c)},
                     {"p50_us", Num(prism_bench::Median(p50[i]))},
                     {"p99_us", Num(prism_bench::Median(p99[i]))},
                     {"server_cpu_us_per_request", Num(prism_bench::Median(cpu[i]))}};
    e.unit = "requests/s";
    e.per_round = rps[i];
    if (c == 1) {
      double v = prism_bench::Median(p50[i]);
      e.target = prism_bench::Target{"p50 <= 300 us at 1 connection (issue 18, end to end)", 300,
                                     v / 300, v <= 300, !opt.quick};
    } else if (c == 64) {
      double v = e.items_per_second;
      e.target = prism_bench::Target{">= 10,000 requests/s (issue 18, end to end)", 10000,
                                     v / 10000, v >= 10000, !opt.quick};
    }
    e.label = std::string(what) + "; no-op handler inline; " + wrk_version;
    entries.push_back(std::move(e));
  }
  if (!sync_p50.empty()) {
    std::printf("  %-40s %-26s %-22s %s\n", "C++ keep-alive client, one at a time",
                Cell(sync_rps, "%.0f").c_str(), Cell(sync_p50, "%.1f").c_str(),
                Cell(sync_p99, "%.1f").c_str());
    prism_bench::Entry e;
    e.name = "serve_http_sync_client";
    e.family_index = family++;
    e.iterations = opt.sync_requests;
    e.real_time = prism_bench::Median(sync_p50);
    e.cpu_time = e.real_time;
    e.items_per_second = prism_bench::Median(sync_rps);
    e.before_unit = {{"p50_us", Num(prism_bench::Median(sync_p50))},
                     {"p99_us", Num(prism_bench::Median(sync_p99))}};
    e.unit = "us (p50 round trip)";
    e.per_round = sync_p50;
    e.label = "Boost.Beast synchronous client, one keep-alive connection";
    entries.push_back(std::move(e));
  }
  std::printf("  (median [min, max] across rounds. Reference on this machine: nginx, one worker, fixed\n"
              "   200 \"ok\", wrk 5 s: 22k/s p50 38 us at 1 connection; 77k/s p50 52 us at 8; 79k/s\n"
              "   p50 0.39 ms p99 0.9 ms at 64.)\n");

  if (!entries.empty()) {
    try {
      prism_bench::Context c;
      c.executable = argv[0];
      c.mhz_per_cpu = static_cast<int>(prism_bench::CpuMhz());
      c.load_avg_at_start = std::vector<double>(load_start, load_start + 3);
      c.quick = opt.quick;
      c.rounds = opt.rounds;
      c.fields = {{"io_threads", Num(opt.io_threads)},
                  {"wrk_threads", Num(opt.wrk_threads)},
                  {"wrk_duration_s", Num(opt.duration_s)},
                  {"wrk", prism_bench::JsonString(have_wrk ? wrk_version : "not installed")}};
      c.statistic = "median across rounds (min/max across rounds alongside)";
      prism_bench::WriteReport(opt.json, c, entries);
      std::printf("\nJSON: %s\n", std::filesystem::absolute(opt.json).c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "prism_serve_http_benchmark: %s\n", e.what());
      status = 1;
    }
  }
  return status;
}
