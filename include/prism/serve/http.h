#pragma once
// What an HTTP-facing deployment sees: serve::Request in, serve::Response out (Ray Serve's
// Starlette request and response, in C++), and the errors the serve library raises.

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "prism/errors.h"
#include "prism/internal/json.h"

namespace prism::serve {

/// The router could not take the request: every replica has max_ongoing_requests in
/// flight and max_queued_requests are already waiting (Ray's BackPressureError). Answered
/// 503 over HTTP. Try again later, or raise max_queued_requests / add replicas.
class BackPressureError : public Error {
 public:
  using Error::Error;
};

/// The request itself is wrong (Request::Json() on a body that is not JSON, or a handler
/// that throws it): answered 400 over HTTP with the message.
class BadRequestError : public Error {
 public:
  using Error::Error;
};

/// A deployment could not be deployed, called or found: its constructor threw, its
/// replicas could not be placed, no deployment has that name, or Serve is shutting down.
class DeploymentError : public Error {
 public:
  using Error::Error;
};

/// One HTTP request as the ingress deployment's handler receives it. A value: copy it,
/// keep it. Header names are lower-case.
struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the full path, e.g. "/classify/v1"
  std::string route_prefix;  // the application's route prefix that matched, e.g. "/classify"
  std::string query;   // after '?', undecoded, or ""
  std::map<std::string, std::string> headers;
  std::string body;    // the bytes as sent (JSON, an image, anything)

  /// The body parsed as JSON. Throws BadRequestError (400 over HTTP) naming the problem
  /// when the body is not JSON or nests deeper than internal::kMaxJsonDepth (512) levels.
  /// Thread-safe (parses each time).
  nlohmann::json Json() const {
    if (::prism::internal::JsonNestingDepth(body) > ::prism::internal::kMaxJsonDepth) {
      throw BadRequestError("the request body's JSON nests deeper than " +
                            std::to_string(::prism::internal::kMaxJsonDepth) + " levels");
    }
    try {
      return nlohmann::json::parse(body);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e999)
      throw BadRequestError(std::string("invalid JSON in the request body: ") + e.what());
    }
  }
  /// The value of query parameter `name` (percent-decoding not applied), or `fallback`.
  std::string QueryParam(const std::string& name, const std::string& fallback = "") const {
    size_t pos = 0;
    while (pos <= query.size()) {
      size_t end = query.find('&', pos);
      if (end == std::string::npos) end = query.size();
      const std::string part = query.substr(pos, end - pos);
      const size_t eq = part.find('=');
      if (part.substr(0, eq) == name) return eq == std::string::npos ? "" : part.substr(eq + 1);
      pos = end + 1;
    }
    return fallback;
  }
  /// The header `name` (lower-case), or "".
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & method & path & route_prefix & query & headers & body;
  }
};

/// One HTTP response. Default: 200, no body, JSON content type.
struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;  // extra headers

  /// A 200 (or `status`) response whose body is `j` serialized. Bytes in its strings that
  /// are not UTF-8 become U+FFFD (JSON text is UTF-8), instead of an exception.
  static Response Json(const nlohmann::json& j, int status = 200) {
    Response r;
    r.status = status;
    r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return r;
  }
  /// A text/plain response.
  static Response Text(std::string text, int status = 200) {
    Response r;
    r.status = status;
    r.body = std::move(text);
    r.content_type = "text/plain; charset=utf-8";
    return r;
  }
  /// An application/octet-stream response.
  static Response Bytes(std::string bytes, int status = 200) {
    Response r;
    r.status = status;
    r.body = std::move(bytes);
    r.content_type = "application/octet-stream";
    return r;
  }

  template <class Archive>
  void serialize(Archive& ar, unsigned) {
    ar & status & body & content_type & headers;
  }
};

}  // namespace prism::serve
