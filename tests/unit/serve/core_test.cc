// prism::serve's pure logic, no MPI: the autoscaling rule and its delays (fake clock), the
// router's choice and queue limit, the batcher's decision (fake clock) and Batch under
// concurrent callers, the ingress's route matching and error mapping, the request metrics
// the dashboard's /metrics shows, the router's handling of a dead replica (a fake sender)
// and where a replacement goes when a rank was lost.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "prism/serve.h"
#include "serve/autoscaling_policy.h"
#include "serve/ingress.h"
#include "serve/replica_placement.h"
#include "serve/request_metrics.h"
#include "serve/router.h"
#include "serve/router_core.h"

namespace prism::serve::internal {
namespace {

AutoscalingConfig Scaling(int min, int max, double up, double down) {
  AutoscalingConfig c;
  c.min_replicas = min;
  c.max_replicas = max;
  c.target_ongoing_requests = 2;
  c.upscale_delay_s = up;
  c.downscale_delay_s = down;
  c.look_back_period_s = 1;
  return c;
}

TEST(ServeAutoscaling, DesiredIsCeilOfLoadOverTargetClamped) {
  auto c = Scaling(1, 5, 0, 0);
  EXPECT_EQ(DesiredReplicas(c, 0), 1);    // clamped up to min
  EXPECT_EQ(DesiredReplicas(c, 2), 1);
  EXPECT_EQ(DesiredReplicas(c, 2.1), 2);  // ceil
  EXPECT_EQ(DesiredReplicas(c, 4), 2);
  EXPECT_EQ(DesiredReplicas(c, 7), 4);
  EXPECT_EQ(DesiredReplicas(c, 100), 5);  // clamped down to max
  auto zero = Scaling(0, 3, 0, 0);
  EXPECT_EQ(DesiredReplicas(zero, 0), 0);
  EXPECT_EQ(DesiredReplicas(zero, 0.5), 1);  // scale from zero
}

TEST(ServeAutoscaling, UpscaleWaitsForItsDelay) {
  AutoscalingDecider d(Scaling(1, 4, 2.0, 10.0));
  EXPECT_EQ(d.Decide(1, 8, 0.0), 1);  // wants 4 from t=0
  EXPECT_EQ(d.Decide(1, 8, 1.0), 1);
  EXPECT_EQ(d.Decide(1, 8, 1.99), 1);
  EXPECT_EQ(d.Decide(1, 6, 2.0), 3);  // the delay passed: the desired count now
  EXPECT_EQ(d.Decide(3, 6, 2.1), 3);  // steady
}

TEST(ServeAutoscaling, DownscaleWaitsForItsDelayAndARiseResetsIt) {
  AutoscalingDecider d(Scaling(1, 4, 0.0, 5.0));
  EXPECT_EQ(d.Decide(4, 0, 0.0), 4);
  EXPECT_EQ(d.Decide(4, 0, 4.0), 4);
  EXPECT_EQ(d.Decide(4, 8, 4.5), 4);  // back at the current count's load: the wish to go down ends
  EXPECT_EQ(d.Decide(4, 0, 5.0), 4);  // a new wish starts its delay again
  EXPECT_EQ(d.Decide(4, 0, 9.9), 4);
  EXPECT_EQ(d.Decide(4, 0, 10.0), 1);
}

TEST(ServeAutoscaling, CountOutsideTheBoundsIsClampedAtOnce) {
  AutoscalingDecider d(Scaling(2, 3, 100, 100));
  EXPECT_EQ(d.Decide(0, 0, 0), 2);
  EXPECT_EQ(d.Decide(7, 100, 0), 3);
}

TEST(ServeAutoscaling, LoadWindowAveragesTheLookBackPeriod) {
  LoadWindow w;
  w.Record(0.0, 10);
  w.Record(0.5, 20);
  w.Record(1.0, 30);
  EXPECT_DOUBLE_EQ(w.Average(1.0, 10), 20);
  EXPECT_DOUBLE_EQ(w.Average(1.2, 1.0), 25);  // the sample at t=0 left the window
  EXPECT_DOUBLE_EQ(w.Average(5.0, 1.0), 0);   // none left
}

TEST(ServeRouter, ChoosesOnlyReplicasWithRoom) {
  std::mt19937_64 rng(1);
  std::vector<ReplicaLoad> loads{{5, true}, {2, false}, {4, true}};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ChooseReplica(loads, 5, rng), 2);
  loads[2].in_flight = 5;
  EXPECT_EQ(ChooseReplica(loads, 5, rng), -1);  // full, or not accepting
  EXPECT_EQ(ChooseReplica({}, 5, rng), -1);
}

TEST(ServeRouter, PowerOfTwoChoicesPrefersTheLessLoaded) {
  std::mt19937_64 rng(7);
  // Two replicas: both are always sampled, so the idle one always wins.
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ChooseReplica({{3, true}, {0, true}}, 5, rng), 1);
  // Many replicas: the busiest is chosen only when paired with an equally busy one, never here.
  std::vector<ReplicaLoad> loads{{4, true}, {0, true}, {1, true}, {2, true}};
  std::set<int> chosen;
  for (int i = 0; i < 500; ++i) chosen.insert(ChooseReplica(loads, 5, rng));
  EXPECT_EQ(chosen.count(0), 0u);
  EXPECT_TRUE(chosen.count(1));
  EXPECT_TRUE(chosen.count(2));  // randomised: not always the global minimum
}

