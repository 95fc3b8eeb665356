#pragma once
// Prism Serve: Ray Serve inside one MPI job. Deployments are classes whose replicas are
// Prism actors on the worker ranks; a router on rank 0 sends each request to a replica with
// room (power of two choices), an HTTP ingress on rank 0 (Boost.Beast) routes by prefix,
// and handles let deployments call each other without blocking a thread.
//
//   class Echo {
//    public:
//     explicit Echo(std::string greeting) : greeting_(std::move(greeting)) {}
//     serve::Response operator()(const serve::Request& r) {            // HTTP handler
//       return serve::Response::Json({{"greeting", greeting_}, {"got", r.Json()}});
//     }
//     int Add(int a, int b) { return a + b; }                          // a typed method
//     void Reconfigure(const nlohmann::json& cfg) { ... }              // optional
//     void CheckHealth() { if (broken_) throw std::runtime_error("broken"); }  // optional
//    private:
//     std::string greeting_;
//   };
//
//   prism::Init(argc, argv);
//   auto app = serve::Deployment<Echo>("echo").NumReplicas(2).MaxOngoingRequests(8)
//                  .Bind(std::string("hi"));
//   serve::Run(app, {.route_prefix = "/echo", .endpoint_file = "endpoint.txt"});
//   auto h = serve::GetDeploymentHandle<Echo>("echo");
//   int three = h.Method<&Echo::Add>(1, 2).Result(10);
//   return serve::RunUntilStopped() >= 0 ? (prism::Shutdown(), 0) : 1;   // until SIGTERM
//
// Handler signatures (any subset; C must be constructible from Bind's arguments):
//   serve::Response operator()(const serve::Request&)   HTTP and handle.Remote(request)
//   R Method(Args...)                                   handle.Method<&C::Method>(args...)
//   void Reconfigure(const nlohmann::json& user_config) at start and on a user_config change
//   void CheckHealth()                                  every health_check_period_s; throwing
//                                                       (or taking longer than
//                                                       health_check_timeout_s) restarts it
// A handler may run on up to max_ongoing_requests threads of its replica at once: guard
// shared state. An exception a handler throws fails that request only (HTTP 500 with the
// message; serve::BadRequestError: 400). serve::Batch (prism/serve/batch.h) batches
// concurrent requests into one call.
//
// HTTP status codes: 404 no application's route prefix matches; 400 malformed HTTP or
// BadRequestError (Request::Json() on a body that is not JSON); 413 a body over the
// server's limit; 503 back pressure (max_queued_requests) or shutting down; 500 the
// replica's error message.

#include "prism/serve/batch.h"
#include "prism/serve/config.h"
#include "prism/serve/deployment.h"
#include "prism/serve/http.h"
