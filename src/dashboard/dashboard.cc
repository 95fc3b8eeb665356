// The dashboard's routes and server (dashboard.h). A request is answered on the server's
// one I/O thread, inline: a snapshot is a few state API calls on rank 0 (no other rank is
// asked: their samples come to rank 0 by themselves), cached for min_refresh_s.
#include "dashboard/dashboard.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <random>

#include "dashboard/metrics.h"
#include "prism/errors.h"

namespace prism::dashboard {

namespace {

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The value of `key` in a query string "a=1&b=2" ("" if absent). Tokens and ranks need
/// no percent-decoding: they are hex digits and digits.
std::string QueryValue(const std::string& query, const std::string& key) {
  size_t at = 0;
  while (at <= query.size()) {
    size_t end = query.find('&', at);
    if (end == std::string::npos) end = query.size();
    const std::string pair = query.substr(at, end - at);
    if (pair.rfind(key + "=", 0) == 0) return pair.substr(key.size() + 1);
    at = end + 1;
  }
  return "";
}

/// Compares in time independent of where they differ.
bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

/// A non-negative integer, or nullopt.
std::optional<long> NonNegative(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0' || n < 0 || errno == ERANGE) return std::nullopt;
  return n;
}

http::Response JsonResponse(const nlohmann::json& j) {
  http::Response r;
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  r.headers["cache-control"] = "no-store";
  return r;
}

}  // namespace

std::string RandomToken() {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 4; ++i) {  // 128 bits
    uint32_t x = rd();
    for (int j = 0; j < 4; ++j, x >>= 8) {
      token += kHex[(x >> 4) & 0xf];
      token += kHex[x & 0xf];
    }
  }
  return token;
}

Routes::Routes(DashboardSources sources, std::string token, double min_refresh_s)
    : sources_(std::move(sources)),
      token_(std::move(token)),
      min_refresh_ns_(static_cast<int64_t>(min_refresh_s * 1e9)) {}

Snapshot Routes::Current() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = SteadyNs();
  if (!have_ || now - taken_ns_ >= min_refresh_ns_) {
    cached_ = sources_.snapshot();
    have_ = true;
    taken_ns_ = now;
  }
  return cached_;
}

http::Response Routes::Answer(const http::Request& request) {
  if (!token_.empty() && !SameToken(QueryValue(request.query, "token"), token_)) {
    return http::ErrorResponse(403, "this dashboard needs ?token=... (the URL rank 0 logged and "
                                    "wrote to its endpoint file has it)");
  }
  if (request.method != "GET" && request.method != "HEAD") {
    http::Response r = http::ErrorResponse(405, "the dashboard answers GET only");
    r.headers["allow"] = "GET, HEAD";
    return r;
  }
  const std::string& path = request.path;
  if (path == "/" || path == "/index.html") {
    http::Response r;
    r.body = PageHtml();
    r.content_type = "text/html; charset=utf-8";
    return r;
  }
  try {
    if (path == "/metrics") {
      http::Response r;
      r.body = PrometheusText(Current());
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      return r;
    }
    if (path == "/api/logs/search") return SearchLogs(request.query);
    if (path == "/api/logs") {
      const std::string rank_text = QueryValue(request.query, "rank");
      char* end = nullptr;
      const long rank = std::strtol(rank_text.c_str(), &end, 10);
      if (rank_text.empty() || *end != '\0' || rank < 0) {
        return http::ErrorResponse(400, "/api/logs needs ?rank=N");
      }
      std::optional<std::string> text;
      if (sources_.log_tail) text = sources_.log_tail(static_cast<int>(rank));
      return JsonResponse({{"rank", rank}, {"reachable", text.has_value()}, {"text", text.value_or("")}});
    }
    if (path.rfind("/api/", 0) == 0) {
      const std::string view = path.substr(5);
      if (view == "job") return JsonResponse(JobJson(Current()));
      if (view == "ranks") return JsonResponse(RanksJson(Current()));
      if (view == "tasks") return JsonResponse(TasksJson(Current()));
      if (view == "actors") return JsonResponse(ActorsJson(Current()));
      if (view == "placement_groups") return JsonResponse(PlacementGroupsJson(Current()));
      if (view == "kv") return JsonResponse(KvJson(Current()));
      if (view == "timeline") return JsonResponse(TimelineJson(Current()));
      if (view == "panels") return JsonResponse(PanelsJson(Current()));
      if (view == "history") return JsonResponse(HistoryJson(Current()));
      if (view == "snapshot") return JsonResponse(SnapshotJson(Current()));
    }
  } catch (const std::exception& e) {
    return http::ErrorResponse(503, std::string("the job's state is not available: ") + e.what());
  }
  return http::ErrorResponse(404, "no such page: " + path +
                                      " (try /, /metrics or /api/{job,ranks,tasks,actors,"
                                      "placement_groups,kv,timeline,panels,history,snapshot,logs?rank=N,"
                                      "logs/search?q=TEXT})");
}

