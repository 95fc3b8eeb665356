#pragma once
// The HTTP ingress (Ray Serve's proxy), on rank 0: one http::Server for the job; each
// request goes to the application whose route_prefix is the longest prefix of its path
// (on a '/' boundary), as a serve::Request to that application's ingress deployment
// through the driver's router. The reply comes back on a completion callback and is
// answered there: no thread waits per request.
//
// Status codes: 404 no route; 503 back pressure (BackPressureError), a replica that died
// and could not be replaced in time (ActorError), or Serve shutting down (DeploymentError);
// 400 BadRequestError from the handler (Request::Json() on a body that is not JSON); 500
// any other exception the handler threw, with its message. The server itself answers
// malformed HTTP (400), oversized bodies (413) and slow clients (408).

#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "http/server.h"
#include "serve/request_metrics.h"
#include "serve/router_core.h"  // MatchRoute

namespace prism::serve::internal {

/// The HTTP answer for a failed call (the mapping above), with body {"error": message}.
http::Response ErrorResponse(std::exception_ptr error);

class Ingress {
 public:
  /// Starts the server (throws prism::Error when it cannot bind). Each request's route,
  /// method, status and time go to `metrics` (when not null).
  Ingress(const std::string& host, uint16_t port, std::shared_ptr<RequestMetrics> metrics = nullptr);
  ~Ingress();
  /// Routes `prefix` to `deployment` (replacing the application's previous prefix).
  void SetRoute(const std::string& app, const std::string& prefix, const std::string& deployment);
  /// Drops the application's route (its prefix then answers 404, or a shorter prefix's app).
  void RemoveRoute(const std::string& app);
  std::string endpoint() const;
  /// Refuses new requests (503) and closes the listening socket.
  void StopAccepting();
  /// Waits up to timeout_s for the requests in flight to be answered.
  bool Drain(double timeout_s);
  void Stop();

 private:
  void Handle(http::Request request, http::Respond respond);

  std::shared_ptr<RequestMetrics> metrics_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> routes_;     // prefix -> deployment
  std::map<std::string, std::string> app_route_;  // app -> prefix
  std::unique_ptr<http::Server> server_;
};

}  // namespace prism::serve::internal