TEST(ServeRouter, QueueLimit) {
  EXPECT_TRUE(CanQueue(0, -1));
  EXPECT_TRUE(CanQueue(1000000, -1));
  EXPECT_FALSE(CanQueue(0, 0));
  EXPECT_TRUE(CanQueue(2, 3));
  EXPECT_FALSE(CanQueue(3, 3));
}

/// Calls a Router sent, answered by the test: a fake of the actor call.
struct FakeReplicas {
  struct Sent {
    std::string replica;
    CallDone done;
  };
  std::vector<Sent> sent;
  std::vector<std::string> died;  // what the router told its owner
  std::shared_ptr<Router> MakeRouter() {
    return std::make_shared<Router>(
        "d", nullptr, [this](const std::string& id, const std::string&) { died.push_back(id); },
        [this](const ReplicaRef& r, const std::string&, const std::string&, CallDone done) {
          sent.push_back({r.id, std::move(done)});
        });
  }
  /// Answers the call sent `i`-th (a copy of its callback: the router may send more meanwhile).
  void Answer(size_t i, CallResult result) {
    CallDone done = sent.at(i).done;
    done(std::move(result));
  }
};

ReplicaSet Set(uint64_t version, std::vector<std::string> ids) {
  ReplicaSet set;
  set.version = version;
  set.max_ongoing_requests = 4;
  for (auto& id : ids) set.replicas.push_back({id, {}});
  return set;
}

CallResult Died() {
  return {{}, std::make_exception_ptr(ActorError("prism: the actor died: its rank 2 was lost (its process ended)"))};
}

TEST(ServeRouter, ACallWhoseReplicaDiedGoesToAnotherThatAloneGetsTheNextCalls) {
  FakeReplicas fake;
  auto router = fake.MakeRouter();
  router->Update(Set(1, {"a", "b"}));
  int answers = 0;
  CallResult got;
  router->Submit("m", "x", [&](CallResult r) {
    ++answers;
    got = std::move(r);
  });
  ASSERT_EQ(fake.sent.size(), 1u);
  const std::string first = fake.sent[0].replica, other = first == "a" ? "b" : "a";
  fake.Answer(0, Died());
  EXPECT_EQ(answers, 0);  // not failed: sent again
  ASSERT_EQ(fake.sent.size(), 2u);
  EXPECT_EQ(fake.sent[1].replica, other);
  EXPECT_EQ(fake.died, std::vector<std::string>{first});  // told once, at once
  fake.Answer(1, {"ok", nullptr});
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(got.bytes, "ok");
  EXPECT_EQ(router->Ongoing(), 0);
  // The dead replica gets nothing more, though the set still names it.
  for (int i = 0; i < 20; ++i) {
    router->Submit("m", "x", [](CallResult) {});
    EXPECT_EQ(fake.sent.back().replica, other);
    fake.Answer(fake.sent.size() - 1, {"ok", nullptr});
  }
  // A second failure of the same replica is not reported again; another error marks nothing.
  EXPECT_EQ(fake.died.size(), 1u);
  router->Submit("m", "x", [](CallResult) {});
  fake.Answer(fake.sent.size() - 1,
              {{}, std::make_exception_ptr(TaskError("E", "handler threw", "m", 1, ""))});
  EXPECT_EQ(fake.died.size(), 1u);
  router->Submit("m", "x", [](CallResult) {});
  EXPECT_EQ(fake.sent.back().replica, other);
}