http::Response Routes::SearchLogs(const std::string& query) {
  const std::optional<std::string> needle = PercentDecode(QueryValue(query, "q"));
  if (!needle) return http::ErrorResponse(400, "/api/logs/search: ?q= has a bad %-escape");
  if (needle->empty() || needle->size() > kMaxLogQueryBytes) {
    return http::ErrorResponse(400, "/api/logs/search needs ?q=TEXT, 1 to " + std::to_string(kMaxLogQueryBytes) +
                                        " bytes (found case-insensitively in each rank's log)");
  }
  if (needle->find_first_of(std::string("\n\r\0", 3)) != std::string::npos) {
    return http::ErrorResponse(400, "/api/logs/search: ?q= is searched within one line: no line breaks");
  }
  std::optional<int> rank;
  if (const std::string text = QueryValue(query, "rank"); !text.empty() && text != "all") {
    const std::optional<long> n = NonNegative(text);
    if (!n || *n > 1 << 24) return http::ErrorResponse(400, "/api/logs/search: ?rank= is a rank (0, 1, ...) or all");
    rank = static_cast<int>(*n);
  }
  LogSearchLimits limits;
  if (const std::string text = QueryValue(query, "limit"); !text.empty()) {
    const std::optional<long> n = NonNegative(text);
    if (!n || *n < 1 || *n > static_cast<long>(kMaxLogSearchMatches)) {
      return http::ErrorResponse(400, "/api/logs/search: ?limit= is 1 to " + std::to_string(kMaxLogSearchMatches));
    }
    limits.max_matches = static_cast<size_t>(*n);
  }
  if (!sources_.log_search) return http::ErrorResponse(404, "this dashboard has no logs to search");
  const LogSearchResult found = sources_.log_search(*needle, rank, limits);
  nlohmann::json matches = nlohmann::json::array();
  for (const LogMatch& m : found.matches) {
    matches.push_back({{"rank", m.rank}, {"file", m.file}, {"line", m.line}, {"text", m.text}});
  }
  return JsonResponse({{"query", *needle},
                       {"matches", std::move(matches)},
                       {"truncated", found.truncated},
                       {"limit", limits.max_matches},
                       {"scanned_bytes", found.scanned_bytes},
                       {"partial_scan", found.partial_scan},
                       {"unreadable_ranks", found.unreadable_ranks}});
}

Dashboard::Dashboard(const DashboardSetting& where, DashboardSources sources, double min_refresh_s) {
  if (where.mode != DashboardSetting::Mode::kServe) throw Error("prism dashboard: nothing to serve (dashboard=off or report)");
  const std::string token = where.NeedsToken() ? RandomToken() : "";
  routes_ = std::make_unique<Routes>(std::move(sources), token, min_refresh_s);
  http::ServerOptions options;
  options.host = where.host;
  options.port = where.port;
  options.io_threads = 1;
  options.max_body_bytes = 64 << 10;
  Routes* routes = routes_.get();
  server_ = std::make_unique<http::Server>(options, [routes](http::Request request, http::Respond respond) {
    respond(routes->Answer(request));
  });
  url_ = server_->endpoint() + "/" + (token.empty() ? "" : "?token=" + token);
}

Dashboard::~Dashboard() { Stop(); }

uint16_t Dashboard::port() const { return server_->port(); }

void Dashboard::Stop() {
  if (server_) server_->Stop();
}

}  // namespace prism::dashboard
