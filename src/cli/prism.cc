// `prism`: Prism's command line. One subcommand so far:
//
//   prism status <where>    the dashboard's summary in a terminal, where <where> is
//                           the live dashboard's URL (as printed, with its ?token=),
//                           the endpoint file rank 0 wrote (<session dir>/dashboard.url),
//                           or a report (prism-dashboard-<job>.html) after the job.
//
// Exit status: 0, 1 when the dashboard cannot be read (named, with the reason), 2 on bad
// arguments.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange

#include <CLI/CLI.hpp>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "dashboard/status.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

struct Failure {
  std::string what;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Failure{"cannot open " + path};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// GET <path> of the dashboard at `url` ("http://host:port/[?token=...]"), its body.
std::string Get(const std::string& url, const std::string& path) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) throw Failure{url + " is not an http:// URL"};
  const std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find_first_of("/?");
  const std::string authority = rest.substr(0, slash);
  const size_t query_at = rest.find('?');
  const std::string query = query_at == std::string::npos ? "" : rest.substr(query_at);
  const size_t colon = authority.rfind(':');
  const std::string host = colon == std::string::npos ? authority : authority.substr(0, colon);
  const std::string port = colon == std::string::npos ? "80" : authority.substr(colon + 1);
  asio::io_context ioc;
  asio::ip::tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::seconds(10));
  beast::error_code ec;
  auto where = resolver.resolve(host, port, ec);
  if (!ec) stream.connect(where, ec);
  if (ec) throw Failure{"cannot reach " + url + " (" + ec.message() + "): the job may have ended; its report is in $PRISM_STORAGE_PATH (else ~/prism_results)"};
  beast::http::request<beast::http::string_body> request{beast::http::verb::get, path + query, 11};
  request.set(beast::http::field::host, authority);
  request.set(beast::http::field::connection, "close");
  beast::http::write(stream, request, ec);
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> response;
  if (!ec) beast::http::read(stream, buffer, response, ec);
  if (ec) throw Failure{"reading " + url + path + ": " + ec.message()};
  if (response.result_int() != 200) {
    throw Failure{url + path + " answered " + std::to_string(response.result_int()) + ": " + response.body()};
  }
  return response.body();
}

int Status(const std::string& where) {
  std::string url = where;
  if (where.rfind("http://", 0) != 0) {
    const std::string text = ReadFile(where);
    if (auto snapshot = prism::dashboard::ReportSnapshot(text)) {
      std::fputs(prism::dashboard::StatusText(*snapshot, where, false).c_str(), stdout);
      return 0;
    }
    url = text.substr(0, text.find_first_of("\r\n"));
    if (url.rfind("http://", 0) != 0) {
      throw Failure{where + " is neither a dashboard report nor an endpoint file (dashboard.url)"};
    }
  }
  const nlohmann::json snapshot = nlohmann::json::parse(Get(url, "/api/snapshot"), nullptr, false);
  if (snapshot.is_discarded()) throw Failure{url + "/api/snapshot did not answer JSON"};
  std::fputs(prism::dashboard::StatusText(snapshot, url, true).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prism's command line"};
  app.require_subcommand(1);
  std::string where;
  CLI::App* status = app.add_subcommand("status", "A job's dashboard summary: live or from its report");
  status->add_option("where", where,
                     "the dashboard's URL, its endpoint file (<session dir>/dashboard.url) or a report "
                     "(prism-dashboard-<job>.html)")
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return Status(where);
  } catch (const Failure& f) {
    std::fprintf(stderr, "prism status: %s\n", f.what.c_str());
    return 1;
  }
}
