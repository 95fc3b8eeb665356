#include "serve/ingress.h"

#include <chrono>

#include "prism/serve/deployment.h"

namespace prism::serve::internal {

http::Response ErrorResponse(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const BackPressureError& e) {
    return http::ErrorResponse(503, e.what());
  } catch (const BadRequestError& e) {
    return http::ErrorResponse(400, e.what());
  } catch (const DeploymentError& e) {
    return http::ErrorResponse(503, e.what());
  } catch (const ActorError& e) {
    return http::ErrorResponse(503, std::string("serve: the replica died: ") + e.what());
  } catch (const TaskError& e) {
    // An exception from the handler, raised on the replica's rank: its type tells 400 from 500.
    if (e.OriginalType().find("BadRequestError") != std::string::npos) return http::ErrorResponse(400, e.OriginalMessage());
    return http::ErrorResponse(500, e.OriginalMessage());
  } catch (const std::exception& e) {
    return http::ErrorResponse(500, e.what());
  } catch (...) {
    return http::ErrorResponse(500, "serve: unknown error");
  }
}

Ingress::Ingress(const std::string& host, uint16_t port, std::shared_ptr<RequestMetrics> metrics)
    : metrics_(std::move(metrics)) {
  http::ServerOptions options;
  options.host = host;
  options.port = port;
  server_ = std::make_unique<http::Server>(options, [this](http::Request request, http::Respond respond) {
    Handle(std::move(request), std::move(respond));
  });
}

Ingress::~Ingress() { Stop(); }

void Ingress::SetRoute(const std::string& app, const std::string& prefix, const std::string& deployment) {
  std::lock_guard<std::mutex> lock(mu_);
  auto old = app_route_.find(app);
  if (old != app_route_.end()) routes_.erase(old->second);
  routes_[prefix] = deployment;
  app_route_[app] = prefix;
}

void Ingress::RemoveRoute(const std::string& app) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = app_route_.find(app);
  if (it == app_route_.end()) return;
  routes_.erase(it->second);
  app_route_.erase(it);
}

std::string Ingress::endpoint() const { return server_->endpoint(); }
void Ingress::StopAccepting() { server_->StopAccepting(); }
bool Ingress::Drain(double timeout_s) { return server_->Drain(std::chrono::duration<double>(timeout_s)); }
void Ingress::Stop() { server_->Stop(); }

void Ingress::Handle(http::Request request, http::Respond respond) {
  std::string deployment, prefix, app;
  std::string known;  // the route prefixes, for a 404
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto match = MatchRoute(routes_, request.path)) {
      prefix = *match;
      deployment = routes_.at(prefix);
      for (const auto& [a, p] : app_route_) {
        if (p == prefix) app = a;
      }
    } else {
      for (const auto& [p, d] : routes_) known += (known.empty() ? "" : ", ") + p;
    }
  }
  if (metrics_) {
    // Counted once answered, whichever way: the answer goes through this wrapper.
    metrics_->HttpStarted();
    respond = [respond = std::move(respond), metrics = metrics_, method = request.method, route = prefix, app,
               started = std::chrono::steady_clock::now()](http::Response r) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
      metrics->HttpEnded(route, method, app, r.status, ms);
      respond(std::move(r));
    };
  }
  if (deployment.empty()) {
    respond(http::ErrorResponse(404, "no route for " + request.path + " (route prefixes: " +
                                         (known.empty() ? "none" : known) + ")"));
    return;
  }
  Request r;
  r.method = std::move(request.method);
  r.path = std::move(request.path);
  r.route_prefix = std::move(prefix);
  r.query = std::move(request.query);
  r.headers = std::move(request.headers);
  r.body = std::move(request.body);
  SubmitCall(deployment, kHttpMethod, platform::ToBytes(r), [respond](CallResult result) {
    if (result.error) {
      respond(ErrorResponse(result.error));
      return;
    }
    try {
      Response out = platform::FromBytes<Response>(result.bytes);
      respond(http::Response{out.status, std::move(out.body), std::move(out.content_type), std::move(out.headers)});
    } catch (...) {
      respond(ErrorResponse(std::current_exception()));
    }
  });
}

}  // namespace prism::serve::internal