TEST(ServeRouter, WithNoLiveReplicaACallWaitsForTheNextSetAndFails503AfterMaxAttempts) {
  FakeReplicas fake;
  auto router = fake.MakeRouter();
  router->Update(Set(1, {"a"}));
  int answers = 0;
  CallResult got;
  router->Submit("m", "x", [&](CallResult r) {
    ++answers;
    got = std::move(r);
  });
  fake.Answer(0, Died());
  EXPECT_EQ(router->Queued(), 1);  // no live replica: it waits, it is not failed
  EXPECT_EQ(fake.sent.size(), 1u);
  router->Submit("m", "y", [](CallResult) {});  // a new call waits too, behind it
  EXPECT_EQ(router->Queued(), 2);
  router->Update(Set(2, {"b"}));  // the replacement
  ASSERT_EQ(fake.sent.size(), 3u);
  EXPECT_EQ(fake.sent[1].replica, "b");
  for (int attempt = 2; attempt <= Router::kMaxAttempts; ++attempt) {
    fake.Answer(1 + 2 * (attempt - 2), Died());
    if (attempt < Router::kMaxAttempts) router->Update(Set(1 + attempt, {"r" + std::to_string(attempt)}));
  }
  ASSERT_EQ(answers, 1);
  ASSERT_TRUE(got.error);
  EXPECT_EQ(ErrorResponse(got.error).status, 503);
  EXPECT_EQ(fake.died.size(), static_cast<size_t>(Router::kMaxAttempts));
}

state::NodeState Node(int rank, bool alive, double cpus_free) {
  state::NodeState n;
  n.rank = rank;
  n.state = alive ? "ALIVE" : "DEAD";
  n.resources_total = {{"CPU", 1}};
  n.resources_available = {{"CPU", cpus_free}};
  return n;
}

TEST(ServeReplicaPlacement, ALostRankIsNeverPicked) {
  const std::map<std::string, double> half{{"CPU", 0.5}};
  std::string why;
  // Rank 2 has room and none of Serve's replicas, but it was lost: rank 1 it is.
  EXPECT_EQ(PickReplicaRank({Node(0, true, 1), Node(1, true, 0.5), Node(2, false, 1)}, {{1, 1}}, half, why), 1);
  // Rank 1 is full now: the replacement waits there rather than go to the lost rank.
  EXPECT_EQ(PickReplicaRank({Node(0, true, 1), Node(1, true, 0), Node(2, false, 1)}, {{1, 2}}, half, why), 1);
  // Both worker ranks lost: rank 0 serves (as in a one-rank job).
  EXPECT_EQ(PickReplicaRank({Node(0, true, 1), Node(1, false, 1), Node(2, false, 1)}, {}, half, why), 0);
  EXPECT_EQ(PickReplicaRank({Node(0, true, 1)}, {}, half, why), 0);
  // Only the lost rank had the resource: none, and the reason names what live ranks offer.
  auto gpu = Node(2, false, 1);
  gpu.resources_total["GPU"] = 1;
  EXPECT_EQ(PickReplicaRank({Node(0, true, 1), Node(1, true, 1), gpu}, {}, {{"GPU", 1}}, why), -1);
  EXPECT_NE(why.find("no worker rank can hold"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 1: {\"CPU\":1.0}"), std::string::npos) << why;
  EXPECT_NE(why.find("lost, left out: rank 2"), std::string::npos) << why;
  EXPECT_EQ(why.find("rank 2:"), std::string::npos) << why;
}

TEST(ServeBatch, QueueIsReadyWhenFullOrWhenTheOldestHasWaited) {
  BatchQueue<int> q({.max_batch_size = 3, .batch_wait_timeout_s = 0.01});
  EXPECT_FALSE(q.Ready(0));
  q.Add(1, 100.0);
  EXPECT_FALSE(q.Ready(100.005));
  EXPECT_DOUBLE_EQ(q.Deadline(), 100.01);
  EXPECT_TRUE(q.Ready(100.01));
  q.Add(2, 100.002);
  q.Add(3, 100.003);
  q.Add(4, 100.004);
  EXPECT_TRUE(q.Ready(100.004));  // full before the timeout
  EXPECT_EQ(q.Take(), (std::vector<int>{1, 2, 3}));
  EXPECT_FALSE(q.Ready(100.013));  // item 4's own wait ends at 100.014
  EXPECT_TRUE(q.Ready(100.0145));
  EXPECT_EQ(q.Take(), (std::vector<int>{4}));
  EXPECT_TRUE(q.Empty());
}

TEST(ServeBatch, RejectsBadOptions) {
  EXPECT_THROW(BatchQueue<int>({.max_batch_size = 0}), Error);
  EXPECT_THROW(BatchQueue<int>({.max_batch_size = 2, .batch_wait_timeout_s = -1}), Error);
  EXPECT_THROW((Batch<int, int>(nullptr)), Error);
}

TEST(ServeBatch, ConcurrentCallsAreBatchedAndEachGetsItsResult) {
  std::atomic<int> calls{0};
  Batch<int, int> batch(
      [&](std::vector<int> xs) {
        ++calls;
        std::vector<int> out;
        for (int x : xs) out.push_back(x * 10);
        return out;
      },
      {.max_batch_size = 8, .batch_wait_timeout_s = 0.05});
  std::vector<std::thread> threads;
  std::vector<int> results(32, -1);
  for (int i = 0; i < 32; ++i) threads.emplace_back([&, i] { results[i] = batch(i); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 32; ++i) EXPECT_EQ(results[i], i * 10);
  EXPECT_EQ(batch.items(), 32u);
  EXPECT_LT(batch.batches(), 32u);  // some calls shared a batch
  EXPECT_GT(batch.max_observed_batch_size(), 1);
  EXPECT_LE(batch.max_observed_batch_size(), 8);
}

TEST(ServeBatch, ABatchFunctionErrorFailsEveryCallOfTheBatch) {
  Batch<int, int> wrong_count([](std::vector<int>) { return std::vector<int>{}; }, {.max_batch_size = 2});
  EXPECT_THROW(wrong_count(1), Error);
  Batch<int, int> throws([](std::vector<int>) -> std::vector<int> { throw std::runtime_error("model broke"); });
  try {
    throws(1);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "model broke");
  }
}

TEST(ServeIngress, LongestPrefixOnSlashBoundaries) {
  std::map<std::string, std::string> routes{{"/", "root"}, {"/a", "a"}, {"/a/b", "ab"}};
  EXPECT_EQ(MatchRoute(routes, "/a/b/c").value(), "/a/b");
  EXPECT_EQ(MatchRoute(routes, "/a/bc").value(), "/a");
  EXPECT_EQ(MatchRoute(routes, "/a").value(), "/a");
  EXPECT_EQ(MatchRoute(routes, "/ab").value(), "/");
  routes.erase("/");
  EXPECT_FALSE(MatchRoute(routes, "/ab").has_value());
  EXPECT_FALSE(MatchRoute(routes, "/").has_value());
}

TEST(ServeIngress, ErrorsMapToStatusCodes) {
  auto status = [](auto e) { return ErrorResponse(std::make_exception_ptr(e)).status; };
  EXPECT_EQ(status(BackPressureError("full")), 503);
  EXPECT_EQ(status(DeploymentError("gone")), 503);
  EXPECT_EQ(status(BadRequestError("bad json")), 400);
  EXPECT_EQ(status(TaskError("prism::serve::BadRequestError", "invalid JSON", "Call", 1, "x")), 400);
  auto r = ErrorResponse(std::make_exception_ptr(TaskError("std::runtime_error", "boom", "Call", 1, "x")));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"], "boom");
  // A binary body's parse error quotes bytes that are not UTF-8: still a 400 with a JSON body
  // (dump threw inside the completion, and the client got "dropped the request" instead).
  Request binary;
  binary.body = std::string("\x89PNG\r\n\x1a\n\xff\xfe", 10);
  std::exception_ptr error;
  try {
    binary.Json();
  } catch (...) {
    error = std::current_exception();
  }
  ASSERT_TRUE(error);
  r = ErrorResponse(error);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(nlohmann::json::parse(r.body)["error"].get<std::string>().find("invalid JSON"), std::string::npos);
}

TEST(ServeApi, DeploymentOptionsAreChecked) {
  struct C {
    int F(int x) { return x; }
  };
  EXPECT_THROW(Deployment<C>(""), Error);
  EXPECT_THROW(Deployment<C>("a#b"), Error);
  EXPECT_THROW(Deployment<C>("c").MaxOngoingRequests(0), Error);
  EXPECT_THROW(Deployment<C>("c").MaxQueuedRequests(-2), Error);
  EXPECT_THROW(Deployment<C>("c").Autoscaling({.min_replicas = 3, .max_replicas = 2}), Error);
  EXPECT_THROW(Deployment<C>("c").Autoscaling({.min_replicas = 1, .max_replicas = 2, .target_ongoing_requests = 0}), Error);
  auto app = Deployment<C>("c").NumReplicas(2).Bind();
  EXPECT_EQ(app.IngressName(), "c");
  EXPECT_FALSE(app.Deployments().back().has_http);
  EXPECT_EQ(app.Deployments().back().config.num_replicas, 2);
}

TEST(ServeApi, IncludeAddsDependenciesAheadOfTheIngressOnce) {
  struct C {
    int F(int x) { return x; }
  };
  auto a = Deployment<C>("a").Bind();
  auto b = Deployment<C>("b").Bind();
  auto ingress = Deployment<C>("ingress").Bind();
  ingress.Include(a).Include(b).Include(a);
  ASSERT_EQ(ingress.Deployments().size(), 3u);
  EXPECT_EQ(ingress.Deployments()[0].name, "a");
  EXPECT_EQ(ingress.Deployments()[1].name, "b");
  EXPECT_EQ(ingress.IngressName(), "ingress");
  // The same name with other arguments is another deployment: refused.
  auto other_a = Deployment<C>("a").Bind();
  EXPECT_NO_THROW(ingress.Include(other_a));  // same class and (no) arguments: the same one
  struct D {
    explicit D(int) {}
  };
  EXPECT_THROW(ingress.Include(Deployment<D>("a").Bind(7)), Error);
  EXPECT_EQ(ingress.Deployments().size(), 3u);
}

TEST(ServeApi, RequestJsonAndQuery) {
  Request r;
  r.body = "{\"x\": [1, 2]}";
  r.query = "a=1&b=two&c";
  EXPECT_EQ(r.Json()["x"][1], 2);
  EXPECT_EQ(r.QueryParam("b"), "two");
  EXPECT_EQ(r.QueryParam("c", "none"), "");
  EXPECT_EQ(r.QueryParam("d", "none"), "none");
  r.body = "{not json";
  EXPECT_THROW(r.Json(), BadRequestError);
  // A number no double holds is nlohmann's out_of_range, not a parse_error: still a 400
  // (found by fuzzing the JSON request path, tests/fuzz/corpus/json/regress-*).
  r.body = "[1e30792]";
  EXPECT_THROW(r.Json(), BadRequestError);
  EXPECT_EQ(Response::Json({{"k", 1}}).body, "{\"k\":1}");
}

TEST(ServeApi, ADeeplyNestedBodyIsABadRequestAndInvalidUtf8IsReplaced) {
  // 100,000 levels would overflow the stack of whatever copies or dumps the parsed value.
  Request r;
  r.body = std::string(100000, '[') + std::string(100000, ']');
  try {
    r.Json();
    ADD_FAILURE() << "a body nested 100,000 levels deep was accepted";
  } catch (const BadRequestError& e) {
    EXPECT_NE(std::string(e.what()).find("nests deeper than 512 levels"), std::string::npos) << e.what();
  }
  r.body = std::string(512, '[') + std::string(512, ']');  // the limit itself parses
  EXPECT_TRUE(r.Json().is_array());
  r.body = "{\"s\": \"[[[[\"}";  // brackets in strings do not count
  EXPECT_EQ(r.Json()["s"], "[[[[");
  // A string that is not UTF-8 is answered with U+FFFD in its place, not an exception.
  EXPECT_EQ(Response::Json({{"s", std::string("a\xff")}}).body, "{\"s\":\"a\xef\xbf\xbd\"}");
}

TEST(ServeRequestMetrics, CountsRequestsAndCallsIntoRaysNamesWithCumulativeBuckets) {
  RequestMetrics m;
  m.HttpStarted();
  m.HttpStarted();
  m.HttpStarted();
  m.HttpEnded("/g", "GET", "app", 200, 0.5);
  m.HttpEnded("/g", "GET", "app", 200, 7);
  m.CallEnded("greeter", "greeter#0", false, 3);
  m.CallEnded("greeter", "greeter#0", true, 2000);
  std::map<std::string, platform::PanelMetric> by;
  for (auto& x : m.Metrics({{"greeter", "app"}})) {
    std::string key = x.name;
    for (const auto& [k, v] : x.labels) key += "," + k + "=" + v;
    by[key] = x;
  }
  const std::string http = ",route=/g,method=GET,application=app,status_code=200";
  ASSERT_TRUE(by.count("ray_serve_num_http_requests" + http));
  EXPECT_EQ(by["ray_serve_num_http_requests" + http].type, "counter");
  EXPECT_EQ(by["ray_serve_num_http_requests" + http].value, 2);
  const platform::PanelMetric& latency = by["ray_serve_http_request_latency_ms" + http];
  EXPECT_EQ(latency.type, "histogram");
  EXPECT_EQ(latency.count, 2u);
  EXPECT_DOUBLE_EQ(latency.sum, 7.5);
  ASSERT_EQ(latency.bounds, LatencyBucketsMs());
  EXPECT_EQ(latency.buckets[0], 1u) << "0.5 ms <= 1";
  EXPECT_EQ(latency.buckets[2], 1u) << "7 ms > 5";
  EXPECT_EQ(latency.buckets[3], 2u) << "cumulative: 7 ms <= 10";
  EXPECT_EQ(latency.buckets.back(), 2u);
  EXPECT_EQ(by["ray_serve_num_ongoing_http_requests"].value, 1) << "three started, two answered";
  const std::string call = ",deployment=greeter,replica=greeter#0,application=app";
  EXPECT_EQ(by["ray_serve_deployment_request_counter" + call].value, 2);
  EXPECT_EQ(by["ray_serve_deployment_error_counter" + call].value, 1);
  EXPECT_EQ(by["ray_serve_deployment_processing_latency_ms" + call].count, 2u);
  EXPECT_EQ(by["ray_serve_deployment_processing_latency_ms" + call].buckets[0], 0u);
  const RequestMetrics::Totals totals = m.DeploymentTotals("greeter");
  EXPECT_EQ(totals.calls, 2u);
  EXPECT_EQ(totals.errors, 1u);
  EXPECT_DOUBLE_EQ(totals.sum_ms, 2003);
  EXPECT_EQ(m.DeploymentTotals("other").calls, 0u);
}

}  // namespace
}  // namespace prism::serve::internal
